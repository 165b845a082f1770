"""Weight bytes at each precision, computed per tensor (never "parameters x bits").

Every quantization method converts only some tensors; the rest stay 16-bit (or F32 in GGUF). Rules:

- Quantized: the Linear weights of attention, MLP, MoE experts (and shared experts) and SSM projections, as
  logical ``[out, in]`` matrices (fused MoE expert tensors ``[E, out, in]`` count as E matrices).
- Not quantized (kept at 16 bits, or F32 in GGUF): token embeddings, ``lm_head`` (except GGUF, which quantizes
  both), norms, biases, MoE routers, convolution kernels, vision/audio towers and projectors. transformers'
  bitsandbytes integration keeps ``lm_head`` and non-Linear modules (``integrations/bitsandbytes.py``
  ``get_keys_to_not_convert``); AutoAWQ/AutoGPTQ quantize only the decoder-layer Linears; vLLM's FP8 keeps
  ``lm_head``/embeddings in the activation dtype.

Layouts (bytes per quantized ``[out, in]`` matrix; ``n = out * in``):

- FP8 per-tensor: ``n`` (E4M3) + one F32 ``weight_scale`` (transformers ``integrations/finegrained_fp8.py``,
  vLLM ``quantization/fp8.py``). FP8 block: ``n`` + F32 ``weight_scale_inv[ceil(out/128), ceil(in/128)]``.
- INT8 (LLM.int8): ``n`` int8 + F32 ``SCB[out]`` row scales (bitsandbytes ``nn/modules.py`` ``Int8Params`` /
  ``Linear8bitLt``; the serialized 1-byte ``weight_format`` marker is not GPU memory and not counted).
- INT4 AWQ (GEMM, group 128): ``qweight`` I32 ``[in, ceil(out/8)]`` + ``qzeros`` I32 ``[ceil(in/128),
  ceil(out/8)]`` + ``scales`` F16 ``[ceil(in/128), out]`` (AutoAWQ ``awq/modules/linear/gemm.py``
  ``WQLinear_GEMM``; vLLM ``quantization/awq.py``). GPTQ: ``qweight`` I32 ``[ceil(in/8), out]`` + the same
  ``qzeros``/``scales`` + ``g_idx`` I32 ``[in]`` (AutoGPTQ ``nn_modules/qlinear``; vLLM ``quantization/gptq.py``).
- bitsandbytes NF4/FP4, blocksize 64, double quantization: ``ceil(n/2)`` packed codes + U8 absmax
  ``[ceil(n/64)]`` + F32 nested absmax ``[ceil(ceil(n/64)/256)]`` + F32 nested code ``[256]`` + F32 code
  ``[16]`` (bitsandbytes ``functional.py`` ``quantize_4bit`` with ``compress_statistics``, ``QuantState``);
  the JSON-packed ``quant_state`` blob of a serialized checkpoint is host-side metadata and not counted.
  ``nf4-nodq``: F32 absmax ``[ceil(n/64)]`` + code ``[16]``.
- MXFP4 (OCP MX): per row ``ceil(in/32)`` blocks of 16 bytes (32 FP4 values) + one E8M0 scale byte = 4.25 bits
  (transformers ``integrations/mxfp4.py``). Applied to MoE experts only when the model is MoE (gpt-oss), else to
  every quantizable Linear.
- GGUF (llama.cpp): block sizes from ggml ``ggml/src/ggml-common.h`` (``block_q8_0`` 34 B / 32 values,
  ``block_q6_K`` 210 B / 256, ``block_q5_K`` 176 B / 256, ``block_q4_K`` 144 B / 256, ``block_q5_0`` 22 B / 32,
  ``block_q5_1`` 24 B / 32); the per-tensor type mix of Q4_K_M / Q5_K_M follows ``src/llama-quant.cpp``
  ``llama_tensor_get_type_impl`` (output -> Q6_K; attn_v and ffn_down -> Q6_K on ``use_more_bits`` layers;
  8-expert models: attn_v/attn_k -> Q8_0, attn_output -> Q5_K for Q4_K_M; fused qkv -> Q5_K/Q6_K) and
  ``tensor_type_fallback`` (rows not divisible by 256: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0). 1-D tensors
  and MoE routers (``ffn_gate_inp``) are F32 (``convert_hf_to_gguf.py``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter
from typing import Any

from hfmem.errors import UsageError
from hfmem.gguf.ggml import block_of
from hfmem.model.dtypes import dtype_bits
from hfmem.model.quant import Quantization
from hfmem.units import cdiv

GROUP = 128  # GPTQ/AWQ group size
BNB_BLOCK = 64
BNB_NESTED_BLOCK = 256
FP8_BLOCK = 128
MX_BLOCK = 32

# key -> (label, bits of the quantized tensors as a rough guide, what stays unquantized)
PRECISIONS: dict[str, str] = {
    "fp32": "FP32",
    "bf16": "BF16 / FP16",
    "fp8": "FP8 E4M3, per-tensor scale",
    "fp8-block": "FP8 E4M3, 128x128 block scales",
    "int8": "INT8 LLM.int8 (bitsandbytes, row scales)",
    "int4": "INT4 AWQ, group 128",
    "gptq": "INT4 GPTQ, group 128 (+g_idx)",
    "nf4": "bitsandbytes NF4/FP4, double quant",
    "nf4-nodq": "bitsandbytes NF4/FP4, no double quant",
    "mxfp4": "MXFP4 (32-value blocks, E8M0 scale)",
    "q8_0": "GGUF Q8_0",
    "q6_k": "GGUF Q6_K",
    "q5_k_m": "GGUF Q5_K_M",
    "q4_k_m": "GGUF Q4_K_M",
}
ALIASES = {
    "float32": "fp32", "f32": "fp32", "bfloat16": "bf16", "float16": "bf16", "fp16": "bf16", "f16": "bf16",
    "16": "bf16", "8": "int8", "4": "int4", "fp8-e4m3": "fp8", "fp8-128": "fp8-block", "llm.int8": "int8",
    "awq": "int4", "int4-awq": "int4", "gptq-int4": "gptq", "int4-gptq": "gptq", "bnb4": "nf4", "fp4": "nf4",
    "bnb-nf4": "nf4", "q4_k": "q4_k_m", "q5_k": "q5_k_m", "gguf-q8_0": "q8_0", "gguf-q6_k": "q6_k",
    "gguf-q5_k_m": "q5_k_m", "gguf-q4_k_m": "q4_k_m", "int8-bnb": "int8",
}
CHECKPOINT = "checkpoint"  # the bytes as stored (what loading the repo as-is costs)

# llama.cpp's shape fallback for rows not divisible by the k-quant block (src/llama-quant.cpp: tensor_type_fallback)
_GGML_FALLBACK = {"q4_k": "q5_0", "q5_k": "q5_1", "q6_k": "q8_0"}

_QUANT_COMPONENTS = {"attention", "mlp", "moe_experts", "moe_shared_experts", "ssm"}


def resolve_precision(text: str) -> str:
    key = text.strip().lower().replace(" ", "")
    key = ALIASES.get(key, key)
    if key in PRECISIONS or key in (CHECKPOINT, "auto"):
        return CHECKPOINT if key == "auto" else key
    raise UsageError(f"unknown precision {text!r}; use one of: auto, {', '.join(PRECISIONS)}")


# One per stored tensor (500k in the largest checkpoints): not frozen, whose __init__ costs 8x (see TensorEntry).
@dataclass(slots=True, unsafe_hash=True)
class WeightTensor:
    """One parameter tensor in logical form: ``count`` matrices of ``[out, inn]`` (1-D: out = numel, inn = 1)."""

    name: str
    component: str
    layer: int | None
    kind: str  # linear | embedding | lm_head | router | vector | other
    out: int
    inn: int
    count: int
    stored_bytes: int  # as stored in the checkpoint, including its quantization bookkeeping
    # the name with numeric parts replaced by ".#" (inventory.CountedTensor.pattern): the key of per-pattern memos
    pattern: str | None = field(default=None, compare=False)

    @property
    def numel(self) -> int:
        return self.count * self.out * self.inn


def _logical_matrix(name: str, dtype: str, shape: tuple[int, ...], method: str | None, bits: int | None) -> tuple[int, int, int]:
    """(count, out, in) of a stored tensor, undoing the packing of quantized layouts."""
    dims = list(shape) or [1]
    if name.endswith(".qweight") and len(dims) == 2:
        factor = 32 // (bits or 4)
        if method and "awq" in method:  # [in, out/8]
            return 1, dims[1] * factor, dims[0]
        return 1, dims[1], dims[0] * factor  # GPTQ [in/8, out]
    if name.endswith("_blocks") and dtype == "U8" and len(dims) >= 3:  # MXFP4 [..., out, in/32, 16]
        count = math.prod(dims[:-3]) if len(dims) > 3 else 1
        return count, dims[-3], dims[-2] * dims[-1] * 2
    if name.endswith(".weight_packed") and len(dims) == 2:
        per = ((dtype_bits(dtype) or 32) // (bits or 4))
        return 1, dims[0], dims[1] * per
    if len(dims) == 1:
        return 1, dims[0], 1
    if len(dims) == 2:
        return 1, dims[0], dims[1]
    return math.prod(dims[:-2]), dims[-2], dims[-1]


# inventory roles that are no weight of their own: registered buffers and the second name of a tied tensor
_NOT_WEIGHTS = frozenset(("buffer", "tied_duplicate"))


def weight_tensors(counted: Iterable[Any], quantization: Quantization | None = None, hidden_size: int | None = None) -> list[WeightTensor]:
    """Logical parameter tensors from the inventory (``inventory.CountedTensor``); bookkeeping tensors of a
    quantized checkpoint are folded into the stored bytes of the weight they belong to (or kept as "other").

    The logical form and kind are worked out once per (role, logical count, component, dtype, shape, last name part):
    ``_logical_matrix`` reads only those, and the kind (``_kind_by_tail``) the same plus one look at the whole name
    ("conv"), made once per name pattern or per tensor; tests/test_pattern_memo.py compares the result with the same
    computation done tensor by tensor."""
    method = quantization.method if quantization else None
    bits = quantization.bits if quantization else None
    out: list[WeightTensor] = []
    append = out.append
    overhead = 0
    forms: dict[tuple[Any, ...], tuple[int, int, int, str]] = {}
    for c in counted:
        role = c.role
        if role in _NOT_WEIGHTS:
            continue
        e = c.entry
        if role == "quant_overhead":
            overhead += e.nbytes
            continue
        name = e.name
        pattern = c.pattern
        if pattern is not None:
            # the whole-name test ("conv": no digit, so it matches a name exactly when it matches its pattern) is
            # made once per pattern too
            key: tuple[Any, ...] = (pattern, role, c.logical, c.component, e.dtype, e.shape)
            form = forms.get(key)
            if form is None:
                form = forms[key] = _weight_form(name, e.dtype, e.shape, role, c.logical, c.component, method, bits, hidden_size)
                if form[3] == _LINEAR_UNLESS_CONV:
                    form = forms[key] = (*form[:3], "other" if "conv" in pattern.lower() else "linear")
            count, rows, cols, kind = form
        else:
            head, dot, tail = name.rpartition(".")
            key = (role, c.logical, c.component, e.dtype, e.shape, dot + tail)
            form = forms.get(key)
            if form is None:
                form = forms[key] = _weight_form(name, e.dtype, e.shape, role, c.logical, c.component, method, bits, hidden_size)
            count, rows, cols, kind = form
            if kind == _LINEAR_UNLESS_CONV:
                kind = "other" if "conv" in name.lower() else "linear"
        append(WeightTensor(name, c.component, c.layer, kind, rows, cols, count, e.nbytes, pattern))
    if overhead and out:
        # Attribute the checkpoint's quantization bookkeeping as one pseudo-tensor so stored totals stay exact.
        append(_bookkeeping(overhead))
    return out


def _bookkeeping(overhead: int) -> WeightTensor:
    """The checkpoint's quantization scales and zeros as one pseudo-tensor, so stored totals stay exact."""
    return WeightTensor("<quantization scales/zeros>", "other", None, "bookkeeping", overhead, 1, 1, overhead)


