"""vLLM release families hfmem models: the engine defaults and memory terms that changed between releases.

Each field names the upstream file and function it comes from (read at the tag, or at the nearest stored commit, as
docs/planner.md says); where only published start-up logs say (the non-torch memory), the field says so and the log
is a held-in row of tests/test_vllm_logs.py. Nothing here is fitted to the held-out rows.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

from hfmem.errors import UsageError

GiB = 1 << 30
# V1 top-k/top-p paths a run can take whatever its family's default (--vllm-sampler). Which one runs depends on the
# install, not only the release: V1 samplers of the 0.8-0.10 era take FlashInfer's whenever flashinfer imports
# (topk_topp_sampler.py TopKTopPSampler.__init__: ``envs.VLLM_USE_FLASHINFER_SAMPLER is not False``, unset = on),
# later releases only with VLLM_USE_FLASHINFER_SAMPLER=1 ("available but disabled by default"), and the newest again
# when FlashInfer is installed and usable (flashinfer_sampler_supported). The log says which: "Using FlashInfer for
# top-p & top-k sampling."
SAMPLERS = ("sort", "triton", "flashinfer")
# vLLM's --mm-encoder-tp-mode values (config/multimodal.py MultiModalConfig.mm_encoder_tp_mode)
ENCODER_TP_MODES = ("weights", "data")
# vLLM on ROCm is planned with the CUDA code's terms. How the ROCm platform measures model loading
# (platforms/rocm.py get_current_memory_usage) decides whether load-time allocator blocks come off the pool: from
# 0.7.3 to 0.20.x it is the device's used memory, total - free (merged as "[ROCm] Using a more precise memory
# profiling", vllm-project/vllm#12624); before 0.7.3 and from 0.21.0 it is torch's allocated bytes (0.21.0 adds an
# empty_cache first), as on CUDA (platforms/cuda.py). Read in the 0.7.2, 0.7.3, 0.18.0-0.21.0, 0.25.0 and 0.33.0 wheels.
ROCM_USED_MEMORY_RELEASES = ((0, 7, 3), (0, 21, 0))  # [from, to): loading measured as total - free
# Held-out ROCm logs (tests/test_vllm_logs.py: Red Hat's ROCm builds of 0.11-0.18 on an MI300X, all inside that span)
# put the plan's pool at ROCM_POOL_RANGE of theirs; test_rocm_note_is_the_logs ties these figures to those rows.
ROCM_STARTS, ROCM_POOL_RANGE, ROCM_LOADING_EXCESS = 23, (0.97, 1.26), 0.36
ROCM_NOTE = (f"vLLM on ROCm: planned with the CUDA code paths' terms. Against {ROCM_STARTS} starts of Red Hat's ROCm "
             f"builds of 0.11-0.18 on an MI300X the pool shown was {ROCM_POOL_RANGE[0]:.2f}-{ROCM_POOL_RANGE[1]:.2f} "
             f"of the logged one: model loading took up to {ROCM_LOADING_EXCESS:.0%} more than the CUDA plan's "
             "weights (Qwen3-VL-30B-A3B 79.3 GiB for 58.2 in four builds, 59.8 in a fifth; DeepSeek-R1 2 % and FP8 "
             "Llama-3.3-70B 1 % more), and Llama-3.3-70B in bf16 at TP 1 left a 3 % smaller pool. vLLM's ROCm "
             "platform measures model loading as the device's used memory from 0.7.3 to 0.20 (platforms/rocm.py "
             "get_current_memory_usage: total - free), which counts allocator blocks that load-time temporaries "
             "leave reserved and takes them off the pool; how many is not derivable here. So the pool can be that "
             "much smaller on AMD GPUs with these releases (0.21 and later measure allocated bytes, as on CUDA)")
ROCM_ALLOCATED_NOTE = ("vLLM on ROCm: planned with the CUDA code paths' terms. This release's ROCm platform measures "
                       "model loading as its CUDA platform does (platforms/rocm.py get_current_memory_usage: torch's "
                       "allocated bytes, before 0.7.3 and from 0.21), so the loading excess of the 0.7.3-0.20 releases "
                       f"(the pool up to {ROCM_POOL_RANGE[1] - 1:.0%} smaller in Red Hat's ROCm builds of 0.11-0.18) "
                       "does not come off its pool; no ROCm start of such a release was found to check the plan against")


def rocm_note(release: tuple[int, int, int | None] | None) -> str:
    """The note on a ROCm plan for ``release`` (None: the newest code, the default family; a release without a patch
    number is its newest patch, as pool_tokens_rule reads one)."""
    if release is None:
        return ROCM_ALLOCATED_NOTE
    major, minor, patch = release
    start, end = ROCM_USED_MEMORY_RELEASES
    return ROCM_NOTE if start <= (major, minor, sys.maxsize if patch is None else patch) < end else ROCM_ALLOCATED_NOTE


# DeepSeek-V4 (model_type deepseek_v4) under vLLM: the weights per GPU match its logs, the profile does not. Held-out
# starts of DeepSeek-V4-Pro at TP 8 on an H200 under 0.20.2 (tests/test_vllm_logs.py, the Red Hat benchmark database)
# put the plan's pool at DSV4_POOL_RANGE of theirs: the budget held DSV4_UNMODELLED_GIB more beyond weights and pool
# than the plan's torch peak, non-torch and graph terms. test_deepseek_v4_note_is_the_logs ties these to the rows.
DSV4_STARTS, DSV4_POOL_RANGE, DSV4_UNMODELLED_GIB = 2, (1.23, 1.56), (4.8, 7.6)
DSV4_NOTE = (f"DeepSeek-V4 under vLLM: the weights per GPU are checked against its logs; of its memory profile only "
             f"the attention's prefill-gather workspace is modelled (in the torch peak). Against {DSV4_STARTS} starts "
             f"of DeepSeek-V4-Pro at TP 8 on an H200 (vLLM 0.20.2) the pool shown was {DSV4_POOL_RANGE[0]:.2f}-"
             f"{DSV4_POOL_RANGE[1]:.2f} of the logged one: the budget held {DSV4_UNMODELLED_GIB[0]:.1f}-"
             f"{DSV4_UNMODELLED_GIB[1]:.1f} GiB per GPU more than the weights, pool and the torch peak, non-torch and "
             "CUDA-graph terms shown here (its hyper-connection streams, sparse-attention indexer and MXFP4 expert "
             "kernels are not modelled). Read the pool, the longest context and the concurrency as upper bounds")
# The notes whose logs put vLLM's pool more than 2 % from the plan's: the --gpu verdict shows them beside the answer
POOL_CAVEATS = frozenset({ROCM_NOTE, DSV4_NOTE})

# Links between tensor-parallel ranks (--interconnect): "pcie" covers every link without NVLink P2P (PCIe, no P2P,
# across nodes), where vLLM's log says custom all-reduce is disabled.
INTERCONNECTS = ("nvlink", "pcie")
# Non-torch memory logged at TP 2 over NVLink (held-out rows of tests/test_vllm_logs.py, never used to choose a
# constant): shown in the plan's note as the range the NVLink-class constant may be off by. Why they differ
# (docs/planner.md, "non-torch forward increase memory"): not NCCL's version (0.10.2-0.11 run torch 2.8.0's NCCL 2.27.3,
# 0.19 NCCL 2.27.5, the same buffers and NVLS rules) but what vLLM runs between its snapshot and the profile's end
# (0.19: the allreduce+RMSNorm fusion's FlashInfer workspace and the CUDA-graph memory profile). What the source fixes:
# per connection LL 512 KiB + LL128 4,915,200 B + SIMPLE 4 MiB (NCCL src/init.cc DEFAULT_*BUFFSIZE), NVLS off at two
# GPUs or fewer (src/transport/nvls.cc ncclNvlsInit); what it does not: the channel count (src/graph/search.cc
# ncclTopoCompute, from the topology detected at run time), cuMem's granularity, how many communicators the window opens.
NVLINK_TP_LOGGED = {"vLLM 0.10.2, H200": int(1.38 * GiB), "vLLM 0.11.0, H100": int(0.54 * GiB)}
# Where the NVLink-class constant comes from (the project issue's figure; the logs: llm-d-planner's accuracy sweep).
NVLINK_TP_SOURCE = "vLLM 0.19.0 logs on H100s at TP 2-4 (2.06-2.13 GiB)"
# First release whose gpu_worker.py Worker.init_device takes the memory snapshot after
# init_worker_distributed_environment: from it the TP group's PyNccl communicator (ncclCommInitRank and its warm-up
# all-reduce) and the custom all-reduce IPC buffers are allocated before the snapshot and stay out of the non-torch
# figure (and out of the KV budget's arithmetic); before it they are inside. 0.10.2's worker snapshots first; the
# 0.11.0 logs show the TP 2 start-up free memory 0.93 GiB below TP 1's, which only the later snapshot explains.
SNAPSHOT_AFTER_DIST_INIT = (0, 11)
# Catalog keys of NVLink/xGMI-class parts. "h100" covers the H100 NVL (h100-nvl): its pairs are joined by NVLink
# bridges, so at TP 2 vLLM keeps custom all-reduce (custom_all_reduce.py CustomAllreduce.__init__, NVLink P2P) and NCCL
# rings over NVLink; it has no NVSwitch, so no NVLS, which no TP 2 run has anyway (ncclNvlsInit). Beyond a bridged pair
# the pairs meet over PCIe and vLLM turns custom all-reduce off for more than two GPUs not all NVLink-connected: there
# --interconnect pcie describes the link.
NVLINK_CLASS = ("a100", "h100", "h200", "b200", "gb200", "gh200", "mi300")
# V1 non-torch at TP 1 on compute capability 9.0 (Hopper), by release: (first release, bytes). From logs, not source.
# At TP 1 vLLM allocates nothing outside torch that it sizes: parallel_state.py GroupCoordinator.__init__ builds a
# device communicator (PyNccl, custom all-reduce) only for more than one rank, and PyTorch's cuBLAS/cuBLASLt
# workspaces come from its caching allocator (CublasHandlePool.cpp getNewWorkspace), so they are in the torch peak.
# What stays outside torch is the driver's memory for kernel modules loaded lazily at first launch (CUDA's lazy
# module loading) and library handles: on sm90 vLLM's attention runs FlashAttention 3 (fa_utils.py
# get_flash_attn_version: version 3 only when the device's major capability is 9), elsewhere FlashAttention 2 or
# FlashInfer, and cuBLAS and Triton load
# per-architecture kernels; the binaries set the size, not vLLM, so the figure is per GPU class and release, and
# each value is one published log's (docs/planner.md):
# - 0.14 GiB: RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic, vLLM 0.11.0, one H100 80GB, TP 1 (llm-d-benchmark's
#   empirical-vllm-memory-results.md: "Non-torch Memory (GiB) 0.14"; a failed start whose terms add up: 67.72 +
#   4.84 + 0.14 - 1.44 = 71.26 GiB requested); a run no table row holds. No TP 1 log on sm90 before 0.11 is at
#   hand: 0.8-0.10 take it too (FlashAttention 3 on sm90 is older than 0.8).
# - 0.25 GiB from 0.18: Llama-3.1-8B-Instruct, vLLM 0.19.0, one H100 80GB, TP 1, max_model_len 8192 (llm-d-planner's
#   accuracy_report.md, TP sensitivity table: "Actual non-torch (GiB) 0.25"); the table holds its 16k run, not this.
#   Where between 0.17 and 0.18 it grew is the same report's Part 2 (0.13 on 0.17.0, 0.25 on 0.18.0), not source.
# Other GPU classes keep the family's non_torch_tp1 (0.02 GiB, a 0.10.2 log on a 24 GB card): the Ampere, Ada,
# Volta and Blackwell rows of tests/test_vllm_logs.py agree with it, and the one that logs its figure (a 48 GB-class
# Ada card, 0.10 development build) logs 0.02. A GPU whose class hfmem does not know keeps it too, with a note.
SM90_TP1: tuple[tuple[tuple[int, int], int], ...] = (((0, 8), int(0.14 * GiB)), ((0, 18), int(0.25 * GiB)))
SM90_TP1_SOURCE = {(0, 8): "vLLM 0.11.0's H100 log of Llama-3.3-70B-FP8", (0, 18): "vLLM 0.19.0's H100 log of Llama-3.1-8B"}


# get_batch_defaults' third tier, ">= 160GB memory" (B200/B300), in the 0.28.0 wheel and not in 0.27.0's
LARGE_GPU_BATCH_FROM = (0, 28)


@dataclass(frozen=True)
class VllmVersion:
    name: str
    engine: str  # "V0" (vllm/worker/worker.py) or "V1" (vllm/v1/worker/gpu_worker.py)
    # CacheConfig.gpu_memory_utilization (vllm/config/cache.py; vllm/engine/arg_utils.py before the config split)
    gpu_util: float
    # The dummy sampler run's fp32 temporaries per logits element, on top of the model-dtype logits
    # (gpu_model_runner.py _dummy_sampler_run: top_k = vocab - 1 and top_p = 0.9, so top-k/top-p always run):
    # - "sort": topk_topp_sampler.py apply_top_k_top_p (PyTorch path). Its peak is inside logits.sort(): PyTorch's
    #   SortStable.cu segmented_sort_pairs allocates the int64 reverse indices (8) and cub's SortPairs its alternate
    #   key/value buffers (4 + 8), next to the fp32 copy (Sampler.forward logits.to(float32), 4) and the outputs
    #   (values 4, int64 indices 8): 36 B. Later, at the scatter (masks 2, probs_sort 4 with cumsum in place, the
    #   scatter's new tensor 4, without the sort's temporaries) only 26 B are alive.
    # - "v0": vllm/model_executor/layers/sampler.py Sampler.forward (V0, driver rank only) with ModelRunner.profile_run's
    #   SamplingParams(top_p=0.99, top_k=vocab - 1). _apply_top_k_top_p sorts and, since vLLM 0.6.2, scatters the
    #   masked values back (torch.empty_like(logits_sort).scatter_) instead of gathering through an int64 inverse
    #   permutation, so its peak is the same logits.sort() as "sort": 36 B. At the scatter the fp32 copy 4, sorted
    #   values 4, int64 indices 8, two masks 2, probs_sort 4, probs_sum 4 (cumsum not in place) and the output 4 are
    #   30 B; softmax/log_softmax and _multinomial's copy and noise come after the sort's tensors are freed (20 B).
    # - "triton": topk_topp_triton.py apply_top_k_top_p_triton masks the fp32 logits in place (pivot search, no
    #   sort), then forward_native's softmax probs 4 and random_sample's exponential noise q 4: 4 + 4 + 4 = 12 B.
    # - "flashinfer" (not a family default; chosen per run, see SAMPLERS): topk_topp_sampler.py
    #   TopKTopPSampler.forward_cuda -> flashinfer_sample -> flashinfer's sampling.py top_k_top_p_sampling_from_logits
    #   ("top_k_first"): top_k_mask_logits returns a new tensor like the fp32 logits (torch.empty_like) and
    #   torch.softmax of it another; top_p_sampling_from_probs returns int32 ids only: 4 + 4 + 4 = 12 B, no sort.
    sampler: str
    # "GPU KV cache size: N tokens" (kv_cache_utils.py): "groups" = num_blocks // num_groups x block_size (the 2025
    # code), "concurrency" = int(max concurrency x max_model_len) (2026 code, group-aware)
    pool_tokens: str
    # Non-torch memory the profile adds (MemoryProfilingResult.non_torch_increase; cuBLAS/cuBLASLt workspaces, NCCL
    # communicators and channel buffers, custom all-reduce IPC buffers): not computable from vLLM's source alone
    # (NCCL sizes its buffers at run time), so these two numbers come from published start-up logs, cited in
    # docs/planner.md, and are shown as such.
    non_torch_tp1: int
    non_torch_tp: int  # TP >= 2 on NVLink data-centre GPUs (A100/H100/H200/B200 SXM class, or no GPU given)
    non_torch_tp_pcie: int  # TP >= 2 on other GPUs (PCIe workstation/consumer cards)
    # CUDA graph memory deducted from the KV budget: gpu_worker.py Worker.determine_available_memory subtracts
    # profile_cudagraph_memory's estimate when envs.py VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS is set, and its
    # default is "0" up to v0.19.1, "1" from v0.20.0 (read in both wheels; the log line itself says "default since
    # v0.21.0", which the 0.20.0 code contradicts). Further conditions, by release: a cudagraph_mode other than NONE
    # (--enforce-eager: none), and the platform (cudagraph_deducted_on).
    cudagraph_deducted: bool

    def sampler_bytes(self, act_bytes: int, rows: int, kind: str | None = None) -> int:
        """Bytes per logits element alive at the sampler's peak: the model-dtype logits the runner keeps plus the
        sampler's temporaries. ``kind`` overrides the family's path (a V1 run whose log says "Using FlashInfer for
        top-p & top-k sampling."). Newer vLLM takes the Triton path only from 8 rows up (topk_topp_sampler.py
        apply_top_k_top_p: ``HAS_TRITON and logits.shape[0] >= 8``), else the PyTorch sort."""
        return act_bytes + {"v0": 36, "sort": 36, "triton": 12, "flashinfer": 12}[self.sampler_path(rows, kind)]

    def sampler_path(self, rows: int, kind: str | None = None) -> str:
        """The top-k/top-p path the dummy sampler run takes: ``kind`` (--vllm-sampler) else the family's, with
        Triton falling back to the PyTorch sort below 8 rows (see sampler_bytes); "v0" is V0's sampler."""
        kind = kind or self.sampler
        return "sort" if kind == "triton" and rows < 8 else kind

    def batch_defaults(self, gpu_memory_bytes: int | None, gpu_key: str | None,
                       release: tuple[int, int] | None = None) -> tuple[int | None, int]:
        """(max_num_batched_tokens, max_num_seqs) of the OpenAI API server when the user sets neither.

        V1: vllm/engine/arg_utils.py EngineArgs.get_batch_defaults: on GPUs with >= 70 GiB that are not an A100,
        8192 tokens and 1024 sequences; otherwise 2048 tokens and 256 sequences; from 0.28 (LARGE_GPU_BATCH_FROM)
        GPUs with >= 160 GiB (B200, MI300X) take 16384 tokens and 1024 sequences. ``release`` None is the newest code.
        V0 (vllm/engine/arg_utils.py EngineArgs.create_engine_config, 0.6): no chunked prefill up to 32k tokens, so
        the profile runs max_model_len tokens (None here: the planner uses the context) and 256 sequences."""
        if self.engine == "V0":
            return None, 256
        if gpu_memory_bytes is None:
            return 8192, 1024  # no GPU given: the data-centre default (H100 class)
        if gpu_memory_bytes >= 160 * GiB and (release is None or release >= LARGE_GPU_BATCH_FROM):
            return 16384, 1024
        large = gpu_memory_bytes >= 70 * GiB and not (gpu_key or "").startswith("a100")
        return (8192, 1024) if large else (2048, 256)

    def non_torch(self, tp: int, gpu_key: str | None = None, interconnect: str | None = None,
                  gpu_class: str | None = None, release: tuple[int, int] | None = None) -> int:
        """Non-torch memory per GPU. At TP >= 2 it is mostly NCCL's per-channel buffers, and NCCL opens many more
        channels over NVLink/NVSwitch than over PCIe, so the figure follows the link between the ranks: the one given
        (``interconnect``), else the GPU class's. A data-centre GPU is not always on NVLink: vLLM's log says so when it
        turns custom all-reduce off (distributed/device_communicators/custom_all_reduce.py CustomAllreduce.__init__:
        "this process group spans across nodes", "your platform lacks GPU P2P capability", "more than two PCIe-only
        GPUs"), and NCCL then runs over sockets, shared memory or PCIe, as on the PCIe-class constant's own log.

        At TP 1 on V1 it follows the GPU class (``gpu_class``: "sm90" for compute capability 9.0, "other", or None
        when hfmem cannot tell) and on sm90 the release (``release``, else the family's): SM90_TP1."""
        if tp <= 1:
            if self.engine == "V1" and gpu_class == "sm90":
                return sm90_tp1(release or release_of(self.name))
            return self.non_torch_tp1
        return self.non_torch_tp if resolve_interconnect(gpu_key, interconnect) == "nvlink" else self.non_torch_tp_pcie


