"""hfmem's vLLM KV arithmetic against vLLM's own planning code, release by release.

fixtures/vllm/planning.json holds what each vLLM wheel's kv_cache_utils.py / kv_cache_planning.py gives (run by
scripts/record_vllm_planning.py on the specs the model's layers build in that release, no GPU): for an available
memory and a max_model_len, the pool blocks, the bytes its fit check asks one request for, and the concurrency it logs.
DeepSeek-V4-Flash / -Pro at 0.20.2 to 0.34.0 (the releases where V4's pool layout, the concurrency divisor or a window's
admission changed, and one on each side); two sliding-window models (Gemma 3, gpt-oss), two stubs whose layer counts
tell the group-size rules apart and Whisper (cross attention), at every minor release from 0.10.2 (the start-up check,
the group size and the window admission each changed in between)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hfmem.memory.kv.estimate import estimate_kv
from hfmem.units import cdiv
from hfmem.memory.kv.vllm import admission_tokens
from hfmem.memory.kv.vllm_deepseek_v4 import LAYOUTS, deepseek_v4_vllm, layout_for
from hfmem.memory.kv.layers import describe_layers
from hfmem.model.architecture import build_architecture

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TRUTH = json.loads((FIXTURES / "vllm" / "planning.json").read_text())
RECORDS = TRUTH["records"]


def _release(name: str) -> tuple[int, int]:
    major, minor = name.split(".")[:2]
    return int(major), int(minor)


def _arch(repo: str):
    return build_architecture(json.loads((FIXTURES / "configs" / repo / "config.json").read_text()))[0]


def _kv(repo: str, max_len: int, mbt: int, release: tuple[int, int] | None):
    v4 = "DeepSeek-V4" in repo
    # the other models: the release's default block size (16, 64 from 0.34), as the recording's specs take it
    return estimate_kv(_arch(repo), max_len, kv_dtype="fp8" if v4 else "bf16", block_size=256 if v4 else None,
                       max_batched_tokens=mbt, vllm_release=release)


def _divisor(est, release: tuple[int, int], repo: str) -> int:
    """The estimate's divisor for its release: it carries the older one exactly for DeepSeek-V4 before 0.27."""
    assert (est.blocks_per_request_before_027 is not None) == ("DeepSeek-V4" in repo and release < (0, 27))
    return est.blocks_per_request_before_027 or est.blocks_per_request


@pytest.mark.parametrize("record", RECORDS, ids=[f"{r['model'].split('/')[1]}-{r['vllm']}" for r in RECORDS])
def test_blocks_fit_and_concurrency_are_vllms(record):
    """Every point: num_blocks = available // bytes_per_block, the start-up check's bytes (from 0.19 the whole
    request's, total_bytes; below it before), and the logged concurrency = num_blocks / the release's divisor, all
    exactly."""
    release = _release(record["vllm"])
    for row in record["points"]:
        p = dict(zip(TRUTH["fields"], row))
        est = _kv(record["model"], p["max_model_len"], p["max_num_batched_tokens"], release)
        blocks = p["available_bytes"] // est.bytes_per_block
        assert blocks == p["num_blocks"], p
        assert est.startup_check_bytes == p["fit_bytes"], p
        if "whisper" in record["model"]:
            continue  # its cross attention is charged more than a request holds: test_whisper_cross_attention_charge
        if release >= (0, 19):
            assert est.total_bytes == p["fit_bytes"], p
        else:
            assert est.total_bytes >= p["fit_bytes"], p
        assert blocks / _divisor(est, release, record["model"]) == pytest.approx(p["concurrency"], rel=1e-12), p


def _record(model: str, release: str) -> list[dict]:
    rec = next(r for r in RECORDS if r["model"] == model and r["vllm"] == release)
    return [dict(zip(TRUTH["fields"], row)) for row in rec["points"]]