def weight_groups(counted: Iterable[Any], quantization: Quantization | None = None,
                  hidden_size: int | None = None) -> list[tuple[WeightTensor, int]]:
    """``weight_tensors`` collapsed to (first tensor, how many): tensors whose names differ only in numeric parts
    other than the layer number (the ``.experts.N.`` index) share (name pattern, layer, role, logical count,
    component, dtype, shape, bytes), so every field of their WeightTensor but the name, and everything the planner
    reads from the name: vLLM's parameter key (``vllm_weights.parameter_keys`` decides it per (pattern, layer) for
    these patterns), ``planner.shard``'s substrings and replicated-label part (no numeric part: the label's part
    is not a "#" of the pattern), the GGUF category (``group_tensors``). Other tensors stay one per group. The
    groups keep the order of their first tensor. Kimi-K3's 497,220 tensors are a few thousand groups;
    tests/test_weight_groups.py compares the expansion with ``weight_tensors``."""
    groups: dict[Any, list[Any]] = {}
    get = groups.get
    overhead = 0
    decided: dict[tuple[str, bool], bool] = {}
    for c in counted:
        role = c.role
        if role in _NOT_WEIGHTS:
            continue
        e = c.entry
        if role == "quant_overhead":
            overhead += e.nbytes
            continue
        pattern = c.pattern
        key: Any = id(c)
        if pattern is not None:
            layer = c.layer
            layered = layer is not None
            ok = decided.get((pattern, layered))
            if ok is None:
                parts = pattern.split(".")
                ok = decided[(pattern, layered)] = (pattern.count(".#") == layered + (".experts.#." in pattern)
                                                    and (len(parts) < 2 or parts[-2] != "#"))
            if ok:
                key = (pattern, layer, role, c.logical, c.component, e.dtype, e.shape, e.nbytes)
        g = get(key)
        if g is None:
            groups[key] = [c, 1]
        else:
            g[1] += 1
    firsts = weight_tensors([c for c, _ in groups.values()], quantization, hidden_size)
    out = [(t, n) for t, (_, n) in zip(firsts, groups.values())]
    if overhead and out:
        out.append((_bookkeeping(overhead), 1))
    return out