def sm90_tp1(release: tuple[int, int]) -> int:
    """V1 non-torch at TP 1 on compute capability 9.0 for a release (SM90_TP1: the newest step at or below it)."""
    return [b for first, b in SM90_TP1 if first <= release][-1]


def sm90_tp1_source(release: tuple[int, int]) -> str:
    """The log SM90_TP1's value for a release comes from."""
    return [SM90_TP1_SOURCE[first] for first, _ in SM90_TP1 if first <= release][-1]


def resolve_interconnect(gpu_key: str | None, interconnect: str | None) -> str:
    """The link between TP ranks hfmem assumes: the one given, else the GPU class's (NVLink for data-centre parts and
    when no GPU is given, PCIe else)."""
    if interconnect is not None:
        return interconnect
    return "nvlink" if gpu_key is None or gpu_key.startswith(NVLINK_CLASS) else "pcie"


# non_torch: published start-up logs, one per constant (which log, and its numbers: docs/planner.md and the held-in
# rows of tests/test_vllm_logs.py). TP 1: V0 0.35 GiB (RTX 3090, 0.6.4) up to 0.6 and 0.05 GiB from 0.7 (Llama-3.1-8B on
# a 22.07 GiB card, a March 2025 V0 worker.py log on an OCI AI Quick Actions troubleshooting page; not a table row): vLLM PR
# 11809, in 0.7.0, moved V0's worker.py determine_num_available_blocks onto utils.py memory_profiling, which counts the
# non-torch increase since a snapshot taken after the CUDA context is up, where 0.6 counted all non-torch memory in use
# (the context's included); V1 0.02 GiB (0.10.2; cuBLAS workspaces come
# from torch's allocator in V1's PyTorch, so little is left outside it). TP >= 2: V0 0.30 GiB (2 x L40S, 0.7); V1
# 0.09 GiB on 24 GB cards (TP 4, 0.11.1) and 2.1 GiB on NVLink data-centre GPUs (NVLINK_TP_SOURCE: 0.19.0 H100 logs
# at TP 2-4; eight 0.19 TP 2 runs of other models log 2.07-2.11, three are held-out rows). None of these is in vLLM's
# source: NCCL's per-connection buffers are (9,633,792 B), the channel count it multiplies is chosen at run time.
# What the logged figure covers does follow the source, by release (SNAPSHOT_AFTER_DIST_INIT): up to 0.10.x
# gpu_worker.py Worker.init_device snapshots memory before init_worker_distributed_environment, so the TP group's
# PyNcclCommunicator and CustomAllreduce buffers are inside it; from 0.11 it snapshots after, so they are not. Every V1
# profile also opens torch's NCCL communicator (DeviceCommunicatorBase.all_gather of the logits). No family splits on
# it: only the 0.19 logs (the 2.1 GiB) are held in, and the sizes either side are NCCL's, set at run time.
#
# Family boundaries: 0.7 = V0 with PR 11809's measurement (above); 0.8 = V1 (the default engine from 0.8.0) with the PyTorch sort sampler (seen in 0.8-0.15 code
# and logs); 0.17 = the Triton top-k/top-p kernel (it landed after 0.15.1; the first release carrying it is not
# pinned down here); 0.20 = two defaults that changed in v0.20.0 (read in the 0.19.1 and 0.20.0 wheels): envs.py
# VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS "0" -> "1" (the CUDA-graph estimate deducted) and config/cache.py
# CacheConfig.gpu_memory_utilization 0.9 -> 0.92; with them, from v0.20.1, the group-aware token log
# (v1/core/kv_cache_utils.py _report_kv_cache_config: int(max_concurrency x max_model_len); 0.20.0 still prints
# num_blocks // num_groups x block_size: pool_tokens_rule). The first two read the same in every x.y.0 wheel from
# 0.20.0 to 0.33.0, the token form through 0.29.0's log (get_kv_cache_capacity) and 0.33.0's function; 0.34.0 sizes
# the KV cache another way by default (EXTENSIBLE_KV_CACHE_FROM), which no family models.
VERSIONS: dict[str, VllmVersion] = {
    "0.6": VllmVersion("0.6", "V0", 0.9, "v0", "groups", int(0.35 * GiB), int(0.30 * GiB), int(0.30 * GiB), False),
    "0.7": VllmVersion("0.7", "V0", 0.9, "v0", "groups", int(0.05 * GiB), int(0.30 * GiB), int(0.30 * GiB), False),
    "0.8": VllmVersion("0.8", "V1", 0.9, "sort", "groups", int(0.02 * GiB), int(2.1 * GiB), int(0.09 * GiB), False),
    "0.17": VllmVersion("0.17", "V1", 0.9, "triton", "groups", int(0.02 * GiB), int(2.1 * GiB), int(0.09 * GiB), False),
    "0.20": VllmVersion("0.20", "V1", 0.92, "triton", "concurrency", int(0.02 * GiB), int(2.1 * GiB), int(0.09 * GiB), True),
}
DEFAULT_VERSION = "0.20"
# The newest release whose wheel was read for these families (PyPI, `pip download --no-deps vllm==X`): the default
# plan (no --vllm-version) follows its code, the 0.20 family's arithmetic with its runner choice and its extensible
# KV cache given as a bound (EXTENSIBLE_KV_CACHE_FROM).
NEWEST_RELEASE_READ = "0.34.0"
# 0.34.0's config/cache.py: enable_extensible_kv_cache defaults on for CUDA and ROCm ("the cache is sized from the
# memory actually free after CUDA graph capture rather than from a profiling estimate") and gpu_memory_utilization
# defaults to 1.0 with it (CacheConfig.resolved_gpu_memory_utilization). hfmem keeps the 0.20 family's profile
# arithmetic there (the pool vLLM sizes with it off) and gives the extensible pool as a bound from above, in a note
# and in JSON (extensible_kv_cache_max_bytes): its size depends on the CUDA context, which only vLLM measures.
EXTENSIBLE_KV_CACHE_FROM = (0, 34)
# The KV cache block size `vllm serve` starts with where --block-size is not given: config/cache.py
# CacheConfig.DEFAULT_BLOCK_SIZE, 16 up to 0.33.0 and 64 from 0.34.0, which Platform.update_block_size_for_backend keeps
# where every attention backend takes it (_preferred_block_size_for_backends: FLASH_ATTN's MultipleOf(16), FLASHINFER,
# TRITON_ATTN and the MLA backends all take 64); backends that force their own size (FlashMLA-sparse, DeepSeek-V4's)
# and the hybrid alignment start from it.
DEFAULT_BLOCK_SIZE_64_FROM = (0, 34)


