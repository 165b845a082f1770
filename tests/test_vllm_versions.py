"""The vLLM version table and the mechanics of the vLLM plan: which family a version resolves to, the defaults it
brings, the sampler term (full vocabulary on every TP rank, the Triton path only from 8 rows), the fp32 KV cache,
CUDA graphs, the pool token count of hybrid models, and the `vllm` JSON object. The numbers themselves are checked
against real start-up logs in tests/test_vllm_logs.py; these tests pin the rules that make them."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from stubs import model_files

from hfmem.api import analyze_files
from hfmem.cli import main
from hfmem.errors import UsageError
from hfmem.memory.gpus import GiB, resolve_gpu
from hfmem.memory.planner import Planner
from hfmem.memory.vllm_versions import DEFAULT_VERSION, VERSIONS, resolve_version

QWEN = "Qwen/Qwen2-7B-Instruct"

# PyTorch's cuBLAS + cuBLASLt workspaces in every phase of the profile; without a GPU the H100-class size
# (hfmem/memory/planner.py cublas_workspace_bytes: 32 MiB + 1 MiB on compute capability 9.0)
WORKSPACES = 33 << 20
# vLLM's Triton top-k/top-p kernel keeps [SMs, vocab] fp32 (topk_topp_triton.py); no GPU given: an H100's 132 SMs
TRITON_BUFFER = 132 * 152_064 * 4


def _report(repo: str = QWEN):
    return analyze_files(model_files(repo))


@pytest.mark.parametrize("given, family", [("0.6.3", "0.6"), ("v0.7", "0.7"), ("0.7.2", "0.7"), ("0.9.2", "0.8"), ("0.10.2", "0.8"), ("0.15.1", "0.8"),
                                           ("0.19.1", "0.17"), ("0.20.0", "0.20"), ("0.24", "0.20"), ("0.30.0", "0.20"),
                                           (None, "0.20")])
def test_versions_resolve_to_the_newest_family_at_or_below(given, family):
    assert resolve_version(given).name == family
    assert DEFAULT_VERSION == max(VERSIONS, key=lambda v: tuple(int(p) for p in v.split(".")))


@pytest.mark.parametrize("bad", ["0.5", "latest", "1", ""])
def test_unknown_versions_are_a_usage_error(bad):
    with pytest.raises(UsageError):
        resolve_version(bad)


def test_cli_bad_version_one_line_exit_2(stub_repo):
    result = CliRunner().invoke(main, [str(stub_repo(QWEN)), "--vllm-version", "0.3"])
    assert result.exit_code == 2
    assert "--vllm-version 0.3" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("gpu, tokens, seqs", [("h100", 8192, 1024), ("h200", 8192, 1024), ("a100-80gb", 2048, 256),
                                               ("4090", 2048, 256)])
def test_api_server_batch_defaults_by_gpu(gpu, tokens, seqs):
    """EngineArgs.get_batch_defaults: >= 70 GiB and not an A100 -> 8192 tokens / 1024 sequences."""
    p = Planner(_report(), gpu=resolve_gpu(gpu))
    assert (p.max_batched_tokens, p.max_num_seqs) == (tokens, seqs)


def test_v0_profiles_max_model_len_up_to_32k():
    p = Planner(_report(), vllm_version="0.6")
    assert [p.profile_tokens(c) for c in (1000, 20_000, 32_768, 40_000)] == [2048, 20_000, 32_768, 2048]
    assert Planner(_report(), vllm_version="0.6", max_batched_tokens=4096).profile_tokens(20_000) == 4096


def test_gpu_util_by_version_unless_given():
    assert Planner(_report(), vllm_version="0.19").gpu_util == 0.9
    assert Planner(_report(), vllm_version="0.25").gpu_util == 0.92
    assert Planner(_report(), vllm_version="0.25", gpu_util=0.8).gpu_util == 0.8
    assert Planner(_report(), engine="transformers").gpu_util == 0.9


@pytest.mark.parametrize("runner", ["v1", "v2"])
def test_sampler_sees_the_full_vocabulary_on_every_tp_rank(runner):
    """LogitsProcessor gathers the vocab-parallel logits: the sampler term does not shrink with TP, the MLP does."""
    def terms(tp):
        return Planner(_report(), tp=tp, max_batched_tokens=8192, max_num_seqs=1024, vllm_version="0.33",
                       model_runner=runner).activation(4096, 1)[1]
    one, two = terms(1), terms(2)
    assert one["sampler (dummy run)"] == two["sampler (dummy run)"]
    assert two["mlp"] < one["mlp"]
    if runner == "v1":
        # 1024 rows x 152,064 vocab x (2 model-dtype + 12 Triton-path fp32) + hidden states [8192 + 2 x 1024, 3584] x 2
        # + the Triton kernel's cached fp32 row buffer, one vocabulary row per SM (no GPU given: an H100's 132)
        assert one["sampler (dummy run)"] == (1024 * 152_064 * 14 + (8192 + 2048) * 3584 * 2 + WORKSPACES
                                              + TRITON_BUFFER)
    else:
        # V2's greedy dummy sampler: the bf16 logits, the hidden states and their gathered rows [8192 + 1024, 3584]
        assert one["sampler (dummy run)"] == 1024 * 152_064 * 2 + (8192 + 1024) * 3584 * 2 + WORKSPACES


@pytest.mark.parametrize("family, seqs, per_element", [("0.25", 1024, 14), ("0.25", 4, 38), ("0.8", 1024, 38),
                                                        ("0.6", 256, 38)])
def test_sampler_bytes_per_element_by_family(family, seqs, per_element):
    """Triton top-k/top-p only from 8 rows (apply_top_k_top_p), the PyTorch sort below; V0's sorts too (its
    scatter-back since 0.6.2) and keeps no [rows, h] copies beside the hidden states."""
    p = Planner(_report(), vllm_version=family, max_batched_tokens=8192, max_num_seqs=seqs,
                model_runner="v1" if family == "0.25" else None)  # 0.25 runs Qwen2 on V2 by default
    terms = p.activation(4096, 1)[1]
    rows = min(seqs, 8192)
    hidden_rows = 8192 + (0 if family == "0.6" else 2 * rows)
    buffer = TRITON_BUFFER if per_element == 14 else 0  # the Triton path's row buffer (sort and V0 keep none)
    assert terms["sampler (dummy run)"] == rows * 152_064 * per_element + hidden_rows * 3584 * 2 + WORKSPACES + buffer


def test_fp32_model_keeps_an_fp32_kv_cache():
    """vLLM's cache dtype 'auto' is the model dtype: --dtype fp32 doubles the KV bytes per token."""
    bf16 = Planner(_report(), "bf16").plan(4096)
    fp32 = Planner(_report(), "fp32").plan(4096)
    assert fp32.kv_dtype == "fp32" and fp32.kv_bytes_per_token == 2 * bf16.kv_bytes_per_token == 2 * 57_344
    assert Planner(_report(), "fp32", kv_dtype="fp8").plan(4096).kv_bytes_per_token == 57_344 // 2


