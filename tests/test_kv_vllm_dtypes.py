"""vLLM's quantized KV cache dtypes (int8/fp8/int4_per_token_head, nvfp4, nvfp4_4over6, turboquant_*) against what
vLLM's own code gives, release by release: fixtures/vllm/kv_dtypes.json (scripts/record_vllm_kv_dtypes.py: each
layer's spec from Attention.get_kv_cache_spec and the backend's packing, in the 0.20.0-0.34.0 wheels) for the page
bytes of one token of one layer; fixtures/vllm/turboquant.json (scripts/record_vllm_turboquant.py) for dense models'
TurboQuant boundary layers, block size, pool and concurrency; and fixtures/vllm/hybrid.json's records with a kv_dtype
(scripts/record_vllm_hybrid.py --kv-dtype) for the hybrid models' block size, pool and concurrency
(tests/test_vllm_planning_truth.py runs those)."""

from __future__ import annotations

import gzip
import json

import pytest
from click.testing import CliRunner

from stubs import FIXTURES

from hfmem.cli import main
from hfmem.errors import UsageError
from hfmem.memory.kv import estimate_kv
from hfmem.memory.kv.estimate import DOES_NOT_START
from hfmem.memory.kv.vllm_dtypes import FIRST_RELEASE, VLLM_NAME, backend_refusal, forced_backend, sink_kinds
from hfmem.model.architecture import build_architecture

TRUTH = json.loads((FIXTURES / "vllm" / "kv_dtypes.json").read_text())
TURBOQUANT = json.loads((FIXTURES / "vllm" / "turboquant.json").read_text())
HFMEM_NAME = {"int8_per_token_head": "int8", "int4_per_token_head": "int4"}
# fixture models whose attention layers have the recorded shapes: (label, kind, heads, dk, dv) per model
MODELS = {
    "meta-llama/Llama-3.1-8B-Instruct": [("full_attention", "full", 8, 128, 128)],
    "google/gemma-3-27b-it": [("full_attention", "full", 16, 128, 128), ("sliding_attention", "sliding", 16, 128, 128)],
    "openai/gpt-oss-20b": [("full_attention", "full", 8, 64, 64), ("sliding_attention", "sliding", 8, 64, 64)],
    "XiaomiMiMo/MiMo-V2.5": [("full_attention", "full", 4, 192, 128), ("sliding_attention", "sliding", 8, 192, 128)],
    "Qwen/Qwen3.5-4B": [("full_attention", "full", 4, 256, 256)],
}


