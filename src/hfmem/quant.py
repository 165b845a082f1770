"""Quantized checkpoint layouts: which stored tensors are packed weights (and how many logical values each
holds) and which are bookkeeping (scales, zeros, indices, serialized quant state) that is overhead, not parameters.

Layouts followed:
- GPTQ: ``qweight`` I32 [in*bits/32, out] (packed along the input dim), ``qzeros`` I32, ``scales`` F16, ``g_idx``
  (vllm/model_executor/layers/quantization/gptq.py ``create_weights``).
- AWQ (GEMM): ``qweight`` I32 [in, out*bits/32] (packed along the output dim) (vllm .../quantization/awq.py).
- bitsandbytes 4-bit: U8 (or ``bnb_4bit_quant_storage``) weight holding two codes per byte, plus ``absmax``,
  ``quant_map``, ``nested_absmax``, ``nested_quant_map``, ``quant_state.bitsandbytes__nf4|fp4``; 8-bit: I8 weight
  + ``SCB`` + ``weight_format`` (bitsandbytes/nn/modules.py ``_save_to_state_dict``).
- FP8: F8_E4M3 weights with ``weight_scale``/``weight_scale_inv``/``input_scale`` (transformers
  integrations/finegrained_fp8.py); compressed-tensors ``weight_packed`` I32 + ``weight_scale`` + ``weight_shape``.
- MXFP4 (gpt-oss): ``*_blocks`` U8 (two FP4 values per byte) + ``*_scales`` U8 (transformers integrations/mxfp4.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .header import TensorEntry

_OVERHEAD_SUFFIXES = (
    ".qzeros",
    ".scales",
    ".g_idx",
    ".weight_scale",
    ".weight_scale_inv",
    ".input_scale",
    ".output_scale",
    ".k_scale",
    ".v_scale",
    ".weight_zero_point",
    ".weight_g_idx",
    ".weight_shape",
    ".weight_global_scale",
    ".input_global_scale",
    ".weight.absmax",
    ".weight.quant_map",
    ".weight.nested_absmax",
    ".weight.nested_quant_map",
    ".SCB",
    ".weight_format",
    "_scales",
    ".scale_inv",
)


@dataclass
class QuantScheme:
    method: str
    bits: int | None = None
    group_size: int | None = None
    details: dict[str, Any] = field(default_factory=dict)
    # bits per compressed-tensors group are resolved per tensor by pack factor when available
    pack_factor: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "bits": self.bits, "group_size": self.group_size} | self.details


def _quant_config(config: dict[str, Any]) -> dict[str, Any] | None:
    for holder in (config, config.get("text_config") or {}):
        q = holder.get("quantization_config") if isinstance(holder, dict) else None
        if isinstance(q, dict):
            return q
    return None


def detect_scheme(config: dict[str, Any], entries: list[TensorEntry]) -> QuantScheme | None:
    """From quantization_config when present, else from tensor names/dtypes."""
    q = _quant_config(config)
    names_dtypes = {t.dtype for t in entries}
    if q is not None:
        method = str(q.get("quant_method") or q.get("quant_type") or "unknown").lower()
        if method == "bitsandbytes":
            method = "bitsandbytes-4bit" if q.get("load_in_4bit") or q.get("_load_in_4bit") else "bitsandbytes-8bit"
            bits = 4 if "4bit" in method else 8
            details = {}
            if bits == 4:
                details = {
                    "quant_type": q.get("bnb_4bit_quant_type", "fp4"),
                    "double_quant": bool(q.get("bnb_4bit_use_double_quant", False)),
                    "quant_storage": q.get("bnb_4bit_quant_storage", "uint8"),
                }
            return QuantScheme(method, bits, 64 if bits == 4 else None, details)
        if method == "compressed-tensors":
            bits = None
            group = None
            for grp in (q.get("config_groups") or {}).values():
                w = (grp or {}).get("weights") or {}
                bits = bits or w.get("num_bits")
                group = group or w.get("group_size")
            return QuantScheme(method, bits, group, {"format": q.get("format")})
        if method == "fp8":
            block = q.get("weight_block_size")
            return QuantScheme(method, 8, None, {"weight_block_size": block, "fmt": q.get("fmt")})
        if method == "mxfp4":
            return QuantScheme(method, 4, 32, {})
        bits = q.get("bits") or q.get("w_bit") or q.get("num_bits")
        group = q.get("group_size") or q.get("q_group_size")
        return QuantScheme(method, bits, group, {k: q[k] for k in ("version", "desc_act", "zero_point") if k in q})
    if any(t.name.endswith(".qweight") for t in entries):
        return QuantScheme("gptq-or-awq (no quantization_config)", 4, None)
    if any(t.name.endswith("_blocks") and t.dtype == "U8" for t in entries):
        return QuantScheme("mxfp4", 4, 32)
    if "F8_E4M3" in names_dtypes and any(t.name.endswith(("weight_scale_inv", "weight_scale")) for t in entries):
        return QuantScheme("fp8", 8, None)
    return None


def _itemsize(dtype: str) -> int:
    from .dtypes import dtype_bits

    return (dtype_bits(dtype) or 8) // 8 or 1


def tensor_role(t: TensorEntry, scheme: QuantScheme | None, names: set[str]) -> tuple[str, int]:
    """(role, logical parameter count) of one stored tensor."""
    name = t.name
    if scheme is None:
        return "param", t.numel
    method = scheme.method
    if name.endswith(".quant_state.bitsandbytes__nf4") or name.endswith(".quant_state.bitsandbytes__fp4") or ".quant_state." in name:
        return "quant_overhead", 0
    if name.endswith(_OVERHEAD_SUFFIXES) and t.dtype not in ("BF16", "F16", "F32") or name.endswith(_OVERHEAD_SUFFIXES) and _is_scale_companion(name, names):
        return "quant_overhead", 0
    if t.dtype == "F8_E8M0":
        return "quant_overhead", 0
    if name.endswith(".qweight"):
        bits = scheme.bits or 4
        return "quantized", (t.numel * 32) // bits
    if name.endswith(".weight_packed"):
        bits = scheme.bits or 4
        return "quantized", (t.numel * _itemsize(t.dtype) * 8) // bits
    if name.endswith("_blocks") and t.dtype == "U8":
        return "quantized", t.numel * 2
    if method == "bitsandbytes-4bit" and name.endswith(".weight") and (name + ".absmax") in names:
        # Two 4-bit codes per byte of storage (quant_storage may be wider than a byte).
        return "quantized", t.numel * _itemsize(t.dtype) * 2
    if method == "bitsandbytes-8bit" and t.dtype == "I8" and (name[: -len("weight")] + "SCB") in names:
        return "quantized", t.numel
    if t.dtype.startswith("F8_") and (name + "_scale_inv" in names or name + "_scale" in names or name.endswith(".weight")):
        return "quantized", t.numel
    return "param", t.numel


def _is_scale_companion(name: str, names: set[str]) -> bool:
    """A 16/32-bit tensor is bookkeeping only when it sits beside the weight it scales (AWQ scales are F16)."""
    stem = name.rsplit(".", 1)[0]
    base = stem
    for candidate in (stem + ".qweight", stem + ".weight", stem + ".weight_packed", name.replace("_scales", "_blocks")):
        if candidate in names:
            return True
    return base + ".weight" in names and name.endswith((".weight_scale", ".weight_scale_inv", ".input_scale", ".weight_zero_point", ".weight_global_scale", ".SCB", ".weight_shape", ".weight_g_idx"))
