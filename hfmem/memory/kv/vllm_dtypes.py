"""vLLM's quantized KV cache dtypes beyond fp8 (--kv-cache-dtype): the per-token-head ones, NVFP4 and TurboQuant, the
release each arrived in, and the bytes one token costs in one attention layer, release by release.

Read in the 0.20.0-0.34.0 wheels and recorded from their own code (scripts/record_vllm_kv_dtypes.py,
fixtures/vllm/kv_dtypes.json): vllm/config/cache.py CacheDType (the choices), v1/kv_cache_interface.py
get_kv_quant_mode and the spec classes' page_size_bytes (up to 0.27), and from 0.28 the backends' customize_spec:
TRITON_ATTN for the per-token-head dtypes (v1/attention/backends/triton_attn.py, the only CUDA backend that takes
them), FLASHINFER for NVFP4 (v1/attention/backends/flashinfer.py). TurboQuant (dense models recorded by
scripts/record_vllm_turboquant.py in fixtures/vllm/turboquant.json, hybrids by record_vllm_hybrid.py --kv-dtype):
model_executor/layers/quantization/turboquant/config.py TurboQuantConfig (slot sizes, get_boundary_skip_layers),
engine/arg_utils.py (the boundary layers kept at the model dtype), platforms/interface.py
_align_heterogeneous_kv_block_size (the block size from 0.25)."""

from __future__ import annotations

from hfmem.units import cdiv

PER_TOKEN_HEAD = ("int8", "fp8_per_token_head", "int4")
NVFP4 = ("nvfp4", "nvfp4_4over6")
# TurboQuant presets: (key bits, value bits); 8-bit keys are fp8, fewer are Lloyd-Max codes plus an fp16 norm
TURBOQUANT = {"turboquant_k8v4": (8, 4), "turboquant_4bit_nc": (4, 4), "turboquant_k3v4_nc": (3, 4),
              "turboquant_3bit_nc": (3, 3)}
# hfmem's name -> vLLM's; int8 and int4 were hfmem's names before vLLM had them, and mean these on vLLM
VLLM_NAME = {"int8": "int8_per_token_head", "fp8_per_token_head": "fp8_per_token_head", "int4": "int4_per_token_head",
             **{name: name for name in (*NVFP4, *TURBOQUANT)}}
# the first release whose CacheDType offers each; an older one rejects the choice at start-up
FIRST_RELEASE = {"int8": (0, 20), "fp8_per_token_head": (0, 20), "nvfp4": (0, 20), "int4": (0, 25),
                 "nvfp4_4over6": (0, 28), **{name: (0, 20) for name in TURBOQUANT}}
# TurboQuant keeps the first and last TURBOQUANT_BOUNDARY layers of a dense model at the model dtype (at most half);
# a hybrid attention/state model keeps none, from 0.21 (0.20 refuses hybrids: NotImplementedError in arg_utils.py)
TURBOQUANT_BOUNDARY = 2
TURBOQUANT_HYBRID_FROM = (0, 21)
# from 0.25 the block size grows until one quantized page (as the first backend, FLASH_ATTN, sizes it: one byte per
# value) covers a boundary layer's page at the smallest kernel block (16)
TURBOQUANT_BLOCK_ALIGNED_FROM = (0, 25)
# SlidingWindowSpec.real_page_size_bytes ignored NVFP4's packing in 0.20 (one byte per value, no scales) ...
NVFP4_SLIDING_PACKED_FROM = (0, 21)
# ... and int4_per_token_head's halving in 0.25-0.27 (one byte per value, the scales kept)
INT4_SLIDING_UNHALVED = ((0, 25), (0, 28))
# FlashInferBackend.customize_spec asserts equal key and value head sizes from 0.28
NVFP4_EQUAL_HEADS_FROM = (0, 28)
# fp32 K and V scales per token per head (per-token-head dtypes)
_SCALES = 2 * 4


def _nvfp4_unpacked(attn: str, release: tuple[int, int] | None) -> bool:
    """Whether an NVFP4 page holds one byte per value, unscaled: sliding-window layers in 0.20."""
    return attn == "sliding" and release is not None and release < NVFP4_SLIDING_PACKED_FROM


def is_vllm_quantized(dtype: str) -> bool:
    return dtype in VLLM_NAME


def nvfp4_dim(head_size: int) -> int:
    """Bytes of one head's NVFP4 row: two fp4 values per byte plus an fp8 scale per 16 (utils/torch_utils.py
    nvfp4_kv_cache_full_dim)."""
    return head_size // 2 + head_size // 16


