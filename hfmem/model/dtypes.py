"""Safetensors dtypes and their storage widths.

Bit widths follow safetensors' own ``Dtype::bitsize`` (huggingface/safetensors, safetensors/src/tensor.rs).
F4 headers record the logical element count (two values per byte), so bytes = numel * bits / 8 for every dtype.
"""

from __future__ import annotations

DTYPE_BITS: dict[str, int] = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "F8_E4M3FNUZ": 8,
    "F8_E5M2FNUZ": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "I64": 64,
    "U64": 64,
    "F64": 64,
    "C64": 64,
}

def dtype_bits(dtype: str) -> int | None:
    """Bits per element, or None for a dtype this version does not know (counted, bytes flagged)."""
    return DTYPE_BITS.get(dtype)