def as_compared(release: tuple[int, int] | None) -> tuple[int, int]:
    """A release to compare with the "from" constants: None, the newest code read, comes after every release."""
    return release if release is not None else (1 << 16, 0)


def default_block_size(release: tuple[int, int] | None) -> int:
    """vLLM's default KV block size in `release` (None: the newest read)."""
    return 64 if release is None or release >= DEFAULT_BLOCK_SIZE_64_FROM else 16


# Platforms whose worker profiles the CUDA-graph estimate (gpu_worker.py determine_available_memory's guard):
# 0.20.0 ``not current_platform.is_rocm()``, 0.21.0-0.25.0 ``current_platform.is_cuda()``, from 0.26.0
# ``current_platform.is_cuda_alike()`` (CUDA and ROCm). On ROCm nothing is deducted before 0.26.
ROCM_CUDAGRAPH_FROM = (0, 26)


def release_triple(name: str) -> tuple[int, int, int | None]:
    """(major, minor, patch or None) of a release name such as 0.19, 0.10.1.1, 0.20.0rc1 or v0.11.0; a usage
    error when major and minor are not numbers. The one parser of release names (release_of is its first two)."""
    parts = name.strip().lstrip("v").split(".")
    try:
        major, minor = int(parts[0]), int(parts[1])
    except (ValueError, IndexError):
        raise UsageError(f"--vllm-version must look like 0.19, got {name!r}") from None
    patch = int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else None
    return major, minor, patch


