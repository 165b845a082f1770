"""Whether vLLM keeps its FULL uniform-decode CUDA graphs for a model: the least CUDA-graph support among the attention
backends its layers get, release by release (0.20-0.34).

v1/worker/gpu_model_runner.py ``_check_and_update_cudagraph_mode`` (Model Runner V2: gpu/model_runner.py, the same
resolution without V1's rounding of the sizes) takes the smallest
``AttentionCGSupport`` of the backends' metadata builders (``get_cudagraph_support``) and
config/compilation.py ``resolve_cudagraph_mode_and_sizes`` acts on it: with NEVER it drops the FULL decode graphs
(FULL_AND_PIECEWISE -> PIECEWISE); with speculative decoding (a uniform decode batch of 1 + num_speculative_tokens
queries per request) it drops them below UNIFORM_BATCH too ("CUDAGraphMode.FULL_AND_PIECEWISE is not supported with
spec-decode for attention backend FlashInferBackend (support: AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE);
setting cudagraph_mode=PIECEWISE").

Which backend a layer gets is the release's selector (platforms/cuda.py ``get_valid_backends``, the first valid in its
priority list) for the model dtype or fp8; the rules below are held to what each release's own selector and builders
answer (scripts/record_vllm_spec_graphs.py, fixtures/vllm/spec_graphs.json.gz: SM 8.0-12.0, head sizes 64-512,
sliding windows, sinks, MLA and sparse MLA). The quantized dtypes' backends are fixed (vllm_dtypes.py): TRITON_ATTN for
the per-token-head ones (ALWAYS), TURBOQUANT (UNIFORM_BATCH); NVFP4's FlashInfer off the SM100 family is not modelled
here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hfmem.memory.kv.vllm_dtypes import NVFP4, PER_TOKEN_HEAD, TURBOQUANT, flashinfer_heads, forced_backend, sink_kinds
from hfmem.memory.vllm_versions import as_compared

if TYPE_CHECKING:
    from hfmem.memory.kv.layers import _Layer
    from hfmem.model.architecture import Architecture

ALWAYS, UNIFORM_BATCH, SINGLE_TOKEN, NEVER = "ALWAYS", "UNIFORM_BATCH", "UNIFORM_SINGLE_TOKEN_DECODE", "NEVER"
RANK = {NEVER: 0, SINGLE_TOKEN: 1, UNIFORM_BATCH: 2, ALWAYS: 3}
FA_FP8_SM100_FROM = (0, 27)
# fp8 KV on SM 9.0 with 512-wide heads: FlashAttention 3 refuses them in 0.27-0.30, FlashInfer (or, with sinks up to
# 0.29, TRITON_ATTN) takes them
FA3_FP8_512_REFUSED = ((0, 27), (0, 31))
FA3_FP8_512_SINKS_FLASHINFER_FROM = (0, 30)
# FlashInfer off the SM100 family: from 0.28 the SM12x XQA path takes sinks (the selector picks it for them) and
# uniform batches (from 0.30 only for the head sizes XQA has: not 512); the SM 8.x FA2 decode path takes uniform
# batches from 0.33
FLASHINFER_XQA_SM12X_FROM = (0, 28)
FLASHINFER_XQA_HEADS_FROM = (0, 30)
FLASHINFER_FA2_DECODE_FROM = (0, 33)
# TRITON_MLA's builder: NEVER in 0.20-0.21, UNIFORM_BATCH in 0.22-0.25 and from 0.31, single-token decode in 0.26-0.30
TRITON_MLA_NEVER_UNTIL = (0, 22)
TRITON_MLA_SINGLE_TOKEN = ((0, 26), (0, 31))
FLASH_ATTN_MLA_SPARSE_FROM = (0, 25)  # SM 9.0's sparse MLA default in the model dtype (FLASHMLA_SPARSE before)
SPARSE_MLA_SM12X_FROM = (0, 24)
# the state layers' backends (MambaAttentionBackendEnum): MiniMax's lightning attention (LINEAR) decodes single tokens
STATE_SUPPORT = {"mamba1": UNIFORM_BATCH, "mamba2": UNIFORM_BATCH, "gdn": UNIFORM_BATCH, "kda": UNIFORM_BATCH,
                 "short_conv": UNIFORM_BATCH, "linear": SINGLE_TOKEN}
_STATE_BACKEND = {"mamba1": "MAMBA1", "mamba2": "MAMBA2", "gdn": "GDN_ATTN", "kda": "GDN_ATTN",
                  "short_conv": "SHORT_CONV", "linear": "LINEAR"}


def _in(release: tuple[int, int], span: tuple[tuple[int, int], tuple[int, int]]) -> bool:
    return span[0] <= release < span[1]


def attention_backend(dtype: str, release: tuple[int, int] | None, sm: int, head: int, sink: bool) -> str | None:
    """The backend vLLM's selector gives a non-MLA attention layer of this head size (with attention sinks or not) in
    the model dtype ("auto") or fp8, on a GPU of compute capability `sm` (x10)."""
    newest = as_compared(release)
    family = sm // 10
    heads = flashinfer_heads(release)
    if family == 10:
        if head in heads:
            return "FLASHINFER"
        if dtype == "fp8":  # FlashAttention takes an fp8 cache there from 0.27, for heads up to 128 (80, 96: not 192)
            return "FLASH_ATTN" if newest >= FA_FP8_SM100_FROM and head <= 128 else "TRITON_ATTN"
        return "FLASH_ATTN"
    if sm == 90:
        if dtype == "fp8" and head == 512 and _in(newest, FA3_FP8_512_REFUSED):
            return "TRITON_ATTN" if sink and newest < FA3_FP8_512_SINKS_FLASHINFER_FROM else "FLASHINFER"
        return "FLASH_ATTN"
    # SM 8.x and 12.x: FlashAttention 2 (no fp8 cache, heads up to 256, no sinks), then FlashInfer, then Triton
    if sink:
        sm12x_sinks = family == 12 and newest >= FLASHINFER_XQA_SM12X_FROM and head in heads
        return "FLASHINFER" if sm12x_sinks else "TRITON_ATTN"
    if dtype != "fp8" and head <= 256 and head % 8 == 0:
        return "FLASH_ATTN"
    return "FLASHINFER" if head in heads else "TRITON_ATTN"


def backend_support(backend: str, release: tuple[int, int] | None, sm: int, head: int) -> str:
    """The CUDA-graph support the backend's metadata builder reports in `release` on a GPU of compute capability `sm`."""
    newest = as_compared(release)
    family = sm // 10
    if backend in ("TRITON_ATTN", "FLEX_ATTENTION"):
        return ALWAYS
    if backend == "FLASHINFER":
        if family == 10:
            return UNIFORM_BATCH  # TRTLLM attention decodes uniform batches
        if family == 12 and newest >= FLASHINFER_XQA_SM12X_FROM and not (newest >= FLASHINFER_XQA_HEADS_FROM and head == 512):
            return UNIFORM_BATCH
        if family == 8 and newest >= FLASHINFER_FA2_DECODE_FROM:
            return UNIFORM_BATCH
        return SINGLE_TOKEN
    if backend == "TRITON_MLA":
        if newest < TRITON_MLA_NEVER_UNTIL:
            return NEVER
        return SINGLE_TOKEN if _in(newest, TRITON_MLA_SINGLE_TOKEN) else UNIFORM_BATCH
    return UNIFORM_BATCH  # FLASH_ATTN (ALWAYS with FA3), TURBOQUANT, the MLA backends but Triton's


