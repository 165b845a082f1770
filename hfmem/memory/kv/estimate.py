"""The KV cache estimate: options (engines, KV dtypes), the result record, and ``estimate_kv`` / ``kv_section``.

Exact integer bytes for every attention kind, as stored by vLLM (paged blocks, ``vllm.py``) or by transformers
(DynamicCache, ``dynamic_cache.py``); the per-layer facts both read are in ``layers.py``. Derivations: docs/kv.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from hfmem.errors import UsageError
from hfmem.memory.kv.layers import (
    _BITS,
    _ST_TO_SHORT,
    GGML_KV_DTYPES,
    MTP_SLIDING_TYPES,
    _int,
    _Layer,
    _model_dtype,
    describe_layers,
    fp8_ds_mla,
    ggml_block,
    index_bytes_per_token,
)
from hfmem.memory.kv.options import (  # noqa: F401 (re-exported)
    ENGINES,
    KV_DTYPE_ALIASES,
    KV_DTYPES,
    SAFETENSORS_KV_DTYPES,
    SPECULATIVE,
    VLLM_ONLY_KV_DTYPES,
)
from hfmem.memory.kv.vllm_dtypes import (
    NVFP4,
    PER_TOKEN_HEAD,
    TURBOQUANT,
    TURBOQUANT_BOUNDARY,
    VLLM_NAME,
    boundary_layers,
    is_vllm_quantized,
    per_head_formula,
)
from hfmem.memory.vllm_versions import default_block_size
from hfmem.model.architecture import Architecture

if TYPE_CHECKING:
    pass


# The words of a warning that the engine refuses the configuration; the plan lifts such a warning into its notes and
# the report's warnings, since a fit verdict holds only if the engine starts.
DOES_NOT_START = "does not start this"
# where whether vLLM starts depends on a compute capability hfmem does not have (kv/vllm.py): lifted beside the verdict
# like a refusal, since the verdict cannot say it
GPU_NOT_CHECKED = "not a CUDA GPU hfmem knows"

@dataclass
class KVCacheEstimate:
    """One engine's KV cache at one context: exact bytes, per layer type, and how they were computed."""

    engine: str
    dtype: str
    context: int
    batch: int
    bytes_per_token: int
    constant_bytes: int
    total_bytes: int
    by_layer_type: dict[str, dict[str, int]]
    tp: int = 1
    block_size: int | None = None
    page_reserved_total_bytes: int | None = None
    bytes_per_block: int | None = None  # vLLM: one pool block across all layers (num_blocks = available // this)
    blocks_per_request: int | None = None  # vLLM: blocks one request of `context` tokens needs (concurrency divisor)
    # vLLM 0.20-0.26's concurrency divisor where it differs from blocks_per_request (DeepSeek-V4 only): that
    # release's get_max_concurrency_for_kv_cache_config charges every group's pages at its own page bytes and divides
    # by the first group's page bytes, where 0.27 on sums the groups' pages; None: the same as blocks_per_request
    blocks_per_request_before_027: int | None = None
    kv_groups: int = 1  # vLLM: KV cache groups (kv_cache_utils.py get_kv_cache_groups); the older token log divides by it
    # ... and multiplies by the smallest group block size (DeepSeek-V4's state groups: 4; None: block_size)
    smallest_group_block: int | None = None
    # vLLM: bytes its start-up check asks for ONE request of `context` tokens in the release planned; below the
    # per-request need up to 0.18 for models with several KV cache groups (kv/vllm.py STARTUP_CHECK_*), above it
    # for cross attention from 0.11 (CROSS_CHARGES_BATCHED_TOKENS_FROM), else equal to it
    startup_check_bytes: int | None = None
    total_is: str = ""
    bookkeeping_bytes: int = 0
    storage_bytes: dict[str, int] | None = None
    encoder_len: int | None = None
    formulas: dict[str, str] = field(default_factory=dict)
    assumptions: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "engine": self.engine,
            "dtype": self.dtype,
            "context": self.context,
            "batch": self.batch,
            "bytes_per_token": self.bytes_per_token,
            "constant_bytes": self.constant_bytes,
            "total_bytes": self.total_bytes,
            "by_layer_type": {k: dict(v) for k, v in self.by_layer_type.items()},
            "tp": self.tp,
            "per_gpu": self.tp > 1,
            "total_is": self.total_is,
        }
        if self.engine == "vllm":
            out["block_size"] = self.block_size
            out["page_reserved_total_bytes"] = self.page_reserved_total_bytes
            out["bytes_per_block"] = self.bytes_per_block
            out["blocks_per_request"] = self.blocks_per_request
            out["startup_check_bytes"] = self.startup_check_bytes
            if self.blocks_per_request_before_027 is not None:
                out["blocks_per_request_before_027"] = self.blocks_per_request_before_027
        else:
            out["bookkeeping_bytes"] = self.bookkeeping_bytes
            out["storage_bytes"] = dict(self.storage_bytes or {})
        if self.encoder_len is not None:
            out["encoder_len"] = self.encoder_len
        out["formulas"] = dict(self.formulas)
        out["assumptions"] = list(self.assumptions)
        out["warnings"] = list(self.warnings)
        return out