def test_the_truth_tells_the_startup_checks_apart():
    """Gemma 3 (52 window layers padded to 60 beside 10 full ones) asks three different start-up figures of the same
    32k request: 0.13 every layer's own pages (no padding), 0.14-0.18 the first group's (a window group's) blocks for
    every group, 0.19 on the whole request. Each below the next, and the last one is what hfmem calls the need."""
    gemma = "google/gemma-3-27b-it"
    asked = [_record(gemma, release)[0]["fit_bytes"] for release in ("0.13.0", "0.14.0", "0.18.0", "0.19.0")]
    assert asked[1] == asked[2] < asked[0] < asked[3]
    need = _kv(gemma, 32_768, 8_192, (0, 19)).total_bytes
    assert asked[3] == need
    assert _kv(gemma, 32_768, 8_192, (0, 13)).startup_check_bytes == asked[0]
    assert _kv(gemma, 32_768, 8_192, (0, 18)).startup_check_bytes == asked[1]
    older = _kv(gemma, 32_768, 8_192, (0, 18))
    assert any("start-up check asks" in a and "first KV cache group" in a for a in older.assumptions)
    assert not any("start-up check" in a for a in _kv(gemma, 32_768, 8_192, None).assumptions)


def test_whisper_cross_attention_charge():
    """Whisper's cross-attention pages: from 0.11 vLLM's start-up check and logged concurrency charge every request
    max_num_batched_tokens encoder tokens (CrossAttentionSpec reads max_num_encoder_input_tokens, which SchedulerConfig
    sets to max_num_batched_tokens), up to 0.10 the encoder's 1,500; a request holds its 1,500 either way
    (CrossAttentionManager), which total_bytes counts. vLLM's records give the concurrency at every batched-token
    count, and the charge follows them, not the encoder."""
    whisper = "openai/whisper-large-v3"
    page = 32 * 16 * 20 * 64 * 2 * 2  # one block of the 32 decoder layers' pages, per group
    for release in ("0.10.2", "0.11.0", "0.19.0", "0.29.0"):
        rel = _release(release)
        for p in _record(whisper, release):
            est = _kv(whisper, p["max_model_len"], p["max_num_batched_tokens"], rel)
            encoder = 1500 if rel < (0, 11) else p["max_num_batched_tokens"]
            assert est.blocks_per_request == cdiv(448, 16) + cdiv(encoder, 16), (release, p)
            assert p["num_blocks"] / est.blocks_per_request == pytest.approx(p["concurrency"], rel=1e-12)
            assert est.total_bytes == (cdiv(448, 16) + cdiv(1500, 16)) * page  # what a request holds
    assert any("charge each request max_num_batched_tokens (8,192)" in a
               for a in _kv(whisper, 448, 8_192, None).assumptions)


def test_the_truth_tells_the_group_sizes_apart():
    """vLLM's group size (the fewest layers of a type, or the most when within a factor): no factor up to 0.11, 1.25
    in 0.12-0.17, 1.5 from 0.18. 12 window + 10 full layers form groups of 10 in 0.11 and 12 from 0.12; 14 + 10 form
    groups of 10 up to 0.17 and 14 from 0.18: the pool's blocks change exactly there in vLLM's own records, and hfmem
    follows them (test_blocks_fit_and_concurrency_are_vllms)."""
    def blocks(stub: str, release: str) -> int:
        return _record(f"hfmem-stubs/gemma3-window-mix-{stub}", release)[0]["num_blocks"]

    assert blocks("12-10", "0.11.2") != blocks("12-10", "0.12.0") == blocks("12-10", "0.29.0")
    assert blocks("14-10", "0.11.2") == blocks("14-10", "0.17.0") != blocks("14-10", "0.18.0")
    assert blocks("14-10", "0.18.0") == blocks("14-10", "0.29.0")
    # 0.34 starts with 64-token blocks (CacheConfig.DEFAULT_BLOCK_SIZE): a quarter of the blocks, four times the page
    assert blocks("12-10", "0.34.0") == blocks("12-10", "0.29.0") // 4