def test_cuda_graphs_deducted_only_where_vllm_does():
    gpu = resolve_gpu("h100")
    eager = Planner(_report(), vllm_version="0.21", cudagraph=False).plan(32_768, 1, gpu)
    graphs = Planner(_report(), vllm_version="0.21").plan(32_768, 1, gpu)
    given = Planner(_report(), vllm_version="0.21", cudagraph_memory=GiB).plan(32_768, 1, gpu)
    older = Planner(_report(), vllm_version="0.19", gpu_util=0.92, cudagraph_memory=GiB).plan(32_768, 1, gpu)
    # Model Runner V2 estimates nothing before 0.29 (its profile_cudagraph_memory returns 0), from 0.29 it does
    v2_28 = Planner(_report(), vllm_version="0.28", cudagraph_memory=GiB).plan(32_768, 1, gpu)
    v2_29 = Planner(_report(), vllm_version="0.29").plan(32_768, 1, gpu)
    v1_28 = Planner(_report(), vllm_version="0.28", model_runner="v1").plan(32_768, 1, gpu)
    assert (v2_28.model_runner, v2_29.model_runner, v1_28.model_runner) == ("V2", "V2", "V1")
    assert v2_28.cudagraph_bytes is None and v2_29.cudagraph_bytes and v1_28.cudagraph_bytes
    assert eager.cudagraph_bytes is None and not any("CUDA graph" in n for n in eager.notes)
    assert graphs.cudagraph_bytes and any("Estimated CUDA graph memory" in n for n in graphs.notes)
    assert eager.kv_available_bytes == graphs.kv_available_bytes + graphs.cudagraph_bytes
    assert given.kv_available_bytes == eager.kv_available_bytes - GiB and not any("CUDA graph" in n for n in given.notes)
    assert older.cudagraph_bytes is None and older.kv_available_bytes == eager.kv_available_bytes  # not deducted < 0.20
    with pytest.raises(UsageError):
        Planner(_report(), cudagraph_memory=-1)


@pytest.mark.parametrize("release, deducted, util, tokens", [("0.19.1", False, 0.9, "groups"), ("0.20.0", True, 0.92, "groups"),
                                                             ("0.20.1", True, 0.92, "concurrency"),
                                                             ("0.29.0", True, 0.92, "concurrency")])