def pool_tokens_rule(version: VllmVersion, release: str | None) -> str:
    """The "GPU KV cache size" form a release logs: the family's, except 0.20.0 itself, which still prints
    num_blocks // num_groups x block_size (the concurrency form is in the 0.20.1 wheel, not the 0.20.0 one)."""
    if release is not None and release_triple(release) == (0, 20, 0):
        return "groups"
    return version.pool_tokens


def cudagraph_deducted_on(version: VllmVersion, release: tuple[int, int] | None, gpu_kind: str | None) -> bool:
    """Whether a release of the family deducts its CUDA-graph estimate on this GPU kind: on ROCm only from
    ROCM_CUDAGRAPH_FROM; ``release`` None is the newest code (the default family), which does."""
    if not version.cudagraph_deducted:
        return False
    return gpu_kind != "rocm" or release is None or release >= ROCM_CUDAGRAPH_FROM


# v1/worker/extensible_kv_cache.py at 0.34.0: the margin kept free beside the transient peak when the extensible KV
# cache is sized (KV_CACHE_MARGIN_FLOOR_BYTES: 1 GiB, 3 GiB on ROCm; KV_CACHE_MARGIN_FRACTION 0.75 of the peak).
EXTENSIBLE_MARGIN_FLOOR = {"cuda": 1 << 30, "rocm": 3 << 30}
EXTENSIBLE_MARGIN_FRACTION = 0.75
# What the bound leaves out, as real logs show it: the memory in use when vLLM's worker takes its start snapshot
# ("Free memory on device (free/total GiB) on startup", gpu_worker.py), total less free, in the TP 1 logs of Linux
# machines in tests/test_vllm_logs.py (A100 80GB, H100, L4, a 24 GB card; vLLM 0.10-0.31): the CUDA context and
# whatever else held the GPU. Logs, not source: the driver sizes the context. At TP >= 2 from 0.11 the snapshot also
# follows the NCCL and custom all-reduce set-up (gpu_worker.py Worker.init_device), so more is in use by then.
START_IN_USE_TP1_GIB = (0.19, 0.61)