def test_the_truth_tells_the_layouts_apart():
    """The fixture would catch a wrong layout: for every recorded release, each other DeepSeek-V4 layout misses at
    least one of its V4-Flash points."""
    arch = _arch("deepseek-ai/DeepSeek-V4-Flash")
    layers = describe_layers(arch, "vllm")
    for record in (r for r in RECORDS if r["model"] == "deepseek-ai/DeepSeek-V4-Flash"):
        release = _release(record["vllm"])
        points = [dict(zip(TRUTH["fields"], row)) for row in record["points"]]
        for layout in LAYOUTS:
            got = [(p["available_bytes"] // e.bytes_per_block, e.total_bytes) for p in points for e in [
                deepseek_v4_vllm(arch, layers, "fp8", p["max_model_len"], 1, 256,
                                 admission_tokens(p["max_num_batched_tokens"], release), layout)]]
            same = got == [(p["num_blocks"], p["fit_bytes"]) for p in points]
            assert same == (layout == layout_for(release)), (record["vllm"], layout)


def test_window_admission_doubles_from_026():
    """From 0.26 a window layer admits vLLM's max_in_flight_tokens (2 async-scheduled batches) beyond its window:
    Gemma 3's recorded fit check at 32k grows between 0.25 and 0.26 by exactly what doubling gives hfmem."""
    by = {r["vllm"]: dict(zip(TRUTH["fields"], r["points"][0])) for r in RECORDS if r["model"] == "google/gemma-3-27b-it"}
    assert by["0.26.0"]["fit_bytes"] > by["0.25.0"]["fit_bytes"]
    once = _kv("google/gemma-3-27b-it", 32_768, 16_384, (0, 25))  # 0.25's rule with twice the tokens
    assert once.total_bytes == by["0.26.0"]["fit_bytes"]
    assert admission_tokens(8_192, (0, 25)) == 8_192 and admission_tokens(8_192, (0, 26)) == 16_384
    assert admission_tokens(8_192, None) == 16_384  # the newest release read