def turboquant_slot(dtype: str, head_size: int) -> int:
    """Bytes of one head's packed key and value (TurboQuantConfig.slot_size_aligned): fp8 keys are one byte per value,
    Lloyd-Max keys their bits plus a 2-byte norm; values their bits plus a 2-byte scale and zero; rounded up to even."""
    key_bits, value_bits = TURBOQUANT[dtype]
    key = head_size if key_bits == 8 else cdiv(head_size * key_bits, 8) + 2
    slot = key + cdiv(head_size * value_bits, 8) + 4
    return slot + slot % 2


def boundary_layers(num_layers: int) -> set[int]:
    """The layer indices TurboQuant keeps at the model dtype in a dense model (get_boundary_skip_layers)."""
    n = min(TURBOQUANT_BOUNDARY, num_layers // 2)
    return set(range(n)) | set(range(num_layers - n, num_layers))


def turboquant_block_size(block_size: int, heads: int, head_size: int, model_bytes: int,
                          release: tuple[int, int] | None) -> int:
    """The block size vLLM plans a dense TurboQuant model with, from the one it starts with."""
    if release is not None and release < TURBOQUANT_BLOCK_ALIGNED_FROM:
        return block_size
    align = max(16, block_size)
    primary = heads * 2 * head_size  # FlashAttentionBackend.customize_spec leaves the page unpacked, uint8
    kept = heads * 2 * head_size * model_bytes
    return max(block_size, align * cdiv(kept * 16, align * primary))


def _halved(dtype: str, attn: str, release: tuple[int, int] | None) -> bool:
    """Whether a per-token-head page holds two values per byte: int4, but on sliding-window layers not in 0.25-0.27."""
    return dtype == "int4" and not (attn == "sliding" and release is not None
                                    and INT4_SLIDING_UNHALVED[0] <= release < INT4_SLIDING_UNHALVED[1])


def bytes_per_token(dtype: str, attn: str, heads: int, dk: int, dv: int, release: tuple[int, int] | None) -> int:
    """Bytes one token costs in one attention layer (`attn`: hfmem's kind, "full", "sliding", "chunked" or "cross";
    no MLA backend takes these dtypes) under vLLM `release` (None: the newest read)."""
    if dtype in PER_TOKEN_HEAD:
        return heads * ((dk // 2 + dv // 2 if _halved(dtype, attn, release) else dk + dv) + _SCALES)
    if dtype in TURBOQUANT:
        return heads * turboquant_slot(dtype, dk)
    assert dtype in NVFP4, dtype
    if _nvfp4_unpacked(attn, release):
        return heads * (dk + dv)
    return heads * (nvfp4_dim(dk) + nvfp4_dim(dv))


def per_head_formula(dtype: str, attn: str, dk: int, dv: int, release: tuple[int, int] | None) -> str:
    """How :func:`bytes_per_token` got one head's bytes, in words a reader can redo."""
    total = bytes_per_token(dtype, attn, 1, dk, dv, release)
    if dtype in TURBOQUANT:
        key_bits, value_bits = TURBOQUANT[dtype]
        key = f"{dk} x 1 B" if key_bits == 8 else f"{dk} x {key_bits}/8 B + 2 B norm"
        return f"({key}) + ({dk} x {value_bits}/8 B + 4 B scale and zero), even = {total} B"
    if dtype in PER_TOKEN_HEAD:
        values = f"({dk} + {dv}) / 2 B" if _halved(dtype, attn, release) else f"({dk} + {dv}) x 1 B"
        return f"{values} + 2 x 4 B fp32 scales = {total} B"
    if _nvfp4_unpacked(attn, release):
        return f"({dk} + {dv}) x 1 B, unpacked (SlidingWindowSpec in 0.20) = {total} B"
    return f"({dk}/2 + {dk}/16) + ({dv}/2 + {dv}/16) B = {total} B"


def release_refusal(dtype: str, release: tuple[int, int] | None, hybrid: bool = False) -> str | None:
    """Why vLLM `release` rejects this KV cache dtype (for a hybrid attention/state model if `hybrid`), or None."""
    first = FIRST_RELEASE.get(dtype)
    if release is not None and first is not None and release < first:
        return f"--kv-cache-dtype {VLLM_NAME[dtype]} is a choice from {first[0]}.{first[1]}"
    if hybrid and dtype in TURBOQUANT and release is not None and release < TURBOQUANT_HYBRID_FROM:
        return "it refuses TurboQuant for hybrid attention/state models up to 0.20 (engine/arg_utils.py)"
    return None


def head_size_refusal(dtype: str, dk: int, dv: int, release: tuple[int, int] | None) -> str | None:
    """Why vLLM `release` refuses a layer of these head sizes in this dtype, or None."""
    if dtype in NVFP4 and dk != dv and (release is None or release >= NVFP4_EQUAL_HEADS_FROM):
        return (f"FlashInfer's NVFP4 cache asserts equal key and value head sizes ({dk} and {dv} here; "
                "FlashInferBackend.customize_spec)")
    return None