def _resolve_dtype(arch: Architecture, kv_dtype: str, engine: str, assumptions: list[str], weights_dtype: str | None) -> str:
    if kv_dtype not in KV_DTYPES:
        raise UsageError(f"--kv-dtype must be one of {', '.join(KV_DTYPES)}, got {kv_dtype!r}")
    kv_dtype = KV_DTYPE_ALIASES.get(kv_dtype, kv_dtype)
    if kv_dtype not in SAFETENSORS_KV_DTYPES:
        raise UsageError(f"--kv-dtype {kv_dtype} is a llama.cpp cache type, for GGUF models only; the {engine} "
                         f"estimate takes {', '.join(SAFETENSORS_KV_DTYPES)} (or {', '.join(KV_DTYPE_ALIASES)})")
    if kv_dtype == "auto":
        return _model_dtype(arch, engine, assumptions, weights_dtype)
    if engine == "vllm" and kv_dtype in GGML_KV_DTYPES:
        assumptions.append(f"vLLM has no {kv_dtype} KV cache; bytes assume its storage layout regardless")
    if engine == "vllm" and kv_dtype in PER_TOKEN_HEAD:
        assumptions.append(f"{kv_dtype} = vLLM's {VLLM_NAME[kv_dtype]}"
                           + (", two values per byte" if kv_dtype == "int4" else "")
                           + ": adds fp32 K and V scales per token per head (TRITON_ATTN)")
    if engine == "vllm" and kv_dtype in TURBOQUANT:
        assumptions.append(f"{kv_dtype}: keys and values packed in one slot per head (TURBOQUANT backend; the first "
                           f"and last {TURBOQUANT_BOUNDARY} layers keep the model dtype)")
    if engine == "vllm" and kv_dtype in NVFP4:
        assumptions.append(f"{kv_dtype}: two fp4 values per byte and an fp8 scale per 16 values, K and V rows apart "
                           "(FLASHINFER, on GPUs whose FlashInfer runs NVFP4 attention)")
    if engine == "transformers" and kv_dtype in VLLM_ONLY_KV_DTYPES:
        raise UsageError(f"--kv-dtype {kv_dtype} is a vLLM cache dtype; transformers' DynamicCache has none "
                         "(use --engine vllm)")
    if engine == "transformers" and kv_dtype not in ("bf16", "fp16", "fp32"):
        assumptions.append(
            f"DynamicCache stores the model dtype; {kv_dtype} assumes a quantized cache with no scale/zero-point "
            "or full-precision residual overhead"
        )
    ggml = ggml_block(kv_dtype)
    if ggml is not None:
        per, size = ggml
        assumptions.append(f"{kv_dtype}: llama.cpp blocks of {per} values in {size} bytes per K and V row")
    return kv_dtype


def _elem(dtype: str) -> str:
    ggml = ggml_block(dtype)
    if ggml is not None:
        per, size = ggml
        return f"{size}/{per} B"
    bits = _BITS[dtype]
    return f"{bits // 8} B" if bits % 8 == 0 else f"{bits}/8 B"