# _weight_form's kind when only the whole name can decide: "linear", or "other" for a convolution kernel
_LINEAR_UNLESS_CONV = "linear unless conv"


def _weight_form(name: str, dtype: str, shape: tuple[int, ...], role: str, logical: int, component: str,
                 method: str | None, bits: int | None, hidden_size: int | None) -> tuple[int, int, int, str]:
    """(count, rows, cols, kind) of one parameter tensor; the kind may be _LINEAR_UNLESS_CONV. Reads of ``name``
    only its last part (with the dot before it), so it is the same for every name ending alike."""
    count, rows, cols = _logical_matrix(name, dtype, shape, method, bits)
    if role == "param" and count * rows * cols != logical:
        count, rows, cols = 1, logical, 1
    elif role == "quantized" and count * rows * cols != logical:
        # Flattened storage (bitsandbytes [n/2, 1]): the row length is not in the header; take rows of
        # hidden_size, the input width of most quantized Linears (exact for q/k/v/o/gate/up).
        if hidden_size and logical % hidden_size == 0:
            count, rows, cols = 1, logical // hidden_size, hidden_size
        else:
            count, rows, cols = 1, logical, 1
    kind = _kind_by_tail(name, component, rows, cols)
    if role == "quantized" and kind == "vector":
        kind = "linear"
    return count, rows, cols, kind


