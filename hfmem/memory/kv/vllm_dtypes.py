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

from hfmem.memory.vllm_versions import as_compared
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
# ... and int4_per_token_head's halving in 0.25-0.27 (one byte per value, the scales kept), and TurboQuant's packing up
# to 0.27 (one byte per key and value value, no norms; TurboQuantAttentionBackend.customize_spec packs them from 0.28)
INT4_SLIDING_UNHALVED = ((0, 25), (0, 28))
TURBOQUANT_SLIDING_PACKED_FROM = (0, 28)
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


def _turboquant_unpacked(attn: str, release: tuple[int, int] | None) -> bool:
    """Whether a TurboQuant page holds one byte per key and value value, unpacked: sliding-window layers up to 0.27."""
    return attn == "sliding" and release is not None and release < TURBOQUANT_SLIDING_PACKED_FROM


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
        return heads * (dk + dv) if _turboquant_unpacked(attn, release) else heads * turboquant_slot(dtype, dk)
    assert dtype in NVFP4, dtype
    if _nvfp4_unpacked(attn, release):
        return heads * (dk + dv)
    return heads * (nvfp4_dim(dk) + nvfp4_dim(dv))


def per_head_formula(dtype: str, attn: str, dk: int, dv: int, release: tuple[int, int] | None) -> str:
    """How :func:`bytes_per_token` got one head's bytes, in words a reader can redo."""
    total = bytes_per_token(dtype, attn, 1, dk, dv, release)
    if dtype in TURBOQUANT and _turboquant_unpacked(attn, release):
        return f"({dk} + {dv}) x 1 B, unpacked (SlidingWindowSpec up to 0.27) = {total} B"
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


# Which CUDA attention backend vLLM's selector can give a layer cached in these dtypes, release by release
# (platforms/cuda.py get_valid_backends over each backend's validate_configuration; recorded from the 0.20.0-0.34.0
# wheels by scripts/record_vllm_backends.py, fixtures/vllm/backends.json.gz). A layer no backend takes stops the start
# ("No valid attention backend found"). The rules:
# - TurboQuant: only the TURBOQUANT backend takes it, which has no attention sinks, no cross-attention (DECODER only)
#   and, from 0.26 (validate_configuration's sliding-window check), no sliding window. The layers kept at the model
#   dtype are not asked.
# - The per-token-head dtypes: TRITON_ATTN takes every layer (FLASH_ATTN on SM 9.0 in 0.20-0.21).
# - NVFP4 (FLASHINFER's supports_kv_cache_dtype and head sizes; FLASH_ATTN in 0.20-0.21 on SM 9.0, whose
#   supports_kv_cache_dtype took any quantized dtype there): see _nvfp4_refusal.
TURBOQUANT_SLIDING_REFUSED_FROM = (0, 26)
FLASHINFER_512_FROM = (0, 22)


def flashinfer_heads(release: tuple[int, int] | None) -> tuple[int, ...]:
    """FlashInferBackend.get_supported_head_sizes in vLLM `release` (None: the newest read): 512 from 0.22."""
    return (64, 128, 256, 512) if as_compared(release) >= FLASHINFER_512_FROM else (64, 128, 256)
# FlashInfer's NVFP4 cache only on the SM100 family (TRTLLM attention) from 0.25; from 0.32 also on the SM 8.x, 9.0 and
# 12.x families through its FA2 path (_nvfp4_kv_on_fa2), without 64-wide heads and without sinks there
NVFP4_SM100_ONLY = ((0, 25), (0, 32))


# The releases whose model code builds these models' layers with attention sinks (read in the 0.20.0-0.34.0 wheels)
GRANITE_SINKS_FROM = (0, 29)  # granite.py / granitemoe.py granite_layer_attn_params
LAGUNA_SINKS_FROM = (0, 21)  # laguna.py, the first release with the model


def sink_kinds(model_type: str, config: dict, release: tuple[int, int] | None = None) -> set[str]:
    """The attention kinds ("full", "sliding") whose layers vLLM `release` (None: the newest read) builds with
    attention sinks (their Attention gets ``sinks``), from model_executor/models: gpt_oss.py on every layer; mimo_v2.py
    (mimo_v2_flash.py in 0.20) on the sliding-window layers when the config sets add_swa_attention_sink_bias (its
    add_full_attention_sink_bias is not read); laguna.py on the sliding-window layers when swa_attention_sink_enabled;
    granite.py and granitemoe.py, from 0.29, on every layer when attention_sinks is set or, without it, when the config
    has layer_types."""
    newest = as_compared(release)
    if model_type == "gpt_oss":
        return {"full", "sliding"}
    if model_type.startswith("mimo_v2"):
        return {"sliding"} if config.get("add_swa_attention_sink_bias") else set()
    if model_type == "laguna" and newest >= LAGUNA_SINKS_FROM:
        return {"sliding"} if config.get("swa_attention_sink_enabled") else set()
    if model_type in ("granite", "granitemoe") and newest >= GRANITE_SINKS_FROM:
        has_sink = config.get("attention_sinks", config.get("layer_types") is not None)
        return {"full", "sliding"} if has_sink else set()
    return set()


# model_executor/models/config.py Gemma4Config.verify_and_update_config: Gemma 4's sliding and global layers have
# different head sizes, and where no backend is given vLLM forces TRITON_ATTN for every layer: up to 0.23 when the
# larger head exceeds 256, from 0.24 unless FlashAttention 4 runs on the GPU (vllm_flash_attn _is_fa4_supported: the
# 9.x, 10.x and 11.x families; the wheels ship it) and the larger head is at most 512
GEMMA4_FA4_FROM = (0, 24)


