"""The KV options' choices (engines, cache dtypes, speculative methods), apart from the estimators so the CLI can
offer them at start-up without importing the architecture and estimation code."""

from __future__ import annotations

from hfmem.memory.kv.llamacpp import CACHE_TYPE_NAMES

ENGINES = ("vllm", "transformers")
# --speculative: None (no speculative decoding) or "mtp" (vLLM's speculative method that runs the checkpoint's own
# multi-token-prediction layers, weights and cache: vllm/config/speculative.py, SpeculativeConfig.method).
SPECULATIVE = (None, "mtp")
# The dtypes vLLM / transformers estimates take (q8_0 / q4_0: llama.cpp's blocks, as an assumption).
SAFETENSORS_KV_DTYPES = ("auto", "bf16", "fp16", "fp32", "fp8", "int8", "int4", "q8_0", "q4_0")
# llama.cpp's own cache type names (GGUF models) come after them; f16 / f32 are fp16 / fp32 for the other engines.
KV_DTYPES = tuple(dict.fromkeys(SAFETENSORS_KV_DTYPES + CACHE_TYPE_NAMES))