def test_default_is_the_newest_release():
    """No release: the newest read (0.34), as every other default of the plan."""
    newest = next(r for r in RECORDS if r["vllm"] == "0.34.0" and r["model"] == "deepseek-ai/DeepSeek-V4-Pro")
    p = dict(zip(TRUTH["fields"], newest["points"][1]))
    est = estimate_kv(_arch("deepseek-ai/DeepSeek-V4-Pro"), p["max_model_len"], kv_dtype="fp8", block_size=256,
                      max_batched_tokens=p["max_num_batched_tokens"])
    assert (p["available_bytes"] // est.bytes_per_block, est.total_bytes) == (p["num_blocks"], p["fit_bytes"])
    assert layout_for(None) == "packed"


# fixtures/vllm/hybrid.json: the same, for hybrid attention/state models, from scripts/record_vllm_hybrid.py, which also
# runs the release's own hybrid block-size alignment (Platform._align_hybrid_block_size from 0.20,
# HybridAttentionMambaModelConfig before) and the model's config hooks (mamba_cache_mode, SSM state dtype) with the
# model class's own state shapes: Qwen3-Next, Qwen3.5, Qwen3.6, Qwen3.5-35B-A3B (GDN), Nemotron-H (Mamba2),
# Kimi-Linear and Kimi-K3 (KDA + MLA; K3 from 0.27, where vLLM has it; the Qwen3.5 family from 0.17, where vLLM
# has them), at TP 1 and 4, with and without prefix caching, on Hopper (0.11.2 to 0.34) and Blackwell (0.20 on, where
# its backend classes decide the alignment).
HYBRID = json.loads((FIXTURES / "vllm" / "hybrid.json").read_text())
HYBRID_REFUSED = [r for r in HYBRID["records"] if "refused" in r]
HYBRID_RECORDS = [r for r in HYBRID["records"] if "refused" not in r]
# the records of the model-dtype cache, which the rule checks below pick by release and setting (those with a
# kv_dtype, --kv-cache-dtype, are held by the test of every record)
HYBRID_AUTO = [r for r in HYBRID_RECORDS if "kv_dtype" not in r]


def _hybrid_kv(record: dict, max_len: int, mbt: int):
    drafts = record.get("speculative_tokens", 0)
    return estimate_kv(_arch(record["model"]), max_len, kv_dtype=record.get("kv_dtype", "bf16"), tp=record["tp"],
                       max_batched_tokens=mbt,
                       prefix_caching=record["prefix_caching"], vllm_release=_release(record["vllm"]),
                       gpu_sm=record["sm"], speculative_tokens=drafts, mtp_layers=record.get("mtp_layers", 0))


def _hybrid_id(r: dict) -> str:
    drafts = f"-spec{r['speculative_tokens']}" if r.get("speculative_tokens") else ""
    dtype = f"-{r['kv_dtype']}" if r.get("kv_dtype") else ""
    return (f"{r['model'].split('/')[1]}-{r['vllm']}-sm{r['sm']}-tp{r['tp']}-{'pc' if r['prefix_caching'] else 'nopc'}"
            f"{drafts}{dtype}")


@pytest.mark.parametrize("record", HYBRID_RECORDS, ids=[_hybrid_id(r) for r in HYBRID_RECORDS])
def test_hybrid_block_size_blocks_fit_and_concurrency_are_vllms(record):
    """The block size vLLM's alignment picks, and at every point the pool blocks, the start-up check's bytes and the
    logged concurrency, all exactly. Up to 0.18 the start-up check asked less than a request takes (0.11-0.13 every
    layer's own pages, 0.14-0.18 the first group's, here a state group's, for every group); the pool and the
    concurrency were already a request's whole need. With speculative decoding, up to 0.14 (and in mode "all" up to
    0.21) vLLM charges no state pages for the draft tokens, which a request holds at run time: there hfmem's total is
    above the charge."""
    release = _release(record["vllm"])
    all_mode = (record["model"] == "nvidia/Nemotron-H-56B-Base-8K" and record["prefix_caching"]
                and not (0, 20) <= release < (0, 22))  # 0.20-0.21 run "align" when a drafter runs
    uncharged_drafts = record.get("speculative_tokens", 0) and (release < (0, 15) or (release < (0, 22) and all_mode))
    for row in record["points"]:
        p = dict(zip(HYBRID["point_fields"], row))
        est = _hybrid_kv(record, p["max_model_len"], p["max_num_batched_tokens"])
        assert est.block_size == record["block_size"], p
        blocks = p["available_bytes"] // est.bytes_per_block
        assert blocks == p["num_blocks"], p
        assert est.startup_check_bytes == p["fit_bytes"], p
        if release >= (0, 19) and not uncharged_drafts:
            assert est.total_bytes == p["fit_bytes"], p
        elif release >= (0, 14):
            assert est.total_bytes > p["fit_bytes"], p
        assert blocks / est.blocks_per_request == pytest.approx(p["concurrency"], rel=1e-12), p


def test_hybrid_speculative_align_refusal_is_said():
    """vLLM 0.15-0.16 assert that prefix caching's 'align' mode runs without speculative decoding, and 0.20 refuses
    TurboQuant on hybrid models (recorded: the release's own code raised); hfmem warns that vLLM does not start, and
    only there."""
    assert {(r["vllm"], r["model"]) for r in HYBRID_REFUSED} >= {("0.15.0", "Qwen/Qwen3-Next-80B-A3B-Instruct"),
                                                                 ("0.16.0", "Qwen/Qwen3-Next-80B-A3B-Instruct")}
    for r in HYBRID_REFUSED:
        # the speculative ones, and TurboQuant on a hybrid in 0.20 (engine/arg_utils.py raises NotImplementedError)
        assert ("speculative decoding" in r["refused"]) != (r.get("kv_dtype", "").startswith("turboquant_")
                                                             and r["vllm"] == "0.20.0"), r
        est = _hybrid_kv(r, 32_768, 8192)
        assert any("does not start" in w for w in est.warnings), r
    for r in HYBRID_RECORDS:
        if r.get("speculative_tokens") or r.get("kv_dtype"):
            # the recorder gave NVFP4 layers FlashInfer's spec; vLLM 0.20's own selector gives them no backend off
            # SM 9.0 (FlashInfer lists no nvfp4 there: fixtures/vllm/backends.json.gz, test_kv_vllm_dtypes.py)
            selector_refuses = r.get("kv_dtype") == "nvfp4" and r["vllm"] == "0.20.0" and r["sm"] != 90
            warnings = _hybrid_kv(r, 32_768, 8192).warnings
            assert any("does not start" in w for w in warnings) == selector_refuses, _hybrid_id(r)


def test_hybrid_truth_tells_the_older_state_rules_apart():
    """Read in 0.11.2-0.17.0 and held to vLLM's own records: with prefix caching asked for, Qwen3-Next keeps one state
    page per request up to 0.14 (vLLM switches prefix caching off for hybrids outside the Mamba families) and two from
    0.15; Nemotron-H keeps a page per block from 0.11.2; its SSM state is the model dtype before 0.13 (half the page,
    about half the attention block) and the config's float32 from 0.13."""
    def rec(model: str, release: str, pc: bool) -> dict:
        return next(r for r in HYBRID_AUTO if r["model"] == model and r["vllm"] == release and r["tp"] == 1
                    and r["prefix_caching"] is pc and r["sm"] == 90)

    def per_request(r: dict) -> int:  # blocks one request of the first point takes (32k)
        p = dict(zip(HYBRID["point_fields"], r["points"][0]))
        return round(p["num_blocks"] / p["concurrency"])

    nxt = "Qwen/Qwen3-Next-80B-A3B-Instruct"
    assert per_request(rec(nxt, "0.14.0", True)) == per_request(rec(nxt, "0.14.0", False))
    assert per_request(rec(nxt, "0.15.0", True)) == per_request(rec(nxt, "0.15.0", False)) + 3  # 3 state groups
    nem = "nvidia/Nemotron-H-56B-Base-8K"
    assert per_request(rec(nem, "0.11.2", True)) == 7 * cdiv(32_768, rec(nem, "0.11.2", True)["block_size"])
    assert 1.95 < rec(nem, "0.13.0", False)["block_size"] / rec(nem, "0.12.0", False)["block_size"] < 2
    for r in (rec(nxt, "0.14.0", True), rec(nem, "0.11.2", True), rec(nem, "0.12.0", False)):
        p = dict(zip(HYBRID["point_fields"], r["points"][0]))
        assert _hybrid_kv(r, p["max_model_len"], p["max_num_batched_tokens"]).block_size == r["block_size"]


def _hybrid_record(model: str, vllm: str, prefix_caching: bool, tp: int = 1, sm: int = 90) -> dict:
    return next(r for r in HYBRID_AUTO
                if (r["model"], r["vllm"], r["prefix_caching"], r["tp"], r["sm"]) == (model, vllm, prefix_caching, tp, sm))


def test_hybrid_truth_covers_each_rule():
    """The fixture holds each hybrid rule where it changes, so a rule applied to the wrong releases fails above: the
    Mamba2 'all' mode's chunk-aligned blocks up to 0.27 (Nemotron-H 4,224 with prefix caching, 4,128 without), the
    MLA alignment (Kimi-Linear 1,920 = 64 x 30 up to 0.19, 1,888 = 16 x 118 in 0.20-0.26, 1,920 = 128 x 15 from
    0.27), the GDN checkpoint alignment from 0.33 (Qwen3-Next 576 with prefix caching, 544 before), Kimi-K3's FlashKDA
    checkpoint page from 0.29 (a larger fit check than 0.28's with prefix caching, the same without)."""
    def bs(model: str, vllm: str, pc: bool) -> int:
        return _hybrid_record(model, vllm, pc)["block_size"]
    nemotron, kimi, nxt = ("nvidia/Nemotron-H-56B-Base-8K", "moonshotai/Kimi-Linear-48B-A3B-Instruct",
                           "Qwen/Qwen3-Next-80B-A3B-Instruct")
    assert (bs(nemotron, "0.27.0", True), bs(nemotron, "0.28.0", True), bs(nemotron, "0.27.0", False)) == (4224, 4128, 4128)
    assert [bs(kimi, v, True) for v in ("0.19.0", "0.20.2", "0.26.0", "0.27.0")] == [1920, 1888, 1888, 1920]
    assert [bs(nxt, v, True) for v in ("0.32.0", "0.33.0")] == [544, 576] and bs(nxt, "0.33.0", False) == 544

    def fit(vllm: str, pc: bool) -> int:
        return _hybrid_record("moonshotai/Kimi-K3", vllm, pc)["points"][0][4]
    assert fit("0.28.0", True) < fit("0.29.0", True) and fit("0.28.0", False) == fit("0.29.0", False)
