"""vLLM's quantized KV cache dtypes (int8/fp8/int4_per_token_head, nvfp4, nvfp4_4over6, turboquant_*) against what
vLLM's own code gives, release by release: fixtures/vllm/kv_dtypes.json (scripts/record_vllm_kv_dtypes.py: each
layer's spec from Attention.get_kv_cache_spec and the backend's packing, in the 0.20.0-0.34.0 wheels) for the page
bytes of one token of one layer; fixtures/vllm/turboquant.json (scripts/record_vllm_turboquant.py) for dense models'
TurboQuant boundary layers, block size, pool and concurrency; and fixtures/vllm/hybrid.json's records with a kv_dtype
(scripts/record_vllm_hybrid.py --kv-dtype) for the hybrid models' block size, pool and concurrency
(tests/test_vllm_planning_truth.py runs those)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from stubs import FIXTURES

from hfmem.cli import main
from hfmem.errors import UsageError
from hfmem.memory.kv import estimate_kv
from hfmem.memory.kv.estimate import DOES_NOT_START
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
    says vLLM does not start."""
    pages = _pages(release)
    checked = 0
    for repo, layer_kinds in MODELS.items():
        kw = dict(kv_dtype=HFMEM_NAME.get(dtype, dtype), vllm_release=_release(release))
        own = {pages[(dtype, kind, h, dk, dv)] for _, kind, h, dk, dv in layer_kinds}
        if all(isinstance(p, int) for p in own) and max(own) % min(own):
            # pages of two sizes, neither a multiple of the other: kv_cache_utils.py unify_kv_cache_spec_page_size
            # raises NotImplementedError (NVFP4's unpacked sliding pages in 0.20, int4's unhalved ones in 0.25-0.27)
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
    assert checked >= 5


def test_the_truth_tells_the_release_rules_apart():
    """The recorded pages differ where hfmem's rules say they do, so each rule is held to vLLM, not to itself: NVFP4
    sliding-window pages unpacked in 0.20 only, int4_per_token_head's sliding pages unhalved in 0.25-0.27, NVFP4's
    refusal of unequal head sizes from 0.28."""
    nvfp4 = ("nvfp4", "sliding", 16, 128, 128)
    assert (_pages("0.20.0")[nvfp4], _pages("0.21.0")[nvfp4]) == (16 * 256, 16 * (2 * (64 + 8)))
    int4 = ("int4_per_token_head", "sliding", 8, 128, 128)
    assert [_pages(r)[int4] for r in ("0.25.0", "0.27.0", "0.28.0")] == [8 * 264, 8 * 264, 8 * 136]
    mimo = ("nvfp4", "full", 4, 192, 128)
    assert _pages("0.27.0")[mimo] == 4 * ((96 + 12) + (64 + 8)) and isinstance(_pages("0.28.0")[mimo], str)
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


@pytest.mark.parametrize("record", TURBOQUANT["records"],
                         ids=[f"{r['model'].split('/')[1]}-{r['vllm']}-{r['dtype']}" for r in TURBOQUANT["records"]])
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


def test_turboquant_truth_tells_the_block_rules_apart():
    """The block size is 16 up to 0.24, 32 in 0.25-0.33 (the boundary layers' bf16 page covered by a quantized page at
    the smallest kernel block) and 64 from 0.34 (its default block size): each rule changes the recorded pools."""
    sizes = {r["vllm"]: r["block_size"] for r in TURBOQUANT["records"] if r["model"] == "Qwen/Qwen2-7B-Instruct"}
    assert (sizes["0.24.0"], sizes["0.25.0"], sizes["0.33.0"], sizes["0.34.0"]) == (16, 32, 32, 64)


def test_turboquant_is_refused_where_not_modelled():
    """Sliding-window models are not recorded with TurboQuant: a usage error naming their layers. Hybrids are (their
    records in hybrid.json): no boundary layers there, and 0.20 does not start them."""
    with pytest.raises(UsageError, match="sliding_attention"):
        estimate_kv(_arch("google/gemma-3-27b-it"), 4096, kv_dtype="turboquant_k8v4")
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
