"""llama.cpp's KV cache for a GGUF model: K and V cells per layer in the cache type, the context padded to 256 cells;
iSWA models' sliding layers keep a window-sized cache (llama.cpp, src/llama-kv-cache.cpp: llama_kv_cache;
src/llama-kv-cache-iswa.cpp: llama_kv_cache_iswa)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hfmem.errors import UsageError
from hfmem.gguf.ggml import block_of
from hfmem.units import cdiv

# Sliding-window layer patterns llama.cpp hard-codes per architecture (llama.cpp, src/llama-model.cpp:
# set_swa_pattern): every n-th layer is full attention, the others use the window.
_SWA_PATTERN = {"gemma2": 2, "gemma3": 6, "gemma3n": 5, "cohere2": 4, "gpt-oss": 2, "llama4": 4}
_N_UBATCH = 512  # llama.cpp's default physical batch size (n_ubatch)
_PAD = 256  # llama.cpp pads the number of KV cells to a multiple of 256
# --kv-dtype spellings -> llama.cpp cache types (auto = llama.cpp's default f16).
LLAMA_CPP_CACHE_TYPES = {"auto": "f16", "fp16": "f16", "bf16": "bf16", "fp32": "f32", "q8_0": "q8_0", "q4_0": "q4_0"}
# The cache types gguf_kv accepts (block sizes from hfmem.gguf.ggml).
KV_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1")


def _pad(n: int, to: int = _PAD) -> int:
    return cdiv(n, to) * to


@dataclass
class GGUFKV:
    context: int
    batch: int
    dtype: str
    cells: int
    bytes_per_token: int
    constant_bytes: int
    total_bytes: int
    by_layer_type: dict[str, dict[str, int]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": "llama.cpp", "dtype": self.dtype, "context": self.context, "batch": self.batch,
            "cells": self.cells, "bytes_per_token": self.bytes_per_token, "constant_bytes": self.constant_bytes,
            "total_bytes": self.total_bytes, "by_layer_type": self.by_layer_type,
        }  # fmt: skip


def gguf_kv(arch: dict[str, Any], context: int, batch: int = 1, cache_type: str = "f16") -> GGUFKV:
    """KV cache of `batch` sequences of `context` tokens, from architecture_from_metadata's facts."""
    if cache_type not in KV_TYPES:
        raise UsageError(f"unknown llama.cpp cache type {cache_type!r}; use one of {', '.join(KV_TYPES)}")
    block, size = block_of(cache_type)
    layers = int(arch["num_layers"] or 0)
    kv_heads = arch["num_kv_heads"]
    per_layer_heads = kv_heads if isinstance(kv_heads, list) else [kv_heads] * layers
    k_len, v_len = int(arch["key_length"] or 0), int(arch["value_length"] or 0)
    window = arch.get("sliding_window")
    pattern = _SWA_PATTERN.get(arch["architecture"]) if window else None
    cells = _pad(context)
    swa_cells = min(cells, _pad(int(window) * batch + _N_UBATCH)) if pattern and window else cells
    by_type: dict[str, dict[str, int]] = {}
    per_token = constant = total = 0
    for i, n_kv in enumerate(per_layer_heads):
        if not n_kv:
            continue  # attention-free / recurrent layers keep no KV
        values = int(n_kv) * (k_len + v_len)
        if values % block:
            raise UsageError(f"cache type {cache_type} needs head sizes divisible by {block}")
        cell_bytes = values // block * size
        is_swa = pattern is not None and (i + 1) % pattern != 0
        kind = "sliding_attention" if is_swa else "full_attention"
        n_cells = swa_cells if is_swa else cells
        entry = by_type.setdefault(kind, {"layers": 0, "tokens": n_cells, "bytes": 0})
        entry["layers"] += 1
        if is_swa and swa_cells < cells:
            constant += cell_bytes * n_cells
            layer_total = cell_bytes * n_cells  # the window cache is shared by all sequences (unified)
        else:
            per_token += cell_bytes
            layer_total = cell_bytes * n_cells * batch
        entry["bytes"] += layer_total
        total += layer_total
    return GGUFKV(context, batch, cache_type, cells, per_token, constant, total, by_type)