def extensible_kv_cache_on(release: tuple[int, int] | None, gpu_kind: str | None) -> bool:
    """Whether the release sizes the KV cache after warmup by default on this GPU kind (config/cache.py at 0.34.0:
    on for CUDA and ROCm); ``release`` None is the newest code, which does."""
    return (release is None or release >= EXTENSIBLE_KV_CACHE_FROM) and gpu_kind in (None, *EXTENSIBLE_MARGIN_FLOOR)


def extensible_kv_cache_max_bytes(*, total: int, gpu_util: float | None, resident: int, peak: int, gpu_kind: str) -> int:
    """An upper bound on the KV cache 0.34's extensible sizing commits on one GPU (v1/worker/extensible_kv_cache.py
    measure_kv_cache_bytes): min(requested - non-KV use, free memory after warmup - margin) - peak, with requested =
    ceil(total x gpu_memory_utilization) (1.0 unless given: CacheConfig.resolved_gpu_memory_utilization,
    worker/utils.py request_memory), margin = max(floor, 0.75 x peak) and peak the profiled activation peak plus the
    CUDA-graph estimate (gpu_worker.py initialize_from_config sets reserved_headroom_bytes to peak_activation_memory).
    ``resident`` is what hfmem sees of the non-KV use (weights, non-torch, runner state, the captured graphs); the
    free memory is taken as ``total - resident``, which leaves out the CUDA context and anything else on the GPU at
    start: vLLM measures those and hfmem cannot, so the result is a bound from above."""
    requested = math.ceil(total * (1.0 if gpu_util is None else gpu_util))
    margin = max(EXTENSIBLE_MARGIN_FLOOR[gpu_kind], int(peak * EXTENSIBLE_MARGIN_FRACTION))
    return max(min(requested - resident, total - resident - margin) - peak, 0)


