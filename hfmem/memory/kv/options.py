"""The KV options' choices (engines, cache dtypes, speculative methods), apart from the estimators so the CLI can
offer them at start-up without importing the architecture and estimation code."""

from __future__ import annotations

from hfmem.memory.kv.llamacpp import CACHE_TYPE_NAMES

ENGINES = ("vllm", "transformers")
# --speculative: None (no speculative decoding) or "mtp" (vLLM's speculative method that runs the checkpoint's own
# multi-token-prediction layers, weights and cache: vllm/config/speculative.py, SpeculativeConfig.method).
SPECULATIVE = (None, "mtp")
# The dtypes vLLM / transformers estimates take (q8_0 / q4_0: llama.cpp's blocks, as an assumption; on vLLM int8 / int4
# are its int8_per_token_head / int4_per_token_head; fp8_per_token_head, nvfp4, nvfp4_4over6 and turboquant_* are
# vLLM's only).
SAFETENSORS_KV_DTYPES = ("auto", "bf16", "fp16", "fp32", "fp8", "int8", "int4", "fp8_per_token_head", "nvfp4",
                         "nvfp4_4over6", "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc",
                         "turboquant_3bit_nc", "q8_0", "q4_0")
VLLM_ONLY_KV_DTYPES = ("fp8_per_token_head", "nvfp4", "nvfp4_4over6", "turboquant_k8v4", "turboquant_4bit_nc",
                       "turboquant_k3v4_nc", "turboquant_3bit_nc")
# vLLM's own spellings of hfmem's names (--kv-cache-dtype), and llama.cpp's f16 / f32 for the other engines.
KV_DTYPE_ALIASES = {"f16": "fp16", "f32": "fp32", "float16": "fp16", "bfloat16": "bf16", "fp8_e4m3": "fp8",
                    "fp8_e5m2": "fp8", "int8_per_token_head": "int8", "int4_per_token_head": "int4"}
# llama.cpp's own cache type names (GGUF models) come after them.
KV_DTYPES = tuple(dict.fromkeys(SAFETENSORS_KV_DTYPES + tuple(KV_DTYPE_ALIASES) + CACHE_TYPE_NAMES))
