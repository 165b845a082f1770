"""Exact KV-cache bytes for every attention kind, as stored by vLLM (paged blocks), transformers (DynamicCache) and
llama.cpp (GGUF models). Derivations and sources: docs/kv.md."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# Resolved lazily: the CLI imports the option choices (options.py) at start-up; the estimators load when used.
_EXPORTS = {
    "parse_context": "context", "KVCacheEstimate": "estimate", "estimate_kv": "estimate",
    "stored_float_dtype": "estimate", "describe_layers": "layers", "row_bytes": "layers", "GGUFKV": "llamacpp",
    "LLAMA_CPP_CACHE_TYPES": "llamacpp", "gguf_kv": "llamacpp", "ENGINES": "options", "KV_DTYPES": "options",
    "SPECULATIVE": "options",
}  # fmt: skip

__all__ = [
    "ENGINES", "GGUFKV", "KVCacheEstimate", "KV_DTYPES", "LLAMA_CPP_CACHE_TYPES", "SPECULATIVE", "cdiv",
    "describe_layers", "estimate_kv", "gguf_kv", "parse_context", "row_bytes", "stored_float_dtype",
]  # fmt: skip

if TYPE_CHECKING:
    from hfmem.memory.kv.context import parse_context
    from hfmem.memory.kv.estimate import KVCacheEstimate, estimate_kv, stored_float_dtype
    from hfmem.memory.kv.layers import describe_layers, row_bytes
    from hfmem.memory.kv.llamacpp import GGUFKV, LLAMA_CPP_CACHE_TYPES, gguf_kv
    from hfmem.memory.kv.options import ENGINES, KV_DTYPES, SPECULATIVE

from hfmem.units import cdiv  # noqa: E402  (tiny; kept eager for callers that take it from here)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'hfmem.memory.kv' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"hfmem.memory.kv.{module}"), name)