def _formulas(layers: list[_Layer], dtype: str, engine: str, context: int, mbt: int, bs: int,
              release: tuple[int, int] | None = None) -> dict[str, str]:
    """How each layer type's bytes were computed, in words a reader can redo by hand (per sequence); release: the
    vLLM release whose page rules apply to its quantized dtypes."""
    groups: dict[str, dict[tuple, int]] = {}
    for l in layers:
        if l.label in ("kv_shared", "no_cache"):
            continue
        key = (l.attn, l.kv_heads, l.dk, l.dv, l.window, tuple((s.name, s.hf_elements, s.hf_dtype, s.vllm_elements,
                                                                   s.vllm_dtype) for s in l.states),
               _index_formula(l, dtype, engine), l.kv_dtype or dtype)
        groups.setdefault(l.label, {}).setdefault(key, 0)
        groups[l.label][key] += 1
    out: dict[str, str] = {}
    for label, shapes in groups.items():
        parts = []
        for (attn, heads, dk, dv, window, states, index, layer_dtype), n in shapes.items():
            bits = []
            if layer_dtype != dtype:  # TurboQuant's boundary layers keep the model dtype
                bits.append(f"{n} x {heads} KV heads x ({dk} + {dv}) x {_elem(layer_dtype)}{index} per token "
                            "(kept at the model dtype)")
            elif attn and engine == "vllm" and is_vllm_quantized(dtype):
                bits.append(f"{n} x {heads} KV heads x {per_head_formula(dtype, attn, dk, dv, release)}{index} per token")
            elif attn == "mla" and engine == "vllm" and dtype == "fp8" and "fp8_ds_mla" in index:
                bits.append(f"{n} x fp8_ds_mla ({dk} fp8 + {dk // 128} x 4 B scales + {dv} x 2 B rope = "
                            f"{dk + dk // 128 * 4 + dv * 2} B){index.replace('fp8_ds_mla', '')} per token")
            elif attn == "mla":
                bits.append(f"{n} x (kv_lora_rank {dk} + qk_rope_head_dim {dv}) x {_elem(dtype)}{index} per token")
            elif attn:
                bits.append(f"{n} x {heads} KV heads x ({dk} + {dv}) x {_elem(dtype)}{index} per token")
            if attn in ("sliding", "chunked"):
                if engine == "transformers":
                    bits.append(f"x min(context, {window} - 1) tokens")
                elif attn == "sliding":
                    bits.append(f"x (cdiv(min({window} - 1 + {mbt}, context), {bs}) + 1) blocks of {bs}")
                else:
                    bits.append(f"x cdiv(min({window} + {mbt}, context), {bs}) blocks of {bs}")
            elif attn == "cross":
                bits.append(f"x {window} encoder tokens" + (f" (rounded to blocks of {bs})" if engine == "vllm" else ""))
            elif attn and engine == "vllm":
                bits.append(f"x cdiv(context, {bs}) blocks of {bs}")
            elif attn:
                bits.append("x context tokens")
            if states:
                desc = []
                for name, hf_el, hf_dt, v_el, v_dt in states:
                    el, dt = (hf_el, hf_dt) if engine == "transformers" else (v_el, v_dt)
                    desc.append(f"{name} {el:,} x {_elem(dt)}")
                bits.append(("+ " if attn else "") + f"{n} x state ({' + '.join(desc)}) per sequence")
            parts.append(" ".join(bits))
        out[label] = "; ".join(parts)
    return out


def _index_formula(l: _Layer, dtype: str, engine: str) -> str:
    """The index-key part of a sparse-attention layer's formula (" + ..."), "" for other layers; "fp8_ds_mla"
    marks vLLM's packed fp8 latent layout."""
    text = "fp8_ds_mla" if engine == "vllm" and fp8_ds_mla(l, dtype) else ""
    if not l.index_dim:
        return text
    per = index_bytes_per_token(l, dtype, engine)
    if engine == "vllm" and l.index_kind == "dsa":
        return text + f" + indexer key ({l.index_dim} fp8 + {l.index_dim // 128} x 4 B scales = {per} B)"
    return text + f" + index key {l.index_dim} x {_elem(dtype)}"


def _compressed_formulas(layers: list[_Layer], dtype: str) -> dict[str, str]:
    """DeepSeek-V4 CSA/HCA layers (compressed.py) under transformers, per sequence (vLLM's formulas come with its
    estimate: vllm_deepseek_v4.py)."""
    out: dict[str, str] = {}
    for label in dict.fromkeys(l.label for l in layers if l.compressed is not None):
        group = [l for l in layers if l.label == label]
        c, n, first = group[0].compressed, len(group), group[0]
        assert c is not None
        entry = " + ".join(str(w) for w in c.widths)
        rows = f"{n} x ({entry}) x {_elem(dtype)} per entry, one entry per {c.rate} tokens"
        extra = (f"; buffers 2 x (context mod {c.rate}) x {c.buffer_factor} x ({entry}) x {_elem(dtype)}"
                 + (f"; overlap {c.rate} x ({entry}) x ({_elem(dtype)} + 4 B)" if c.overlap else ""))
        out[label] = (f"{n} x window min(context, {first.window} - 1) x {first.dk} x {_elem(dtype)} (K = V once)"
                      f" + {rows}{extra}")
    return out