def mla_backend(dtype: str, release: tuple[int, int] | None, sm: int, sparse: bool) -> str | None:
    """The backend vLLM's selector gives an MLA layer (DeepSeek's 512 + 64 head) in the model dtype or fp8; sparse:
    DeepSeek Sparse Attention's. None: no backend takes it (vLLM does not start)."""
    newest = as_compared(release)
    family = sm // 10
    if sparse:
        if family == 12:
            return "FLASHINFER_MLA_SPARSE_SM120" if newest >= SPARSE_MLA_SM12X_FROM else None
        if family == 8:
            return None
        if family == 10:
            return "FLASHINFER_MLA_SPARSE" if dtype == "fp8" else "FLASHMLA_SPARSE"
        return "FLASH_ATTN_MLA_SPARSE" if dtype != "fp8" and newest >= FLASH_ATTN_MLA_SPARSE_FROM else "FLASHMLA_SPARSE"
    if family == 10:
        return "FLASHINFER_MLA"
    return "FLASH_ATTN_MLA" if sm == 90 and dtype != "fp8" else "TRITON_MLA"


def least_support(layers: list[tuple[str, str]]) -> tuple[str, str] | None:
    """(support, backend) of the least-supporting of (backend, support) pairs, or None for none."""
    if not layers:
        return None
    backend, support = min(layers, key=lambda pair: RANK[pair[1]])
    return support, backend


def state_backend(family: str) -> tuple[str, str]:
    """(backend, support) of a state layer family's backend (the same in 0.20-0.34)."""
    return _STATE_BACKEND[family], STATE_SUPPORT[family]


def decode_graph_support(arch: Architecture, layers: list[_Layer], kv_dtype: str, release: tuple[int, int] | None,
                         sm: int | None) -> tuple[str, str] | None:
    """(support, backend): the least CUDA-graph support among the backends vLLM `release` gives this model's cached
    `layers` (the KV layout's, per GPU: TurboQuant's boundary layers carry the model dtype) on a GPU of compute
    capability `sm` (x10) with the KV cache in `kv_dtype` (hfmem's name), and the backend that has it. None where hfmem
    does not know the backends: no CUDA GPU it knows, NVFP4 off the SM100 family, chunked-attention, cross-attention
    and DeepSeek-V4 compressed layers, or a layer no backend takes."""
    if sm is None:
        return None
    heads = {l.dk for l in layers if l.attn}
    forced = forced_backend(arch.model_type, heads, release, sm)
    sinks = sink_kinds(arch.model_type, arch.text_config or {}, release)
    default = "fp8" if kv_dtype == "fp8" else "auto"
    pairs: list[tuple[str, str]] = []
    for l in layers:
        if l.state_family:
            pairs.append(state_backend(l.state_family))
        if not l.attn:
            continue
        if l.compressed is not None or l.attn in ("chunked", "cross"):
            return None
        quantized = kv_dtype if l.kv_dtype is None else "auto"  # TurboQuant's boundary layers keep the model dtype
        if l.attn == "mla":
            backend = mla_backend(default, release, sm, l.index_kind == "dsa")
        elif forced is not None:
            backend = forced
        elif quantized in PER_TOKEN_HEAD:
            backend = "TRITON_ATTN"
        elif quantized in TURBOQUANT:
            backend = "TURBOQUANT"
        elif quantized in NVFP4:
            if sm // 10 != 10:
                return None
            backend = "FLASHINFER"
        else:
            backend = attention_backend(default, release, sm, l.dk, l.attn in sinks)
        if backend is None:
            return None
        pairs.append((backend, backend_support(backend, release, sm, l.dk)))
    return least_support(pairs)