def extensible_kv_cache_note(release: tuple[int, int] | None, bound: str | None = None, left: str | None = None) -> str:
    """The note for plans of releases from EXTENSIBLE_KV_CACHE_FROM (and the newest code), whose default KV sizing
    after warmup hfmem bounds from above (``bound``: that figure in words, None without a GPU; ``left``: the pool in
    words once START_IN_USE_TP1_GIB is taken off, at TP 1)."""
    which = ("vLLM 0.34 and later (the default here) size" if release is None
             else f"vLLM {release[0]}.{release[1]} sizes")
    text = (f"{which} the KV cache by default from the memory free after warmup and CUDA-graph capture "
            "(enable_extensible_kv_cache, gpu_memory_utilization 1.0 unless set: v1/worker/extensible_kv_cache.py "
            "measure_kv_cache_bytes keeps max(1 GiB (3 GiB on ROCm), 0.75 x peak) and the peak, its torch peak plus "
            "CUDA-graph estimate, free; its log: 'Extended KV cache to N blocks')")
    if bound is None:
        return text + "; the pool shown is the profile-sized one vLLM keeps with --no-enable-extensible-kv-cache"
    low, high = START_IN_USE_TP1_GIB
    leaves = f", which would leave {left}" if left else ""
    return (text + f"; here at most {bound}, less what holds the GPU when vLLM starts (the CUDA context: "
            f"{low:.2f}-{high:.2f} GiB at TP 1 in the logs' 'Free memory on device' lines{leaves}; more at TP >= 2; "
            "vLLM measures it, hfmem cannot); the pool shown is the profile-sized one vLLM keeps with "
            "--no-enable-extensible-kv-cache")


