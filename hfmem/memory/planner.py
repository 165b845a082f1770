"""Inference planner: will this model run on this GPU, with what context, and for how many concurrent users?

per GPU: total = weights (split by tensor-parallel rules) + KV cache + activation workspace of one forward pass +
runtime overhead, every term computed and shown. The budget follows vLLM's ``gpu_worker.determine_available_memory``
(vllm/v1/worker/gpu_worker.py) and its KV block arithmetic (vllm/v1/core/kv_cache_utils.py); derivations and
measured checks are in docs/planner.md."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hfmem.errors import UsageError
from hfmem.hub.disk import folder_size
from hfmem.memory.gpus import CATALOG, DEVICES, GPU, GiB
from hfmem.memory.kv import ENGINES, SPECULATIVE
from hfmem.memory.kv.estimate import DOES_NOT_START, KVLayout, estimate_at, kv_layout, position_limit
from hfmem.memory.kv.layers import state_and_attention
from hfmem.memory.precision import (
    CHECKPOINT,
    VLLM_MTP_LAYERS,
    WeightTensor,
    counted_for_weights,
    groups_for_report,
    resolve_precision,
    tensor_bytes,
    weight_tensors,
)
from hfmem.memory.vllm_versions import (
    DSV4_NOTE,
    ENCODER_TP_MODES,
    INTERCONNECTS,
    NVLINK_TP_LOGGED,
    NVLINK_TP_SOURCE,
    RUNNER_STATE_COUNTED_FROM,
    RUNNERS,
    SAMPLERS,
    SNAPSHOT_AFTER_DIST_INIT,
    START_IN_USE_TP1_GIB,
    V1_RUNNER_REMOVED_FROM,
    V2_CUDAGRAPH_ESTIMATE_FROM,
    RunnerModel,
    VllmVersion,
    cudagraph_deducted_on,
    default_block_size,
    default_runner,
    extensible_kv_cache_max_bytes,
    extensible_kv_cache_note,
    extensible_kv_cache_on,
    newer_than_read_note,
    pool_tokens_rule,
    release_of,
    release_triple,
    resolve_interconnect,
    resolve_version,
    rocm_note,
    runner_available,
    sm90_tp1,
    sm90_tp1_source,
    v2_runner_state_bytes,
)
from hfmem.model.architecture import Architecture
from hfmem.units import cdiv, round_up

if TYPE_CHECKING:
    from hfmem.memory.vllm_cudagraph import CudagraphEstimate
    from hfmem.report import Report

DEFAULT_GPU_UTIL = 0.9  # transformers/CPU plans ignore it; vLLM's default comes from the version table
DEFAULT_MAX_BATCHED_TOKENS = 8192  # vLLM API-server default on >= 70 GiB GPUs (arg_utils.py EngineArgs.get_batch_defaults)
ENCODER_COMPONENTS = ("vision", "audio", "projector")
MLA_DEQUANT_TERM = "MLA W_UK/W_UV (kv_b_proj dequantized)"
MAX_BATCH = 1 << 20  # transformers concurrency is searched below this many sequences
APPLE_WORKING_SET = 0.75  # Metal's default recommendedMaxWorkingSetSize is ~75% of unified memory
# Per-GPU memory outside the tensors hfmem counts:
# - vllm: the version table's non-torch increase (hfmem/memory/vllm_versions.py); the CUDA context is outside the
#   budget (the profile measures from after it).
# - transformers (CUDA): the CUDA context (0.3-0.8 GiB depending on the driver and GPU) + cuBLAS workspaces.
# - cpu: the Python process with torch + transformers imported (resident libraries).
DEFAULT_OVERHEAD = {"transformers": 3 * GiB // 4, "cpu": GiB // 2}
_MTP_CONFIG_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_modules")


def _config_mtp_count(report: Report) -> int | None:
    """The MTP layer count the config names (_MTP_CONFIG_KEYS), if any."""
    cfg = report.architecture.text_config or {}
    return next((v for v in map(cfg.get, _MTP_CONFIG_KEYS) if isinstance(v, int) and not isinstance(v, bool) and v > 0),
                None)


def mtp_layer_count(report: Report) -> int:
    """Multi-token-prediction layers vLLM builds: the config's count, else the distinct layer indices of the MTP
    tensors, at most VLLM_MTP_LAYERS for the model type."""
    count = _config_mtp_count(report)
    if count is None:
        layers = {c.layer for c in report.tensors if c.component == "mtp"}
        count = len(layers - {None}) or (1 if layers else 0)
    cap = VLLM_MTP_LAYERS.get(report.architecture.model_type)
    return min(count, cap) if cap is not None else count


def speculative_tokens(report: Report, speculative: str | None, asked: int | None,
                       layers: int) -> tuple[int, str | None]:
    """(vLLM's num_speculative_tokens, a note when it was assumed) for --speculative and --num-speculative-tokens;
    layers: mtp_layer_count's.
    vLLM's MTP default is the draft config's n_predict, the checkpoint's MTP layer count where its config names one;
    more tokens than layers must be a multiple of them, the layers reused in turn (v1/worker/gpu/spec_decode/
    speculator_config.py resolve_num_speculative_tokens)."""
    if asked is not None and speculative is None:
        raise UsageError("--num-speculative-tokens needs --speculative")
    if speculative is None:
        return 0, None
    if asked is not None and asked < 1:
        raise UsageError(f"--num-speculative-tokens must be at least 1, got {asked}")
    if asked is not None:
        if layers and asked > layers and asked % layers:
            raise UsageError(f"--num-speculative-tokens {asked} is not a multiple of this checkpoint's {layers} MTP "
                             "layers (vLLM requires it when asking more tokens than layers)")
        return asked, None
    if (layers and report.architecture.model_type not in VLLM_MTP_LAYERS  # (vLLM sets those models' n_predict)
            and _config_mtp_count(report) is None):
        return layers, (f"--speculative mtp: this config names no MTP layer count, so vLLM asks for "
                        f"num_speculative_tokens; {layers} assumed (the checkpoint's MTP layers), "
                        "--num-speculative-tokens sets it")
    return layers, None


def _act_bytes_of(arch: Architecture) -> int:
    return 4 if (arch.torch_dtype or "").replace("torch.", "") in ("float32", "fp32") else 2


# ------------------------------------------------------------------------------------------------------------
# Tensor parallelism


def _largest_fitting(fits: Any, lo: int, hi: int) -> int:
    """Binary search: the largest n in [lo, hi) with fits(n), given fits(lo) (or lo == 0) and not fits(hi)."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


# DeepSeek-V4 modules vLLM keeps whole on every tensor-parallel rank (its deepseek_v4 model, 0.20.0 to 0.34.0):
# DeepseekV4MLAAttention's fused_wqa_wkv (wq_a + wkv) and the compressors' fused_wkv_wgate are linears built with
# disable_tp=True (deepseek_v4.py, deepseek_compressor.py), the indexer's wq_b and weights_proj ReplicatedLinear
# (deepseek_v4_attention.py DeepseekV4Indexer), and the hyper-connection mixing tensors (hc_attn_*, hc_ffn_*,
# hc_head_*) plain parameters of the full [hc_mult, hc_mult x hidden] shape.
_DSV4_REPLICATED = ("attn.wq_a.", "attn.wkv.", "attn.compressor.", "attn.indexer.", "hc_attn_", "hc_ffn_", "hc_head_")
DSV4_REPLICATED_LABEL = "DeepSeek-V4 wq_a/wkv, compressors, indexer, hyper-connections"


def dsv4_replicated(name: str, arch: Architecture) -> bool:
    """Whether vLLM keeps this DeepSeek-V4 tensor (lower-case checkpoint name) whole on every rank."""
    return arch.model_type == "deepseek_v4" and any(k in name for k in _DSV4_REPLICATED)


def shard(t: WeightTensor, nbytes: int, arch: Architecture, tp: int) -> tuple[int, str]:
    """(bytes on one of ``tp`` GPUs, rule) following vLLM's layers: column/row-parallel linears split ``tp`` ways;
    embeddings/lm_head vocab-parallel (vocab padded to a multiple of 64, ``vocab_parallel_embedding.py``); norms,
    MoE routers and MLA's ``q_a_proj``/``kv_a_proj_with_mqa`` replicated (``ReplicatedLinear``); K/V projections
    hold ``max(1, n_kv // tp)`` heads per GPU (``QKVParallelLinear`` replicates KV heads when tp > n_kv)."""
    if tp <= 1:
        return nbytes, "whole"
    n = t.name.lower()
    if t.kind in ("embedding", "lm_head"):
        rows = t.out if t.count == 1 else t.out * t.count
        if rows and nbytes % rows == 0:
            per_row = nbytes // rows
            return per_row * cdiv(round_up(rows, 64), tp), "vocab-parallel"
        return cdiv(nbytes, tp), "vocab-parallel"
    if t.kind in ("router",) or t.component == "norms" or any(k in n for k in ("q_a_proj", "kv_a_proj_with_mqa", "q_a_layernorm", "kv_a_layernorm")):
        return nbytes, "replicated"
    if dsv4_replicated(n, arch):
        return nbytes, "replicated"
    if t.kind == "vector":
        if any(k in n for k in ("o_proj", "down_proj", "out_proj", "dense.bias", "w2", "fc2", "c_proj")):
            return nbytes, "replicated"  # row-parallel biases are added once, after the all-reduce, on every rank
        if any(k in n for k in ("k_proj", "v_proj")) and arch.num_kv_heads:
            return nbytes * max(1, arch.num_kv_heads // tp) // arch.num_kv_heads, "kv-heads"
        if t.component in ("attention", "mlp", "moe_experts", "moe_shared_experts", "ssm"):
            return cdiv(nbytes, tp), "split"
        return nbytes, "replicated"
    if any(k in n for k in ("k_proj", "v_proj")) and arch.num_kv_heads and arch.attention_kind != "mla":
        kv = arch.num_kv_heads
        return nbytes * max(1, kv // tp) // kv, "kv-heads"
    if (any(k in n for k in ("qkv_proj", "query_key_value", "wqkv")) or ".c_attn." in f".{n}") and arch.num_attention_heads:
        q, kv = arch.num_attention_heads, arch.num_kv_heads
        per_rank = q / tp + 2 * max(1, kv // tp)
        return math.ceil(nbytes * per_rank / (q + 2 * kv)), "qkv (kv heads replicated)"
    if t.kind == "bookkeeping" or t.kind in ("linear", "other"):
        return cdiv(nbytes, tp), "split"
    return nbytes, "replicated"


# ------------------------------------------------------------------------------------------------------------
# Activation workspace


def _gated(names: Iterable[str]) -> bool:
    """Whether the MLP is gated, from the first 400 weight tensors' names."""
    names = " ".join(islice(names, 400)).lower()
    return any(k in names for k in ("gate_proj", "gate_up_proj", ".w1.", ".w3.", "experts", "gate_up"))


def activation_terms(arch: Architecture, tokens: int, *, engine: str, act_bytes: int, tp: int = 1,
                     logits_rows: int, gated: bool = True, positions: int | None = None) -> dict[str, int]:
    """Peak bytes of each phase of one forward pass over ``tokens`` tokens (per GPU); the workspace is their max.

    Hidden-state copies alive at the peak: vLLM 3 (residual, normed input, layer output: the decoder layers'
    ``forward`` in vllm/model_executor/models/llama.py);
    transformers 4 (the embedding output, which the model's forward keeps referenced, the decoder layer's input,
    the residual and the normed input), plus the rotary cos/sin ``[positions, head_dim]`` pair and int64
    positions. Measured on CPU with a TorchDispatchMode (tests/test_planner_truth.py).
    """
    h = arch.hidden_size
    a = act_bytes
    T = tokens
    hidden_live = 3 * h if engine == "vllm" else 4 * h
    terms: dict[str, int] = {}
    inter = arch.intermediate_size or 4 * h
    up = (2 if gated else 1) * inter
    split = tp if engine == "vllm" else 1
    rope = 0
    if engine != "vllm" and arch.num_attention_heads and _uses_rope(arch):
        rotary = arch.mla.qk_rope_head_dim if arch.mla else arch.head_dim
        rope = (positions if positions is not None else T) * (2 * rotary * a + 8)
    moe = arch.moe
    if moe:
        top_k = int(moe.experts_per_token or 1)
        experts = int(moe.num_experts or 1)
        mi = int(moe.moe_intermediate_size or inter)
        mup = (2 if gated else 1) * mi
        if engine == "vllm":
            # fused_moe: intermediate_cache1 [T, k, 2I], cache2 [T*k, I], cache3 [T, k, h]; router logits [T, E] fp32
            per_tok = hidden_live * a + top_k * (mup // split + mi // split + h) * a + experts * 4
            terms["moe (fused experts)"] = T * per_tok
        else:
            # transformers grouped_mm experts (integrations/moe.py): T*k routed rows hold the gathered input,
            # the gate_up output, the activation and the gated product at once; router logits fp32 and the
            # sort/permutation indices (int64) per routed row
            per_tok = hidden_live * a + top_k * (h + mup + 2 * mi) * a + experts * 4 + top_k * 20
            terms["moe (grouped experts)"] = T * per_tok + rope
        dense_layers = int(moe.first_k_dense_replace or 0)
        if dense_layers and arch.intermediate_size:
            terms["mlp (dense layers)"] = T * a * (hidden_live + (up + inter) // split) + rope
    else:
        terms["mlp"] = T * a * (hidden_live + (up + inter) // split) + rope
    heads = arch.num_attention_heads or 0
    if heads:
        d = arch.head_dim
        q = heads // split
        kv = max(1, arch.num_kv_heads // split)
        if arch.attention_kind == "mla" and arch.mla:
            kv = q  # re-expanded K/V of every head
            d = arch.mla.qk_nope_head_dim + arch.mla.qk_rope_head_dim
        terms["attention"] = T * a * (hidden_live + (q + 2 * kv) * d + q * d) + rope
    terms["logits"] = logits_rows * arch.vocab_size * 4 + T * h * a
    return terms


# vLLM V0 model classes whose MLP keeps the gate_up output referenced through down_proj (see v0_mlp_peak)
V0_GATE_UP_KEPT = frozenset({"qwen2"})


def v0_mlp_peak(arch: Architecture, tokens: int, act_bytes: int, tp: int, gated: bool = True) -> int:
    """Peak bytes of vLLM V0's eager MLP (per GPU), the profile's forward peak for dense models.

    Alive through a decoder layer (the models' ``DecoderLayer.forward`` with the in-place ``fused_add_rms_norm``):
    the layer input, which the model's layer loop still references, the residual and the MLP input: 3 h. Then
    - llama.py ``LlamaMLP.forward`` rebinds ``x`` to the activation, so gate_up [2I/tp] is freed before down_proj:
      3h + 3I/tp at ``SiluAndMul``; at down_proj 4h + I/tp, and at TP >= 2 one more h, because
      parallel_state.py ``GroupCoordinator._all_reduce_out_place`` returns the reduced sum as a new tensor while
      ``RowParallelLinear.forward`` still holds its output;
    - qwen2.py ``Qwen2MLP.forward`` keeps ``gate_up`` referenced through down_proj: 4h + 3I/tp, plus the all-reduced
      copy (h) at TP >= 2.
    """
    h = arch.hidden_size
    inter = arch.intermediate_size or 4 * h
    up = (2 if gated else 1) * inter // tp
    act = inter // tp
    down = 4 * h if tp == 1 else 5 * h
    if arch.model_type in V0_GATE_UP_KEPT:
        per_tok = down + up + act
    else:
        per_tok = max(3 * h + up + act, down + act)
    return tokens * act_bytes * per_tok


def cublas_workspace_bytes(gpu: GPU | None) -> int:
    """The cuBLAS and cuBLASLt workspaces PyTorch gives the first GEMM on a (handle, stream) pair, per GPU.

    PyTorch aten/src/ATen/cuda/CublasHandlePool.cpp: ``parseChosenWorkspaceSize`` (cuBLAS: 32 MiB on compute
    capability 9.0, else ``:4096:2:16:8`` = 8 MiB + 128 KiB; hipBLAS: 32 MiB, 128 MiB on gfx94x/gfx95x) and
    ``parseCUDABlasLtWorkspaceSize`` (cuBLASLt: 1 MiB, a separate buffer unless TORCH_CUBLASLT_UNIFIED_WORKSPACE is
    set; hipBLASLt: 76 MiB). Both come from the caching allocator (``getNewWorkspace``, ``getNewCUDABlasLtWorkspace``)
    and are kept for the process, so in vLLM they are torch memory allocated by the profile's first GEMM and part of
    "torch peak memory increase", never of the non-torch figure. On CUDA the cuBLASLt handle is the cuBLAS handle, so
    the cuBLAS workspace is always set; on ROCm the two are separate handles and AMD Instinct parts (gfx90a, gfx942,
    gfx950) prefer hipBLASLt (aten/src/ATen/Context.cpp ``Context::blasPreferredBackend``), so only its 76 MiB is
    counted there, hipBLAS's 32 MiB elsewhere. Without a GPU the H100-class default (9.0, as for the batch defaults);
    a GPU given only by its size gets the smaller CUDA size, which the plan says (cublas_workspace_known)."""
    from hfmem.memory.hardware import hardware_of

    hw = hardware_of(gpu) if gpu is not None else None
    if gpu is not None and gpu.kind == "rocm":
        instinct = hw is not None and str(hw.compute_capability).startswith(("gfx90a", "gfx942", "gfx950"))
        return 76 << 20 if instinct else 32 << 20
    sm90 = gpu is None or (hw is not None and hw.sm == 90)
    return (32 << 20 if sm90 else (8 << 20) + (128 << 10)) + (1 << 20)


def triton_topk_buffer_bytes(gpu: GPU | None, rows: int, vocab: int) -> int:
    """The row buffer vLLM's Triton top-k/top-p kernel keeps (v1/sample/ops/topk_topp_triton.py
    apply_top_k_top_p_triton, 0.17-0.33): fp32 [min(next_power_of_2(programs), SMs), vocab], programs = min(SMs,
    rows), cached in _TRITON_BUFFER_CACHE from the dummy sampler run on. SMs: hardware.SM_COUNT (vLLM's
    num_compute_units); without a GPU or for a size, the H100's 132 (the plan says so, triton_buffer_known)."""
    from hfmem.memory.hardware import SM_COUNT

    sms = SM_COUNT.get(gpu.key if gpu is not None else "h100-80gb", SM_COUNT["h100-80gb"])
    programs = min(sms, rows)
    return min(1 << max(0, programs - 1).bit_length(), sms) * vocab * 4


def triton_buffer_known(gpu: GPU | None) -> bool:
    """Whether the Triton top-k/top-p buffer's row count is the GPU's own (a catalog card, or none: the H100 class)."""
    from hfmem.memory.hardware import SM_COUNT

    return gpu is None or gpu.key in SM_COUNT


def cublas_workspace_known(gpu: GPU | None) -> bool:
    """Whether hfmem knows the GPU's compute capability (or architecture), which sets the workspaces' size."""
    from hfmem.memory.hardware import hardware_of

    return gpu is None or hardware_of(gpu) is not None


def gpu_class(gpu: GPU | None) -> str | None:
    """The GPU class vLLM's TP 1 non-torch figure follows (VllmVersion.non_torch): "sm90" for compute capability 9.0
    (and without a GPU, the H100-class default, as for the batch defaults and cublas_workspace_bytes), "other" for
    any other known part, None for a GPU given only by its size (the plan says so)."""
    from hfmem.memory.hardware import hardware_of

    if gpu_sm(gpu) == 90:
        return "sm90"
    return "other" if gpu is not None and hardware_of(gpu) is not None else None


def gpu_sm(gpu: GPU | None) -> int | None:
    """The GPU's CUDA compute capability x 10 for the KV rules that follow vLLM's kernel choice (90 without a GPU, the
    H100-class default; None for a GPU known by size only or not a CUDA one)."""
    from hfmem.memory.hardware import hardware_of

    if gpu is None:
        return 90
    hw = hardware_of(gpu)
    return hw.sm if hw is not None and gpu.kind == "cuda" else None


def _uses_rope(arch: Architecture) -> bool:
    cfg = arch.text_config or {}
    if cfg.get("position_embedding_type") == "absolute":
        return False
    return arch.model_type not in ("gpt2", "bert", "t5", "whisper", "opt", "bloom", "mamba", "falcon_mamba", "mamba2")


# ------------------------------------------------------------------------------------------------------------
# The plan


@dataclass
class FitRow:
    gpu: GPU
    fits: bool
    margin_bytes: int
    max_context: int | None
    max_concurrency: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu.key, "memory_bytes": self.gpu.memory_bytes, "fits": self.fits,
                "margin_bytes": self.margin_bytes, "max_context": self.max_context,
                "max_concurrency": self.max_concurrency}


@dataclass
class InferencePlan:
    precision: str
    engine: str
    device: str
    context: int
    batch: int
    gpus: int
    gpu_util: float | None
    max_batched_tokens: int
    weights_bytes: int
    kv_bytes: int
    activation_bytes: int
    overhead_bytes: int
    total_bytes: int
    weight_terms: dict[str, int]
    activation_terms: dict[str, int]
    activation_tokens: int
    kv_bytes_per_token: int
    kv_dtype: str
    gpu: GPU | None = None
    budget_bytes: int | None = None
    fits: bool | None = None
    margin_bytes: int | None = None
    max_context: int | None = None
    max_context_capped: bool = False
    max_concurrency: int | None = None
    concurrency: float | None = None
    kv_available_bytes: int | None = None
    kv_blocks: int | None = None
    kv_pool_tokens: int | None = None
    vllm_version: str | None = None  # the family of releases whose terms apply (vllm_versions.VERSIONS)
    vllm_release: str | None = None  # the release asked for (--vllm-version), which the plan's words name
    max_num_seqs: int | None = None
    cudagraph: bool | None = None
    sampler: str | None = None  # the dummy sampler run's top-k/top-p path (sort, triton, flashinfer; v0: V0's)
    interconnect: str | None = None  # the link between TP ranks the non-torch term assumes (None at TP 1)
    model_runner: str | None = None  # the GPU model runner planned: vLLM's default, or --vllm-runner (V0: the V0 engine)
    runner_state_bytes: int | None = None  # V2's persistent sampler state, inside overhead_bytes (vLLM >= 0.27)
    cudagraph_bytes: int | None = None
    cudagraph_detail: str | None = None  # how hfmem's estimate of it is made (text output)
    # vLLM >= 0.34's default extensible KV cache, bounded from above (vllm_versions.extensible_kv_cache_max_bytes)
    extensible_kv_max_bytes: int | None = None
    extensible_kv_max_tokens: int | None = None
    replicated: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # The catalog (every GPU: fit, longest context, concurrency) is ~16 rows of searches, so it is computed on first
    # read of ``fits_on`` (the text output and JSON read it; --gpu, check, compare and batch summaries do not).
    _fits_on: list[FitRow] | None = field(default=None, repr=False)
    _catalog: Callable[[], list[FitRow]] | None = field(default=None, repr=False, compare=False)

    @property
    def fits_on(self) -> list[FitRow] | None:
        if self._catalog is not None:
            self._fits_on, self._catalog = self._catalog(), None
        return self._fits_on

    @fits_on.setter
    def fits_on(self, rows: list[FitRow] | None) -> None:
        self._fits_on, self._catalog = rows, None

    @property
    def vllm_named(self) -> str | None:
        """How the plan's words name vLLM: the release asked for, else the family of releases."""
        return self.vllm_release or self.vllm_version

    @property
    def catalog_computed(self) -> bool:
        """Whether the catalog rows exist yet (no catalog asked for counts as computed)."""
        return self._catalog is None

    def vllm_terms(self) -> dict[str, Any] | None:
        """The plan in the words of vLLM's start-up log (gpu_worker.py determine_available_memory and
        kv_cache_utils.py), per GPU; None off vLLM on CUDA."""
        if self.engine != "vllm" or self.device != "cuda":
            return None
        return {
            "version": self.vllm_version,
            "max_num_batched_tokens": self.activation_tokens,
            "max_num_seqs": self.max_num_seqs,
            "cudagraph": self.cudagraph,
            "sampler": self.sampler,  # what hfmem assumed: --vllm-sampler, else the version's path
            "interconnect": self.interconnect,  # --interconnect, else the GPU class's; null at TP 1
            "model_runner": self.model_runner,  # the runner whose profile the terms follow (vLLM's default unless given)
            "requested_memory": self.budget_bytes,  # total GPU memory x gpu_memory_utilization
            "weights": self.weights_bytes,  # "Model loading took X GiB"
            "torch_peak_memory_increase": self.activation_bytes,
            "non_torch_forward_increase_memory": self.overhead_bytes - (self.runner_state_bytes or 0),
            # V2's sampler penalty buffers: with the weights and non-torch, the 'consumed memory' vLLM >= 0.27 logs
            "model_runner_state": self.runner_state_bytes,
            "cuda_graph_memory": self.cudagraph_bytes,  # deducted from the budget only where vLLM does
            "available_kv_cache_memory": self.kv_available_bytes,  # "Available KV cache memory: X GiB"
            "gpu_kv_cache_size_tokens": self.kv_pool_tokens,  # "GPU KV cache size: N tokens"
            "maximum_concurrency": self.concurrency,  # "Maximum concurrency for ctx tokens per request: Nx"
            # >= 0.34 by default: "Extended KV cache to N blocks (X GiB)", at most these (null where it is off)
            "extensible_kv_cache_max_bytes": self.extensible_kv_max_bytes,
            "extensible_kv_cache_max_tokens": self.extensible_kv_max_tokens,
        }

    def to_dict(self, catalog: bool = True) -> dict[str, Any]:
        """The JSON contract; ``catalog=False`` leaves ``fits_on`` out without computing it."""
        out = {
            "precision": self.precision,
            "engine": self.engine,
            "device": self.device,
            "context": self.context,
            "batch": self.batch,
            "gpus": self.gpus,
            "gpu_util": self.gpu_util,
            "max_batched_tokens": self.max_batched_tokens,
            "weights_bytes": self.weights_bytes,
            "kv_bytes": self.kv_bytes,
            "activation_bytes": self.activation_bytes,
            "overhead_bytes": self.overhead_bytes,
            "total_bytes": self.total_bytes,
            "weight_terms": dict(self.weight_terms),
            "activation_terms": dict(self.activation_terms),
            "activation_tokens": self.activation_tokens,
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "kv_dtype": self.kv_dtype,
            "gpu": self.gpu.to_dict() if self.gpu else None,
            "budget_bytes": self.budget_bytes,
            "fits": self.fits,
            "margin_bytes": self.margin_bytes,
            "max_context": self.max_context,
            "max_context_capped": self.max_context_capped,
            "max_concurrency": self.max_concurrency,
            "concurrency": self.concurrency,
            "kv_available_bytes": self.kv_available_bytes,
            "kv_blocks": self.kv_blocks,
            "kv_pool_tokens": self.kv_pool_tokens,
            "replicated": list(self.replicated),
            "vllm": self.vllm_terms(),
        }
        if catalog:
            rows = self.fits_on
            out["fits_on"] = [r.to_dict() for r in rows] if rows is not None else None
        out["notes"] = list(self.notes)
        return out


def profile_tokens(version: VllmVersion, gpu: GPU | None, context: int, given: int | None = None,
                   release: tuple[int, int] | None = None) -> int:
    """max_num_batched_tokens as vLLM resolves it: the given value, else the version's API-server default for the GPU
    (V1, chunked prefill), or V0's max_model_len (SchedulerConfig without chunked prefill: max(max_model_len, 2048),
    up to 32k; above it V0 enables chunked prefill with 2048 tokens)."""
    if given:
        return given
    tokens, _ = version.batch_defaults(gpu.memory_bytes if gpu else None, gpu.key if gpu else None, release)
    if tokens is None:
        return max(context, 2048) if context <= 32_768 else 2048
    return tokens


def _budget(gpu: GPU, device: str, engine: str, util: float) -> int:
    if device == "cpu":
        return gpu.memory_bytes
    if gpu.kind == "apple":
        return int(gpu.memory_bytes * APPLE_WORKING_SET)
    if engine == "vllm":
        return int(gpu.memory_bytes * util)
    return gpu.memory_bytes


def _deepseek_v4_rates(arch: Architecture) -> list[int]:
    """The compress ratio of each DeepSeek-V4 main layer as vLLM builds it (0 for a sliding-window-only layer), from
    the normalised layer types and compress rates (hfmem.memory.kv.compressed, the KV code's reader of them)."""
    from hfmem.memory.kv.compressed import compressed_layer

    cfg = arch.text_config or {}
    kinds = cfg.get("layer_types")
    if not isinstance(kinds, list):
        return []
    rates = []
    for kind in kinds[: arch.num_layers]:
        layer = compressed_layer(cfg, kind) if isinstance(kind, str) else None
        rates.append(layer.rate if layer is not None else 0)
    return rates


def _deepseek_v4_rope_caches(arch: Architecture, mtp: bool) -> list[int]:
    """DeepSeek-V4's rotary caches: DeepseekV4Attention (deepseek_v4.py) calls get_rope with rope_theta =
    compress_rope_theta on layers whose compress ratio is above 1 and rope_theta on the others (an MTP layer's ratio
    is 1), YaRN parameters on every layer; DeepseekV4ScalingRotaryEmbedding keeps its cache in fp32 ("cos_sin_cache
    stored as fp32") over original_max_position_embeddings x factor positions and the rope dim (qk_rope_head_dim).
    One cache per distinct theta among the layers vLLM builds."""
    cfg = arch.text_config or {}
    rotary = cfg.get("qk_rope_head_dim")
    if not isinstance(rotary, int) or rotary <= 0 or not arch.max_position_embeddings:
        return []
    from hfmem.model.fast_config import yarn_positions

    positions = yarn_positions(cfg) or arch.max_position_embeddings
    thetas = {"compress" if rate > 1 else "main" for rate in _deepseek_v4_rates(arch)} or {"main"}
    if mtp:
        thetas.add("main")
    return [positions * rotary * 4 for _ in sorted(thetas)]


def _rope_caches(arch: Architecture, act_bytes: int, mtp: bool = False) -> list[int]:
    """vLLM's RotaryEmbedding cos_sin_cache, [max_position_embeddings, rotary_dim] in the model dtype: one per distinct
    rotary embedding (get_rope caches instances by head size, rotary dim and parameters). Rope parameters given per
    layer type (Gemma 4) make one per type present: the full-attention layers' head size is ``global_head_dim``
    there, and its "proportional" rope (Gemma4RotaryEmbedding, rotary_embedding/gemma4_rope.py) builds the cache over
    the whole head (rotary_dim = head_size, the unrotated part zero-padded) whatever its partial_rotary_factor."""
    if not arch.num_attention_heads or not arch.max_position_embeddings or not _uses_rope(arch):
        return []
    from hfmem.memory.kv.layers import _per_layer
    from hfmem.model.fast_config import rope_per_layer_type

    cfg = arch.text_config or {}
    if arch.model_type == "deepseek_v4":
        return _deepseek_v4_rope_caches(arch, mtp)
    factor = _mrope_cache_factor(arch)
    per_type = rope_per_layer_type(cfg)
    if per_type is not None:
        caches = set()
        for i, kind in enumerate(cfg["layer_types"]):
            params = per_type[kind]
            head = int(_per_layer(cfg, i).get("head_dim") or arch.head_dim)  # Gemma 4's global heads: per_layer_config
            rotary = head if params.get("rope_type") == "proportional" else int(
                head * float(params.get("partial_rotary_factor") or 1.0))
            caches.add((head, rotary, repr(sorted(params.items(), key=repr))))
        return [arch.max_position_embeddings * rotary * act_bytes * factor for _, rotary, _ in sorted(caches)]
    rotary = arch.mla.qk_rope_head_dim if arch.mla else int(arch.head_dim * float(cfg.get("partial_rotary_factor") or 1.0))
    return [arch.max_position_embeddings * rotary * act_bytes * factor]


def _mrope_cache_factor(arch: Architecture) -> int:
    """4 for multimodal RoPE: vLLM's MRotaryEmbedding.__init__ (rotary_embedding/mrope.py, 0.11.0 to 0.23.0) builds its
    cos/sin cache for 4 x max_position_embeddings ("the maximum index value is related to the duration of the input
    video"); get_rope picks it whenever the rope parameters carry an ``mrope_section``."""
    from hfmem.model.fast_config import mrope_section

    return 4 if mrope_section(arch.text_config or {}) else 1


def _deepstack_buffers(arch: Architecture, max_batched_tokens: int, act_bytes: int) -> tuple[int, int]:
    """Qwen3-VL's deepstack input buffers: Qwen3VLForConditionalGeneration.__init__ (qwen3_vl.py, 0.11.0 and 0.13.0)
    allocates one zero tensor [max_num_batched_tokens, text hidden_size] per deepstack level in the model dtype on the
    GPU while the model is built, so "Model loading took" includes them. Returns (levels, bytes of each)."""
    vision = arch.vision_config or {}
    levels = len(vision.get("deepstack_visual_indexes") or [])
    if not levels or not arch.hidden_size:
        return 0, 0
    return levels, max_batched_tokens * arch.hidden_size * act_bytes


# vLLM's DeepSeek-V4 drops the MTP hidden-state buffer unless a drafter reads it from this release on
# (models/deepseek_v4/nvidia/model.py: needs_mtp_hidden_states in the 0.27.0 wheel, not in 0.26.0's)
DSV4_MTP_BUFFER_ONLY_WITH_DRAFTER_FROM = (0, 27)


def _deepseek_v4_buffers(arch: Architecture, max_batched_tokens: int, act_bytes: int, release: tuple[int, int] | None,
                         mtp: bool) -> list[tuple[str, int]]:
    """DeepSeek-V4's tensors allocated while vLLM builds the model, so inside "Model loading took"
    (DeepseekV4Model.__init__, deepseek_v4.py in 0.20-0.21, models/deepseek_v4/nvidia/model.py later): the indexer
    layers' shared top-k buffer [max_num_batched_tokens, index_topk] int32, and the pre-hc_head residual stream
    kept for an MTP drafter, [max_num_batched_tokens, hc_mult x hidden_size] in the model dtype: always up to 0.26,
    from 0.27 only when a drafter reads it (--speculative mtp). ``release`` None is the newest code."""
    if arch.model_type != "deepseek_v4" or not arch.hidden_size:
        return []
    cfg = arch.text_config or {}
    out = []
    topk = cfg.get("index_topk")
    if isinstance(topk, int) and topk > 0:
        out.append(("DeepSeek-V4 indexer top-k buffer", max_batched_tokens * topk * 4))
    hc = cfg.get("hc_mult")
    old = release is not None and release < DSV4_MTP_BUFFER_ONLY_WITH_DRAFTER_FROM
    if isinstance(hc, int) and hc > 0 and (old or mtp):
        out.append(("DeepSeek-V4 MTP hidden-state buffer", max_batched_tokens * hc * arch.hidden_size * act_bytes))
    return out


# DeepSeek-V4's dummy-run reservation also holds the combined top-k indices from this release on
# (models/deepseek_v4/nvidia/flashmla.py: in the 0.27.0 wheel, not in 0.26.0's)
DSV4_GATHER_INDICES_FROM = (0, 27)
DSV4_PREFILL_CHUNK = 4  # PREFILL_CHUNK_SIZE (deepseek_v4_attention.py; DeepseekV4Attention in the later layout)


def deepseek_v4_gather_workspace(arch: Architecture, max_model_len: int, max_batched_tokens: int,
                                 release: tuple[int, int] | None) -> int:
    """Bytes DeepSeek-V4's attention reserves in vLLM's shared workspace during the profile's dummy run, kept for the
    rest of it: "Reserve _forward_prefill's bf16-gather workspace" (deepseek_v4_attention.py in 0.20-0.21,
    models/deepseek_v4/nvidia/flashmla.py later) takes [PREFILL_CHUNK_SIZE, M, head_dim] bf16 with M = the compressed
    tokens of max_model_len at the smallest compress ratio + the sliding window + max_num_batched_tokens (the largest
    layer's request sizes the shared workspace), and from 0.27 the combined top-k indices [max_num_batched_tokens,
    round_up(index_topk + window, 128)] and their lengths [max_num_batched_tokens] in int32. 0 for other models."""
    if arch.model_type != "deepseek_v4":
        return 0
    cfg = arch.text_config or {}
    compressed = [rate for rate in _deepseek_v4_rates(arch) if rate > 1]
    head, window, topk = cfg.get("head_dim"), cfg.get("sliding_window") or 0, cfg.get("index_topk") or 0
    if not isinstance(head, int) or head <= 0 or not isinstance(window, int) or not isinstance(topk, int):
        return 0
    m = (cdiv(max_model_len, min(compressed)) if compressed else 0) + window + max_batched_tokens
    out = DSV4_PREFILL_CHUNK * m * head * 2
    if release is None or release >= DSV4_GATHER_INDICES_FROM:
        out += max_batched_tokens * (round_up((topk if compressed else 0) + window, 128) + 1) * 4
    return out


class Planner:
    """Weights fixed at one precision; everything else as a function of context and batch."""

    def __init__(self, report: Report, precision: str = CHECKPOINT, *, engine: str = "vllm", device: str = "cuda",
                 tp: int = 1, kv_dtype: str = "auto", max_batched_tokens: int | None = None,
                 overhead: int | None = None, gpu_util: float | None = None, encoder_len: int | None = None,
                 block_size: int | None = None, max_num_seqs: int | None = None, speculative: str | None = None,
                 prefix_caching: bool | None = None, vllm_version: str | None = None, cudagraph: bool = True,
                 cudagraph_memory: int | None = None, gpu: GPU | None = None, sampler: str | None = None,
                 interconnect: str | None = None, model_runner: str | None = None,
                 encoder_tp_mode: str | None = None, num_speculative_tokens: int | None = None):
        self.arch: Architecture = report.architecture
        if encoder_tp_mode not in (None, *ENCODER_TP_MODES):
            raise UsageError(f"unknown --mm-encoder-tp-mode {encoder_tp_mode!r}; use one of: {', '.join(ENCODER_TP_MODES)}")
        # vLLM's --mm-encoder-tp-mode (config/multimodal.py MultiModalConfig.mm_encoder_tp_mode, default "weights"):
        # "data" runs the multimodal encoder data-parallel, its weights whole on every tensor-parallel rank
        self.encoder_tp_mode = encoder_tp_mode or "weights"
        if speculative not in SPECULATIVE:
            raise UsageError(f"unknown --speculative {speculative!r}; use one of: {', '.join(s for s in SPECULATIVE if s)}")
        # MTP layers are loaded (weights and KV) only for MTP speculative decoding.
        self.mtp_layers = mtp_layer_count(report) if speculative == "mtp" else 0
        self.mtp_parameters = report.parameters.by_component.get("mtp", 0)
        self.speculative = speculative
        # vLLM's num_speculative_tokens: state layers keep a page per draft token per request
        self.speculative_tokens, self._speculative_note = speculative_tokens(report, speculative, num_speculative_tokens,
                                                                             self.mtp_layers)
        self.precision = resolve_precision(precision)
        if engine not in ENGINES:
            raise UsageError(f"unknown engine {engine!r}; use one of: {', '.join(ENGINES)}")
        if device not in DEVICES:
            raise UsageError(f"unknown device {device!r}; use cuda or cpu")
        if tp < 1:
            raise UsageError("--gpus must be at least 1")
        if device == "cpu":
            engine = "transformers"
            tp = 1
        self.engine, self.device, self.tp = engine, device, tp
        self.gpu = gpu
        self.vllm: VllmVersion = resolve_version(vllm_version)
        self.vllm_release = vllm_version  # the release asked for (the encoder's dummy item differs inside a family)
        # what vLLM's default runner choice reads of the model (vllm_versions.py default_runner)
        state, attention = state_and_attention(report.architecture)
        self._runner_model = RunnerModel(tuple(report.architecture.architectures), report.architecture.moe is not None,
                                         bool(report.parameters.quantization), state and attention,
                                         state and not attention)
        if model_runner is not None:
            if model_runner not in RUNNERS:
                raise UsageError(f"unknown --vllm-runner {model_runner!r}; use one of: {', '.join(RUNNERS)}")
            if self.vllm.engine == "V0":
                raise UsageError("--vllm-runner applies to vLLM's V1 engine (0.8 and later); V0 has one runner")
            why = runner_available(self._release(), model_runner)
            if why is not None:
                raise UsageError(f"--vllm-runner {model_runner} with vLLM {vllm_version or '(the newest release)'}: {why}")
        self.model_runner_asked = model_runner  # None: vLLM's default for the release and model (vllm_runner)
        if sampler is not None and sampler not in SAMPLERS:
            raise UsageError(f"unknown --vllm-sampler {sampler!r}; use one of: {', '.join(SAMPLERS)}")
        if sampler is not None and self.vllm.engine == "V0":
            raise UsageError("--vllm-sampler applies to vLLM's V1 engine (0.8 and later); V0 has one sampler")
        self.sampler = sampler  # None: the family's path (hfmem/memory/vllm_versions.py)
        if interconnect is not None and interconnect not in INTERCONNECTS:
            raise UsageError(f"unknown --interconnect {interconnect!r}; use one of: {', '.join(INTERCONNECTS)}")
        self.interconnect = interconnect  # None: the GPU class's (VllmVersion.non_torch)
        self.cudagraph = cudagraph
        if cudagraph_memory is not None and cudagraph_memory < 0:
            raise UsageError("--cudagraph-memory must not be negative")
        # vLLM >= 0.20 subtracts its estimated CUDA-graph pool from the KV budget (gpu_worker.py
        # determine_available_memory; on ROCm from 0.26, cudagraph_deducted_on): a log's "Estimated CUDA graph
        # memory: X GiB total" when given, else hfmem's estimate of it (hfmem/memory/vllm_cudagraph.py), set once the
        # batch settings are known (_set_cudagraph, which for_gpu reruns for each GPU); whether it is deducted is decided
        # there too, as it depends on the GPU's platform
        self.cudagraph_deducted = False
        self.cudagraph_memory_asked = cudagraph_memory or 0
        self.cudagraph_memory = 0
        self.cudagraph_memory_given = cudagraph_memory is not None
        self.cudagraph_estimate: CudagraphEstimate | None = None
        self._decoder_cache: bool | None = None  # whether the model has a decoder KV/state cache (_set_cudagraph)
        # (support, backend) of the least-supporting layer's attention backend (vllm_graph_support.py; _set_cudagraph)
        self.decode_graphs: tuple[str, str] | None = None
        self.prefix_caching = prefix_caching  # None: the release's default (vLLM: hybrid state pages and block size)
        # None: the release's default (vllm_versions.default_block_size: 64 from 0.34, 16 before and off vLLM)
        self.block_size = block_size or (default_block_size(self._release()) if engine == "vllm" else 16)
        self.encoder_len = encoder_len
        self.gpu_util_given = gpu_util  # vLLM >= 0.34 defaults to 1.0 with its extensible KV cache (_extensible_bound)
        if gpu_util is None:
            gpu_util = self.vllm.gpu_util if engine == "vllm" else DEFAULT_GPU_UTIL
        self.gpu_util = gpu_util
        if not 0 < gpu_util <= 1:
            raise UsageError("--gpu-util must be in (0, 1]")
        if max_num_seqs is not None and max_num_seqs < 1:
            raise UsageError("--max-num-seqs must be at least 1")
        # vLLM's API-server defaults by version and GPU size (hfmem/memory/vllm_versions.py batch_defaults); V0
        # profiles max_model_len tokens, so its token count is resolved per context (None here)
        tokens_default, seqs_default = self.vllm.batch_defaults(gpu.memory_bytes if gpu else None, gpu.key if gpu else None,
                                                                self._release())
        if engine != "vllm":
            tokens_default = DEFAULT_MAX_BATCHED_TOKENS
        self.max_batched_tokens_given = max_batched_tokens
        self.max_batched_tokens = max_batched_tokens or tokens_default or DEFAULT_MAX_BATCHED_TOKENS
        self.max_num_seqs = max_num_seqs or seqs_default
        self.max_num_seqs_given = max_num_seqs
        self.overhead_given = overhead
        if overhead is None:
            overhead = (self.vllm.non_torch(tp, gpu.key if gpu else None, interconnect, gpu_class(gpu),
                                            self._release())
                        if engine == "vllm" and device == "cuda"
                        else DEFAULT_OVERHEAD["cpu" if device == "cpu" else engine])
        self.overhead = overhead  # non-torch (vLLM) or the runtime overhead; V2's sampler state is runner_state
        self.runner_state = 0
        # the weight tensors as (first tensor, how many) groups (precision.weight_groups): every per-tensor sum below
        # is the group's term times its count; the tensor-by-tensor list (``tensors``) is made only when asked for
        self._counted = counted_for_weights(report, include_mtp=speculative == "mtp")
        self._tensors: list[WeightTensor] | None = None
        self._quantization = report.parameters.quantization
        self.groups, self.weights = groups_for_report(report, self._counted,
                                                      [] if self.precision == CHECKPOINT else [self.precision])
        self.act_bytes = 4 if self.precision == "fp32" else _act_bytes_of(self.arch) if self.precision == CHECKPOINT else 2
        if self.precision == CHECKPOINT and report.parameters.quantization:
            self.act_bytes = 2
        # vLLM's auto KV dtype is the model dtype (CacheConfig cache_dtype "auto" -> model_config.dtype): an fp32
        # model (--dtype fp32) keeps an fp32 cache
        self.kv_dtype = "fp32" if (kv_dtype == "auto" and engine == "vllm" and self.precision == "fp32") else kv_dtype
        self.gated = _gated(c.entry.name for c in self._counted
                            if c.role not in ("buffer", "tied_duplicate", "quant_overhead"))
        # need() and concurrency() memos: the catalog asks every GPU's row the same few points
        self._need_memo: dict[tuple[int, int], int] = {}
        self._one_seq_memo: dict[int, tuple[int, Any]] = {}
        self._kv_layout: KVLayout | None = None
        q = report.parameters.quantization
        # vLLM pads MXFP4 MoE experts for its kernels (hfmem/memory/vllm_weights.py): the layers that hold them
        self.mxfp4_moe_layers = (len({t.layer for t, _ in self.groups if t.component == "moe_experts" and t.kind == "linear"})
                                 if self.precision == CHECKPOINT and q is not None and q.method.lower() == "mxfp4" else 0)
        self._weights_per_gpu()
        self._pad_for_gpu()
        self._set_runner_state()
        self._set_cudagraph()
        self._set_encoder()

    @property
    def tensors(self) -> list[WeightTensor]:
        """The weight tensors one by one (``precision.weight_tensors``), in checkpoint order."""
        if self._tensors is None:
            self._tensors = weight_tensors(self._counted, self._quantization, self.arch.hidden_size)
        return self._tensors

    # -- fixed terms ----------------------------------------------------------------------------------------
    def _weights_per_gpu(self) -> None:
        arch = self.arch
        moe = bool(arch.moe)
        from hfmem.memory.precision import _GGUFContext  # the GGUF type mix depends on model facts
        from hfmem.memory.vllm_weights import ALLOC_TERM, allocator_rounding_bytes, parameter_keys

        gctx = None
        if self.precision in ("q8_0", "q6_k", "q5_k_m", "q4_k_m"):
            gctx = _GGUFContext(self.precision, arch.num_layers, arch.moe.num_experts if arch.moe else 0,
                                arch.tie_word_embeddings, arch.model_type == "llama" and arch.num_layers == 80)
        total = 0
        replicated: dict[str, int] = {}
        memo: dict[tuple, int] = {}
        per_parameter: dict[str, int] = {}  # vLLM parameter -> bytes on one rank (the allocator's unit)
        # MLA's absorbed up-projections: MLAAttention.process_weights_after_loading (layers/attention/mla_attention.py
        # in 0.34.0; MLACommonImpl.process_weights_after_loading in v1/attention/backends/mla/common.py from 0.8) takes
        # W_UK and W_UV as views of get_and_maybe_dequant_weights(kv_b_proj): the weight itself when unquantized, a
        # new activation-dtype tensor (the quantized layer applied to an identity matrix) otherwise, kept alive by the
        # views while the quantized weight stays for prefill. Built during load_model, so in "Model loading took".
        mla_copy = (arch.attention_kind == "mla" and self.engine == "vllm" and self.device == "cuda"
                    and self.vllm.engine != "V0")
        dequantized = 0
        for (t, mult), key in zip(self.groups, parameter_keys([t for t, _ in self.groups])):
            sig = (t.kind, t.component, t.out, t.inn, t.count, t.stored_bytes, t.layer if gctx else None, t.name.rsplit(".", 1)[-1] if gctx else None)
            b = memo.get(sig)
            if b is None or gctx is not None:
                b = memo[sig] = tensor_bytes(t, self.precision, moe=moe, gguf=gctx)
            if self.tp > 1 and self.encoder_tp_mode == "data" and t.component in ENCODER_COMPONENTS:
                per, rule = b, "encoder data-parallel"
            else:
                per, rule = shard(t, b, arch, self.tp) if self.tp > 1 else (b, "whole")  # (shard's answer at tp 1)
            per *= mult
            total += per
            per_parameter[key] = per_parameter.get(key, 0) + per
            if mla_copy and t.name.endswith("kv_b_proj.weight") and b != t.numel * self.act_bytes:
                # one allocation per layer: the dequantized kv_b_proj's shard in the activation dtype
                copy = mult * (t.numel * self.act_bytes // self.tp)
                dequantized += copy
                per_parameter[f"{key} dequantized"] = per_parameter.get(f"{key} dequantized", 0) + copy
            if rule == "encoder data-parallel" and per:
                label = "multimodal encoder (--mm-encoder-tp-mode data)"
                replicated[label] = replicated.get(label, 0) + per
            if self.tp > 1 and rule in ("replicated", "kv-heads") and per:
                label = {"norms": "norms", "moe_router": "MoE routers"}.get(t.component, t.name.split(".")[-2] if "." in t.name else t.name)
                if rule == "kv-heads" and arch.num_kv_heads < self.tp:
                    label = f"K/V projections ({arch.num_kv_heads} KV heads < {self.tp} GPUs)"
                elif rule == "kv-heads":
                    continue
                elif "a_proj" in t.name:
                    label = "MLA q_a_proj/kv_a_proj_with_mqa"
                elif dsv4_replicated(t.name.lower(), arch):
                    label = DSV4_REPLICATED_LABEL
                elif t.kind == "vector":
                    label = "norms" if t.component == "norms" else "row-parallel biases"
                replicated[label] = replicated.get(label, 0) + per
        terms = {"parameters": total}
        if dequantized:
            terms[MLA_DEQUANT_TERM] = dequantized
        if self.engine == "vllm" and self.device == "cuda":
            ropes = _rope_caches(arch, self.act_bytes, self.speculative == "mtp")
            if ropes:
                terms["rotary cos/sin cache"] = sum(ropes)
                for n, rope in enumerate(ropes):  # separate allocations: each is rounded by the allocator
                    per_parameter[f"rotary cos/sin cache {n}"] = rope
            levels, each = _deepstack_buffers(arch, self.max_batched_tokens, self.act_bytes)
            if levels:
                terms["deepstack input buffers"] = levels * each
                for level in range(levels):  # separate allocations: each is rounded by the allocator
                    per_parameter[f"deepstack input buffer {level}"] = each
            for label, each in _deepseek_v4_buffers(arch, self.max_batched_tokens, self.act_bytes, self._release(),
                                                    self.speculative == "mtp"):
                terms[label] = each
                per_parameter[label] = each  # a separate allocation: rounded by the allocator
            blocks = allocator_rounding_bytes(per_parameter)
            if blocks:
                terms[ALLOC_TERM] = blocks
        self.weight_terms = terms
        self.weights_bytes = sum(terms.values())
        self.replicated = sorted(replicated)
        if self.tp > 1:
            self.replicated.append("embeddings/lm_head vocab-parallel (split, vocab padded to 64)")
            if arch.attention_kind == "mla":
                self.replicated.append("MLA latent KV cache (every GPU holds all of it)")
            elif arch.num_kv_heads and arch.num_kv_heads < self.tp:
                self.replicated.append(f"KV cache heads ({arch.num_kv_heads} KV heads over {self.tp} GPUs)")

    def _pad_for_gpu(self) -> None:
        """The weight term vLLM's kernels add on this GPU over the checkpoint's bytes (MXFP4 experts: Marlin or Triton layout)."""
        from hfmem.memory.vllm_weights import PAD_TERM, TRITON_TERM, marlin_padding_bytes, mxfp4_backend, triton_layout_bytes

        terms = {k: v for k, v in self.weight_terms.items() if k not in (PAD_TERM, TRITON_TERM)}
        if self.mxfp4_moe_layers and self.engine == "vllm" and self.device == "cuda" and self.gpu is not None:
            backend = mxfp4_backend(self.gpu)
            if backend == "marlin":
                pad = marlin_padding_bytes(self.arch, self.mxfp4_moe_layers, self.tp)
                if pad:
                    terms[PAD_TERM] = pad
            elif backend is not None:  # get_mxfp4_backend's default on 9.x/10.x: Triton
                pad = triton_layout_bytes(self.arch, self.mxfp4_moe_layers, self.tp)
                if pad:
                    terms[TRITON_TERM] = pad
        self.weight_terms = terms
        self.weights_bytes = sum(terms.values())

    @property
    def _v2(self) -> bool:
        """Whether the plan follows Model Runner V2's profile (vLLM's default runner for the release and model, or
        --vllm-runner v2)."""
        return self.engine == "vllm" and self.device == "cuda" and self.vllm_runner() == "V2"

    def _set_runner_state(self) -> None:
        """The model runner's persistent state the pool is sized without: Model Runner V2's sampler buffers
        (v2_runner_state_bytes), which vLLM's arithmetic counts from RUNNER_STATE_COUNTED_FROM; per GPU, as
        max_num_seqs and the runner are."""
        self.runner_state = 0
        if not self._v2:
            return
        release = self._release()
        if release is None or release >= RUNNER_STATE_COUNTED_FROM:
            self.runner_state = v2_runner_state_bytes(self.max_num_seqs, self.arch.vocab_size)

    def _set_cudagraph(self) -> None:
        """vLLM's CUDA-graph estimate for this planner's batch settings (hfmem/memory/vllm_cudagraph.py): the
        largest capture's forward peak from the same forward phases as the profile's, per GPU."""
        from hfmem.memory import vllm_cudagraph
        from hfmem.memory.vllm_graph_support import RANK, SINGLE_TOKEN, UNIFORM_BATCH

        self.cudagraph_estimate = None
        release = self._release()
        self.cudagraph_deducted = (self.engine == "vllm" and self.device == "cuda" and self.cudagraph
                                   and cudagraph_deducted_on(self.vllm, release,
                                                             self.gpu.kind if self.gpu is not None else None)
                                   and not (release is not None and release < V2_CUDAGRAPH_ESTIMATE_FROM and self._v2))
        self.cudagraph_memory = self.cudagraph_memory_asked if self.cudagraph_deducted else 0
        if not self.cudagraph_deducted:
            return
        if self._decoder_cache is None:  # the same on every GPU: for_gpu's copies keep it
            self._decoder_cache = bool(self.kv(1, 1).total_bytes)
        if not self._decoder_cache:
            return  # no decoder cache (an encoder-only model): no decode graphs to estimate here
        sm = gpu_sm(self.gpu)
        drafts = self.speculative_tokens if self.speculative else 0
        self.decode_graphs = self._decode_graph_limit(release, sm)
        support = self.decode_graphs[0] if self.decode_graphs else None
        # the runners' mode resolution (vllm_graph_support.py): without uniform multi-token decode support (for
        # speculative decoding) or any (NEVER) the FULL decode graphs go; with drafts the sizes follow 1 + k
        keep = support is None or RANK[support] >= RANK[UNIFORM_BATCH if drafts else SINGLE_TOKEN]
        if self._v2:
            sizes, full = vllm_cudagraph.v2_graph_sizes(self.max_num_seqs, self.max_batched_tokens, 1 + drafts, keep,
                                                        release, sm)
        elif drafts or not keep:
            sizes, full = vllm_cudagraph.spec_decode_graph_sizes(self.max_num_seqs, self.max_batched_tokens,
                                                                 1 + drafts, keep, release, sm)
        else:
            sizes, full = vllm_cudagraph.graph_sizes(self.max_num_seqs, self.max_batched_tokens, release, sm)
        if not sizes:
            return
        terms = activation_terms(self.arch, sizes[-1], engine="vllm", act_bytes=self.act_bytes, tp=self.tp,
                                 logits_rows=0, gated=self.gated)
        terms.pop("logits", None)
        self.cudagraph_estimate = vllm_cudagraph.estimate(sizes, full, max(terms.values()) if terms else 0)
        if not self.cudagraph_memory_given and self.cudagraph_estimate is not None:
            self.cudagraph_memory = self.cudagraph_estimate.bytes

    def _graph_notes(self) -> list[str]:
        """What the CUDA-graph estimate took from the attention backends and the draft tokens (_set_cudagraph)."""
        est = self.cudagraph_estimate
        if est is None:
            return []
        from hfmem.memory.vllm_graph_support import NEVER, RANK, UNIFORM_BATCH

        drafts = self.speculative_tokens if self.speculative else 0
        runner = "Model Runner V2" if self._v2 else "vLLM's V1 runner"
        notes = []
        if drafts:
            how = ("v1/worker/gpu/cudagraph_utils.py CudaGraphManager" if self._v2
                   else "compilation.py adjust_cudagraph_sizes_for_spec_decode")
            notes.append(f"CUDA graphs with {drafts} draft token(s): sized for uniform decode batches of {1 + drafts} "
                         f"queries per request, as {runner} sizes them (config/vllm.py _set_cudagraph_sizes, {how}): "
                         f"PIECEWISE={est.piecewise}, FULL={est.full} (largest={est.largest}); the drafter's own "
                         "graphs are not counted")
        if self.decode_graphs is None:
            if drafts:
                notes.append("whether vLLM keeps the FULL decode graphs with drafts follows the attention backends, "
                             "which hfmem does not know for this model and GPU: counted as kept")
            return notes
        support, backend = self.decode_graphs
        if support == NEVER or (drafts and RANK[support] < RANK[UNIFORM_BATCH]):
            why = "takes no CUDA graph" if support == NEVER else "decodes only one token per request in a graph"
            notes.append(f"the {backend} backend {why} ({support}): {runner} drops the FULL decode graphs and "
                         "captures PIECEWISE ones only (compilation.py resolve_cudagraph_mode_and_sizes: "
                         "'setting cudagraph_mode=PIECEWISE')")
        return notes

    def _decode_graph_limit(self, release: tuple[int, int] | None, sm: int | None) -> tuple[str, str] | None:
        """vllm_graph_support.decode_graph_support for this model's cached layers and KV dtype, once per release and
        GPU (context-free: kept in the layout's memo, which for_gpu's copies share)."""
        from hfmem.memory.vllm_graph_support import decode_graph_support

        layout = self._layout()
        key = ("decode graph support", release, sm)
        if key not in layout.memo:
            layout.memo[key] = decode_graph_support(self.arch, layout.layers, self.kv_dtype, release, sm)
        return layout.memo[key]

    def _set_encoder(self) -> None:
        """vLLM V1's profile also runs the vision tower on one dummy item of the maximum size
        (hfmem/memory/vllm_encoder.py); modelled for Qwen3-VL's, Qwen2.5-VL's and Qwen3.5's towers, said in a note for any
        other."""
        from hfmem.memory.vllm_encoder import is_modelled

        self._encoder_memo: dict[int, Any] = {}
        self._encoder_args: tuple[dict[str, Any], int, int, tuple[int, int] | None] | None = None
        self.encoder_note = None
        vision = self.arch.vision_config
        if not vision or self.engine != "vllm" or self.device != "cuda":
            return
        if self.vllm.engine != "V1":
            # V0 (worker/model_runner.py profile_run) puts dummy multimodal data into the profiling sequences
            self.encoder_note = ("vLLM V0's profile also runs the vision tower on dummy multimodal inputs of the "
                                 "maximum size; hfmem does not count that run under V0, so the KV pool shown may be "
                                 "too large by its peak")
            return
        release = self._release()
        if is_modelled(vision):
            # data-parallel, each rank runs the whole encoder (on its share of the items: the profile's one dummy item)
            self._encoder_args = (vision, self.act_bytes, 1 if self.encoder_tp_mode == "data" else self.tp, release)
        if self._encoder_args is None:
            kind = vision.get("model_type") or "this model's"
            self.encoder_note = (f"vLLM's profile also runs the {kind} vision tower on a dummy input of the maximum "
                                 "feature size and keeps its outputs through the forward ('Encoder cache will be "
                                 "initialized with a budget of N tokens'); hfmem models that run for Qwen3-VL's, "
                                 "Qwen2.5-VL's and Qwen3.5's towers only, so here its peak is not counted and the KV pool shown may "
                                 "be too large by it "
                                 "(--limit-mm-per-prompt / skip_mm_profiling change it in vLLM)")

    def encoder_at(self, context: int) -> Any:
        """The vision tower's profile run at max_model_len = ``context`` (Qwen2.5-VL's dummy video grows with it;
        Qwen3-VL's does not), or None where the tower is not modelled."""
        if self._encoder_args is None:
            return None
        if context not in self._encoder_memo:
            from hfmem.memory.vllm_encoder import encoder_profile

            self._encoder_memo[context] = encoder_profile(*self._encoder_args, max_model_len=context)
        return self._encoder_memo[context]

    def profile_tokens(self, context: int) -> int:
        """Tokens of vLLM's profiling forward (also the sliding-window admission allowance): see profile_tokens."""
        if self.engine != "vllm":
            return self.max_batched_tokens
        return profile_tokens(self.vllm, self.gpu, context, self.max_batched_tokens_given, self._release())

    def activation(self, context: int, batch: int) -> tuple[int, dict[str, int], int]:
        if self.engine == "vllm":
            tokens = self.profile_tokens(context)
            rows = min(self.max_num_seqs, tokens)
        else:
            tokens = context * batch
            rows = batch  # generate() computes the last position's logits only (logits_to_keep=1), in fp32
        terms = activation_terms(self.arch, tokens, engine=self.engine, act_bytes=self.act_bytes,
                                 tp=self.tp if self.engine == "vllm" else 1, logits_rows=rows, gated=self.gated,
                                 positions=None if self.engine == "vllm" else context)
        if self.engine == "vllm":
            # The profile's torch peak is the larger of the forward and the dummy sampler run
            # (gpu_model_runner.py profile_run -> _dummy_run, _dummy_sampler_run). The sampler sees min(max_num_seqs,
            # tokens) rows of the full vocabulary: LogitsProcessor gathers the vocab-parallel logits onto every rank,
            # so it is not divided by TP (V0 gathers to rank 0 and samples there only; its executor takes the smallest
            # pool of all ranks, so the driver's peak counts). Alive with it: the forward's hidden states [tokens, h] and, in V1, the
            # sampled rows plus their rand_like copy [rows, h] in the model dtype; V0 (model_runner.py execute_model)
            # keeps only the hidden states: LogitsProcessor's pruned rows are freed when compute_logits returns.
            del terms["logits"]
            if self.vllm.engine == "V0" and "mlp" in terms:
                terms["mlp"] = v0_mlp_peak(self.arch, tokens, self.act_bytes, self.tp, self.gated)
            h = self.arch.hidden_size
            if self._v2:
                # Model Runner V2 (gpu/model_runner.py profile_run -> _dummy_sampler_run): compute_logits' model-dtype
                # logits of the sampled rows, with the hidden states and their gathered rows
                # (hidden_states[logits_indices]) alive. The dummy batch's requests are never added, so
                # Sampler.apply_sampling_params finds no request needing logits processing and returns the logits
                # without an fp32 copy, and top_k/top_p are None: gumbel_sample's per-block argmax buffers only.
                terms["sampler (dummy run)"] = (rows * self.arch.vocab_size + (tokens + rows) * h) * self.act_bytes
            else:
                terms["sampler (dummy run)"] = (rows * self.arch.vocab_size
                                                * self.vllm.sampler_bytes(self.act_bytes, rows, self.sampler)
                                                + (tokens + (0 if self.vllm.engine == "V0" else 2 * rows)) * h
                                                * self.act_bytes)
                if self.vllm.sampler_path(rows, self.sampler) == "triton":
                    terms["sampler (dummy run)"] += triton_topk_buffer_bytes(self.gpu, rows, self.arch.vocab_size)
            enc = self.encoder_at(context)
            if enc is not None:
                # profile_run runs the vision tower first and keeps its outputs in encoder_cache, and the dummy
                # pixel values in a local, through the text dummy run and the sampler run (hfmem/memory/vllm_encoder.py)
                terms = {k: v + enc.held_bytes for k, v in terms.items()}
                terms[f"multimodal encoder (dummy {enc.modality} run)"] = enc.run_bytes
            if self.device == "cuda":
                # the cuBLAS/cuBLASLt workspaces, allocated by the profile's first GEMM and alive at every later peak
                ws = cublas_workspace_bytes(self.gpu)
                # DeepSeek-V4's prefill-gather workspace: reserved by the first attention layer, kept for the run
                ws += deepseek_v4_gather_workspace(self.arch, context, tokens, self._release())
                terms = {k: v + ws for k, v in terms.items()}
        return max(terms.values()) if terms else 0, terms, tokens

    def _layout(self) -> KVLayout:
        if self._kv_layout is None:  # the layers are described once; for_gpu's copies share it (same model, TP)
            self._kv_layout = kv_layout(self.arch, self.kv_dtype, self.engine, self.encoder_len, self.tp,
                                        mtp_layers=self.mtp_layers)
        return self._kv_layout

    def kv(self, context: int, batch: int) -> Any:
        return estimate_at(self._layout(), context, batch, self.block_size, self.profile_tokens(context),
                           self.prefix_caching, self._release() if self.engine == "vllm" else None, gpu_sm(self.gpu),
                           self.speculative_tokens)

    def need(self, context: int, batch: int) -> int:
        # Memoised: the catalog asks every GPU's row the same few points (the model limit, 1 token, one block, the
        # asked context). Every input is fixed once the planner is built; for_gpu's copies get fresh memos.
        key = (context, batch)
        if key not in self._need_memo:
            self._need_memo[key] = (self.weights_bytes + self.kv(context, batch).total_bytes
                                    + self.activation(context, batch)[0] + self.overhead + self.runner_state
                                    + self.cudagraph_memory)
        return self._need_memo[key]

    # -- answers --------------------------------------------------------------------------------------------
    def context_limit(self) -> int:
        return position_limit(self.arch) or 2**24

    def max_context(self, budget: int, batch: int) -> tuple[int | None, bool]:
        """Longest context (tokens) that fits at ``batch``, capped at the model's limit (then flagged)."""
        cap = self.context_limit()
        at_cap = self.need(cap, batch)
        if at_cap <= budget:
            return cap, True
        first = self.need(1, batch)
        if first > budget:
            return None, False
        guess = self._linear_context(budget, batch, first, cap, at_cap)
        if guess is not None:
            return guess, False  # the boundary the search below would find, in 5 estimates, not ~25
        return _largest_fitting(lambda ctx: self.need(ctx, batch) <= budget, 1, cap), False

    def _linear_context(self, budget: int, batch: int, first: int, cap: int, at_cap: int) -> int | None:
        """The longest context if memory grows by a fixed step per whole block of context (vLLM: KV pages of
        block_size tokens, activations sized by max_num_batched_tokens; transformers: per token): one division.
        Kept only where need() lies exactly on that line at the boundary, one token past it and at the model's
        limit; anything else (sliding windows and fixed-size state bend the growth; DeepSeek-V4's compressed
        cache in transformers even shrinks at some lengths, so need() is not monotone there) leaves it to the
        search, whose answer is then the reference."""
        block = self.block_size if self.engine == "vllm" else 1
        if block < 1 or 1 + block >= cap:
            return None
        step = self.need(1 + block, batch) - first
        if step <= 0:
            return None
        line = lambda ctx: first + step * (cdiv(ctx, block) - 1)  # noqa: E731
        guess = ((budget - first) // step + 1) * block  # line(guess) <= budget < line(guess + 1)
        if not 1 <= guess < cap or line(cap) != at_cap:
            return None
        if self.need(guess, batch) != line(guess) or self.need(guess + 1, batch) != line(guess + 1):
            return None
        return guess

    def _one_seq(self, context: int) -> tuple[int, Any]:
        """(activation bytes, KV of one sequence) at ``context``: the same for every budget this planner is asked
        about, so worked out once per context."""
        if context not in self._one_seq_memo:
            self._one_seq_memo[context] = (self.activation(context, 1)[0], self.kv(context, 1))
        return self._one_seq_memo[context]

    def startup_refusal(self, context: int, available: int) -> str | None:
        """Why vLLM refuses to start with a KV pool of ``available`` bytes at ``context`` where one request would fit:
        its start-up check asks more than a request holds only for cross attention, whose charge is
        max_num_batched_tokens encoder tokens (kv.vllm CROSS_CHARGES_BATCHED_TOKENS_FROM), and raises
        "To serve at least one request ... KV cache is needed" (v1/core/kv_cache_utils.py); or, whatever the pool,
        where the KV estimate says the release refuses the configuration (a KV dtype it does not offer, speculative
        decoding in a mode that asserts it off). None: it starts."""
        if self.engine != "vllm" or self.device != "cuda":
            return None
        refused = self.config_refusal(context)
        if refused is not None:
            return refused
        one = self._one_seq(context)[1]
        check = one.startup_check_bytes
        if check is None or check <= one.total_bytes or available >= check:
            return None
        return (f"vLLM {DOES_NOT_START}: its start-up check asks {check / GiB:.2f} GiB of KV cache for one request "
                f"(cross attention charged max_num_batched_tokens encoder tokens), more than the "
                f"{max(available, 0) / GiB:.2f} GiB pool, though a request holds {one.total_bytes / GiB:.2f} GiB")

    def config_refusal(self, context: int) -> str | None:
        """Why vLLM refuses this configuration whatever the pool (the KV estimate's DOES_NOT_START warning: a KV
        dtype the release does not offer, speculative decoding in a mode that asserts it off), or None."""
        if self.engine != "vllm" or self.device != "cuda":
            return None
        return next((w for w in self._one_seq(context)[1].warnings if DOES_NOT_START in w), None)

    def _started_context(self, budget: int, longest: int | None) -> int | None:
        """The longest context up to ``longest`` at which vLLM's start-up check passes on ``budget`` (None: none):
        what max_context gives where startup_refusal applies."""
        def starts(context: int) -> bool:
            return not self.startup_refusal(context, self.concurrency(budget, context)[3])
        if not longest or not starts(1):
            return None
        return longest if starts(longest) else _largest_fitting(starts, 1, longest)

    def concurrency(self, budget: int, context: int) -> tuple[float | None, int | None, int | None, int]:
        """(vLLM "Maximum concurrency" at ``context``, KV blocks, pool tokens, bytes available to KV)."""
        act, one = self._one_seq(context)
        available = budget - self.weights_bytes - act - self.overhead - self.runner_state - self.cudagraph_memory
        if available <= 0 or one.total_bytes <= 0:
            return (0.0 if available <= 0 else None), None, None, available
        if self.engine == "vllm" and not one.constant_bytes and one.bytes_per_token:
            blocks_per_seq = math.ceil(context / self.block_size)
            page = one.bytes_per_token * self.block_size
            if one.total_bytes == page * blocks_per_seq:  # uniform full attention: vLLM's own arithmetic
                blocks = available // page
                return blocks / blocks_per_seq, blocks, blocks * self.block_size, available
        if self.engine == "vllm" and one.bytes_per_block and one.blocks_per_request:
            # vllm, v1/core/kv_cache_utils.py: get_num_blocks (available // one block across the layer groups) and
            # get_max_concurrency_for_kv_cache_config (whole blocks per request per group); pool tokens as its
            # "GPU KV cache size" log of the version: int(concurrency x max_model_len), or before that
            # num_blocks // num_groups x block_size
            blocks = available // one.bytes_per_block
            # the release's own divisor: DeepSeek-V4's estimate for a release before 0.27 carries the older one
            conc = blocks / (one.blocks_per_request_before_027 or one.blocks_per_request)
            if pool_tokens_rule(self.vllm, self.vllm_release) == "groups":
                # 0.20.0 (kv_cache_utils.py _report_kv_cache_config): num_blocks // groups x the smallest group's
                # block size
                tokens = blocks // max(1, one.kv_groups) * (one.smallest_group_block or one.block_size)
                return conc, blocks, tokens, available
            return conc, blocks, int(conc * context), available
        if self.engine == "transformers":
            return float(self.max_batch(budget, context)), None, None, available
        # vLLM still prints a token count for models without one page size per token (hybrid, sliding): the pool
        # over every layer's bytes per token
        pool = available // one.bytes_per_token if self.engine == "vllm" and one.bytes_per_token else None
        return available / one.total_bytes, None, pool, available

    def max_batch(self, budget: int, context: int) -> int:
        """transformers: the largest batch whose total fits at ``context`` (batch b prefills b x context tokens at
        once), below MAX_BATCH. KV and activations grow by a fixed step per sequence where every term is linear in
        the batch, so one division gives the candidate; it is kept only where need() lies exactly on that line there
        and one sequence later. The activation peak is the largest of several phases, each linear in the batch with
        its own constant, so need() is convex in the batch and agreeing with the line at 1, 2 and the candidate
        means it is that line up to the candidate; otherwise the doubling + binary search it replaces decides."""
        fits = lambda b: self.need(context, b) <= budget  # noqa: E731
        first = self.need(context, 1)
        if first > budget:
            return 0
        step = self.need(context, 2) - first
        if step > 0:
            line = lambda b: first + step * (b - 1)  # noqa: E731
            guess = min((budget - first) // step + 1, MAX_BATCH - 1)  # line(guess) <= budget
            if self.need(context, guess) == line(guess) and (guess == MAX_BATCH - 1 or self.need(context, guess + 1) == line(guess + 1)):
                return guess
        lo, hi = 0, 1
        while fits(hi) and hi < MAX_BATCH:
            lo, hi = hi, hi * 2
        return _largest_fitting(fits, lo, hi)

    def _release(self) -> tuple[int, int] | None:
        """The vLLM release asked for as (major, minor) (None: the family's own): the encoder profile, the sm90 TP 1
        non-torch step and the NVLink note's wording follow it."""
        return release_of(self.vllm_release) if self.vllm_release else None  # valid: resolve_version took it

    def vllm_runner(self) -> str:
        """The GPU model runner the release runs this model with by default: "V1" or "V2" (vllm_versions.py
        default_runner); V0 families have neither."""
        if self.vllm.engine == "V0":
            return "V0"
        if self.model_runner_asked is not None:
            return self.model_runner_asked.upper()
        return default_runner(self._release(), self._runner_model, rocm=self.gpu is not None and self.gpu.kind == "rocm")

    def _v2_runner_note(self) -> str:
        """Which runner's profile the plan follows when it is Model Runner V2, and what differs from V1's there
        (docs/planner.md, "Model Runner V2")."""
        release = self._release()
        if self.model_runner_asked is not None:
            text = "Model Runner V2's profile (--vllm-runner v2, VLLM_USE_V2_MODEL_RUNNER=1)"
        else:
            where = f"vLLM {release[0]}.{release[1]} runs" if release else "vLLM's newest releases run"
            text = (f"{where} this model with Model Runner V2 by default (config/vllm.py "
                    "VllmConfig.use_v2_model_runner), and the plan follows its profile")
        text += (": a greedy dummy sampler (model-dtype logits, no fp32 copy or top-k/top-p; gpu/model_runner.py "
                 "_dummy_sampler_run) and the sampler's penalty buffers, max_num_seqs x vocab int32 "
                 f"({v2_runner_state_bytes(self.max_num_seqs, self.arch.vocab_size) / GiB:.2f} GiB, "
                 "sample/penalties.py)")
        if release is not None and release < RUNNER_STATE_COUNTED_FROM:
            text += (", which vLLM before 0.27 leaves out of its arithmetic: they are in use beside the pool it "
                     "sizes, not deducted from it")
        else:
            text += ", deducted as 'consumed memory' with the weights and non-torch"
        if release is not None and release < V2_CUDAGRAPH_ESTIMATE_FROM and self.cudagraph and self.vllm.cudagraph_deducted:
            text += "; before 0.29 V2 estimates no CUDA-graph memory (its profile_cudagraph_memory returns 0)"
        if self.model_runner_asked is None and (release is None or release < V1_RUNNER_REMOVED_FROM):
            upto = " (up to 0.33; 0.34 removed V1)" if release is None else ""
            text += f"; VLLM_USE_V2_MODEL_RUNNER=0 runs the V1 runner{upto}: --vllm-runner v1 plans that"
        return text

    def for_gpu(self, gpu: GPU) -> Planner:
        """This planner with vLLM's GPU-dependent defaults (batch sizes, non-torch memory) resolved for ``gpu``; what
        the user gave is kept. The weights, KV layout and everything else are shared, not recomputed."""
        if self.engine != "vllm" or self.device != "cuda" or gpu is self.gpu:
            return self
        other = copy.copy(self)
        other._need_memo, other._one_seq_memo = {}, {}  # a shallow copy would share them: batch sizes differ
        other.gpu = gpu
        other._pad_for_gpu()
        tokens, seqs = self.vllm.batch_defaults(gpu.memory_bytes, gpu.key, self._release())
        if self.max_batched_tokens_given is None:
            other.max_batched_tokens = tokens or DEFAULT_MAX_BATCHED_TOKENS
        if self.max_num_seqs_given is None:
            other.max_num_seqs = seqs
        if self.overhead_given is None:
            other.overhead = self.vllm.non_torch(self.tp, gpu.key, self.interconnect, gpu_class(gpu), self._release())
        other._set_runner_state()
        other._set_cudagraph()
        return other

    def plan(self, context: int, batch: int = 1, gpu: GPU | None = None, with_catalog: bool = True) -> InferencePlan:
        if context < 1 or batch < 1:
            raise UsageError("context and batch must be positive")
        if gpu is not None and self.for_gpu(gpu) is not self:
            return self.for_gpu(gpu).plan(context, batch, gpu, with_catalog)
        kv = self.kv(context, batch)
        act, terms, tokens = self.activation(context, batch)
        total = self.weights_bytes + kv.total_bytes + act + self.overhead + self.runner_state + self.cudagraph_memory
        plan = InferencePlan(
            precision=self.precision if self.precision != CHECKPOINT else f"{CHECKPOINT} ({self.weights.checkpoint_label.removeprefix('as stored').strip(' ()') or 'as stored'})",
            engine=self.engine, device=self.device, context=context, batch=batch, gpus=self.tp,
            gpu_util=self.gpu_util if (self.engine == "vllm" and self.device == "cuda") else None,
            max_batched_tokens=self.profile_tokens(context), weights_bytes=self.weights_bytes, kv_bytes=kv.total_bytes,
            activation_bytes=act, overhead_bytes=self.overhead + self.runner_state, total_bytes=total, weight_terms=dict(self.weight_terms),
            activation_terms=terms, activation_tokens=tokens, kv_bytes_per_token=kv.bytes_per_token, kv_dtype=str(kv.dtype),
            replicated=list(self.replicated),
        )
        if self.engine == "vllm" and self.device == "cuda":
            plan.vllm_version, plan.max_num_seqs, plan.cudagraph = self.vllm.name, self.max_num_seqs, self.cudagraph
            release = self._release()
            plan.vllm_release = f"{release[0]}.{release[1]}" if release else None
            plan.sampler = "v2-greedy" if self._v2 else self.vllm.sampler_path(min(self.max_num_seqs, tokens), self.sampler)
            plan.runner_state_bytes = self.runner_state
            if self._v2 and self.sampler is not None:
                plan.notes.append(f"--vllm-sampler {self.sampler} is the V1 runner's top-k/top-p path; Model Runner "
                                  "V2's dummy sampler runs neither (greedy), so it changes nothing in this plan "
                                  "(--vllm-runner v1 plans V1's profile)")
            if self.tp > 1:
                plan.interconnect = resolve_interconnect(self.gpu.key if self.gpu else None, self.interconnect)
            if self.cudagraph_deducted:
                plan.cudagraph_bytes = self.cudagraph_memory
                if not self.cudagraph_memory_given and self.cudagraph_estimate is not None:
                    plan.cudagraph_detail = f"hfmem's estimate: {self.cudagraph_estimate.detail()}"
            est = self.cudagraph_estimate
            if self.cudagraph_deducted and not self.cudagraph_memory_given and est is not None:
                # gpu_worker.py determine_available_memory subtracts the pool profile_cudagraph_memory extrapolates
                # from two captures per mode; its per-graph sample is the allocator's growth for one capture, so
                # vLLM's own figure varies between starts of one command (hfmem/memory/vllm_cudagraph.py)
                # Model Runner V2 (gpu/cudagraph_utils.py profile_cudagraph_memory, from 0.29) captures the PIECEWISE
                # graphs in full and extrapolates only the FULL ones; hfmem's estimate keeps V1's arithmetic
                how = ("Model Runner V2 captures the PIECEWISE graphs in full and extrapolates the FULL ones from two "
                       "captures, which hfmem's V1-shaped estimate does not separate" if self._v2
                       else "vLLM extrapolates it from two captures per mode")
                plan.notes.append(f"vLLM {plan.vllm_named} deducts its estimated CUDA graph memory "
                                  "from the KV cache "
                                  f"budget: {est.detail()} = {est.bytes / GiB:.2f} GiB here; {how}, so its own figure "
                                  f"varies between starts (up to {est.high / GiB:.2f} GiB when each graph opens a 20 "
                                  "MiB allocator segment): --cudagraph-memory takes your log's 'Estimated CUDA graph "
                                  "memory'")
            if (newer := newer_than_read_note(release)) is not None:
                plan.notes.append(newer)
            if gpu is None and self._extensible_on(None):
                plan.notes.append(extensible_kv_cache_note(release))  # with a GPU, _fill_fit bounds it
            plan.model_runner = self.vllm_runner()
            if plan.model_runner == "V2":
                plan.notes.append(self._v2_runner_note())
            if self.vllm.engine == "V1" and self.cudagraph:
                # what logs show and vLLM's source does not size (docs/planner.md, the RTX 4090 and 5090 rows)
                plan.notes.append("the KV pool is a restart's, with vLLM's torch.compile cache filled: a first start "
                                  "compiles inside the memory profile, and logs of such starts show 0.6-1.1 GiB more "
                                  "peak activation (0.5B-8B models, vLLM 0.24 to 0.31), so that much less KV pool")
        if self.mxfp4_moe_layers and self.engine == "vllm" and self.device == "cuda":
            from hfmem.memory.vllm_weights import marlin_padding_bytes, mxfp4_backend

            backend = mxfp4_backend(self.gpu) if self.gpu is not None else None
            if backend != "marlin":
                # get_mxfp4_backend falls back to Marlin on 9.x/10.x without triton_kernels or torch >= 2.8 (or with
                # VLLM_MXFP4_USE_MARLIN), and FlashInfer is an opt-in/installed choice: the plan cannot see which
                where = f"on {self.gpu.name}" if self.gpu is not None else "without --gpu"
                marlin = marlin_padding_bytes(self.arch, self.mxfp4_moe_layers, self.tp)
                plan.notes.append(f"MXFP4 experts {where}: counted in vLLM's default Triton MoE layout (fp32 biases, "
                                  "intermediate padded to 64; triton_kernels' own swizzle padding not counted); if "
                                  "vLLM falls back to Marlin (no triton_kernels, torch < 2.8 or VLLM_MXFP4_USE_MARLIN; "
                                  f"its log says 'leveraging the Marlin kernel') the experts take {marlin / GiB:.2f} GiB "
                                  "more per GPU than the checkpoint, and FlashInfer's layouts pad to 128/256")
        if self.engine == "vllm" and self.device == "cuda":
            enc = self.encoder_at(context)
            if enc is not None:
                plan.notes.append(f"vLLM's profile runs the vision tower on {enc.detail()}: its peak "
                                  f"{enc.run_bytes / GiB:.2f} GiB per GPU is one phase of the torch peak, and "
                                  f"its outputs and the dummy pixel values ({enc.held_bytes / GiB:.2f} GiB) stay "
                                  "alive through the forward and sampler phases")
            elif self.encoder_note:
                plan.notes.append(self.encoder_note)
            if (self.vllm.engine == "V1" and not self._v2 and not triton_buffer_known(self.gpu)
                    and self.vllm.sampler_path(min(self.max_num_seqs, tokens), self.sampler) == "triton"):
                plan.notes.append("torch peak: vLLM's Triton top-k/top-p kernel keeps an fp32 buffer of one vocabulary "
                                  "row per streaming multiprocessor (up to the batch), which a size does not give: "
                                  "the H100's 132 assumed")
            if not cublas_workspace_known(self.gpu):
                small, large = cublas_workspace_bytes(self.gpu), cublas_workspace_bytes(None)  # (None: the sm90 sizes)
                plan.notes.append(f"torch peak: PyTorch's cuBLAS/cuBLASLt workspaces depend on the GPU's compute "
                                  f"capability, which a size does not give: {small / (1 << 20):.2f} MiB assumed "
                                  f"(on compute capability 9.0, H100/H200, {large / (1 << 20):.0f} MiB: "
                                  f"{(large - small) / (1 << 20):.2f} MiB more)")
            if (self.tp <= 1 and self.overhead_given is None and self.vllm.engine == "V1"
                    and gpu_class(self.gpu) is None):
                asked = self._release() or release_of(self.vllm.name)
                hopper = sm90_tp1(asked)
                plan.notes.append(f"non-torch memory: vLLM's figure at TP 1 follows the GPU's architecture (the driver's "
                                  f"memory for the kernels it loads), which a size does not give: "
                                  f"{self.overhead / GiB:.2f} GiB assumed, as logged on GPUs other than compute "
                                  f"capability 9.0; on H100/H200 {hopper / GiB:.2f} GiB ({sm90_tp1_source(asked)}): "
                                  f"{(hopper - self.overhead) / GiB:.2f} GiB less KV pool per GPU")
            if (self.tp > 1 and self.overhead_given is None and self.vllm.engine == "V1"
                    and plan.interconnect == "nvlink"):
                # The NVLink-class constant is one release's logs (hfmem/memory/vllm_versions.py NVLINK_TP_SOURCE);
                # what the figure counts differs by release (SNAPSHOT_AFTER_DIST_INIT), what it weighs is NCCL's
                # run-time choice: say so once, with how far the other releases' logs put it (docs/planner.md)
                low = min(NVLINK_TP_LOGGED.values())
                logged = " and ".join(f"{v / GiB:.2f} GiB ({k})" for k, v in NVLINK_TP_LOGGED.items())
                release = self._release()
                if release is None or release >= SNAPSHOT_AFTER_DIST_INIT:
                    counts = ("from vLLM 0.11 it counts what the profile opens (torch's NCCL communicator for the "
                              "logits gather, NCCL connections made on first use), the TP group's PyNccl "
                              "communicator and custom all-reduce buffers being allocated before vLLM's memory "
                              "snapshot")
                else:
                    counts = ("before vLLM 0.11 the memory snapshot precedes the distributed init, so it also "
                              "counts the TP group's PyNccl communicator and custom all-reduce buffers")
                plan.notes.append(f"non-torch memory at TP {self.tp} over NVLink: {self.overhead / GiB:.2f} GiB per GPU "
                                  f"assumed, the figure of {NVLINK_TP_SOURCE}; {counts}; their sizes are NCCL's, "
                                  f"set at run time (channels x buffers), and logs at TP 2 show {logged}, so the KV "
                                  f"pool can be up to {(self.overhead - low) / GiB:.2f} GiB per GPU larger: "
                                  "--overhead takes your log's 'non-torch forward increase memory'")
        limit = self.arch.max_position_embeddings
        if limit and context > limit:
            plan.notes.append(f"context {context:,} exceeds the model's max_position_embeddings {limit:,}")
        if self.mtp_parameters and self.speculative != "mtp":
            plan.notes.append(f"{self.mtp_parameters:,} multi-token-prediction parameters are left out (loaded only for "
                              "MTP speculative decoding; --speculative mtp adds their weights and KV cache)")
        elif self.speculative == "mtp" and not self.mtp_parameters:
            plan.notes.append("--speculative mtp: this checkpoint stores no multi-token-prediction layers")
        if self._speculative_note:
            plan.notes.append(self._speculative_note)
        plan.notes += [w for w in kv.warnings if DOES_NOT_START in w]  # the fit verdict holds only if vLLM starts
        if self.speculative and self.engine == "vllm":
            plan.notes.append(f"--speculative {self.speculative}: the drafter's share of vLLM's profile (its dummy run "
                              f"and the rejection sampler over {self.speculative_tokens} draft token(s) per "
                              "sequence) is not modelled: the torch peak here is the target model's without drafts")
        plan.notes += self._graph_notes()
        if gpu is not None:
            self._fill_fit(plan, gpu)
        elif with_catalog:
            plan._catalog = partial(self.catalog, context, batch)
        return plan

    def _fill_fit(self, plan: InferencePlan, gpu: GPU) -> None:
        budget = _budget(gpu, self.device, self.engine, self.gpu_util)
        plan.gpu = gpu
        plan.budget_bytes = budget
        plan.margin_bytes = budget - plan.total_bytes
        plan.fits = plan.margin_bytes >= 0
        plan.max_context, plan.max_context_capped = self.max_context(budget, plan.batch)
        conc, blocks, pool, available = self.concurrency(budget, plan.context)
        refusal = self.startup_refusal(plan.context, available)
        if refusal:
            plan.fits = False
            if refusal not in plan.notes:  # a refusal of the configuration is in the notes already
                plan.notes.append(f"on {gpu.name}: {refusal}")
            plan.max_context = self._started_context(budget, plan.max_context)
        plan.concurrency = round(conc, 4) if conc is not None else None
        plan.max_concurrency = int(conc) if conc is not None else None
        plan.kv_available_bytes = available
        plan.kv_blocks, plan.kv_pool_tokens = blocks, pool
        if self._extensible_on(gpu.kind):
            self._extensible_bound(plan, gpu)
        if self.arch.model_type == "deepseek_v4" and self.engine == "vllm" and self.device == "cuda":
            plan.notes.append(DSV4_NOTE)
        if gpu.kind == "rocm" and self.engine == "vllm":
            plan.notes.append(rocm_note(release_triple(self.vllm_release) if self.vllm_release else None))
        if gpu.kind == "apple":
            plan.notes.append(f"Apple unified memory: budget is {int(APPLE_WORKING_SET * 100)}% of {gpu.name} (Metal working-set limit)")

    def _extensible_on(self, gpu_kind: str | None) -> bool:
        """Whether vLLM sizes this plan's KV cache after warmup by default (extensible_kv_cache_on: from 0.34 and in
        the newest code, whose family is V1; CUDA and ROCm)."""
        return self.engine == "vllm" and self.device == "cuda" and extensible_kv_cache_on(self._release(), gpu_kind)

    def _extensible_bound(self, plan: InferencePlan, gpu: GPU) -> None:
        """The extensible KV cache's pool (vLLM >= 0.34's default) bounded from above on ``gpu``, in bytes and in
        tokens by the same block arithmetic as the profile-sized pool (``concurrency``), and the note that says so."""
        act = self._one_seq(plan.context)[0]
        resident = self.weights_bytes + self.overhead + self.runner_state + self.cudagraph_memory
        bound = extensible_kv_cache_max_bytes(total=gpu.memory_bytes, gpu_util=self.gpu_util_given, resident=resident,
                                              peak=act + self.cudagraph_memory, gpu_kind=gpu.kind)
        # the budget whose profile-sized pool is ``bound``: the same blocks, tokens and concurrency rules
        def tokens(kv_bytes: int) -> int | None:
            return self.concurrency(kv_bytes + resident + act, plan.context)[2]

        pool = tokens(bound)
        plan.extensible_kv_max_bytes, plan.extensible_kv_max_tokens = bound, pool
        words = f"{bound / GiB:.2f} GiB" + (f" ({pool:,} tokens)" if pool is not None else "")
        left = None
        if pool is not None and self.tp == 1 and gpu.kind == "cuda":
            # less what the TP 1 logs show in use at vLLM's start snapshot (START_IN_USE_TP1_GIB)
            low, high = (tokens(bound - int(g * GiB)) for g in reversed(START_IN_USE_TP1_GIB))
            if low is not None and high is not None:
                left = f"{low:,}-{high:,} tokens"
        plan.notes.append(extensible_kv_cache_note(self._release(), words, left))

    def catalog(self, context: int, batch: int) -> list[FitRow]:
        """Every catalog GPU (Apple's unified memory only off vLLM) at ``context`` x ``batch``."""
        return [self.for_gpu(g)._fit_row(g, context, batch) for g in CATALOG if (g.kind != "apple" or self.engine != "vllm")]

    def _fit_row(self, gpu: GPU, context: int, batch: int) -> FitRow:
        budget = _budget(gpu, self.device, self.engine, self.gpu_util)
        need = self.need(context, batch)
        mc, _ = self.max_context(budget, batch)
        conc, _, _, available = self.concurrency(budget, context)
        refused = bool(self.startup_refusal(context, available))
        if refused:
            mc = self._started_context(budget, mc)
        return FitRow(gpu, need <= budget and not refused, budget - need, mc, int(conc) if conc is not None else None)


# ------------------------------------------------------------------------------------------------------------
# Report integration


def attach(report: Report, *, precision: str = CHECKPOINT, context: int | None = None, batch: int = 1,
           gpu: GPU | None = None, **kwargs: Any) -> InferencePlan:
    """Set the report's ``weights``, ``inference`` and ``download_bytes``."""
    planner = Planner(report, precision, gpu=gpu, **kwargs)
    ctx = context or planner.arch.max_position_embeddings or 4096
    plan = planner.plan(ctx, batch, gpu)
    all_weights = planner.weights if planner.precision != CHECKPOINT or len(planner.weights.bytes) > 1 else None
    if all_weights is None or len(all_weights.bytes) <= 2:
        from hfmem.memory.precision import weights_by_precision

        a = report.architecture
        all_weights = weights_by_precision([t for t, _ in planner.groups], counts=[n for _, n in planner.groups],
                                           num_layers=a.num_layers, moe=bool(a.moe),
                                           n_expert=a.moe.num_experts if a.moe else 0,
                                           tied=a.tie_word_embeddings, model_type=a.model_type,
                                           checkpoint_label=planner.weights.checkpoint_label)
    report.weights = all_weights
    report.inference = plan
    download = None
    if report.source in ("local", "cache"):
        try:
            download = folder_size(report.repo) if Path(report.repo).is_dir() else None
        except OSError:
            download = None
    report.download_bytes = download
    return plan