def _default_encoder_len(arch: Architecture) -> int | None:
    cfg = arch.text_config or {}
    for key in ("max_source_positions", "max_encoder_position_embeddings", "n_positions", "max_position_embeddings"):
        v = _int(cfg.get(key))
        if v:
            return v
    return arch.max_position_embeddings


@dataclass
class KVLayout:
    """What an estimate reads of the model once its engine, KV dtype and TP size are fixed: the per-layer cache facts
    and the notes about them. Estimates at a context are arithmetic on it, so a planner asking dozens of contexts
    (every catalog GPU's longest context and concurrency) describes the layers once."""

    arch: Architecture
    engine: str
    dtype: str
    tp: int
    encoder_len: int | None
    layers: list[_Layer]
    assumptions: list[str]
    warnings: list[str]
    memo: dict[Any, Any] = field(default_factory=dict)  # context-free facts of the engine path (vllm.py, formulas)


def kv_layout(
    arch: Architecture,
    kv_dtype: str = "auto",
    engine: str = "vllm",
    encoder_len: int | None = None,
    tp: int = 1,
    weights_dtype: str | None = None,
    mtp_layers: int = 0,
) -> KVLayout:
    """The per-layer cache facts :func:`estimate_kv` reads (arguments as there)."""
    if engine not in ENGINES:
        raise UsageError(f"--engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    _check_positive("tp", tp)
    assumptions: list[str] = []
    warnings: list[str] = []
    dtype = _resolve_dtype(arch, kv_dtype, engine, assumptions, weights_dtype)
    if arch.is_encoder_decoder and encoder_len is None:
        encoder_len = _default_encoder_len(arch)
        if encoder_len is None:
            raise UsageError("encoder-decoder model without a maximum source length: give --encoder-len")
    layers = describe_layers(arch, engine, tp, encoder_len, assumptions, warnings, weights_dtype)
    if engine == "vllm" and is_vllm_quantized(dtype):
        _check_quantized_layers(layers, dtype, arch)
    if mtp_layers:
        layers = layers + mtp_cache_layers(layers, mtp_layers, assumptions, engine,
                                           sliding=arch.model_type in MTP_SLIDING_TYPES)
    if engine == "vllm" and dtype in TURBOQUANT and not any(l.states for l in layers):
        # the boundary layers of a dense model (by index; MTP layers come after them); hybrids keep none (0.21 on)
        kept = boundary_layers(arch.num_layers)
        model = _model_dtype(arch, engine, [], weights_dtype)
        layers = [replace(l, kv_dtype=model, label="boundary_attention") if l.index in kept else l
                  for l in layers]
    if arch.is_encoder_decoder:
        assumptions.append(f"cross-attention cache sized by an encoder input of {encoder_len:,} tokens (--encoder-len)")
    if tp > 1:
        assumptions.append(f"per-GPU bytes at tensor parallel size {tp} (KV heads max(1, n_kv // tp); MLA not split)")
    return KVLayout(arch, engine, dtype, tp, encoder_len, layers, assumptions, warnings)


def _check_quantized_layers(layers: list[_Layer], dtype: str, arch: Architecture) -> None:
    """The layer kinds vLLM's quantized dtypes can meet here: full, sliding-window and cross attention (per-token-head
    also chunked); which of them a release refuses (no attention backend takes them) or hfmem has not recorded is
    decided with the release (vllm.py _backend_refusal, _check_started_layers). Any other layer is a usage error, said
    once per kind. No MLA attention backend takes them (the MLA backends' supported_kv_cache_dtypes, 0.20-0.34: auto,
    fp16, bf16, fp8), so MLA is refused too."""
    allowed = {"full", "sliding", "cross"} | ({"chunked"} if dtype in PER_TOKEN_HEAD else set())
    other: dict[str, int] = {}
    for l in layers:
        if l.attn and (l.attn not in allowed or l.compressed is not None or (l.index_dim and l.index_kind != "dsa")):
            other[l.label] = other.get(l.label, 0) + 1
    mla = sum(1 for l in layers if l.attn == "mla")
    if mla:
        raise UsageError(f"--kv-dtype {dtype}: vLLM has no MLA attention backend that takes {VLLM_NAME[dtype]} "
                         f"(this model's {mla} MLA layers; the MLA backends take auto, fp16, bf16 and fp8)")
    if other:
        kinds = ", ".join(f"{n} {label} layer{'s' if n > 1 else ''}" for label, n in other.items())
        raise UsageError(f"--kv-dtype {dtype}: hfmem does not model vLLM's {VLLM_NAME[dtype]} cache for this model's "
                         f"{kinds} (modelled: {', '.join(sorted(allowed))} attention layers)")


def _check_positive(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{name} must be a positive integer, got {value!r}")


def estimate_kv(
    arch: Architecture,
    context: int,
    batch: int = 1,
    kv_dtype: str = "auto",
    engine: str = "vllm",
    encoder_len: int | None = None,
    tp: int = 1,
    block_size: int | None = None,
    max_batched_tokens: int = 8192,
    weights_dtype: str | None = None,
    mtp_layers: int = 0,
    prefix_caching: bool | None = None,
    vllm_release: tuple[int, int] | None = None,
    gpu_sm: int | None = 90,
    speculative_tokens: int = 0,
) -> KVCacheEstimate:
    """KV cache for `batch` sequences of `context` tokens under `engine`; exact integer bytes (per GPU if tp > 1).

    weights_dtype: the stored tensors' dominant float dtype ("BF16", ...), used when config.json has no dtype.
    mtp_layers: multi-token-prediction layers run for MTP speculative decoding, each with the cache of a full
    attention layer (vLLM builds them as decoder layers: models/deepseek_mtp.py, DeepSeekMultiTokenPredictorLayer).
    prefix_caching: vLLM's automatic prefix caching (None: the release's default, on for hybrid models from 0.26):
    state layers of hybrid models then reserve two pages per request per group instead of one (a page per block of
    context for the Mamba/Mamba2 families up to 0.27); it also decides their block size. vllm_release: the vLLM
    release (major, minor) whose rules apply where they changed (a window's admission from 0.26, DeepSeek-V4's pool
    layout, hybrid models' prefix caching, block alignment and state pages); None: the newest read. gpu_sm: the GPU's
    compute capability x 10 (90: Hopper, the default without a GPU; None: not known), which decides vLLM's GDN and
    KDA prefill kernels and MLA backend. speculative_tokens: vLLM's num_speculative_tokens (0: no speculative
    decoding): state layers keep a page per draft token per request."""
    if engine not in ENGINES:
        raise UsageError(f"--engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if block_size is None:  # vLLM's default for the release (vllm_versions.default_block_size)
        block_size = default_block_size(vllm_release) if engine == "vllm" else 16
    for name, value in (("context", context), ("batch", batch), ("tp", tp), ("block_size", block_size),
                        ("max_batched_tokens", max_batched_tokens)):
        _check_positive(name, value)
    layout = kv_layout(arch, kv_dtype, engine, encoder_len, tp, weights_dtype, mtp_layers)
    return estimate_at(layout, context, batch, block_size, max_batched_tokens, prefix_caching, vllm_release, gpu_sm,
                       speculative_tokens)


def position_limit(arch: Architecture) -> int | None:
    """The most positions a request may take: an encoder-decoder's decoder is capped by max_target_positions
    (Whisper: 448), every other model by max_position_embeddings; None: not given."""
    target = _int((arch.text_config or {}).get("max_target_positions"))
    return target if target is not None and target > 0 else arch.max_position_embeddings


def estimate_at(layout: KVLayout, context: int, batch: int = 1, block_size: int = 16, max_batched_tokens: int = 8192,
                prefix_caching: bool | None = None, vllm_release: tuple[int, int] | None = None,
                gpu_sm: int | None = 90, speculative_tokens: int = 0) -> KVCacheEstimate:
    """:func:`estimate_kv` at one context and batch, from the layout it describes the layers with."""
    for name, value in (("context", context), ("batch", batch), ("block_size", block_size),
                        ("max_batched_tokens", max_batched_tokens)):
        _check_positive(name, value)
    if speculative_tokens < 0:
        raise UsageError(f"num_speculative_tokens must be 0 or more, got {speculative_tokens}")
    arch, engine, layers, dtype = layout.arch, layout.engine, layout.layers, layout.dtype
    warnings = list(layout.warnings)
    limit = position_limit(arch)
    if limit and context > limit:
        warnings.append(f"context {context:,} exceeds the model's {limit:,} positions (vLLM refuses it unless overridden)")
    # The engines build KVCacheEstimate (defined here), so they are imported when called.
    if engine == "transformers":
        from hfmem.memory.kv.dynamic_cache import _transformers

        est = _transformers(layers, dtype, context, batch)
    else:
        from hfmem.memory.kv.vllm import _vllm

        est = _vllm(arch, layers, dtype, context, batch, block_size, max_batched_tokens, [], warnings,
                    prefix_caching, layout.memo, vllm_release, gpu_sm, speculative_tokens)
        if arch.is_encoder_decoder and arch.model_type not in ("whisper",):
            warnings.append(f"vLLM V1 may not serve {arch.model_type} (encoder-decoder support is limited to a few models)")
    est.tp, est.encoder_len = layout.tp, layout.encoder_len if arch.is_encoder_decoder else None
    if not est.formulas:  # an engine path with its own layout (vLLM DeepSeek-V4) gives its formulas itself
        admitted = max_batched_tokens
        if engine == "vllm":
            from hfmem.memory.kv.vllm import admission_tokens

            admitted = admission_tokens(max_batched_tokens, vllm_release)
        page_release = vllm_release if engine == "vllm" and is_vllm_quantized(dtype) else None
        key = ("formulas", admitted, est.block_size or block_size, page_release)
        if key not in layout.memo:  # the text depends on the layers, the admitted tokens and the block size only
            formulas = _formulas(layers, dtype, engine, context, admitted, est.block_size or block_size, page_release)
            if engine == "transformers":
                formulas.update(_compressed_formulas(layers, dtype))
            layout.memo[key] = formulas
        est.formulas = dict(layout.memo[key])
    est.assumptions = list(dict.fromkeys(layout.assumptions + est.assumptions))  # per-layer notes (e.g. replicated KV heads) once
    est.warnings = warnings + est.warnings
    return est


def stored_float_dtype(by_dtype: dict[str, int] | None) -> str | None:
    """The dominant floating dtype of the stored tensors (Parameters.by_dtype), e.g. "BF16"."""
    floats = {k: v for k, v in (by_dtype or {}).items() if k in _ST_TO_SHORT}
    return max(floats, key=lambda k: floats[k]) if floats else None


def mtp_cache_layers(layers: list[_Layer], count: int, assumptions: list[str], engine: str = "vllm",
                     sliding: bool = False) -> list[_Layer]:
    """``count`` extra layers caching like the model's last full-attention (or MLA) layer, labelled "mtp"; sliding:
    like its last sliding-window layer (MTP_SLIDING_TYPES)."""
    import dataclasses

    window = next((l for l in reversed(layers) if l.attn == "sliding"), None) if sliding else None
    if window is not None:
        assumptions.append(f"--speculative mtp: {count} multi-token-prediction layer(s) cache like a sliding-window "
                           "layer (vLLM's MTP layer of this model uses the sliding-window attention)")
        return [dataclasses.replace(window, index=len(layers) + i, label="mtp", states=[]) for i in range(count)]
    compressed = next((l for l in layers if l.compressed is not None), None)
    if compressed is not None and engine == "vllm":
        # vllm, models/deepseek_v4.py: DeepseekV4Attention.__init__: layers past num_hidden_layers (MTP) get compress
        # ratio 1, so an MTP layer registers only the sliding-window cache
        assumptions.append(f"--speculative mtp: {count} multi-token-prediction layer(s), each a DeepSeek-V4 "
                           "sliding-window cache only (vLLM gives MTP layers compress ratio 1)")
        return [dataclasses.replace(compressed, index=len(layers) + i, label="mtp", compressed=None, states=[])
                for i in range(count)]
    # An MTP module is a whole decoder layer: in DSA models it has its own indexer (GLM-5.2's MTP weights hold one),
    # so a layer that keeps index keys is the template when the model has any.
    attention = [l for l in layers if l.attn in ("full", "mla")]
    template = next((l for l in reversed(attention) if l.index_kind), attention[-1] if attention else None)
    if template is None:
        assumptions.append(f"{count} MTP layer(s): no full-attention layer to copy; their cache is not counted")
        return []
    assumptions.append(f"--speculative mtp: {count} multi-token-prediction layer(s) cache like a {template.label} layer")
    return [dataclasses.replace(template, index=len(layers) + i, label="mtp", states=[]) for i in range(count)]
