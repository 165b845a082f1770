"""The decode roofline (hfmem.memory.speed) against published single-stream measurements: each measured speed must
be below the bound (it is an upper bound) and, for current engines, within a factor 2 of it (the bound is not
vacuous). Sources (docs/planner.md has the table with the ratios):
- johnmusgrave.com/p/vllm-throughput-latency-sweep-on: Llama-3.1-8B-Instruct BF16, 1 x A100 40GB, vLLM 0.23.0,
  1 concurrent request, 1024 in / 128 out: ~75 tok/s.
- github.com/AlexsJones/llmfit/pull/1046: Qwen3-8B, vLLM, RTX 4090: 58.7 tok/s (300 tokens in 5.1 s).
- wangjunjian.com/jetson/qwen3/2025/10/12/Jetson-Thor-LLM-Benchmarking.html: Qwen3-8B, vLLM, Jetson Thor
  (273 GB/s), max-concurrency 1, 2048 in / 128 out: mean TPOT 63.63 ms (15.72 tok/s).
- github.com/dmatora/LLM-inference-speed-benchmarks/issues/10: Llama-3-8B Q6_K, llama.cpp, RTX 4090: 93 tok/s.
- github.com/dmatora/LLM-inference-speed-benchmarks/issues/12: Llama-3.1-8B Q4_K_M, llama.cpp, RTX 3080
  (760 GB/s): 111.95 tok/s.
- github.com/brand-o/normiebench/issues/3: Llama-3.1-8B Q4_K_M, llama.cpp Metal, Mac mini M4 (120 GB/s): tg128
  20.87 tok/s.
- github.com/vllm-project/vllm/issues/2098: Mixtral-8x7B, vLLM 0.2.4, 2 x A100 80GB (TP 2): ~15 tok/s (before
  vLLM's fused MoE kernel: the bound holds but is loose).
Bandwidths of GPUs outside the catalog are their vendors' figures; at one sequence decode is memory-bound, so the
FLOP/s passed for them does not matter (checked)."""

from __future__ import annotations

import json

import pytest
from stubs import model_files

from entry import cli  # noqa: F401  (fixture)
from hfmem.api import analyze_files
from hfmem.memory.planner import Planner
from hfmem.memory.speed import roofline

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
QWEN3 = "Qwen/Qwen3-8B"

# (repo, precision, TP, context mid-generation, bandwidth GB/s, TFLOP/s, measured tok/s, a current engine)
PUBLISHED = [
    (LLAMA, "bf16", 1, 1024 + 64, 1555, 312, 75.0, True),
    (QWEN3, "bf16", 1, 300, 1008, 165.2, 58.7, True),
    (QWEN3, "bf16", 1, 2048 + 64, 273, 100, 15.72, True),
    (LLAMA, "q6_k", 1, 512, 1008, 165.2, 93.0, True),
    (LLAMA, "q4_k_m", 1, 512, 760, 59.5, 111.95, True),
    (LLAMA, "q4_k_m", 1, 128, 120, 4.3, 20.87, True),
    ("mistralai/Mixtral-8x7B-v0.1", "bf16", 2, 512, 2039, 312, 15.0, False),
]


@pytest.mark.parametrize("repo, precision, tp, context, bandwidth, tflops, measured, current", PUBLISHED)
def test_published_decode_is_below_the_bound(repo, precision, tp, context, bandwidth, tflops, measured, current):
    report = analyze_files(model_files(repo))
    speed = roofline(report, Planner(report, precision, tp=tp), context, 1, bandwidth, tflops)
    assert speed.decode_bound == "memory"
    ratio = measured / speed.decode_tokens_per_s
    assert ratio <= 1.0, f"measured {measured} above the bound {speed.decode_tokens_per_s:.1f}"
    if current:
        assert ratio >= 0.5, f"bound {speed.decode_tokens_per_s:.1f} more than twice the measured {measured}"


def test_moe_reads_the_experts_a_batch_touches():
    report = analyze_files(model_files("mistralai/Mixtral-8x7B-v0.1"))
    planner = Planner(report, "bf16", tp=2)
    one, many = roofline(report, planner, 512, 1, 2039, 312), roofline(report, planner, 512, 64, 2039, 312)
    # one token reads 2 of 8 experts per layer; 64 sequences touch all 8 (1 - (6/8)^64 ~ 1)
    assert many.read_bytes > 3 * one.read_bytes - 3 * planner.kv(512, 1).total_bytes
    assert many.aggregate_tokens_per_s > 10 * one.decode_tokens_per_s


def test_the_cli_shows_the_bound_with_its_label(cli):  # noqa: F811
    out = cli(["fixtures/models/Qwen/Qwen2-7B-Instruct", "--ctx", "32k", "--gpu", "4090", "--format", "json"])
    data = json.loads(out.stdout)
    speed = data["speed"]
    seqs = data["inference"]["max_concurrency"]  # whole sequences that fit (3.99 -> 3)
    assert seqs == int(data["inference"]["concurrency"]) >= 2
    assert speed["upper_bound"] is True and speed["bandwidth_gbs"] == 1008 and speed["batch"] == seqs
    # decode at that many sequences: their 32k tokens of KV and the weights but the 1.02 GiB embedding table, per step
    kv3 = seqs * data["kv_cache"]["total_bytes"]
    weights = data["inference"]["weight_terms"]["parameters"] - 544_997_376 * 2
    assert speed["decode_read_bytes"] == weights + kv3
    assert speed["decode_tokens_per_s"] == pytest.approx(1008e9 / (weights + kv3), rel=1e-3)
    text = cli(["fixtures/models/Qwen/Qwen2-7B-Instruct", "--ctx", "32k", "--gpu", "4090"]).stdout.splitlines()
    assert text[5].split()[:3] == ["speed", "(at", "most)"] and "an upper bound" in text[5]



def test_more_experts_per_token_than_experts_reads_every_expert_once():
    """A hostile config (Mixtral with 20 experts per token of its 8) at a large batch: the roofline reads each expert
    once, as at 8 of 8, instead of raising OverflowError on (1 - 20/8) ** batch (found by tests/test_fuzz.py's config
    properties on a DeepSeek-V3 with num_local_experts 2)."""
    from stubs import load_config

    repo = "mistralai/Mixtral-8x7B-v0.1"
    speeds = []
    for k in (20, 8):
        config = dict(load_config(repo), num_experts_per_tok=k)
        report = analyze_files(model_files(repo, config))
        assert report.architecture.moe.experts_per_token == k
        speeds.append(roofline(report, Planner(report, "bf16"), 1, 62_722, 3350.0, 1979.0))
    assert speeds[0].read_bytes == speeds[1].read_bytes > 0
