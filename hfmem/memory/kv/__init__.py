"""Exact KV-cache bytes for every attention kind, as stored by vLLM (paged blocks), transformers (DynamicCache) and
llama.cpp (GGUF models). Derivations and sources: docs/kv.md."""

from hfmem.memory.kv.context import parse_context
from hfmem.memory.kv.estimate import ENGINES, KV_DTYPES, SPECULATIVE, KVCacheEstimate, estimate_kv, stored_float_dtype
from hfmem.memory.kv.layers import describe_layers, row_bytes
from hfmem.memory.kv.llamacpp import GGUFKV, LLAMA_CPP_CACHE_TYPES, gguf_kv
from hfmem.units import cdiv

__all__ = [
    "ENGINES", "GGUFKV", "KVCacheEstimate", "KV_DTYPES", "LLAMA_CPP_CACHE_TYPES", "SPECULATIVE", "cdiv",
    "describe_layers", "estimate_kv", "gguf_kv", "parse_context", "row_bytes", "stored_float_dtype",
]