def newer_than_read_note(release: tuple[int, int] | None) -> str | None:
    """A note for an asked release newer than NEWEST_RELEASE_READ: planned as that release's code, which it may
    have changed (said, not assumed silently); None otherwise."""
    newest = release_of(NEWEST_RELEASE_READ)
    if release is None or release <= newest:
        return None
    return (f"vLLM {release[0]}.{release[1]} is newer than the newest release hfmem has read ({NEWEST_RELEASE_READ}): "
            f"it is planned as {NEWEST_RELEASE_READ}'s code (family {DEFAULT_VERSION}); defaults or memory terms it "
            "changed are not in this plan")


def release_of(name: str) -> tuple[int, int]:
    """(major, minor) of a release name such as 0.19, 0.10.1.1 or v0.11.0; a usage error otherwise."""
    major, minor, _ = release_triple(name)
    return major, minor


def resolve_version(name: str | None) -> VllmVersion:
    """The family for ``X.Y`` (or ``X.Y.Z``): the newest modelled family at or below it."""
    if name is None:
        return VERSIONS[DEFAULT_VERSION]
    parts = release_of(name)
    known = sorted(VERSIONS, key=lambda v: tuple(int(p) for p in v.split(".")))
    chosen = None
    for v in known:
        if tuple(int(p) for p in v.split(".")) <= parts:
            chosen = v
    if chosen is None:
        raise UsageError(f"--vllm-version {name}: hfmem models vLLM {', '.join(known)} (and releases after each)")
    return VERSIONS[chosen]


# Which GPU model runner a V1-engine release runs by default: "V1" (v1/worker/gpu_model_runner.py GPUModelRunner, the
# profile hfmem models) or "V2" (v1/worker/gpu/model_runner.py, "Model Runner V2", log "Using V2 Model Runner").
# Read in each wheel's config/vllm.py VllmConfig.use_v2_model_runner (gpu_worker.py Worker.__init__ takes it from
# there from 0.22; up to 0.21 it reads envs.py VLLM_USE_V2_MODEL_RUNNER, default "0": V1 always):
# - 0.22-0.23: V2 for a generate model whose architectures include one of V2_DEFAULT_ARCHITECTURES[release], not MoE
#   and not quantized (_is_default_v2_model_runner_model: ``not model_config.is_moe and not model_config.is_quantized``);
# - 0.24: any model of the list (the MoE and quantization conditions dropped);
# - 0.25-0.26: every dense model and the listed MoE ones (``any(arch in ...) or not model_config.is_moe``), but not
#   hybrid (attention + Mamba/linear-attention state layers) or attention-free models;
# - 0.27-0.28: the same, a listed hybrid included (is_hybrid excludes only unlisted ones); on ROCm the list less
#   ROCM_EXCLUDED_V2_MODEL_RUNNER_ARCHITECTURES (0.27) / DeepSeek-V4 (0.28: default_v2_model_runner_architectures);
# - 0.29-0.33: every model (no list), except on ROCm the ROCM_DEFAULT_MRV1_ARCHITECTURES (0.29-0.31);
# - 0.34: V2 only (platforms/interface.py validate_environ: "Model Runner V1 has been removed").
# In every release from 0.22 to 0.33, VLLM_USE_V2_MODEL_RUNNER set either way overrides the default, and V2 falls back
# to V1 without Triton or for a feature V2 lacks (_get_v2_model_runner_unsupported_features: e.g. ngram speculative
# decoding before 0.33, custom logits processors), which hfmem's inputs do not carry.
V2_RUNNER_FROM = (0, 22)
V2_RUNNER_EVERY_MODEL_FROM = (0, 29)
# Model Runner V2 estimates its CUDA-graph pool only from 0.29: gpu/model_runner.py profile_cudagraph_memory returns 0
# ("TBD whether we keep this API") in every release from 0.25 to 0.28 and calls cudagraph_utils'
# _profile_cudagraph_memory from 0.29.0; gpu_worker.py determine_available_memory deducts what it returns.
V2_CUDAGRAPH_ESTIMATE_FROM = (0, 29)
V1_RUNNER_REMOVED_FROM = (0, 34)
# From 0.27 the profile's arithmetic counts every torch allocation alive after profile_run ("consumed memory":
# utils/mem_utils.py memory_profiling total_consumed, free memory lost since the start-up snapshot), so V2's persistent
# sampler state is deducted from the pool; 0.22-0.26 take weights + torch peak increase + non-torch increase, which
# leaves it out (the pool is sized as if it were not there).
RUNNER_STATE_COUNTED_FROM = (0, 27)
RUNNERS = ("v1", "v2")  # --vllm-runner: VLLM_USE_V2_MODEL_RUNNER=0 / =1