def forced_backend(model_type: str, head_sizes: set[int], release: tuple[int, int] | None,
                   sm: int | None) -> str | None:
    """The attention backend vLLM `release` forces for every layer of this model, given its attention layers' head
    sizes, on a GPU of compute capability `sm` (x10; None: not known, where a GPU-dependent choice is not made), or
    None."""
    if not model_type.startswith("gemma4") or len(head_sizes) < 2:
        return None
    top = max(head_sizes)
    if release is not None and release < GEMMA4_FA4_FROM:
        return "TRITON_ATTN" if top > 256 else None
    if sm is None:
        return None
    return None if sm // 10 in (9, 10, 11) and top <= 512 else "TRITON_ATTN"


def forced_backend_refusal(dtype: str, model_type: str, head_sizes: set[int], release: tuple[int, int] | None,
                           sm: int | None) -> str | None:
    """Why the backend vLLM forces for this model (forced_backend) takes no layer in `dtype`, or None: TRITON_ATTN
    takes the per-token-head dtypes and fp8, not NVFP4 or TurboQuant ("Selected backend TRITON_ATTN is not valid for
    this configuration. Reason: ['kv_cache_dtype not supported']")."""
    if forced_backend(model_type, head_sizes, release, sm) != "TRITON_ATTN" or dtype not in (*NVFP4, *TURBOQUANT):
        return None
    why = ("the larger exceeds 256" if release is not None and release < GEMMA4_FA4_FROM
           else "FlashAttention 4 does not run on this GPU" if sm is not None and sm // 10 not in (9, 10, 11)
           else "the larger exceeds 512")
    sizes = " and ".join(map(str, sorted(head_sizes)))
    return (f"Gemma 4's head sizes {sizes} make vLLM force TRITON_ATTN for every layer ({why}; Gemma4Config), which "
            f"takes no {VLLM_NAME[dtype]}")


def gpu_decides(dtype: str, model_type: str, head_sizes: set[int], release: tuple[int, int] | None) -> bool:
    """Whether the rules above need the GPU's compute capability to say if vLLM starts this model in `dtype`: NVFP4's
    always, and TurboQuant's where the backend vLLM forces for the model depends on the GPU (Gemma 4 from 0.24)."""
    return dtype in NVFP4 or (dtype in TURBOQUANT and forced_backend(model_type, head_sizes, release, 80)
                              != forced_backend(model_type, head_sizes, release, 90))


def _nvfp4_refusal(dtype: str, release: tuple[int, int], sm: int, head: int, sink: bool, cross: bool) -> str | None:
    """backend_refusal for the NVFP4 dtypes, in the order the recorded selector refuses them."""
    family = sm // 10
    if release < (0, 22) and sm == 90:
        return None  # FLASH_ATTN takes it: its supports_kv_cache_dtype accepts any quantized dtype with FA3
    if release < (0, 21):
        return "only FlashAttention 3 (SM 9.0) takes it in 0.20"
    heads = flashinfer_heads(release)
    if cross:
        return "FlashInfer takes no cross-attention layers (attention type encoder_decoder)"
    if sm < 80:
        return f"FlashInfer needs compute capability 8.0 or newer (this GPU: {family}.{sm % 10})"
    if head not in heads:
        return f"FlashInfer takes head sizes {', '.join(map(str, heads))}, not {head}"
    sm100_only = dtype == "nvfp4_4over6" or (release >= NVFP4_SM100_ONLY[0] and (
        release < NVFP4_SM100_ONLY[1] or family not in (8, 9, 12)))
    if family != 10 and sm100_only:
        return (f"FlashInfer's {dtype} cache needs an SM100-family GPU (B200/GB200/B300: TRTLLM attention), "
                f"this one is {family}.{sm % 10}")
    if family != 10 and sink:
        return "FlashInfer takes attention sinks only on SM100-family GPUs"
    if family != 10 and head == 64 and release >= NVFP4_SM100_ONLY[1]:
        return "FlashInfer's FA2 path refuses an NVFP4 cache at head size 64 (fa2 prefill misreads it)"
    return None


def backend_refusal(dtype: str, release: tuple[int, int] | None, sm: int | None, attn: str, head: int,
                    sink: bool) -> str | None:
    """Why no CUDA attention backend of vLLM `release` (None: the newest read) takes a layer of kind `attn` (hfmem's:
    full, sliding, chunked, cross), key head size `head` and attention sinks or not, cached in `dtype`, on a GPU of
    compute capability `sm` (x10; None: not a CUDA GPU hfmem knows, where only the GPU-independent rules apply)."""
    newest = as_compared(release)
    if dtype in TURBOQUANT:
        if sink:
            return "the TURBOQUANT backend takes no attention sinks"
        if attn == "cross":
            return "the TURBOQUANT backend takes no cross-attention layers (attention type encoder_decoder)"
        if attn == "sliding" and newest >= TURBOQUANT_SLIDING_REFUSED_FROM:
            return "the TURBOQUANT backend takes no sliding-window layers"
        return None
    if dtype in NVFP4 and sm is not None:
        return _nvfp4_refusal(dtype, newest, sm, head, sink, attn == "cross")
    return None