def test_the_020_defaults_as_the_wheels_read(release, deducted, util, tokens):
    """Read in the released wheels (PyPI, pip download --no-deps), not in the logs: envs.py
    VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to "0" in 0.19.1 and "1" in 0.20.0 (and every x.y.0 through
    0.34.0), config/cache.py gpu_memory_utilization 0.9 in 0.19.1 and 0.92 in 0.20.0-0.33.0, and kv_cache_utils.py's
    "GPU KV cache size" is num_blocks // num_groups x block_size in 0.20.0, int(max_concurrency x max_model_len)
    from 0.20.1. The logs agree where they print it: 0.19.0's "CUDA graph memory profiling is disabled" (the
    Qwen2.5-72B L40S row) and 0.21.0's "is enabled" (the A5000 row)."""
    from hfmem.memory.vllm_versions import pool_tokens_rule

    planner = Planner(_report(), vllm_version=release, gpu=resolve_gpu("h100"))
    assert planner.cudagraph_deducted is deducted and planner.gpu_util == util
    assert pool_tokens_rule(planner.vllm, release) == tokens


@pytest.mark.parametrize("release, deducted", [("0.20.0", False), ("0.25.0", False), ("0.26.0", True), (None, True)])
def test_rocm_deducts_cuda_graphs_from_026(release, deducted):
    """gpu_worker.py determine_available_memory profiles the CUDA-graph estimate only on ``not is_rocm()`` (0.20.0),
    ``is_cuda()`` (0.21.0-0.25.0), then ``is_cuda_alike()`` (0.26.0 on): an MI300X plan deducts it from 0.26 only,
    an H100 plan from 0.20. (The V1 runner's estimate: Model Runner V2, Qwen2's default from 0.25, has none before
    0.29.)"""
    runner = "v1" if release in ("0.25.0", "0.26.0") else None
    gpu = resolve_gpu("mi300x")
    plan = Planner(_report(), vllm_version=release, model_runner=runner).plan(32_768, 1, gpu)
    assert (plan.cudagraph_bytes is not None) is deducted
    h100 = Planner(_report(), vllm_version=release, model_runner=runner).plan(32_768, 1, resolve_gpu("h100"))
    assert h100.cudagraph_bytes


@pytest.mark.parametrize("release, used_memory", [
    ("0.7.2", False), ("0.7.3", True), ("0.7", True), ("0.11.2", True), ("0.18", True), ("0.20.2", True), ("0.20", True),
    ("0.21.0", False), ("0.21", False),
    ("0.25", False), (None, False)])
def test_rocm_note_follows_how_the_release_measures_loading(release, used_memory):
    """platforms/rocm.py get_current_memory_usage is total - free from 0.7.3 (vllm-project/vllm#12624) to 0.20.2 and
    torch's allocated bytes before and from 0.21.0 (read in the wheels): only the former takes load-time allocator
    blocks off the pool, so only its plans give the MI300X logs' range; a CUDA plan has neither note."""
    from hfmem.memory.vllm_versions import ROCM_ALLOCATED_NOTE, ROCM_NOTE

    notes = Planner(_report(), vllm_version=release).plan(32_768, 1, resolve_gpu("mi300x")).notes
    assert (ROCM_NOTE in notes, ROCM_ALLOCATED_NOTE in notes) == (used_memory, not used_memory)
    cuda = Planner(_report(), vllm_version=release).plan(32_768, 1, resolve_gpu("h100")).notes
    assert ROCM_NOTE not in cuda and ROCM_ALLOCATED_NOTE not in cuda