def runner_available(release: tuple[int, int] | None, runner: str) -> str | None:
    """Why a release cannot run ``runner`` ("v1"/"v2"), or None when it can: V2 exists from V2_RUNNER_FROM (envs.py
    VLLM_USE_V2_MODEL_RUNNER; earlier wheels have no gpu/model_runner.py profile hfmem reads), V1 until
    V1_RUNNER_REMOVED_FROM; ``release`` None is the newest code, V2 only."""
    if runner == "v1" and (release is None or release >= V1_RUNNER_REMOVED_FROM):
        return ("vLLM 0.34 removed Model Runner V1 (platforms/interface.py validate_environ); give --vllm-version 0.33 "
                "or earlier to plan it")
    if runner == "v2" and release is not None and release < V2_RUNNER_FROM:
        return "Model Runner V2 is the default from vLLM 0.22 (hfmem models its profile from there)"
    return None


def v2_runner_state_bytes(max_num_seqs: int, vocab: int) -> int:
    """Model Runner V2's persistent sampler state, built in load_model after the "Model loading took" measurement:
    sample/penalties.py PenaltiesState.__init__ output_bin_counts [max_num_reqs, vocab] int32 and prompt_bin_mask
    [max_num_reqs, cdiv(vocab, 32)] int32 (the same from 0.25.0 to 0.34.0). The other per-request states (sampling
    params, logit bias and allowed ids: 1,024 int32/fp32 per request, bad words) are a few MiB and not counted;
    all_token_ids is host memory (UVA)."""
    return max_num_seqs * (vocab + -(-vocab // 32)) * 4
_V2_QWEN3 = frozenset({"Qwen3ForCausalLM"})
_V2_DENSE = _V2_QWEN3 | {"LlamaForCausalLM", "MistralForCausalLM"}
_V2_MOE = frozenset({"DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM"})
_V2_MOE_26 = _V2_MOE | {"InklingForCausalLM", "InklingForConditionalGeneration", "LongcatFlashNgramForCausalLM"}
V2_DEFAULT_ARCHITECTURES: dict[tuple[int, int], frozenset[str]] = {
    (0, 22): _V2_QWEN3, (0, 23): _V2_DENSE, (0, 24): _V2_DENSE | _V2_MOE, (0, 25): _V2_MOE, (0, 26): _V2_MOE_26,
    (0, 27): _V2_MOE_26 | {"KimiK3ForConditionalGeneration"},
    (0, 28): _V2_MOE_26 | {"KimiK3ForConditionalGeneration", "DeepseekV4ForCausalLM"},
}
_ROCM_EXCLUDED_V2 = {(0, 27): frozenset({"KimiK3ForConditionalGeneration"}), (0, 28): frozenset({"DeepseekV4ForCausalLM"})}
_ROCM_V1_29 = frozenset({"DeepseekV32ForCausalLM", "DeepseekV4ForCausalLM"})
ROCM_DEFAULT_V1_ARCHITECTURES: dict[tuple[int, int], frozenset[str]] = {
    (0, 29): _ROCM_V1_29, (0, 30): _ROCM_V1_29 | {"GlmMoeDsaForCausalLM"}, (0, 31): _ROCM_V1_29 | {"GlmMoeDsaForCausalLM"},
}


@dataclass(frozen=True)
class RunnerModel:
    """What VllmConfig.use_v2_model_runner reads of the model (vLLM's ModelConfig properties)."""
    architectures: tuple[str, ...]
    moe: bool  # ModelConfig.is_moe
    quantized: bool  # ModelConfig.is_quantized: the checkpoint's quantization_config
    hybrid: bool  # ModelConfig.is_hybrid: attention and Mamba/linear-attention state layers
    attention_free: bool  # ModelConfig.is_attention_free: state layers only


def default_runner(release: tuple[int, int] | None, model: RunnerModel, rocm: bool = False) -> str:
    """The model runner a V1-engine release runs this model with by default ("V1" or "V2"), as read above;
    ``release`` None is the newest code (the default family), which runs V2."""
    if release is None or release >= V1_RUNNER_REMOVED_FROM:
        return "V2"
    if release < V2_RUNNER_FROM:
        return "V1"
    archs = set(model.architectures)
    if release >= V2_RUNNER_EVERY_MODEL_FROM:
        return "V1" if rocm and archs & ROCM_DEFAULT_V1_ARCHITECTURES.get(release, frozenset()) else "V2"
    listed_set = V2_DEFAULT_ARCHITECTURES[release] - (_ROCM_EXCLUDED_V2.get(release, frozenset()) if rocm else frozenset())
    listed = bool(archs & listed_set)
    if release < (0, 24):
        return "V2" if listed and not model.moe and not model.quantized else "V1"
    if release < (0, 25):
        return "V2" if listed else "V1"
    if model.attention_free or (model.hybrid and (release < (0, 27) or not listed)):
        return "V1"
    return "V2" if listed or not model.moe else "V1"