def _kind_by_tail(name: str, component: str, out: int, inn: int) -> str:
    """A weight tensor's kind from its component, shape and last name part; _LINEAR_UNLESS_CONV where only the whole
    name decides (a convolution kernel, "conv" anywhere in it, is "other"), which the caller tests."""
    n = name.lower()
    if component == "embeddings":
        return "embedding"
    if component == "lm_head":
        return "lm_head"
    if component == "moe_router":
        return "router"
    if inn == 1 or n.endswith(".bias") or n.endswith("_bias") or component == "norms":
        return "vector"
    if component in _QUANT_COMPONENTS and not n.endswith(("a_log", ".d", "dt_bias", "sinks")):
        return _LINEAR_UNLESS_CONV
    return "other"


# ------------------------------------------------------------------------------------------------------------
# Per-matrix byte counts of each layout


def _linear_bytes(precision: str, out: int, inn: int) -> int:
    n = out * inn
    if precision == "fp32":
        return 4 * n
    if precision == "bf16":
        return 2 * n
    if precision == "fp8":
        return n + 4
    if precision == "fp8-block":
        return n + 4 * cdiv(out, FP8_BLOCK) * cdiv(inn, FP8_BLOCK)
    if precision == "int8":
        return n + 4 * out
    if precision in ("int4", "gptq"):
        groups = cdiv(inn, GROUP)
        zeros = groups * cdiv(out, 8) * 4
        scales = groups * out * 2
        if precision == "int4":
            return inn * cdiv(out, 8) * 4 + zeros + scales
        return cdiv(inn, 8) * out * 4 + zeros + scales + 4 * inn
    if precision == "nf4":
        blocks = cdiv(n, BNB_BLOCK)
        return cdiv(n, 2) + blocks + 4 * cdiv(blocks, BNB_NESTED_BLOCK) + 4 * 256 + 4 * 16
    if precision == "nf4-nodq":
        return cdiv(n, 2) + 4 * cdiv(n, BNB_BLOCK) + 4 * 16
    if precision == "mxfp4":
        return out * cdiv(inn, MX_BLOCK) * (MX_BLOCK // 2 + 1)
    raise KeyError(precision)


def ggml_row_bytes(gtype: str, inn: int) -> tuple[str, int]:
    """(type actually used, bytes of one row of ``inn`` values), with llama.cpp's shape fallback."""
    block, size = block_of(gtype)
    if inn % block:
        fallback = _GGML_FALLBACK.get(gtype)
        if fallback is None or inn % block_of(fallback)[0]:
            gtype = "f16"
        else:
            gtype = fallback
        block, size = block_of(gtype)
    return gtype, inn // block * size


def _use_more_bits(i: int, n: int) -> bool:
    # llama-quant.cpp: i < n/8 || i >= 7*n/8 || (i - n/8) % 3 == 2  (C integer division)
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


@dataclass
class _GGUFContext:
    ftype: str
    num_layers: int
    n_expert: int
    tied: bool
    is_70b: bool


def _gguf_category(t: WeightTensor) -> str:
    n = t.name.lower()
    if t.kind == "lm_head":
        return "output"
    if t.kind == "embedding":
        return "token_embd"
    if t.component == "attention":
        if any(k in n for k in ("qkv_proj", "query_key_value", "c_attn", "wqkv")):
            return "attn_qkv"
        if "v_proj" in n or ".wv." in n:
            return "attn_v"
        if "k_proj" in n or ".wk." in n:
            return "attn_k"
        if "q_proj" in n or ".wq." in n:
            return "attn_q"
        if any(k in n for k in ("o_proj", "out_proj", ".dense.", ".wo.")):
            return "attn_output"
    if t.component in ("mlp", "moe_experts", "moe_shared_experts"):
        if "down" in n or ".w2" in n or "fc2" in n or "dense_4h_to_h" in n:
            return "ffn_down"
    return "other"


def _gguf_type(t: WeightTensor, ctx: _GGUFContext) -> str:
    base = {"q8_0": "q8_0", "q6_k": "q6_k", "q5_k_m": "q5_k", "q4_k_m": "q4_k"}[ctx.ftype]
    cat = _gguf_category(t)
    if cat == "output" or (cat == "token_embd" and ctx.tied):
        block = block_of(base)[0]
        if t.inn % block:
            return "q8_0"
        return base if base == "q8_0" else "q6_k"
    if cat == "token_embd" or ctx.ftype in ("q8_0", "q6_k"):
        return base
    new = base
    layer = t.layer if t.layer is not None else 0
    if cat == "attn_v":
        if _use_more_bits(layer, ctx.num_layers):
            new = "q6_k"
        if ctx.is_70b and new == "q4_k":
            new = "q5_k"
        if ctx.n_expert == 8:
            new = "q8_0"
    elif cat == "attn_k":
        if ctx.n_expert == 8:
            new = "q8_0"
    elif cat == "ffn_down":
        if _use_more_bits(layer, ctx.num_layers):
            new = "q6_k"
    elif cat == "attn_output":
        if ctx.n_expert == 8 and ctx.ftype == "q4_k_m":
            new = "q5_k"
    elif cat == "attn_qkv":
        new = "q5_k" if ctx.ftype == "q4_k_m" else "q6_k"
    return new


def tensor_bytes(t: WeightTensor, precision: str, *, moe: bool = False, gguf: _GGUFContext | None = None) -> int:
    """Bytes of one logical tensor at ``precision``."""
    if precision == CHECKPOINT:
        return t.stored_bytes
    if t.kind == "bookkeeping":
        return 0  # a checkpoint's own scales: replaced by the target layout's
    if precision in ("q8_0", "q6_k", "q5_k_m", "q4_k_m"):
        if t.kind in ("vector", "router") or t.inn == 1:
            return 4 * t.numel  # F32
        if t.kind in ("linear", "embedding", "lm_head") or t.kind == "other":
            assert gguf is not None
            gtype = _gguf_type(t, gguf) if t.kind != "other" else "f16"
            _, row = ggml_row_bytes(gtype, t.inn)
            return t.count * t.out * row
    if precision == "fp32":
        return 4 * t.numel
    quantized = t.kind == "linear" and precision != "bf16"
    if quantized and precision == "mxfp4" and moe and t.component != "moe_experts":
        quantized = False
    if not quantized:
        return 2 * t.numel
    return t.count * _linear_bytes(precision, t.out, t.inn)


@dataclass
class WeightsByPrecision:
    """Exact weight bytes at every precision (and as stored), with what each method leaves unquantized."""

    bytes: dict[str, int]
    quantized_params: dict[str, int]
    total_params: int
    checkpoint_label: str
    by_kind: dict[str, dict[str, int]] = field(default_factory=dict)  # precision -> kind -> bytes

    def to_dict(self) -> dict[str, int]:
        return dict(self.bytes)


def weights_by_precision(tensors: list[WeightTensor], *, num_layers: int, moe: bool = False, n_expert: int = 0,
                         tied: bool = False, model_type: str = "", checkpoint_label: str = "as stored",
                         precisions: Iterable[str] | None = None, counts: Iterable[int] | None = None) -> WeightsByPrecision:
    """``counts``: how many tensors each of ``tensors`` stands for (``weight_groups``); one each without."""
    keys = [CHECKPOINT, *(precisions or PRECISIONS)]
    gguf_ctx = {
        k: _GGUFContext(k, num_layers, n_expert, tied, model_type == "llama" and num_layers == 80)
        for k in ("q8_0", "q6_k", "q5_k_m", "q4_k_m")
    }
    groups = group_tensors(tensors, num_layers, counts)
    # (a group's tensors share kind and count x out x inn)
    total_params = sum(t.numel * mult for t, mult in groups if t.kind != "bookkeeping")
    out: dict[str, int] = {}
    qparams: dict[str, int] = {}
    by_kind: dict[str, dict[str, int]] = {}
    for key in keys:
        total = 0
        q = 0
        kinds: dict[str, int] = {}
        for t, mult in groups:
            b = tensor_bytes(t, key, moe=moe, gguf=gguf_ctx.get(key)) * mult
            total += b
            kinds[t.kind] = kinds.get(t.kind, 0) + b
            if key not in (CHECKPOINT, "fp32", "bf16") and _is_quantized(t, key, moe):
                q += t.numel * mult
        out[key] = total
        by_kind[key] = kinds
        if key != CHECKPOINT:
            qparams[key] = q
    return WeightsByPrecision(out, qparams, total_params, checkpoint_label, by_kind)


def group_tensors(tensors: list[WeightTensor], num_layers: int, counts: Iterable[int] | None = None) -> list[tuple[WeightTensor, int]]:
    """Identical tensors (same shape, kind and byte-relevant facts) collapsed to (representative, multiplicity);
    models with one tensor per expert have 10^4-10^5 tensors but a few hundred distinct ones. ``counts``: the
    multiplicity of each of ``tensors`` (``weight_groups``), one each without."""
    groups: dict[tuple, list] = {}
    # _gguf_category's substrings hold no digit where a numeric part could be, so the name's pattern decides it
    categories: dict[tuple[str, str, str], str] = {}
    for t, mult in zip(tensors, repeat(1) if counts is None else counts):
        pattern = t.pattern
        if pattern is None:
            cat = _gguf_category(t)
        else:
            cat_key = (t.kind, t.component, pattern)
            cat = categories.get(cat_key)  # type: ignore[assignment]
            if cat is None:
                cat = categories[cat_key] = _gguf_category(t)
        layer_bit = _use_more_bits(t.layer or 0, num_layers) if cat in ("attn_v", "ffn_down") else None
        sig = (t.kind, t.component, t.out, t.inn, t.count, t.stored_bytes, cat, layer_bit)
        g = groups.get(sig)
        if g is None:
            groups[sig] = [t, mult]
        else:
            g[1] += mult
    return [(t, n) for t, n in groups.values()]


def _is_quantized(t: WeightTensor, key: str, moe: bool) -> bool:
    if key in ("q8_0", "q6_k", "q5_k_m", "q4_k_m"):
        return t.kind in ("linear", "embedding", "lm_head") and t.inn > 1
    if t.kind != "linear":
        return False
    return not (key == "mxfp4" and moe and t.component != "moe_experts")


# MTP layers vLLM builds for a model type whose checkpoint stores more: MiMo-V2 (vllm,
# model_executor/models/mimo_v2_mtp.py _MIMO_V2_PRO_NUM_MTP_LAYERS / _MIMO_V2_FLASH_NUM_MTP_LAYERS, "vLLM currently
# supports only the first MiMo-V2 MTP layer"; read in the 0.21.0-0.34.0 wheels).
VLLM_MTP_LAYERS = {"mimo_v2": 1, "mimo_v2_flash": 1}


def counted_for_weights(report: Any, *, include_mtp: bool = False) -> list[Any]:
    """The report's counted tensors the weights are made of. Multi-token-prediction layers are loaded only for MTP
    speculative decoding (vLLM's ``SpeculativeConfig`` method "mtp"; transformers never builds them), so they are
    left out unless ``include_mtp``, and then only the first VLLM_MTP_LAYERS ones where vLLM builds fewer."""
    # (a copy without them only where there are some: the set of components is one C-level pass)
    if "mtp" not in set(map(attrgetter("component"), report.tensors)):
        return report.tensors
    if not include_mtp:
        return [c for c in report.tensors if c.component != "mtp"]
    cap = VLLM_MTP_LAYERS.get(report.architecture.model_type)
    if cap is None:
        return report.tensors
    kept = sorted({c.layer for c in report.tensors if c.component == "mtp" and c.layer is not None})[:cap]
    return [c for c in report.tensors if c.component != "mtp" or c.layer in kept]


def for_report(report: Any, precisions: Iterable[str] | None = None, *, include_mtp: bool = False) -> tuple[list[WeightTensor], WeightsByPrecision]:
    """Weights at every precision for a ``hfmem.Report`` (MTP layers only with ``include_mtp``: counted_for_weights)."""
    a = report.architecture
    tensors = weight_tensors(counted_for_weights(report, include_mtp=include_mtp), report.parameters.quantization,
                             a.hidden_size)
    return tensors, _weights_of(report, tensors, None, precisions)


def groups_for_report(report: Any, counted: list[Any], precisions: Iterable[str] | None = None
                      ) -> tuple[list[tuple[WeightTensor, int]], WeightsByPrecision]:
    """``for_report`` with the tensors as ``weight_groups`` (first tensor, how many), of ``counted``: the report's
    counted_for_weights."""
    groups = weight_groups(counted, report.parameters.quantization, report.architecture.hidden_size)
    return groups, _weights_of(report, [t for t, _ in groups], [n for _, n in groups], precisions)


def _weights_of(report: Any, tensors: list[WeightTensor], counts: list[int] | None,
                precisions: Iterable[str] | None) -> WeightsByPrecision:
    a = report.architecture
    q = report.parameters.quantization
    label = "as stored"
    if q:
        label = f"as stored ({q.method}{' ' + str(q.bits) + '-bit' if q.bits else ''})"
    elif report.parameters.by_dtype:
        label = "as stored (" + ", ".join(report.parameters.by_dtype) + ")"
    return weights_by_precision(
        tensors,
        num_layers=a.num_layers,
        moe=bool(a.moe),
        n_expert=a.moe.num_experts if a.moe else 0,
        tied=a.tie_word_embeddings,
        model_type=a.model_type,
        checkpoint_label=label,
        precisions=precisions,
        counts=counts,
    )