def _release(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


def _arch(repo: str):
    return build_architecture(json.loads((FIXTURES / "configs" / repo / "config.json").read_text()))[0]


def _pages(release: str) -> dict[tuple, object]:
    record = next(r for r in TRUTH["records"] if r["vllm"] == release)
    return {tuple(row[:5]): row[5] for row in record["pages"]}


CASES = [(r["vllm"], dtype) for r in TRUTH["records"] for dtype in sorted({row[0] for row in r["pages"]})]


@pytest.mark.parametrize("release, dtype", CASES, ids=[f"{r}-{d}" for r, d in CASES])
def test_each_layers_page_is_vllms(release, dtype):
    """Every fixture model's attention layers cost, per token, the bytes vLLM's spec gives a layer of their shape in
    that release; where the release refuses the shape (NVFP4 with unequal key and value head sizes, 0.28 on), hfmem
    says vLLM does not start. The GPU is one whose backends take the layers where any does (NVFP4: FlashAttention 3 on
    SM 9.0 up to 0.21, FlashInfer on SM 10.0 after); where none does (sinks, head sizes: the selector's truth in
    test_backend_refusals_are_vllms_selector) the start is refused before any page is sized."""
    pages = _pages(release)
    checked = 0
    sm = 90 if dtype.startswith("nvfp4") and _release(release) < (0, 22) else 100
    for repo, layer_kinds in MODELS.items():
        kw = dict(kv_dtype=HFMEM_NAME.get(dtype, dtype), vllm_release=_release(release), gpu_sm=sm)
        arch = _arch(repo)
        if dtype.startswith("turboquant_") and repo == "Qwen/Qwen3.5-4B" and _release(release) < (0, 21):
            continue  # 0.20 refuses TurboQuant on hybrids before any layer (test_turboquant_hybrid_refusal_is_the_logged_one)
        sinks = sink_kinds(arch.model_type, arch.text_config or {}, _release(release))
        if any(backend_refusal(HFMEM_NAME.get(dtype, dtype), _release(release), sm, kind, dk, kind in sinks)
               for _, kind, _, dk, _ in layer_kinds):
            try:  # said as a warning, or raised where the refused layers' pages cannot be unified
                said = estimate_kv(arch, 4096, **kw).warnings
            except UsageError as e:
                said = [str(e)]
            assert any(DOES_NOT_START in w and "no attention backend takes" in w for w in said), repo
            continue
        own = {pages[(dtype, kind, h, dk, dv)] for _, kind, h, dk, dv in layer_kinds}
        unpaddable = _release(release) < (0, 24) or (dtype.startswith("turboquant_") and _release(release) < (0, 29))
        if all(isinstance(p, int) for p in own) and max(own) % min(own) and unpaddable:
            # pages of two sizes, neither a multiple of the other: kv_cache_utils.py unify_kv_cache_spec_page_size
            # raises NotImplementedError up to 0.23 (NVFP4's unpacked sliding pages in 0.20), and for TURBOQUANT's
            # pages up to 0.28 (its refusals in turboquant.json); otherwise from 0.24 it pads the smaller page (int4's
            # unhalved sliding pages in 0.25-0.27: test_unaligned_pages_are_planned_as_vllm)
            with pytest.raises(UsageError, match="cannot unify"):
                estimate_kv(_arch(repo), 4096, **kw)
            checked += 1
            continue
        est = estimate_kv(_arch(repo), 4096, **kw)
        refused = [p for p in own if isinstance(p, str)]
        if refused:
            assert any(DOES_NOT_START in w and "equal key and value head sizes" in w for w in est.warnings), repo
            continue
        assert not any(DOES_NOT_START in w for w in est.warnings), repo
        for label, kind, h, dk, dv in layer_kinds:
            entry = est.by_layer_type[label]
            assert entry["bytes_per_token"] == entry["layers"] * pages[(dtype, kind, h, dk, dv)], (repo, label)
            checked += 1
    # TurboQuant: the sinks of gpt-oss and MiMo-V2 refuse it, and so does the sliding window of Gemma 3 from 0.26
    assert checked >= (2 if dtype.startswith("turboquant_") else 5)


def test_the_truth_tells_the_release_rules_apart():
    """The recorded pages differ where hfmem's rules say they do, so each rule is held to vLLM, not to itself: NVFP4
    sliding-window pages unpacked in 0.20 only, int4_per_token_head's sliding pages unhalved in 0.25-0.27, NVFP4's
    refusal of unequal head sizes from 0.28, TurboQuant's sliding pages unpacked up to 0.27."""
    nvfp4 = ("nvfp4", "sliding", 16, 128, 128)
    assert (_pages("0.20.0")[nvfp4], _pages("0.21.0")[nvfp4]) == (16 * 256, 16 * (2 * (64 + 8)))
    int4 = ("int4_per_token_head", "sliding", 8, 128, 128)
    assert [_pages(r)[int4] for r in ("0.25.0", "0.27.0", "0.28.0")] == [8 * 264, 8 * 264, 8 * 136]
    mimo = ("nvfp4", "full", 4, 192, 128)
    assert _pages("0.27.0")[mimo] == 4 * ((96 + 12) + (64 + 8)) and isinstance(_pages("0.28.0")[mimo], str)
    tq = ("turboquant_k8v4", "sliding", 16, 128, 128)  # unpacked up to 0.27, the backend's packed slot from 0.28
    assert [_pages(r)[tq] for r in ("0.27.0", "0.28.0")] == [16 * 256, 16 * 196]
    assert ("int4_per_token_head", "full", 8, 128, 128) not in _pages("0.24.0")


def test_a_release_without_the_dtype_does_not_start(stub_repo):
    """vLLM 0.19 offers no int8_per_token_head (CacheDType, 0.20 on) and 0.24 no int4_per_token_head (0.25 on): the
    estimate says so, the plan is no fit on any GPU, and `hfmem check` fails with the reason, not a margin."""
    arch = _arch("meta-llama/Llama-3.1-8B-Instruct")
    for dtype, before, first in (("int8", (0, 19), "0.20"), ("int4", (0, 24), "0.25"), ("nvfp4_4over6", (0, 27), "0.28")):
        warned = [w for w in estimate_kv(arch, 4096, kv_dtype=dtype, vllm_release=before).warnings if DOES_NOT_START in w]
        assert warned and f"a choice from {first}" in warned[0], dtype
    repo = str(stub_repo("Qwen/Qwen2-7B-Instruct"))
    result = CliRunner().invoke(main, ["check", repo, "--gpu", "h100", "--ctx", "32k", "--kv-dtype",
                                       "int8_per_token_head", "--vllm-version", "0.19"])
    assert result.exit_code == 1, result.output
    assert "does not start" in result.output and "int8_per_token_head is a choice from 0.20" in result.output
    assert CliRunner().invoke(main, ["check", repo, "--gpu", "h100", "--ctx", "32k", "--kv-dtype",
                                     "int8_per_token_head", "--vllm-version", "0.20"]).exit_code == 0


def test_vllm_spellings_are_hfmems_dtypes():
    arch = _arch("meta-llama/Llama-3.1-8B-Instruct")
    for alias, name in (("int8_per_token_head", "int8"), ("int4_per_token_head", "int4"), ("fp8_e4m3", "fp8"),
                        ("fp8_e5m2", "fp8"), ("bfloat16", "bf16")):
        a, b = estimate_kv(arch, 4096, kv_dtype=alias), estimate_kv(arch, 4096, kv_dtype=name)
        assert (a.dtype, a.total_bytes) == (name, b.total_bytes), alias


def test_unmodelled_layers_and_engines_are_refused_once():
    """No MLA attention backend takes these dtypes (supported_kv_cache_dtypes of every MLA backend, 0.20-0.34): an MLA
    model is a usage error naming its layers once, whichever the dtype; transformers has no such cache."""
    for dtype, name in (("nvfp4", "nvfp4"), ("int8", "int8_per_token_head"), ("turboquant_k8v4", "turboquant_k8v4")):
        with pytest.raises(UsageError, match=rf"no MLA attention backend that takes {name} \(this model.s 61 MLA layers"):
            estimate_kv(_arch("deepseek-ai/DeepSeek-V3"), 4096, kv_dtype=dtype)
    with pytest.raises(UsageError, match="vLLM cache dtype"):
        estimate_kv(_arch("meta-llama/Llama-3.1-8B-Instruct"), 4096, kv_dtype="fp8_per_token_head",
                    engine="transformers")


TQ_PLANNED = [r for r in TURBOQUANT["records"] if "refused" not in r]
TQ_REFUSED = [r for r in TURBOQUANT["records"] if "refused" in r]


@pytest.mark.parametrize("record", TQ_PLANNED,
                         ids=[f"{r['model'].split('/')[1]}-{r['vllm']}-{r['dtype']}" for r in TQ_PLANNED])
def test_turboquant_pool_is_vllms(record):
    """A dense model's TurboQuant cache as vLLM plans it: its first and last two layers at the model dtype, the others
    one packed slot per head, the block size vLLM picks, and at every point the pool blocks, the start-up check's
    bytes and the logged concurrency, exactly."""
    arch = _arch(record["model"])
    release = _release(record["vllm"])
    for row in record["points"]:
        p = dict(zip(TURBOQUANT["point_fields"], row))
        est = estimate_kv(arch, p["max_model_len"], kv_dtype=record["dtype"], vllm_release=release,
                          max_batched_tokens=p["max_num_batched_tokens"])
        assert est.block_size == record["block_size"]
        kept = est.by_layer_type["boundary_attention"]
        assert kept["layers"] == len(record["kept_layers"]) == 4
        pages = {kept["bytes_per_token"] // kept["layers"] * est.block_size,
                 est.by_layer_type["full_attention"]["bytes_per_token"]
                 // est.by_layer_type["full_attention"]["layers"] * est.block_size}
        assert sorted(pages) == record["layer_pages"]
        blocks = p["available_bytes"] // est.bytes_per_block
        assert blocks == p["num_blocks"] and est.startup_check_bytes == p["fit_bytes"] == est.total_bytes
        assert blocks / est.blocks_per_request == pytest.approx(p["concurrency"], rel=1e-12)


PADDING = json.loads((FIXTURES / "vllm" / "page_padding.json").read_text())


@pytest.mark.parametrize("record", PADDING["records"],
                         ids=[f"{r['vllm']}-{r['model'].split('/')[1]}-tp{r['tp']}-{r['dtype']}" for r in PADDING["records"]])
def test_unaligned_pages_are_planned_as_vllm(record):
    """Attention pages that do not divide each other (the per-token-head dtypes' fp32 scales on Gemma 4's 256- and
    512-wide heads; int4_per_token_head's unhalved sliding-window pages on Gemma 2 and 3 in 0.25-0.27), as each
    release's own planning takes them (scripts/record_vllm_page_padding.py, TRITON_ATTN on every layer as vLLM's
    selector gives these dtypes): refused up to 0.23 (hfmem: vLLM cannot unify them); from 0.24 the smaller page is
    padded to the largest and keeps its block. hfmem's block size, its layers' own pages, and at each point the pool
    blocks and the concurrency, exactly."""
    arch = _arch(record["model"])
    release = _release(record["vllm"])
    kw = dict(kv_dtype=HFMEM_NAME.get(record["dtype"], record["dtype"]), tp=record["tp"], vllm_release=release,
              gpu_sm=86)
    if "refused" in record:
        assert record["refused"].startswith("NotImplementedError") and "not divisible" in record["refused"]
        with pytest.raises(UsageError, match="cannot unify"):
            estimate_kv(arch, 4096, **kw)
        return
    for row in record["points"]:
        p = dict(zip(PADDING["point_fields"], row))
        est = estimate_kv(arch, p["max_model_len"], max_batched_tokens=p["max_num_batched_tokens"], **kw)
        assert est.block_size == record["block_size"]
        own = {e["bytes_per_token"] // e["layers"] * est.block_size for e in est.by_layer_type.values()}
        assert sorted(own) == record["layer_pages"]
        assert est.bytes_per_block % record["unified_pages"][0] == 0
        blocks = p["available_bytes"] // est.bytes_per_block
        assert blocks == p["num_blocks"]
        assert blocks / est.blocks_per_request == pytest.approx(p["concurrency"], rel=1e-12)
        padded = [a for a in est.assumptions if "which they do not divide" in a]
        assert bool(padded) == (max(own) % min(own) != 0)


def test_the_padding_truth_tells_the_releases_apart():
    """The records differ where hfmem's rule says they do: Gemma 4 with per-token-head scales refused up to 0.23 and
    planned from 0.24 (padded pages); Gemma 3's int4 pages padded in 0.25-0.27, halved alike (no padding) from 0.28."""
    by = {(r["vllm"], r["model"], r["tp"], r["dtype"]): r for r in PADDING["records"]}
    gemma4 = ("google/gemma-4-31B-it", 2, "int8_per_token_head")
    assert "refused" in by[("0.23.0", *gemma4)] and "refused" not in by[("0.24.0", *gemma4)]
    assert by[("0.24.0", *gemma4)]["layer_pages"] == [33_024, 66_560] and by[("0.24.0", *gemma4)]["unified_pages"] == [66_560]
    gemma3 = ("google/gemma-3-27b-it", 1, "int4_per_token_head")
    assert by[("0.27.0", *gemma3)]["layer_pages"] == [34_816, 67_584]
    assert by[("0.28.0", *gemma3)]["layer_pages"] == [34_816]


@pytest.mark.parametrize("record", TQ_REFUSED, ids=[f"{r['vllm']}-{r['dtype']}" for r in TQ_REFUSED])
def test_turboquant_sliding_window_pages_do_not_unify(record):
    """Up to 0.25 the TURBOQUANT backend takes sliding-window layers, and their pages are one byte per key and value
    value, unpacked (SlidingWindowSpec), beside the packed full-attention pages and the boundary layers' bf16 ones:
    vLLM's own planning of a 12 sliding + 10 full-attention stub raised at every preset of 0.20-0.25
    (unify_kv_cache_spec_page_size), and hfmem says vLLM cannot unify them. The recorded pages are hfmem's."""
    from hfmem.memory.kv.vllm_dtypes import bytes_per_token

    release = _release(record["vllm"])
    block = 32 if release >= (0, 25) else 16  # the 0.25 alignment the record's log line shows
    pages = {block * bytes_per_token(record["dtype"], kind, 4, 128, 128, release) for kind in ("full", "sliding")}
    assert sorted(pages | {block * 4 * 2 * 128 * 2}) == record["layer_pages"]
    with pytest.raises(UsageError, match="cannot unify"):
        estimate_kv(_arch(record["model"]), 4096, kv_dtype=record["dtype"], vllm_release=release)


def test_turboquant_truth_tells_the_block_rules_apart():
    """The block size is 16 up to 0.24, 32 in 0.25-0.33 (the boundary layers' bf16 page covered by a quantized page at
    the smallest kernel block) and 64 from 0.34 (its default block size): each rule changes the recorded pools."""
    sizes = {r["vllm"]: r["block_size"] for r in TURBOQUANT["records"] if r["model"] == "Qwen/Qwen2-7B-Instruct"}
    assert (sizes["0.24.0"], sizes["0.25.0"], sizes["0.33.0"], sizes["0.34.0"]) == (16, 32, 32, 64)


def test_turboquant_is_refused_where_not_modelled():
    """From 0.26 vLLM's selector gives TurboQuant's sliding-window layers no backend, so Gemma 3 does not start; up to
    0.25 the TURBOQUANT backend takes them, and their unpacked pages do not unify with the packed and bf16 ones
    (test_turboquant_sliding_window_pages_do_not_unify). Hybrids are recorded (hybrid.json): no boundary layers there,
    and 0.20 does not start them."""
    gemma = _arch("google/gemma-3-27b-it")
    with pytest.raises(UsageError, match="vLLM 0.26 does not start this: no attention backend takes this model's 48 "
                                         "sliding_attention layers in turboquant_k8v4"):
        estimate_kv(gemma, 4096, kv_dtype="turboquant_k8v4", vllm_release=(0, 26))
    with pytest.raises(UsageError, match="cannot unify"):
        estimate_kv(gemma, 4096, kv_dtype="turboquant_k8v4", vllm_release=(0, 25))
    hybrid = _arch("Qwen/Qwen3.5-4B")
    est = estimate_kv(hybrid, 4096, kv_dtype="turboquant_4bit_nc")
    assert "boundary_attention" not in est.by_layer_type and not est.warnings
    old = estimate_kv(hybrid, 4096, kv_dtype="turboquant_4bit_nc", vllm_release=(0, 20))
    assert any(DOES_NOT_START in w and "hybrid" in w for w in old.warnings)


def test_the_serve_command_names_vllms_dtype(stub_repo):
    """`run it` passes the dtype by vLLM's own name (int8 is --kv-cache-dtype int8_per_token_head)."""
    repo = str(stub_repo("Qwen/Qwen2-7B-Instruct"))
    for dtype, flag in (("int8", "int8_per_token_head"), ("int4_per_token_head", "int4_per_token_head"),
                        ("turboquant_k8v4", "turboquant_k8v4"), ("nvfp4", "nvfp4")):
        out = CliRunner().invoke(main, [repo, "--gpu", "4090", "--ctx", "16k", "--kv-dtype", dtype]).output
        line = next(line for line in out.splitlines() if "run it" in line)
        assert f"--kv-cache-dtype {flag} " in line, line


def test_turboquant_hybrid_refusal_is_the_logged_one():
    """Held out: a real vLLM 0.20 start of Qwen3.6-27B with TurboQuant (noonghunna/club-3090 issue 13, found with
    search) stopped with "NotImplementedError: TurboQuant KV cache is not supported for hybrid (attention + Mamba)
    models." The 0.20 records (engine/arg_utils.py's own words) say the same, and hfmem says vLLM 0.20 does not
    start it, where 0.21 (vllm-project/vllm#39931, "TurboQuant: support hybrid models") starts it."""
    logged = "TurboQuant KV cache is not supported for hybrid (attention + Mamba) models."
    hybrid = json.loads((FIXTURES / "vllm" / "hybrid.json").read_text())["records"]
    refused = [r for r in hybrid if r.get("kv_dtype", "").startswith("turboquant_") and "refused" in r]
    assert refused and all(r["vllm"] == "0.20.0" and r["refused"].startswith(logged) for r in refused)
    arch = _arch("Qwen/Qwen3.6-27B")
    for release, starts in (((0, 20), False), ((0, 21), True)):
        warned = any(DOES_NOT_START in w for w in estimate_kv(arch, 65_536, kv_dtype="turboquant_4bit_nc",
                                                               vllm_release=release).warnings)
        assert warned is not starts


BACKENDS = json.loads(gzip.decompress((FIXTURES / "vllm" / "backends.json.gz").read_bytes()))


def test_backend_refusals_are_vllms_selector():
    """Every layer vLLM's own selector (platforms/cuda.py get_valid_backends, recorded in the 0.20.0-0.34.0 wheels by
    scripts/record_vllm_backends.py) gives no backend, and only those, hfmem refuses: each quantized dtype x six
    compute capabilities x seven head sizes x sliding window, attention sinks and cross attention."""
    hfmem_name = {v: k for k, v in VLLM_NAME.items()}
    rows = 0
    for record in BACKENDS["releases"]:
        release = _release(record["vllm"])
        for dtype, sm, head, sliding, sink, attn_type, backend, reasons in record["rows"]:
            attn = "cross" if attn_type == "encoder_decoder" else "sliding" if sliding else "full"
            why = backend_refusal(hfmem_name[dtype], release, sm, attn, head, sink)
            assert (why is None) == (backend is not None), (record["vllm"], dtype, sm, head, attn, sink, reasons)
            rows += 1
    offered = sum(1 for record in BACKENDS["releases"] for dtype in VLLM_NAME.values()
                  if _release(record["vllm"]) >= FIRST_RELEASE[hfmem_name[dtype]])
    assert rows == offered * 6 * 7 * 5  # every dtype the release offers, in every shape


def test_the_selector_truth_tells_the_rules_apart():
    """The recorded selector changes where the rules say: TurboQuant's sliding-window layers taken in 0.25, not in
    0.26; NVFP4 on an H100 taken in 0.24 and 0.32, on no GPU but the SM100 family in 0.25-0.31; FlashInfer's NVFP4
    sinks only on SM100."""
    def backend(release, dtype, sm, head, sliding=False, sink=False):
        record = next(r for r in BACKENDS["releases"] if r["vllm"] == release)
        return next(row[6] for row in record["rows"]
                    if row[:6] == [dtype, sm, head, sliding, sink, "decoder"])
    assert backend("0.25.0", "turboquant_k8v4", 90, 128, sliding=True) == "TURBOQUANT"
    assert backend("0.26.0", "turboquant_k8v4", 90, 128, sliding=True) is None
    assert [backend(r, "nvfp4", 90, 128) for r in ("0.24.0", "0.25.0", "0.31.0", "0.32.0")] == [
        "FLASHINFER", None, None, "FLASHINFER"]
    assert backend("0.31.0", "nvfp4", 100, 128) == "FLASHINFER"
    assert (backend("0.34.0", "nvfp4", 100, 64, sink=True), backend("0.34.0", "nvfp4", 90, 128, sink=True)) == (
        "FLASHINFER", None)


def test_gpt_oss_with_turboquant_does_not_start():
    """gpt-oss builds every attention layer with sinks (gpt_oss.py), which the TURBOQUANT backend does not take: vLLM
    does not start it, and hfmem says so in one line with the layers and the reason (a usage error: the pages of
    layers vLLM never builds were not recorded) where the release cannot lay its pages out either (up to 0.28: the
    boundary layers' bf16 pages and the packed ones do not divide each other); from 0.29 vLLM would pad them, so the
    estimate stands and says DOES NOT START."""
    with pytest.raises(UsageError, match="does not start this: no attention backend takes this model's .* "
                                         "turboquant_k8v4: the TURBOQUANT backend takes no attention sinks"):
        estimate_kv(_arch("openai/gpt-oss-20b"), 4096, kv_dtype="turboquant_k8v4", vllm_release=(0, 28))
    said = estimate_kv(_arch("openai/gpt-oss-20b"), 4096, kv_dtype="turboquant_k8v4").warnings
    assert any(DOES_NOT_START in w and "the TURBOQUANT backend takes no attention sinks" in w for w in said)


def test_nvfp4_on_an_h100_follows_the_release():
    """vLLM 0.25-0.31 take an NVFP4 cache only on SM100-family GPUs (FlashInfer's TRTLLM path): Llama-3.1-8B on an
    H100 (SM 9.0) starts in 0.24 and 0.32, not in 0.25-0.31; on a B200 (SM 10.0) in all of them."""
    llama = _arch("meta-llama/Llama-3.1-8B-Instruct")

    def refused(release, sm):
        est = estimate_kv(llama, 4096, kv_dtype="nvfp4", vllm_release=release, gpu_sm=sm)
        return any(DOES_NOT_START in w for w in est.warnings)
    assert [refused(r, 90) for r in ((0, 24), (0, 25), (0, 31), (0, 32))] == [False, True, True, False]
    assert not any(refused(r, 100) for r in ((0, 24), (0, 25), (0, 31), (0, 32)))


def test_sink_layers_follow_the_model_code():
    """Which layers vLLM builds with attention sinks, as each model file reads its config: gpt-oss every layer;
    MiMo-V2 its sliding-window layers with add_swa_attention_sink_bias (add_full_attention_sink_bias is not read);
    Laguna its sliding-window layers with swa_attention_sink_enabled; Granite from 0.29 every layer when the config has
    layer_types, unless attention_sinks says otherwise. The fixture configs give the first two."""
    gpt_oss = _arch("openai/gpt-oss-20b")
    assert sink_kinds(gpt_oss.model_type, gpt_oss.text_config) == {"full", "sliding"}
    mimo = json.loads((FIXTURES / "configs" / "XiaomiMiMo" / "MiMo-V2.5" / "config.json").read_text())
    assert sink_kinds("mimo_v2", mimo) == {"sliding"}
    assert sink_kinds("mimo_v2", {**mimo, "add_full_attention_sink_bias": True}) == {"sliding"}
    assert sink_kinds("mimo_v2", {**mimo, "add_swa_attention_sink_bias": False}) == set()
    assert sink_kinds("laguna", {"swa_attention_sink_enabled": True}, (0, 21)) == {"sliding"}
    swa = {"layer_types": ["sliding_attention", "full_attention"]}
    assert [sink_kinds("granite", swa, r) for r in ((0, 28), (0, 29))] == [set(), {"full", "sliding"}]
    assert sink_kinds("granitemoe", {**swa, "attention_sinks": False}, (0, 34)) == set()
    assert sink_kinds("granite", {}, (0, 34)) == set()
    assert sink_kinds("llama", swa) == set()


def test_gemma4_forced_backend_is_vllms():
    """Gemma 4's config code (model_executor/models/config.py Gemma4Config, recorded in every release from 0.20.0 to
    0.34.0 by scripts/record_vllm_backends.py on six GPUs and four pairs of head sizes) forces TRITON_ATTN for every
    layer where hfmem says: up to 0.23 when the larger head exceeds 256, from 0.24 unless FlashAttention 4 runs on the
    GPU (SM 9.x, 10.x, 11.x) and the larger head is at most 512; never for equal sizes."""
    rows = 0
    for record in BACKENDS["releases"]:
        release = _release(record["vllm"])
        for sm, head, global_head, forced in record["gemma4"]:
            assert forced_backend("gemma4", {head, global_head}, release, sm) == forced, (record["vllm"], sm, head)
            rows += 1
    assert rows == 15 * 6 * 4
    h100 = [r["gemma4"] for r in BACKENDS["releases"] if r["vllm"] in ("0.23.0", "0.24.0")]
    assert [next(f for sm, h, g, f in grid if (sm, h, g) == (90, 256, 512)) for grid in h100] == ["TRITON_ATTN", None]


def test_gemma4_nvfp4_follows_the_forced_backend():
    """Gemma 4 31B (head sizes 256 and 512) with an NVFP4 cache: TRITON_ATTN, which vLLM forces for it up to 0.23 and
    from 0.24 on GPUs without FlashAttention 4 (an RTX 5090), takes no NVFP4, so vLLM does not start it there; at 0.32
    on an H100 the selector gives FlashInfer both head sizes. A real start stopped the same way: Gemma-4-26B-A4B with
    TurboQuant on an RTX 5090 (vllm-project/vllm#40094, a 0.19.2 nightly: "Forcing TRITON_ATTN backend", then
    "Selected backend AttentionBackendEnum.TRITON_ATTN is not valid for this configuration. Reason: ['kv_cache_dtype
    not supported']")."""
    gemma = _arch("google/gemma-4-31B-it")

    def refused(release, sm):
        est = estimate_kv(gemma, 8192, kv_dtype="nvfp4", vllm_release=release, gpu_sm=sm)
        return any(DOES_NOT_START in w and "force TRITON_ATTN" in w for w in est.warnings)
    assert [refused((0, 22), 100), refused((0, 32), 120), refused((0, 32), 90)] == [True, True, False]


def test_an_unknown_gpu_is_said_where_the_gpu_decides():
    """Where the start depends on the compute capability (NVFP4 always; TurboQuant on Gemma 4 from 0.24, whose forced
    backend follows FlashAttention 4), a GPU hfmem knows only by its size is said once, not assumed either way; where
    it does not (int8, TurboQuant on Llama), nothing is said."""
    from hfmem.memory.kv.vllm_dtypes import gpu_decides

    llama = _arch("meta-llama/Llama-3.1-8B-Instruct")

    def said(dtype, sm):
        return sum("not a CUDA GPU hfmem knows" in w for w in estimate_kv(llama, 4096, kv_dtype=dtype, gpu_sm=sm).warnings)
    assert [said("nvfp4", None), said("nvfp4", 90), said("int8", None), said("turboquant_k8v4", None)] == [1, 0, 0, 0]
    assert [gpu_decides("turboquant_k8v4", "gemma4", {256, 512}, r) for r in ((0, 23), (0, 24))] == [False, True]


def test_an_unknown_gpu_is_said_beside_the_verdict(stub_repo):
    """The verdict "FITS" on a GPU given by its size cannot say whether vLLM gives an NVFP4 cache a backend there, so
    the warning is lifted beside it (the default output, not only -v and the JSON's kv_cache), as a refusal is."""
    repo = str(stub_repo("Qwen/Qwen2-7B-Instruct"))
    out = CliRunner().invoke(main, [repo, "--gpu", "24GB", "--ctx", "32k", "--kv-dtype", "nvfp4"]).output
    assert "warning: the GPU is not a CUDA GPU hfmem knows" in out
    out = CliRunner().invoke(main, [repo, "--gpu", "4090", "--ctx", "32k", "--kv-dtype", "nvfp4"]).output
    assert "not a CUDA GPU hfmem knows" not in out


def test_gemma4_with_int8_scales_starts_as_logged(stub_repo):
    """Held out: vllm-project/vllm#50159 (found with search), the official vLLM 0.26.0 image serving Gemma-4-31B (an
    AWQ checkpoint of it, the same attention shapes) at TP 2 on two RTX 3090 with --kv-cache-dtype
    int8_per_token_head and TRITON_ATTN: it started ("Available KV cache memory: 10.54 GiB", "GPU KV cache size:
    95,792 tokens" on the V1 runner). hfmem said vLLM cannot unify its pages (66,560 B sliding-window pages, 33,024 B
    full-attention ones at TP 2); vLLM 0.26 pads the smaller page. The plan now stands on the 3090 pair and says the
    padding once; 0.23, whose planning raises on these pages, is still refused. (The log's max_model_len is not shown,
    so its token count is not a row: the tokens follow from the pool only through it.)"""
    repo = str(stub_repo("google/gemma-4-31B-it"))
    args = [repo, "--gpu", "3090", "--gpus", "2", "--ctx", "16k", "--kv-dtype", "int8", "--format", "json"]
    out = CliRunner().invoke(main, [*args, "--vllm-version", "0.26"])
    assert out.exit_code == 0, out.output
    said = json.loads(out.output)
    text = json.dumps(said)
    assert text.count("which they do not divide") == 1 and "33,024 B pages to the largest, 66,560 B" in text
    refused = CliRunner().invoke(main, [*args, "--vllm-version", "0.23"])
    assert refused.exit_code != 0 and "cannot unify" in refused.output
