"""Planner: totals, fit, longest context, vLLM's "Maximum concurrency", TP sharding, the catalog, `hfmem check`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import hfmem
from hfmem.hub import disk as disk_mod
from hfmem.memory import planner as planner_mod
from hfmem.cli import main
from hfmem.memory.gpus import CATALOG, GiB, parse_size, resolve_gpu
from hfmem.hub.disk import folder_size
from hfmem.memory.planner import Planner, shard
from hfmem.render.plan import fit_line
from hub_server import RepoSpec

SRC = str(Path(hfmem.__file__).resolve().parent.parent)
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
QWEN = "Qwen/Qwen2-7B-Instruct"


def _report(stub_repo, repo):
    return hfmem.analyze(str(stub_repo(repo)))


# --- a public vLLM V0 start-up log: Llama-3.1-8B on an RTX 3090 (23.58 GiB), util 0.9 -------
# Assumptions (documented in docs/planner.md): V0 profiled max_model_len tokens in one forward, so
# max_batched_tokens = max_model_len; non-torch memory 0.35 GiB as logged; BF16 weights and KV.


@pytest.mark.parametrize("max_len, log_peak_gib, log_kv_gib, log_blocks, fits", [
    (20_000, 17.06, 3.81, 1952, True),
    (29_000, 17.98, 2.89, 1478, False),
])
def test_reproduces_vllm_10517_log(stub_repo, max_len, log_peak_gib, log_kv_gib, log_blocks, fits):
    p = Planner(_report(stub_repo, LLAMA), "bf16", engine="vllm", max_batched_tokens=max_len,
                overhead=int(0.35 * GiB), gpu_util=0.9, vllm_version="0.6")  # a V0 log: no CUDA-graph deduction
    plan = p.plan(max_len, 1, resolve_gpu("rtx3090"))
    assert round(plan.weights_bytes / GiB, 4) == 14.9888  # "Loading model weights took 14.9888 GB"
    assert plan.weight_terms["rotary cos/sin cache"] == 131072 * 128 * 2
    assert abs((plan.weights_bytes + plan.activation_bytes) / GiB - log_peak_gib) <= 0.02  # peak_torch_memory
    assert abs(plan.kv_available_bytes / GiB - log_kv_gib) <= 0.02  # kv_cache_size
    assert abs(plan.kv_blocks - log_blocks) <= 0.005 * log_blocks  # "# GPU blocks"
    assert plan.kv_bytes_per_token == 131_072
    assert plan.fits is fits
    if fits:
        assert abs(plan.concurrency - 1.56) <= 0.01  # "Maximum concurrency for 20000 tokens per request: 1.56x"
    else:
        # "max seq len (29000) is larger than the maximum number of tokens that can be stored in KV cache (23648)"
        assert abs(plan.kv_pool_tokens - 23_648) <= 0.005 * 23_648
        assert plan.max_context == plan.kv_pool_tokens and plan.max_context < max_len


def test_vllm_h100_worked_example(stub_repo):
    """Worked by hand: H100 (79.19 GiB), util 0.9, 8192-token profile, non-torch 0.5 GiB:
    about 54.9 GiB of KV, 28,127 blocks, 3.43x concurrency at 128k."""
    gpu = hfmem.memory.gpus.GPU("h100-7919", "H100 79.19 GiB", int(79.19 * GiB))
    # vLLM 0.19 at 256 sequences: the forward's MLP, not the sampler, is the torch peak
    p = Planner(_report(stub_repo, LLAMA), "bf16", engine="vllm", overhead=GiB // 2, gpu_util=0.9,
                vllm_version="0.19", max_num_seqs=256, max_batched_tokens=8192)
    plan = p.plan(131072, 1, gpu)
    assert abs(plan.kv_available_bytes / GiB - 54.9) <= 0.1
    assert abs(plan.kv_blocks - 28_127) <= 0.005 * 28_127
    assert abs(plan.concurrency - 3.43) <= 0.02


def test_totals_are_the_sum_of_shown_terms(stub_repo):
    p = Planner(_report(stub_repo, QWEN), "int4")
    plan = p.plan(32768, 4, resolve_gpu("4090"))
    assert plan.cudagraph_bytes  # vLLM 0.25 deducts its CUDA-graph estimate: a shown term too
    assert plan.total_bytes == (plan.weights_bytes + plan.kv_bytes + plan.activation_bytes + plan.overhead_bytes
                                + plan.cudagraph_bytes)
    assert plan.weights_bytes == sum(plan.weight_terms.values())
    assert plan.activation_bytes == max(plan.activation_terms.values())
    assert plan.kv_bytes == 4 * 57_344 * 32768  # Qwen2-7B: 56 KiB per token (28 x 4 x 256 x 2)
    assert plan.margin_bytes == int(resolve_gpu("4090").memory_bytes * 0.92) - plan.total_bytes


def test_longest_context_is_the_boundary(stub_repo):
    p = Planner(_report(stub_repo, LLAMA), "bf16", engine="transformers")
    gpu = resolve_gpu("24GB")
    plan = p.plan(8192, 2, gpu)
    budget = gpu.memory_bytes
    assert plan.budget_bytes == budget and not plan.max_context_capped
    assert p.need(plan.max_context, 2) <= budget < p.need(plan.max_context + 1, 2)
    # transformers keeps the prompt's KV and prefills batch x ctx tokens at once: capacity is not vLLM's pool
    assert plan.concurrency == int(plan.concurrency) and p.need(8192, int(plan.concurrency)) <= budget < p.need(8192, int(plan.concurrency) + 1)


def test_context_capped_at_model_limit(stub_repo):
    plan = Planner(_report(stub_repo, QWEN), "int4").plan(4096, 1, resolve_gpu("h100"))
    assert plan.max_context == 32768 and plan.max_context_capped


def test_weights_alone_do_not_fit(stub_repo):
    plan = Planner(_report(stub_repo, "mistralai/Mixtral-8x7B-v0.1"), "bf16").plan(4096, 1, resolve_gpu("4090"))
    assert plan.fits is False and plan.max_context is None and plan.concurrency == 0.0
    assert "does not fit" in fit_line(plan) and "weights alone" in fit_line(plan)


def test_fits_on_catalog_without_gpu(stub_repo):
    plan = Planner(_report(stub_repo, QWEN), "int4").plan(32768, 1)
    assert plan.gpu is None and plan.fits is None
    keys = [r.gpu.key for r in plan.fits_on]
    assert keys == [g.key for g in CATALOG if g.kind != "apple"]  # vLLM does not run on Apple GPUs
    by_key = {r.gpu.key: r for r in plan.fits_on}
    assert by_key["h100-80gb"].fits and by_key["rtx3060"].fits  # 5.2 GiB of INT4 weights + 1.75 GiB KV
    bf16_rows = Planner(_report(stub_repo, QWEN), "bf16").plan(32768, 1).fits_on
    bf16 = {r.gpu.key: r for r in bf16_rows}
    assert not bf16["rtx3060"].fits and bf16["rtx4090"].fits
    # monotone: more memory never fits less
    rows = sorted(plan.fits_on, key=lambda r: r.gpu.memory_bytes)
    assert [r.fits for r in rows] == sorted(r.fits for r in rows)


def test_cpu_ram(stub_repo):
    p = Planner(_report(stub_repo, QWEN), "bf16", device="cpu")
    plan = p.plan(4096, 1, resolve_gpu("32GB"))
    assert plan.engine == "transformers" and plan.gpu_util is None
    assert plan.overhead_bytes == planner_mod.DEFAULT_OVERHEAD["cpu"]
    assert plan.budget_bytes == 32 * GiB and "rotary cos/sin cache" not in plan.weight_terms
    assert plan.total_bytes == 2 * 7_615_616_512 + 57_344 * 4096 + plan.activation_bytes + plan.overhead_bytes
    assert plan.fits


# --- tensor parallelism -----------------------------------------------------------------------------------------


def _qwen2_per_gpu(tp: int) -> int:
    L, h, I, V = 28, 3584, 18944, 152064
    kv_heads = max(1, 4 // tp)
    rows = -(-(-(-V // 64) * 64) // tp)
    emb = 2 * rows * h * 2
    q_o = 2 * (2 * h * h // tp)
    kv = 2 * 2 * (kv_heads * 128) * h
    mlp = 3 * 2 * I * h // tp
    biases = 2 * (h // tp) + 2 * 2 * kv_heads * 128
    norms = 2 * 2 * h
    return L * (q_o + kv + mlp + biases + norms) + emb + 2 * h


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_tp_sharding_rules_qwen2(stub_repo, tp):
    p = Planner(_report(stub_repo, QWEN), "bf16", tp=tp)
    assert p.weight_terms["parameters"] == _qwen2_per_gpu(tp)
    plan = p.plan(32768, 1, resolve_gpu("h100"))
    # per-GPU KV: max(1, 4 // tp) of Qwen2's 4 KV heads -> TP=8 stores as much per GPU as TP=4
    assert plan.kv_bytes_per_token == 28 * 2 * max(1, 4 // tp) * 128 * 2
    if tp == 8:
        assert any("K/V projections" in r for r in plan.replicated) and "norms" in plan.replicated
        assert any("KV cache heads" in r for r in plan.replicated)


def test_tp_mla_latent_and_a_projections_replicated(stub_repo):
    report = _report(stub_repo, "deepseek-ai/DeepSeek-V2-Lite-Chat")  # MLA: kv_lora_rank 512 + rope 64, 27 layers
    one, eight = Planner(report, "checkpoint", tp=1), Planner(report, "checkpoint", tp=8)
    assert eight.kv(32768, 1).bytes_per_token == one.kv(32768, 1).bytes_per_token == 27 * 576 * 2
    by_name = {t.name: t for t in one.tensors}
    kv_a = by_name["model.layers.3.self_attn.kv_a_proj_with_mqa.weight"]
    assert shard(kv_a, 1000, report.architecture, 8) == (1000, "replicated")
    kv_b = by_name["model.layers.3.self_attn.kv_b_proj.weight"]
    assert shard(kv_b, 8000, report.architecture, 8) == (1000, "split")
    assert shard(by_name["model.layers.3.mlp.gate.weight"], 640, report.architecture, 8) == (640, "replicated")
    assert "MLA q_a_proj/kv_a_proj_with_mqa" in eight.replicated
    assert any("MLA latent" in r for r in eight.replicated)


def test_vocab_padding_under_tp():
    from hfmem.memory.precision import WeightTensor

    class A:
        num_kv_heads, num_attention_heads, attention_kind = 8, 32, "gqa"

    emb = WeightTensor("model.embed_tokens.weight", "embeddings", None, "embedding", 32001, 4096, 1, 32001 * 4096 * 2)
    per, rule = shard(emb, emb.stored_bytes, A(), 4)
    assert rule == "vocab-parallel" and per == (32064 // 4) * 4096 * 2  # 32001 -> 32064 (multiple of 64)


# --- catalog and sizes --------------------------------------------------------------------------------------------


def test_catalog_and_sizes():
    assert resolve_gpu("4090").key == "rtx4090" and resolve_gpu("RTX 4090").key == "rtx4090"
    assert resolve_gpu("h100").memory_bytes == int(79.19 * GiB)  # PyTorch's total, not nvidia-smi's 79.65
    assert parse_size("24GB") == parse_size("24GiB") == parse_size("24") == 24 * 2**30 and parse_size("80GiB") == 80 * 2**30
    assert parse_size("24e9B") == 24 * 10**9 and parse_size("85520809984B") == 85_520_809_984
    custom = resolve_gpu("80GiB")
    assert custom.memory_bytes == 80 * GiB and custom.kind == "custom"
    with pytest.raises(hfmem.errors.UsageError):
        resolve_gpu("voodoo3")


# --- CLI: JSON, options, check -----------------------------------------------------------------------------------


def test_json_sections(stub_repo):
    result = CliRunner().invoke(main, [str(stub_repo(QWEN)), "--format", "json", "--gpu", "4090", "--ctx", "32k", "--dtype", "int4"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["weights"]["int4"] > 0 and data["weights"]["bf16"] == 2 * 7_615_616_512
    inf = data["inference"]
    assert {"weights_bytes", "kv_bytes", "activation_bytes", "overhead_bytes", "total_bytes", "gpu", "fits",
            "max_context", "max_concurrency"} <= set(inf)
    assert inf["gpu"]["key"] == "rtx4090" and inf["fits"] is True and inf["context"] == 32768
    assert isinstance(inf["max_concurrency"], int) and inf["max_concurrency"] >= 1
    assert data["download_bytes"] == folder_size(stub_repo(QWEN))
    plain = json.loads(CliRunner().invoke(main, [str(stub_repo(QWEN)), "--format", "json"]).output)["inference"]
    assert plain["gpu"] is None and plain["fits"] is None and plain["max_context"] is None


def test_table_shows_every_term(stub_repo):
    out = CliRunner().invoke(main, [str(stub_repo(QWEN)), "--gpu", "4090", "--ctx", "32k", "-v"]).output
    for label in ("Weights by precision", "KV cache", "torch peak memory increase", "non-torch forward increase memory",
                  "CUDA graph memory", "total", "Fit", "Available KV cache memory", "GPU KV cache size",
                  "Maximum concurrency for 32,768 tokens per request"):
        assert label in out
    cpu = CliRunner().invoke(main, [str(stub_repo(QWEN)), "--device", "cpu", "--gpu", "32GB", "--ctx", "4k"]).output
    for label in ("activations", "runtime overhead", "max concurrency"):
        assert label in cpu


def _exe() -> str:
    exe = shutil.which("hfmem", path=os.path.dirname(sys.executable)) or shutil.which("hfmem")
    assert exe
    return exe


def _check(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=SRC)
    return subprocess.run([_exe(), "check", *args], capture_output=True, text=True, timeout=120, env=env)


def test_check_exit_codes_local(stub_repo):
    path = str(stub_repo(QWEN))
    ok = _check(path, "--gpu", "4090", "--ctx", "32k", "--dtype", "int4")
    assert ok.returncode == 0, ok.stderr
    assert len(ok.stdout.strip().splitlines()) == 1 and ": fits:" in ok.stdout
    bad = _check(path, "--gpu", "rtx3060", "--ctx", "32k")
    assert bad.returncode == 1, bad.stderr
    assert len(bad.stdout.strip().splitlines()) == 1 and "does not fit" in bad.stdout and "longest context" not in bad.stdout
    usage = CliRunner().invoke(main, ["check", path, "--ctx", "32k"])
    assert usage.exit_code == 2 and "--gpu" in usage.output


def test_check_hub_repo_download_size(hub_env, stub_repo):
    root = stub_repo(QWEN)
    hub_env.add_repo(QWEN, RepoSpec(root=root))
    assert disk_mod.hub_download_bytes(QWEN) == folder_size(root)
    ok = _check(QWEN, "--gpu", "h100", "--ctx", "32k", "--disk")
    assert ok.returncode == 0, ok.stderr
    gpu, disk = ok.stdout.strip().splitlines()
    assert "download " in disk and "free at" in disk and "download" not in gpu


def test_check_fails_when_disk_is_too_small(hub_env, stub_repo, monkeypatch):
    hub_env.add_repo(QWEN, RepoSpec(root=stub_repo(QWEN)))
    monkeypatch.setattr(disk_mod, "cache_free_bytes", lambda where=None: ("/tiny", 1000))
    result = CliRunner().invoke(main, ["check", QWEN, "--gpu", "h100", "--ctx", "4k", "--disk"])
    assert result.exit_code == 4 and ": disk: does not fit" in result.output
    both = CliRunner().invoke(main, ["check", QWEN, "--gpu", "3060", "--ctx", "4k", "--disk"])
    assert both.exit_code == 5 and "does not fit" in both.output.splitlines()[0]
    gpu_only = CliRunner().invoke(main, ["check", QWEN, "--gpu", "h100", "--ctx", "4k"])  # no --disk: no disk verdict
    assert gpu_only.exit_code == 0 and "disk" not in gpu_only.output


def test_mtp_layers_left_out_of_inference_unless_speculative():
    """DeepSeek-V3 stores one multi-token-prediction layer (layer 61, 13,463,426,304 parameters) that neither
    transformers nor vLLM loads without MTP speculative decoding: the inference weights leave out exactly its stored
    bytes (FP8 values and their scales, summed from the headers), and --speculative mtp adds them back together
    with one more MLA cache layer (kv_lora_rank 512 + qk_rope_head_dim 64, bf16: 1,152 bytes per token)."""
    from stubs import model_files

    from hfmem.api import analyze_files, attach_sections

    report = analyze_files(model_files("deepseek-ai/DeepSeek-V3"))
    mtp_bytes = sum(c.entry.nbytes for c in report.tensors if c.component == "mtp")
    assert report.parameters.by_component["mtp"] == 13_463_426_304 and mtp_bytes > 13_463_426_304  # + F32 block scales
    attach_sections(report, ctx="32k")
    plain, plain_kv, plain_weights = report.inference, report.kv_cache, report.weights
    attach_sections(report, ctx="32k", speculative="mtp")  # replaces the sections
    spec, spec_kv = report.inference, report.kv_cache
    assert plain is not None and spec is not None and plain_kv and spec_kv and plain_weights is not None
    assert spec.weight_terms["parameters"] - plain.weight_terms["parameters"] == mtp_bytes
    # the rest of the difference: the MTP layer's MLA attention keeps its own dequantized kv_b_proj (bf16, 128 heads x
    # (128 + 128) x 512), and the caching allocator's block rounding of the layer's own parameters
    from hfmem.memory.planner import MLA_DEQUANT_TERM
    from hfmem.memory.vllm_weights import ALLOC_TERM
    extra = spec.weights_bytes - plain.weights_bytes - mtp_bytes
    dequant = spec.weight_terms[MLA_DEQUANT_TERM] - plain.weight_terms[MLA_DEQUANT_TERM]
    assert dequant == 128 * (128 + 128) * 512 * 2 == plain.weight_terms[MLA_DEQUANT_TERM] // 61
    blocks = spec.weight_terms[ALLOC_TERM] - plain.weight_terms[ALLOC_TERM]
    assert extra == dequant + blocks and 0 <= blocks < 64 << 20
    assert plain_weights.bytes["checkpoint"] == report.parameters.stored_bytes - mtp_bytes
    assert spec_kv[0].bytes_per_token - plain_kv[0].bytes_per_token == (512 + 64) * 2
    assert any("--speculative mtp" in n for n in plain.notes)
    dense = attach_sections(analyze_files(model_files("Qwen/Qwen2-7B-Instruct")), speculative="mtp")
    assert dense.inference is not None and any("stores no multi-token-prediction" in n for n in dense.inference.notes)


def test_mtp_decides_the_fit():
    """A budget between the two totals: fits without the MTP layers, not with them (the verdict users act on)."""
    from stubs import model_files

    from hfmem.api import analyze_files, attach_sections

    report = analyze_files(model_files("Qwen/Qwen3-Next-80B-A3B-Instruct"))
    plain = attach_sections(report, ctx="4k").inference
    spec = attach_sections(report, ctx="4k", speculative="mtp").inference
    assert plain is not None and spec is not None and spec.total_bytes > plain.total_bytes
    size = f"{(plain.total_bytes + spec.total_bytes) // 2 / 0.92 / 2**30:.2f}GiB"  # vLLM 0.25 default util
    fits = attach_sections(report, ctx="4k", gpu=size).inference
    fits_mtp = attach_sections(report, ctx="4k", gpu=size, speculative="mtp").inference
    assert fits is not None and fits.fits and fits_mtp is not None and not fits_mtp.fits


def test_cross_attention_charge_decides_whether_vllm_starts():
    """From 0.11 vLLM's start-up check charges a Whisper request max_num_batched_tokens encoder tokens of cross-attention
    pages (1.32 GiB at 8,192; recorded from vLLM's own planning code in fixtures/vllm/planning.json) where it holds
    its 1,500 (0.30 GiB), and refuses to start when the pool is below the charge (kv_cache_utils.py
    check_enough_kv_cache_memory raises). A GPU whose pool lies between the two is not a fit, and the report says
    why beside the verdict; one whose pool holds the charge is."""
    from stubs import model_files

    from hfmem.api import analyze_files, attach_sections

    report = analyze_files(model_files("openai/whisper-large-v3"))
    base = dict(ctx=448, max_batched_tokens=8192, gpu_util=0.9, vllm_version="0.33")  # 16-token blocks
    kv = attach_sections(report, **base).kv_cache[0]
    # (28 self + 512 cross) blocks of 16 tokens x 32 layers x K and V x 1,280 x 2 B
    assert kv.total_bytes < kv.startup_check_bytes == 540 * 16 * 32 * 2 * 1280 * 2
    between = attach_sections(report, **base, gpu="5.118GiB").inference
    assert kv.total_bytes < between.kv_available_bytes < kv.startup_check_bytes
    assert not between.fits and between.margin_bytes > 0  # the sum of terms fits; vLLM does not start
    # 512 cross blocks alone are more than its pool holds (2.5 MiB blocks): no max_model_len starts
    assert between.max_context is None and between.max_concurrency == 0
    assert any("does not start this" in w for w in report.warnings)
    # a pool a few blocks above the 512 cross blocks: vLLM starts up to max_model_len = those blocks x 16 tokens
    # (its check, (cdiv(max_model_len, 16) + 512) blocks of 16 x 163,840 B, within the pool)
    short = attach_sections(report, **base, gpu="5.150GiB").inference
    assert not short.fits and short.max_context == (short.kv_available_bytes // (16 * 163_840) - 512) * 16 == 144
    above = attach_sections(report, **base, gpu="5.832GiB").inference
    assert above.kv_available_bytes > kv.startup_check_bytes and above.fits and above.max_context == 448
    assert not any("does not start" in w for w in report.warnings)