def test_extensible_kv_cache_of_034_is_bounded_from_above(stub_repo):
    """0.34.0's CacheConfig turns enable_extensible_kv_cache on for CUDA and ROCm (the pool sized after warmup and
    capture, gpu_memory_utilization 1.0 unless set). Its size depends on the CUDA context, which only vLLM measures,
    so hfmem gives a bound from above, by v1/worker/extensible_kv_cache.py measure_kv_cache_bytes: everything hfmem
    sees resident, then max(1 GiB (3 GiB on ROCm), 0.75 x peak) and the peak (torch peak + CUDA-graph estimate,
    gpu_worker.py's peak_activation_memory) kept free. The default (the newest code) and 0.34 say so once; 0.33
    sizes from the profile only. No 0.34 start-up log was found to hold it against."""
    gpu = resolve_gpu("h100")
    report = _report()
    for version in ("0.34.0", None):
        plan = Planner(report, vllm_version=version).plan(32_768, 1, gpu)
        assert sum("enable_extensible_kv_cache" in n for n in plan.notes) == 1
        peak = plan.activation_bytes + plan.cudagraph_bytes
        resident = plan.weights_bytes + plan.overhead_bytes + plan.cudagraph_bytes  # runner state is in overhead
        bound = plan.extensible_kv_max_bytes
        assert bound == gpu.memory_bytes - resident - max(GiB, int(0.75 * peak)) - peak
        # above the profile-sized pool at 0.92 by the 8 % it leaves unrequested, less the margin and the peak
        # counted a second time; as tokens, the same whole-block arithmetic as the pool's
        assert bound > plan.kv_available_bytes
        assert plan.extensible_kv_max_tokens == bound // (57_344 * 64) * 64  # 0.34's 64-token blocks
        # and what is left once the TP 1 logs' start-up use (0.19-0.61 GiB, test_vllm_logs) is taken off
        low, high = ((bound - int(g * GiB)) // (57_344 * 64) * 64 for g in (0.61, 0.19))
        assert sum(f"which would leave {low:,}-{high:,} tokens" in n for n in plan.notes) == 1
    old = Planner(report, vllm_version="0.33").plan(32_768, 1, gpu)
    assert old.extensible_kv_max_bytes is None and not any("enable_extensible_kv_cache" in n for n in old.notes)
    # an explicit utilisation caps the request: ceil(total x util) - resident - peak, when that is the smaller
    capped = Planner(report, vllm_version="0.34", gpu_util=0.5).plan(32_768, 1, gpu)
    peak = capped.activation_bytes + capped.cudagraph_bytes
    resident = capped.weights_bytes + capped.overhead_bytes + capped.cudagraph_bytes
    assert capped.extensible_kv_max_bytes == -(-gpu.memory_bytes // 2) - resident - peak
    # ROCm keeps a 3 GiB floor (ROCr maps kernel scratch outside the allocator), which here beats 0.75 x the peak
    mi300 = resolve_gpu("mi300x")
    rocm = Planner(report, vllm_version="0.34").plan(32_768, 1, mi300)
    rpeak = rocm.activation_bytes + (rocm.cudagraph_bytes or 0)
    assert GiB < 0.75 * rpeak < 3 * GiB
    assert rocm.extensible_kv_max_bytes == (mi300.memory_bytes - rocm.weights_bytes - rocm.overhead_bytes
                                            - (rocm.cudagraph_bytes or 0) - 3 * GiB - rpeak)
    # no GPU: the note without a figure
    assert any("enable_extensible_kv_cache" in n for n in Planner(report).plan(32_768, 1).notes)
    # the text output's Fit table gives the bound beside the log's lines, for the versions that size that way
    row = "Extended KV cache, vLLM >= 0.34 default"
    args = [str(stub_repo(QWEN)), "--ctx", "32k", "--gpu", "h100", "-v"]
    text = CliRunner().invoke(main, args).output
    bound = Planner(report).plan(32_768, 1, gpu)
    assert f"at most {bound.extensible_kv_max_bytes / GiB:.2f} GiB ({bound.extensible_kv_max_tokens:,} tokens)" in text
    assert row in text and row not in CliRunner().invoke(main, [*args, "--vllm-version", "0.33"]).output


def test_hybrid_pool_tokens_by_the_versions_log_rule():
    """Qwen3-Next (hybrid): 0.8-0.20.0 logs print num_blocks // groups x block_size, 0.20.1's on int(concurrency x
    len)."""
    report = _report("Qwen/Qwen3-Next-80B-A3B-Instruct")
    gpu = resolve_gpu("h200")
    old = Planner(report, tp=2, vllm_version="0.10.2", prefix_caching=False).plan(262_144, 1, gpu)
    new = Planner(report, tp=2, vllm_version="0.25", prefix_caching=False, gpu_util=0.9).plan(262_144, 1, gpu)
    groups = 4  # 12 full-attention layers, 36 linear-attention layers in groups of 12
    assert old.kv_pool_tokens == old.kv_blocks // groups * 544
    assert new.kv_pool_tokens is not None and abs(new.kv_pool_tokens / (new.concurrency * 262_144) - 1) < 1e-4


def test_sliding_model_gets_a_pool_token_count():
    """Where no block count applies, the pool over every layer's bytes per token (vLLM prints one)."""
    report = _report("google/gemma-3-27b-it")
    plan = Planner(report).plan(131_072, 1, resolve_gpu("h200"))
    assert plan.kv_pool_tokens is not None and plan.kv_pool_tokens > 0


def test_json_names_the_terms_as_vllm_logs_them(stub_repo):
    out = CliRunner().invoke(main, [str(stub_repo(QWEN)), "--ctx", "32k", "--gpu", "h100", "--format", "json"]).output
    v = json.loads(out)["inference"]["vllm"]
    assert set(v) == {"version", "max_num_batched_tokens", "max_num_seqs", "cudagraph", "sampler", "interconnect", "model_runner",
                      "requested_memory", "weights", "torch_peak_memory_increase", "non_torch_forward_increase_memory",
                      "model_runner_state", "cuda_graph_memory", "available_kv_cache_memory", "gpu_kv_cache_size_tokens",
                      "maximum_concurrency", "extensible_kv_cache_max_bytes", "extensible_kv_cache_max_tokens"}
    inf = json.loads(out)["inference"]
    assert v["model_runner"] == "V2" and v["model_runner_state"] == 1024 * (152_064 + 152_064 // 32) * 4
    assert v["available_kv_cache_memory"] == inf["kv_available_bytes"] == (
        v["requested_memory"] - v["weights"] - v["torch_peak_memory_increase"] - v["non_torch_forward_increase_memory"]
        - v["model_runner_state"] - v["cuda_graph_memory"])
    cpu = CliRunner().invoke(main, [str(stub_repo(QWEN)), "--ctx", "4k", "--engine", "transformers", "--format", "json"])
    assert json.loads(cpu.output)["inference"]["vllm"] is None


def test_cli_flags_reach_the_plan(stub_repo):
    args = [str(stub_repo(QWEN)), "--ctx", "32k", "--gpu", "h100", "--format", "json", "--vllm-version", "0.10",
            "--max-num-seqs", "64", "--enforce-eager"]
    v = json.loads(CliRunner().invoke(main, args).output)["inference"]["vllm"]
    assert (v["version"], v["max_num_seqs"], v["cudagraph"], v["cuda_graph_memory"]) == ("0.8", 64, False, None)
    assert v["model_runner"] == "V1"


def test_kv_section_and_plan_use_the_same_batched_tokens():
    """Sliding windows admit W - 1 + the tokens in flight: on a 24 GB GPU vLLM's max_num_batched_tokens default is
    2048, in flight up to 0.25, twice that from 0.26 (async scheduling's two batches), and the KV section and the plan
    both use the release's (gemma-2-9b, W = 4096, 8k context: 385 blocks per sliding layer in 0.25, 513 from 0.26,
    129 blocks of 64 from 0.34, the default)."""
    from hfmem.api import attach_sections

    for version, tokens, block in (("0.25", 2048, 16), (None, 4096, 64), ("0.26", 4096, 16)):
        report = attach_sections(_report("google/gemma-2-9b-it"), ctx="8k", gpu="4090", vllm_version=version)
        kv, plan = report.kv_cache[0], report.inference
        assert kv.total_bytes == plan.kv_bytes
        assert plan.max_batched_tokens == 2048
        assert kv.by_layer_type["sliding_attention"]["tokens"] == (-(-min(4095 + tokens, 8192) // block) + 1) * block


@pytest.mark.parametrize("gpu, tp, gib", [("h100", 1, 0.25), ("h100-nvl", 1, 0.25), ("a100-80gb", 1, 0.02), ("h100", 2, 2.1),
                                          ("h100 nvl", 2, 2.1), ("a100-80gb", 4, 2.1), ("h200", 8, 2.1),
                                          ("4090", 2, 0.09), ("l40s", 4, 0.09)])
def test_v1_non_torch_by_tp_and_gpu_class(gpu, tp, gib):
    """NCCL's channel buffers dominate at TP >= 2 and NVLink-class parts get many more channels than PCIe cards; at
    TP 1 the driver's kernel memory, larger on compute capability 9.0 (vllm_versions.SM90_TP1, the default 0.25)."""
    assert Planner(_report(), tp=tp, gpu=resolve_gpu(gpu)).overhead == int(gib * GiB)
    assert Planner(_report(), tp=tp, gpu=resolve_gpu(gpu), vllm_version="0.6").overhead == int((0.35 if tp == 1 else 0.30) * GiB)


def test_h100_nvl_is_a_catalog_hopper_on_nvlink_bridges():
    """The H100 NVL: 93.00 GiB as PyTorch prints it (nvidia-smi shows 95,830 MiB), compute capability 9.0 (sm90
    non-torch at TP 1 and the 32 + 1 MiB cuBLAS workspaces), the data-centre batch defaults (>= 70 GiB, not an A100),
    and the NVLink class at TP 2 (bridged pairs), PCIe when asked (pairs joined over PCIe beyond TP 2)."""
    from hfmem.memory.hardware import hardware_of
    from hfmem.memory.planner import cublas_workspace_bytes, gpu_class

    nvl = resolve_gpu("H100 NVL")
    assert (nvl.key, nvl.memory_bytes) == ("h100-nvl", 93 * GiB)
    hw = hardware_of(nvl)
    assert hw is not None and hw.sm == 90 and gpu_class(nvl) == "sm90"
    assert cublas_workspace_bytes(nvl) == 33 << 20
    plan = Planner(_report(), tp=2, gpu=nvl).plan(4096, 1, nvl)
    assert (plan.max_batched_tokens, plan.max_num_seqs, plan.vllm_terms()["interconnect"]) == (8192, 1024, "nvlink")
    assert Planner(_report(), tp=4, gpu=nvl, interconnect="pcie").overhead == int(0.09 * GiB)


def test_catalog_rows_use_each_gpus_defaults():
    """A 'fits on' row is the plan vLLM would make on that GPU: its batch defaults and non-torch memory, not those of
    the GPU the planner was built for (or of an H100 when none was given)."""
    planner = Planner(_report())
    rows = {r.gpu.key: r for r in planner.catalog(32_768, 1)}
    for key in ("rtx4090", "a100-40gb", "h100-80gb"):
        gpu = resolve_gpu(key)
        alone = Planner(_report(), gpu=gpu).plan(32_768, 1, gpu)
        assert (rows[key].fits, rows[key].margin_bytes, rows[key].max_concurrency) == (
            alone.fits, alone.margin_bytes, alone.max_concurrency)
    late = Planner(_report()).plan(32_768, 1, resolve_gpu("4090"))
    assert (late.max_batched_tokens, late.max_num_seqs) == (2048, 256)
    kept = Planner(_report(), max_num_seqs=64, overhead=0).plan(32_768, 1, resolve_gpu("h100"))
    assert (kept.max_num_seqs, kept.overhead_bytes - kept.runner_state_bytes, kept.max_batched_tokens) == (64, 0, 8192)
    assert kept.runner_state_bytes == 64 * (152_064 + 152_064 // 32) * 4  # V2's penalty buffers follow max_num_seqs


def test_check_line_names_every_term_of_the_total(stub_repo):
    out = CliRunner().invoke(main, ["check", str(stub_repo(QWEN)), "--gpu", "h100", "--ctx", "32k",
                                    "--cudagraph-memory", "1GiB"]).output
    assert "torch peak" in out and "non-torch" in out and "CUDA graphs 1.00 GiB" in out


@pytest.mark.parametrize("family, seqs, given, path, per_element", [
    ("0.25", 1024, None, "triton", 14), ("0.25", 4, None, "sort", 38), ("0.8", 1024, None, "sort", 38),
    ("0.6", 256, None, "v0", 38), ("0.25", 1024, "flashinfer", "flashinfer", 14), ("0.8", 1024, "triton", "triton", 14)])
def test_plan_echoes_the_sampler_path_it_counted(family, seqs, given, path, per_element):
    """The JSON's vllm.sampler names the path whose bytes the sampler term holds (--vllm-sampler, else the family's;
    Triton below 8 rows is the sort)."""
    p = Planner(_report(), vllm_version=family, max_batched_tokens=8192, max_num_seqs=seqs, sampler=given,
                model_runner="v1" if family == "0.25" else None)
    plan = p.plan(4096)
    assert plan.vllm_terms()["sampler"] == path
    hidden_rows = 8192 + (0 if family == "0.6" else 2 * seqs)
    buffer = TRITON_BUFFER if path == "triton" else 0  # flashinfer keeps no row buffer
    assert plan.activation_terms["sampler (dummy run)"] == (seqs * 152_064 * per_element + hidden_rows * 3584 * 2
                                                            + WORKSPACES + buffer)


@pytest.mark.parametrize("gpu, tp, given, link", [("h100", 2, None, "nvlink"), ("4090", 2, None, "pcie"),
                                                  ("h100", 2, "pcie", "pcie"), ("4090", 4, "nvlink", "nvlink"),
                                                  ("h100", 1, None, None)])
def test_plan_echoes_the_interconnect_it_assumed(gpu, tp, given, link):
    """vllm.interconnect is the link whose non-torch figure the plan carries; null at TP 1 (no links)."""
    g = resolve_gpu(gpu)
    plan = Planner(_report(), tp=tp, interconnect=given).plan(4096, 1, g)
    assert plan.vllm_terms()["interconnect"] == link
    version = Planner(_report()).vllm
    expected = {None: version.non_torch(1, g.key, None, "sm90" if gpu == "h100" else "other"),
                "nvlink": version.non_torch_tp, "pcie": version.non_torch_tp_pcie}[link]
    assert plan.overhead_bytes - plan.runner_state_bytes == expected


def test_cli_json_echoes_the_options(stub_repo):
    def run(*extra):
        out = CliRunner().invoke(main, [str(stub_repo(QWEN)), "--gpu", "h100", "--gpus", "2", "--vllm-sampler",
                                        "flashinfer", "--interconnect", "pcie", "--format", "json", *extra])
        assert out.exit_code == 0, out.output
        return json.loads(out.output)["inference"]
    v1 = run("--vllm-version", "0.33", "--vllm-runner", "v1")["vllm"]
    assert (v1["sampler"], v1["interconnect"], v1["model_runner"], v1["model_runner_state"]) == ("flashinfer", "pcie", "V1", 0)
    v2 = run()  # the newest release runs V2, whose dummy sampler takes no top-k/top-p path: said, not ignored
    assert (v2["vllm"]["sampler"], v2["vllm"]["model_runner"]) == ("v2-greedy", "V2")
    assert sum("--vllm-sampler flashinfer" in n and "changes nothing" in n for n in v2["notes"]) == 1


@pytest.mark.parametrize("release, runner, message", [
    ("0.34", "v1", "removed Model Runner V1"), (None, "v1", "removed Model Runner V1"), ("0.21", "v2", "from vLLM 0.22"),
    ("0.6", "v1", "V0 has one runner"), ("0.25", "v3", "unknown --vllm-runner")])
def test_runner_option_is_checked_against_the_release(release, runner, message):
    with pytest.raises(UsageError, match=message):
        Planner(_report(), vllm_version=release, model_runner=runner)


def test_runner_state_is_deducted_from_027_only():
    """V2's penalty buffers are in use from load_model on, but vLLM's arithmetic counts them only from 0.27
    (utils/mem_utils.py memory_profiling total_consumed): 0.26's pool is sized without them."""
    gpu = resolve_gpu("h100")
    p26, p27 = (Planner(_report(), vllm_version=v, cudagraph=False).plan(32_768, 1, gpu) for v in ("0.26", "0.27"))
    assert (p26.model_runner, p27.model_runner) == ("V2", "V2")
    assert p26.runner_state_bytes == 0 and p27.runner_state_bytes == 1024 * (152_064 + 152_064 // 32) * 4
    assert p26.kv_available_bytes - p27.kv_available_bytes == p27.runner_state_bytes
    assert any("leaves out of its arithmetic" in n for n in p26.notes)


# Model Runner V1 or V2 by default, per release and model (hfmem/memory/vllm_versions.py default_runner, read in each
# wheel's config/vllm.py VllmConfig.use_v2_model_runner). Each case contrasts two releases or two models where the
# source changes its answer, so a rule copied one release off fails here.
_RUNNER_CASES = [
    # (fixture repo, release, runner)
    ("Qwen/Qwen3-8B", "0.21.0", "V1"),  # env default "0" up to 0.21
    ("Qwen/Qwen3-8B", "0.22.0", "V2"),  # the 0.22 list: Qwen3ForCausalLM only
    ("Qwen/Qwen2.5-7B-Instruct", "0.22.0", "V1"),  # the 0.22.0 Qwen2.5-7B log (docs/planner.md): the V1 runner
    ("meta-llama/Llama-3.2-1B-Instruct", "0.23.0", "V2"),  # a 0.23.0 Llama-3.2-1B log: the V2 runner's model_runner.py
    ("meta-llama/Llama-3.1-8B-Instruct", "0.22.0", "V1"),
    ("meta-llama/Llama-3.1-8B-Instruct", "0.23.0", "V2"),  # 0.23 adds Llama and Mistral
    ("Qwen/Qwen3-32B-AWQ", "0.23.0", "V1"),  # listed but quantized: not before 0.24
    ("Qwen/Qwen3-32B-AWQ", "0.24.0", "V2"),
    ("Qwen/Qwen2.5-0.5B", "0.24.0", "V1"),  # Qwen2ForCausalLM is on no list
    ("Qwen/Qwen2.5-0.5B", "0.25.0", "V2"),  # 0.25: every dense model
    ("Qwen/Qwen2.5-0.5B", "0.27.1", "V2"),  # the RTX 4090 logs: "[model_runner.py:329] Model loading took"
    ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "0.24.0", "V1"),  # MoE, not listed (the 4 x L40S 0.24 row)
    ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "0.28.0", "V1"),
    ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "0.29.0", "V2"),  # 0.29: every model
    ("Qwen/Qwen3.5-4B", "0.28.0", "V1"),  # hybrid (Gated DeltaNet + attention), not listed
    ("Qwen/Qwen3.5-4B", "0.29.0", "V2"),  # the L4 row
    ("state-spaces/mamba-2.8b-hf", "0.26.0", "V1"),  # attention-free
    ("Qwen/Qwen2.5-VL-7B-Instruct", "0.23.0", "V1"),  # the A100 0.23 row
    ("Qwen/Qwen2.5-VL-7B-Instruct", "0.25.0", "V2"),
    ("Qwen/Qwen2.5-0.5B", "0.8", "V1"),
]


@pytest.mark.parametrize(("repo", "release", "runner"), _RUNNER_CASES, ids=[f"{r.split('/')[1]}-{v}" for r, v, _ in _RUNNER_CASES])
def test_default_model_runner_by_release_and_model(repo, release, runner):
    planner = Planner(_report(repo), "auto", vllm_version=release)
    assert planner.vllm_runner() == runner
    plan = planner.plan(4096, 1, resolve_gpu("l40s"), with_catalog=False)
    assert plan.vllm_terms()["model_runner"] == runner
    assert bool([n for n in plan.notes if "Model Runner V2" in n]) == (runner == "V2")


def test_default_family_runs_v2_and_v0_has_no_runner():
    assert Planner(_report(), "auto").vllm_runner() == "V2"  # the newest code: V1 removed in 0.34
    assert Planner(_report(), "auto", vllm_version="0.34.0").vllm_runner() == "V2"
    assert Planner(_report(), "auto", vllm_version="0.6").vllm_runner() == "V0"


def test_rocm_keeps_v1_for_its_listed_architectures():
    from hfmem.memory.vllm_versions import RunnerModel, default_runner

    dsv4 = RunnerModel(("DeepseekV4ForCausalLM",), moe=True, quantized=True, hybrid=False, attention_free=False)
    assert default_runner((0, 28), dsv4) == "V2" and default_runner((0, 28), dsv4, rocm=True) == "V1"
    assert default_runner((0, 31), dsv4, rocm=True) == "V1" and default_runner((0, 32), dsv4, rocm=True) == "V2"


def test_v2_note_says_which_profile_the_plan_follows():
    """The V2 note for Qwen2.5-0.5B at 256 sequences: the penalty buffers (256 x (151,936 + 4,748) x 4 B), counted
    from 0.27, the CUDA-graph clause only before 0.29, the V1 way out only where V1 exists."""
    def note(release, runner=None):
        plan = Planner(_report("Qwen/Qwen2.5-0.5B"), "auto", vllm_version=release, max_num_seqs=256,
                       max_batched_tokens=8192, model_runner=runner).plan(4096, 1, resolve_gpu("rtx4090"),
                                                                         with_catalog=False)
        return [n for n in plan.notes if "Model Runner V2" in n and "penalty buffers" in n]
    (n27,), (n29,) = note("0.27.1"), note("0.29.0")
    assert "(0.15 GiB" in n27 and "'consumed memory'" in n27 and "follows its profile" in n27
    assert "returns 0" in n27 and "returns 0" not in n29
    cg29 = Planner(_report("Qwen/Qwen2.5-0.5B"), vllm_version="0.29.0").plan(4096, 1, resolve_gpu("rtx4090")).notes
    assert sum("captures the PIECEWISE graphs in full" in n for n in cg29) == 1  # V2's estimate, said as V2's
    assert "leaves out of its arithmetic" in note("0.25.0")[0]
    assert "VLLM_USE_V2_MODEL_RUNNER=0" in n27 and "VLLM_USE_V2_MODEL_RUNNER=0" not in note("0.34.0")[0]
    assert note("0.27.1", "v1") == [] and note("0.24.0") == []  # V1 planned: no V2 note
    assert "--vllm-runner v2" in note("0.24.0", "v2")[0]



@pytest.mark.parametrize("release, gpu, batch", [
    ("0.27", "b200", (8192, 1024)), ("0.28", "b200", (16384, 1024)), (None, "mi300x", (16384, 1024)),
    (None, "h200", (8192, 1024)), (None, "a100-80gb", (2048, 256)), ("0.31", "4090", (2048, 256))])
def test_api_server_batch_defaults_by_release_and_gpu_memory(release, gpu, batch):
    """EngineArgs.get_batch_defaults (OPENAI_API_SERVER): >= 70 GiB and not an A100: 8192 / 1024, else 2048 / 256;
    from 0.28 a third tier, >= 160 GiB: 16384 / 1024 (read in the 0.27.0 and 0.28.0 wheels). The catalog's totals
    are the CUDA runtime's, as get_device_total_memory reads them (B200 178.36, MI300X 191.98, H200 139.8 GiB)."""
    plan = Planner(_report(), vllm_version=release).plan(32_768, 1, resolve_gpu(gpu))
    assert (plan.max_batched_tokens, plan.max_num_seqs) == batch
    assert plan.activation_tokens == batch[0]


def test_triton_row_buffer_follows_the_kernel_and_the_gpu():
    """apply_top_k_top_p_triton: programs = min(SMs, rows), buffer rows = min(next_power_of_2(programs), SMs); the
    SM count is the GPU's (an RTX 4090: 128, an A100: 108), a size gets the H100's 132 and a note says so."""
    from hfmem.memory.planner import triton_topk_buffer_bytes

    assert triton_topk_buffer_bytes(resolve_gpu("4090"), 256, 1000) == 128 * 1000 * 4
    assert triton_topk_buffer_bytes(resolve_gpu("a100"), 100, 1000) == 108 * 1000 * 4  # next_pow2(100) = 128 > 108
    assert triton_topk_buffer_bytes(resolve_gpu("h100"), 9, 1000) == 16 * 1000 * 4
    assert triton_topk_buffer_bytes(None, 1024, 1000) == 132 * 1000 * 4
    sized = Planner(_report(), vllm_version="0.21").plan(32_768, 1, resolve_gpu("24GB"))
    named = Planner(_report(), vllm_version="0.21").plan(32_768, 1, resolve_gpu("4090"))
    assert sum("Triton top-k/top-p kernel" in n for n in sized.notes) == 1
    assert not any("Triton top-k/top-p kernel" in n for n in named.notes)


def test_a_release_newer_than_the_newest_read_is_said_once():
    """--vllm-version 0.40 is planned as the newest release read (0.34.0), and the plan says so once: not a silent
    fallback. 0.34.x itself and the default carry no such note."""
    from hfmem.memory.vllm_versions import NEWEST_RELEASE_READ

    gpu = resolve_gpu("h100")
    report = _report()
    newer = Planner(report, vllm_version="0.40").plan(32_768, 1, gpu)
    assert sum("newer than the newest release hfmem has read (0.34.0)" in n for n in newer.notes) == 1
    assert newer.kv_available_bytes == Planner(report, vllm_version="0.34").plan(32_768, 1, gpu).kv_available_bytes
    for version in (None, "0.34.1", NEWEST_RELEASE_READ, "0.19"):
        assert not any("newer than the newest release" in n for n in Planner(report, vllm_version=version).plan(32_768, 1, gpu).notes)
