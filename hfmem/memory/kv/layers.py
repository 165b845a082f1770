"""What each layer of a model caches, independent of the engine: its attention kind, KV heads and head dims, window,
and recurrent/conv state tensors (with transformers' and vLLM's shapes and dtypes), plus the bytes of one row."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hfmem.errors import UsageError
from hfmem.gguf.ggml import block_of
from hfmem.memory.kv.compressed import Compressed, compressed_layer
from hfmem.memory.kv.vllm_dtypes import bytes_per_token as quantized_bytes_per_token
from hfmem.memory.kv.vllm_dtypes import is_vllm_quantized
from hfmem.model.architecture import Architecture
from hfmem.units import cdiv

_BITS = {"bf16": 16, "fp16": 16, "fp32": 32, "fp8": 8, "int8": 8, "int4": 4}
# KV dtypes stored as llama.cpp ggml blocks (block sizes from hfmem.gguf.ggml).
GGML_KV_DTYPES = ("q8_0", "q4_0")
_TORCH_TO_SHORT = {
    "bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32",
    "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "float64": "fp32",
}
_ST_TO_SHORT = {"BF16": "bf16", "F16": "fp16", "F32": "fp32"}

# Layer-type names as they appear in normalised configs -> what the cache layer is.
_FULL = {"full_attention", "attention", "global_attention", "global"}
_SLIDING = {"sliding_attention", "sliding", "local_attention", "local"}
_CHUNKED = {"chunked_attention"}
_STATE = {"linear_attention", "mamba", "mamba2", "conv", "ssm", "gated_deltanet", "kda"}
_NONE = {"mlp", "moe", "mlp_only", "moe_only", "dummy", "none"}
# Sparse-attention layers that cache an index key per token beside their attention cache (see _sparse_index).
_INDEXED = {"indexed_attention", "minimax_m3_sparse"}
_DSA_TYPES = {"deepseek_v32", "glm_moe_dsa"}

# Which recurrent-state formula a model type's linear layers follow (each verified against transformers in
# tests/test_kv_truth.py where the model is in transformers; vLLM shapes: vllm,
# model_executor/layers/mamba/mamba_utils.py: MambaStateShapeCalculator).
_STATE_FAMILY = {
    "mamba": "mamba1", "falcon_mamba": "mamba1", "jamba": "mamba1",
    "mamba2": "mamba2", "bamba": "mamba2", "granitemoehybrid": "mamba2", "nemotron_h": "mamba2",
    "falcon_h1": "mamba2", "zamba2": "mamba2",
    "qwen3_next": "gdn", "qwen3_5": "gdn", "qwen3_5_text": "gdn", "qwen3_5_moe": "gdn", "qwen3_5_moe_text": "gdn",
    "kimi_linear": "kda",
    "minimax": "linear",
    "lfm2": "short_conv", "lfm2_moe": "short_conv",
}
# Families whose transformers DynamicCache keeps the states in a LinearAttentionCacheLayerMixin layer (cache_utils.py:
# LinearAttentionLayer and the hybrid LinearAttentionAnd*Layer, from the "linear_attention" / "conv" / "hybrid" layer
# types); MiniMax keeps its lightning state in MiniMaxCache.linear_cache instead, a plain list of tensors
# (models/minimax/modeling_minimax.py).
_HF_LINEAR_LAYER = {"mamba1", "mamba2", "gdn", "kda", "short_conv"}
_ENCODER_ONLY = {"bert", "roberta", "xlm-roberta", "distilbert", "electra", "deberta", "deberta-v2", "albert",
                 "mpnet", "camembert", "modernbert", "nomic_bert", "xlm_roberta"}


def state_and_attention(arch: Architecture) -> tuple[bool, bool]:
    """(whether the model has recurrent-state layers, whether it has attention layers), by its layer types: what vLLM's
    ModelConfig.is_hybrid (both) and is_attention_free (state only) tell apart."""
    names = set(arch.layer_types) | set(arch.layer_type_list)
    state = any(n in _STATE or n in ("hybrid", "hybrid_sliding") for n in names)
    attention = any(n not in _STATE and n not in _NONE for n in names) or (not names and arch.attention_kind != "none")
    return state, attention


def ggml_block(dtype: str) -> tuple[int, int] | None:
    """(values per block, bytes per block) of a ggml-block KV dtype (q8_0, q4_0); None for plain dtypes."""
    return block_of(dtype) if dtype in GGML_KV_DTYPES else None


def row_bytes(values: int, dtype: str) -> int:
    """Bytes of one row of `values` elements in a KV dtype (ggml types: whole blocks, rounded up)."""
    ggml = ggml_block(dtype)
    if ggml is not None:
        per, size = ggml
        return cdiv(values, per) * size
    return cdiv(values * _BITS[dtype], 8)


@dataclass
class _State:
    """One recurrent/conv state tensor of a layer, per sequence (transformers layout and vLLM layout)."""

    name: str
    hf_elements: int
    hf_dtype: str  # short dtype: bf16 / fp16 / fp32
    vllm_elements: int
    vllm_dtype: str
    vllm_rows: int = 0  # a conv state's window rows in vLLM (kernel - 1), which speculative tokens widen; 0: not one


@dataclass
class _Layer:
    index: int
    label: str  # key in by_layer_type
    attn: str | None = None  # full | sliding | chunked | mla | cross
    kv_heads: int = 0
    dk: int = 0
    dv: int = 0
    window: int | None = None
    states: list[_State] = field(default_factory=list)
    index_kind: str | None = None  # "dsa" (DeepSeek Sparse Attention indexer keys) | "block" (MiniMax-M3 index keys)
    index_dim: int = 0  # width of the one index key the layer caches per token (0: none)
    compressed: Compressed | None = None  # DeepSeek-V4 CSA/HCA branch beside the window (compressed.py)
    hf_linear_layer: bool = False  # transformers caches its states in a LinearAttentionCacheLayerMixin layer
    state_family: str | None = None  # mamba1 | mamba2 | gdn | kda | linear | short_conv (_STATE_FAMILY)
    kv_dtype: str | None = None  # this layer's cache dtype where it differs from the model's (TurboQuant's boundary)


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _first(cfg: dict[str, Any], *names: str) -> Any:
    for name in names:
        value = cfg.get(name)
        if value is not None:
            return value
    return None


def _per_layer(cfg: dict[str, Any], index: int) -> dict[str, Any]:
    """transformers' heterogeneous configs serialise per-layer overrides under per_layer_config {"05": {...}}."""
    overrides = cfg.get("per_layer_config")
    if not isinstance(overrides, dict):
        return cfg
    for key, value in overrides.items():
        try:
            if int(key) == index and isinstance(value, dict):
                return {**cfg, **value}
        except (TypeError, ValueError):
            continue
    return cfg


def _short_dtype(name: Any) -> str | None:
    if name is None:
        return None
    return _TORCH_TO_SHORT.get(str(name).replace("torch.", ""))


def _model_dtype(arch: Architecture, engine: str, notes: list[str], weights_dtype: str | None = None) -> str:
    """The activation dtype the runtime computes (and, for 'auto', caches) in."""
    cfg = arch.text_config or {}
    raw = arch.torch_dtype
    short = _short_dtype(raw)
    quantized = bool(cfg.get("quantization_config")) or (raw is not None and short in (None, "fp8"))
    if quantized:
        if short in ("bf16", "fp16"):
            return short
        notes.append("quantized checkpoint: the KV cache and states use the activation dtype, assumed bf16")
        return "bf16"
    if short is None:
        stored = _ST_TO_SHORT.get(str(weights_dtype).upper()) or _short_dtype(weights_dtype)
        if engine == "transformers":
            if stored:  # transformers, modeling_utils.py: _get_dtype: dtype "auto" falls back to the stored weights' dtype
                notes.append(f"config.json has no dtype: transformers uses the stored weights' dtype ({stored})")
                return stored
            notes.append("config.json has no dtype and no weights dtype was given: assumed float32 (torch default)")
            return "fp32"
        notes.append("config.json has no dtype: vLLM serves float32 models in bf16 (its 'auto' downcast)")
        return "bf16"
    if short == "fp32" and engine == "vllm":
        notes.append("float32 model: vLLM's dtype 'auto' serves it in bf16 (fp16 on GPUs without bf16)")
        return "bf16"
    return short


def _state_dims(arch: Architecture, family: str, cfg: dict[str, Any], tp: int, act: str, ssm_vllm: str) -> list[_State]:
    """Conv and recurrent state of one linear/SSM layer, per sequence.

    transformers keeps the conv window at the full kernel width and the recurrent state in float32 (measured);
    vLLM keeps ``kernel - 1`` conv columns and divides channels/heads by TP (vllm,
    model_executor/layers/mamba/mamba_utils.py: MambaStateShapeCalculator)."""
    hidden = arch.hidden_size

    def div(n: int, what: str) -> int:
        if n % tp:
            raise UsageError(f"tensor parallel size {tp} does not divide {what} ({n})")
        return n // tp

    if family == "mamba1":
        inter: int | None = int(cfg["mamba_expand"] * hidden) if _int(cfg.get("mamba_expand")) else None
        if not inter:
            inter = _int(cfg.get("intermediate_size")) if arch.model_type in ("mamba", "falcon_mamba") else None
        inter = inter or int((cfg.get("expand") or 2) * hidden)
        n = _int(_first(cfg, "state_size", "mamba_d_state")) or 16
        k = _int(_first(cfg, "conv_kernel", "mamba_d_conv")) or 4
        return [
            _State("conv", inter * k, act, div(inter, "mamba intermediate size") * (k - 1), act, k - 1),
            _State("ssm", inter * n, "fp32", div(inter, "mamba intermediate size") * n, ssm_vllm),
        ]
    if family == "mamba2":
        heads = _int(_first(cfg, "mamba_n_heads", "mamba_num_heads", "n_mamba_heads", "num_heads")) or 0
        expand = _first(cfg, "mamba_expand", "expand")
        if arch.model_type == "nemotron_h":
            head_dim = _int(cfg.get("mamba_head_dim")) or 0
            inter = heads * head_dim
        else:
            inter = _int(cfg.get("mamba_d_ssm")) or int((expand or 2) * hidden)
            declared = _int(_first(cfg, "mamba_d_head", "mamba_headdim", "mamba_head_dim"))
            if declared is None and arch.model_type == "mamba2":
                declared = _int(cfg.get("head_dim"))
            head_dim = declared or (inter // heads if heads else 0)
        groups = _int(_first(cfg, "mamba_n_groups", "mamba_ngroups", "n_groups")) or 1
        n = _int(_first(cfg, "mamba_d_state", "ssm_state_size", "state_size")) or 128
        k = _int(_first(cfg, "mamba_d_conv", "conv_kernel")) or 4
        extra = 0 if groups % tp == 0 else tp - groups  # vLLM replicates groups to follow head shards
        conv_hf = inter + 2 * groups * n
        conv_vllm = div(inter + 2 * (groups + extra) * n, "mamba conv channels")
        return [
            _State("conv", conv_hf * k, act, conv_vllm * (k - 1), act, k - 1),
            _State("ssm", heads * head_dim * n, "fp32", div(heads, "mamba heads") * head_dim * n, ssm_vllm),
        ]
    if family == "gdn":
        kh = _int(cfg.get("linear_num_key_heads")) or 0
        vh = _int(cfg.get("linear_num_value_heads")) or 0
        kd = _int(cfg.get("linear_key_head_dim")) or 0
        vd = _int(cfg.get("linear_value_head_dim")) or 0
        k = _int(cfg.get("linear_conv_kernel_dim")) or 4
        conv = 2 * kh * kd + vh * vd
        return [
            _State("conv", conv * k, act, div(conv, "gated-DeltaNet conv channels") * (k - 1), act, k - 1),
            _State("recurrent", vh * kd * vd, "fp32", div(vh, "linear value heads") * vd * kd, ssm_vllm),
        ]
    if family == "kda":
        raw_lin = cfg.get("linear_attn_config")
        lin: dict[str, Any] = raw_lin if isinstance(raw_lin, dict) else {}
        h = _int(_first(cfg, "linear_num_heads")) or _int(lin.get("num_heads")) or 0
        d = _int(_first(cfg, "linear_head_dim")) or _int(lin.get("head_dim")) or 0
        k = _int(_first(cfg, "linear_conv_kernel_dim")) or _int(lin.get("short_conv_kernel_size")) or 4
        conv = 3 * h * d  # q, k and v short convolutions
        return [
            _State("conv", conv * k, act, div(conv, "KDA conv channels") * (k - 1), act, k - 1),
            _State("recurrent", h * d * d, "fp32", div(h, "KDA heads") * d * d, "fp32"),  # vLLM kda_state_dtype
        ]
    if family == "linear":  # MiniMax-Text-01 lightning attention: one [heads, d, d] state in the model dtype
        h = _int(cfg.get("num_attention_heads")) or arch.num_attention_heads
        d = _int(cfg.get("head_dim")) or arch.head_dim
        return [_State("recurrent", h * d * d, act, div(h, "attention heads") * d * d, act)]
    if family == "short_conv":  # LFM2: one conv window of conv_L_cache over hidden channels
        k = _int(cfg.get("conv_L_cache")) or 3
        return [_State("conv", hidden * k, act, div(hidden, "hidden size") * (k - 1), act, k - 1)]
    return []


# MiMo-V2 (remote-code configs, model_type mimo_v2): sliding-window layers take their own K/V heads and head sizes
# (swa_num_key_value_heads, swa_head_dim, swa_v_head_dim), full layers the base ones, and values are v_head_dim wide
# (vllm, model_executor/models/mimo_v2.py: MiMoV2DecoderLayer builds MiMoV2Attention with head_size_v; the MTP layer,
# mimo_v2_mtp.py, is a sliding-window one). transformers' MiMo-V2-Flash keeps one head size and doubles the K/V heads
# of sliding layers (models/mimo_v2_flash/modeling_mimo_v2_flash.py: MiMoV2FlashAttention).
_MIMO_V2_TYPES = {"mimo_v2", "mimo_v2_flash"}
MTP_SLIDING_TYPES = _MIMO_V2_TYPES  # model types whose MTP layer caches like a sliding-window layer (above)


def _kv_heads_and_dims(arch: Architecture, cfg: dict[str, Any], index: int, sliding: bool) -> tuple[int, int, int]:
    """(K/V heads, key head size, value head size) of layer ``index``."""
    layer = _per_layer(cfg, index)
    if isinstance(cfg.get("per_layer_config"), dict):  # heterogeneous config: the dict holds the real base values (arch may not)
        heads = _int(layer.get("num_key_value_heads")) or arch.num_kv_heads
        dim = _int(layer.get("head_dim")) or arch.head_dim
    else:
        heads, dim = arch.num_kv_heads, arch.head_dim
    if arch.model_type == "falcon" and cfg.get("multi_query") and not cfg.get("new_decoder_architecture"):
        heads = 1  # transformers, models/falcon/modeling_falcon.py: FalconAttention: multi_query without the new architecture shares one K/V head
    value = dim
    if arch.model_type in _MIMO_V2_TYPES:
        value = _int(cfg.get("v_head_dim")) or dim
        swa_heads = _int(cfg.get("swa_num_key_value_heads"))
        if sliding and swa_heads:
            heads = swa_heads
            dim = _int(cfg.get("swa_head_dim")) or dim
            value = _int(cfg.get("swa_v_head_dim")) or value
        elif sliding and arch.model_type == "mimo_v2_flash":
            heads *= 2
    return heads, dim, value


def _layer_names(arch: Architecture, cfg: dict[str, Any], n: int) -> list[str]:
    declared = cfg.get("layer_types")
    if isinstance(declared, list) and len(declared) >= n and all(isinstance(x, str) for x in declared):
        return list(declared[:n])
    names = list(arch.layer_type_list or [])
    if len(names) >= n:
        return names[:n]
    return names + ["full_attention"] * (n - len(names))


class _IndexPlan:
    """Which layers of a sparse-attention model cache an index key per token, and how wide it is.

    DeepSeek Sparse Attention (DeepSeek-V3.2 paper, arXiv:2512.02556, the "lightning indexer"): every layer's indexer
    caches one ``index_head_dim`` key per token (transformers, models/deepseek_v32/modeling_deepseek_v32.py:
    DeepseekV32Indexer.forward -> cache.update_indexer; cache_utils.py: DynamicIndexedLayer). GLM-MoE-DSA builds
    an indexer only on layers whose ``indexer_types`` entry is "full"; "shared" layers reuse the previous full
    layer's top-k and cache no index keys (models/glm_moe_dsa/modeling_glm_moe_dsa.py: GlmMoeDsaAttention.__init__,
    indexer_types from GlmMoeDsaConfig.__post_init__). MiniMax-M3 sparse layers ("minimax_m3_sparse") cache one
    ``index_head_dim`` key per token beside their GQA K/V (models/minimax_m3_vl/modeling_minimax_m3_vl.py:
    MiniMaxM3VLIndexer.forward -> MiniMaxM3VLSparseCacheLayer.update_index)."""

    def __init__(self, arch: Architecture, cfg: dict[str, Any], names: list[str]) -> None:
        self.kind: str | None = None
        self.dim = 0
        self.keep: list[bool] = []
        model_type = str(cfg.get("model_type") or arch.model_type)
        if "indexed_attention" in names or arch.model_type in _DSA_TYPES or model_type in _DSA_TYPES:
            self.kind = "dsa"
            self.dim = arch.index_head_dim or _int(cfg.get("index_head_dim")) or 128
            types = cfg.get("indexer_types")
            if not (isinstance(types, list) and len(types) >= len(names)):
                types = _glm_indexer_types(cfg, len(names)) if "glm_moe_dsa" in (arch.model_type, model_type) else None
            self.keep = [t != "shared" for t in types[: len(names)]] if types else [True] * len(names)
        elif "minimax_m3_sparse" in names or _sparse_freq(cfg) is not None:
            self.kind = "block"
            sparse = cfg.get("sparse_attention_config")
            raw = _int(sparse.get("sparse_index_dim")) if isinstance(sparse, dict) else None
            self.dim = arch.index_head_dim or _int(cfg.get("index_head_dim")) or raw or 128
            if "minimax_m3_sparse" in names:
                self.keep = [n == "minimax_m3_sparse" for n in names]
            else:  # a raw config (not normalised by transformers): MiniMaxM3VLTextConfig.__post_init__'s rule
                self.keep = [bool(f) for f in _sparse_freq(cfg) or []][: len(names)]

    def of(self, index: int) -> tuple[str | None, int]:
        """(kind, index key width) of one layer; layers of a sparse model without index keys keep the kind (vLLM
        serves every layer of the model with the sparse backend's block size and cache layout)."""
        if self.kind and index < len(self.keep) and self.keep[index]:
            return self.kind, self.dim
        return self.kind, 0

    def notes(self, layers: list[_Layer]) -> list[str]:
        n = sum(1 for l in layers if l.index_dim)
        if not self.kind:
            return []
        if self.kind == "dsa":
            return [f"DeepSeek Sparse Attention: {n} of {len(self.keep)} layers keep one indexer key of index_head_dim "
                    f"{self.dim} per token beside the MLA latent"
                    + (f" (the other {len(self.keep) - n} reuse a previous layer's top-k: indexer_types 'shared')"
                       if n < len(self.keep) else "")]
        return [f"sparse attention: {n} of {len(self.keep)} layers keep one index key of {self.dim} per token beside "
                "their K/V (not divided by tensor parallelism)"]


def _sparse_freq(cfg: dict[str, Any]) -> list[Any] | None:
    """MiniMax-M3's raw sparse_attention_config.sparse_attention_freq (1 = sparse layer), when sparse attention is on."""
    sparse = cfg.get("sparse_attention_config")
    if not isinstance(sparse, dict) or sparse.get("use_sparse_attention") is False:
        return None
    freq = sparse.get("sparse_attention_freq")
    return freq if isinstance(freq, list) else None


def _glm_indexer_types(cfg: dict[str, Any], n: int) -> list[str]:
    """transformers, models/glm_moe_dsa/configuration_glm_moe_dsa.py: GlmMoeDsaConfig.__post_init__ (for raw configs)."""
    pattern = cfg.get("index_topk_pattern")
    if isinstance(pattern, str):
        return [{"F": "full", "S": "shared"}.get(c, "full") for c in pattern]
    if isinstance(pattern, list):
        return [str(x) for x in pattern]
    freq = max(_int(cfg.get("index_topk_freq")) or 1, 1)
    offset = _int(cfg.get("index_skip_topk_offset"))
    offset = 2 if offset is None else offset
    return ["full" if (max(i - offset + 1, 0) % freq) == 0 else "shared" for i in range(n)]


def _count(layers: int) -> str:
    return f"{layers} layer{'s' if layers > 1 else ''}"


def index_bytes_per_token(layer: _Layer, dtype: str, engine: str) -> int:
    """Bytes of the index key a sparse-attention layer caches per token (0 for other layers)."""
    if not layer.index_dim:
        return 0
    if engine == "vllm" and layer.index_kind == "dsa":
        # vllm, model_executor/models/deepseek_v2.py: Indexer.__init__ -> DeepseekV32IndexerCache: uint8, head_dim =
        # index_head_dim + index_head_dim // 128 * 4 (fp8 values and one fp32 scale per 128), whatever the KV dtype
        return layer.index_dim + layer.index_dim // 128 * 4
    return row_bytes(layer.index_dim, dtype)


def fp8_ds_mla(layer: _Layer, dtype: str) -> bool:
    """vLLM stores fp8 KV of DSA models in the packed fp8_ds_mla layout (vllm, v1/kv_cache_interface.py:
    MLAAttentionSpec.real_page_size_bytes, cache_dtype_str "fp8_ds_mla")."""
    return layer.attn == "mla" and layer.index_kind == "dsa" and dtype == "fp8"


def describe_layers(
    arch: Architecture, engine: str = "transformers", tp: int = 1, encoder_len: int | None = None, notes: list[str] | None = None,
    warnings: list[str] | None = None, weights_dtype: str | None = None,
) -> list[_Layer]:
    """One entry per decoder layer (plus cross-attention entries for encoder-decoder models)."""
    notes = notes if notes is not None else []
    warnings = warnings if warnings is not None else []
    cfg = arch.text_config or {}
    act = _model_dtype(arch, engine, [], weights_dtype)
    ssm_vllm = _short_dtype(_first(cfg, "mamba_ssm_cache_dtype", "mamba_ssm_dtype")) or act

    if arch.model_type in _ENCODER_ONLY:
        notes.append(f"{arch.model_type} is an encoder-only model: it keeps no KV cache")
        return []

    n_layers = arch.num_layers
    if arch.is_encoder_decoder:
        n_layers = _int(cfg.get("num_decoder_layers")) or arch.num_layers
    names = _layer_names(arch, cfg, n_layers)
    shared = _int(cfg.get("num_kv_shared_layers")) or 0
    family = _STATE_FAMILY.get(arch.model_type) or _STATE_FAMILY.get(str(cfg.get("model_type")))
    window_default = _int(cfg.get("sliding_window"))
    if window_default is not None and cfg.get("use_sliding_window") is False:
        window_default = None
    if arch.model_type == "gemma4" and cfg.get("use_bidirectional_attention") == "all" and window_default:
        window_default = window_default // 2 + 1  # transformers, Gemma4TextConfig.__post_init__ halves it for bidirectional use
    chunk = _int(cfg.get("attention_chunk_size"))
    mla = arch.mla
    unmodelled: dict[str, int] = {}
    replicated: dict[int, int] = {}  # KV heads < tp -> layers (said once per head count, not once per layer)
    no_state: dict[str, int] = {}
    indexed = _IndexPlan(arch, cfg, names)

    layers: list[_Layer] = []
    for i, raw_name in enumerate(names):
        name = str(raw_name)
        if shared and i >= n_layers - shared:
            layers.append(_Layer(i, "kv_shared"))
            continue
        if name in _NONE:
            layers.append(_Layer(i, "no_cache"))
            continue
        has_state = name in _STATE or name in ("hybrid", "hybrid_sliding")
        attn: str | None = None
        if name in _FULL or name == "hybrid":
            attn = "full"
        elif name in _SLIDING or name == "hybrid_sliding":
            attn = "sliding"
        elif name in _CHUNKED:
            attn = "chunked"
        elif name in _INDEXED:
            attn = "full"
        elif arch.model_type == "deepseek_v4" and compressed_layer(cfg, name) is not None:
            attn = "sliding"  # window + compressed branch (compressed.py)
        elif not has_state:
            unmodelled[name] = unmodelled.get(name, 0) + 1
            attn = "full"
        layer = _Layer(i, "")
        layer.index_kind, layer.index_dim = indexed.of(i)
        if has_state:
            states = _state_dims(arch, family, cfg, tp, act, ssm_vllm) if family else []
            if not states:
                no_state[name] = no_state.get(name, 0) + 1
            layer.states = states
            layer.hf_linear_layer = family in _HF_LINEAR_LAYER
            layer.state_family = family
        if attn is not None:
            window = None
            if attn == "sliding":
                window = _int(_per_layer(cfg, i).get("sliding_window")) or window_default
                if window is None:
                    attn = "full"
            elif attn == "chunked":
                window = chunk
                if window is None:
                    attn = "full"
            if mla is not None and attn == "full":
                layer.attn, layer.kv_heads, layer.dk, layer.dv = "mla", 1, mla.kv_lora_rank, mla.qk_rope_head_dim
            else:
                heads, dim, value = _kv_heads_and_dims(arch, cfg, i, attn == "sliding")
                per_gpu = max(1, heads // tp)
                if tp > 1 and heads < tp:
                    replicated[heads] = replicated.get(heads, 0) + 1
                layer.attn, layer.kv_heads, layer.dk, layer.dv, layer.window = attn, per_gpu, dim, value, window
                if arch.model_type == "deepseek_v4":
                    layer.compressed = compressed_layer(cfg, name)
                    if layer.compressed is not None:
                        layer.dv = 0  # shared-KV MQA: the window tensor is stored once (values is keys)
        if attn is None:
            layer.label = {"mamba1": "mamba", "mamba2": "mamba", "short_conv": "conv"}.get(family or "", "linear_attention")
        elif layer.compressed is not None:
            layer.label = name
        elif has_state:
            layer.label = "hybrid" if attn == "full" else "hybrid_sliding"
        else:
            assert layer.attn is not None  # set with attn above
            layer.label = {"full": "full_attention", "mla": "mla", "sliding": "sliding_attention",
                           "chunked": "chunked_attention"}[layer.attn]
            if layer.index_dim:
                layer.label = "sparse_mla" if layer.attn == "mla" else "sparse_attention"
        layers.append(layer)

    for name, count in unmodelled.items():  # one line per distinct cause, never one per layer
        warnings.append(f"{_count(count)} of type {name!r}: not modelled; counted as full attention")
    for name, count in no_state.items():
        warnings.append(f"{_count(count)} of type {name!r}: recurrent state size is not modelled for model_type "
                        f"{arch.model_type!r}; counted as 0 bytes")
    for heads, count in replicated.items():
        notes.append(f"{heads} KV heads < tp {tp}: KV heads are replicated, 1 per GPU ({_count(count)})")
    notes.extend(indexed.notes(layers))

    if arch.is_encoder_decoder:
        heads = _int(cfg.get("decoder_attention_heads")) or arch.num_kv_heads
        dim = arch.head_dim
        if _int(cfg.get("decoder_attention_heads")) and not _int(cfg.get("d_kv")) and not _int(cfg.get("head_dim")):
            dim = arch.hidden_size // heads
        for j in range(n_layers):
            layers.append(_Layer(n_layers + j, "cross_attention", "cross", max(1, heads // tp), dim, dim, encoder_len))
    if mla is not None:
        notes.append(
            f"MLA: one latent of kv_lora_rank {mla.kv_lora_rank} + qk_rope_head_dim {mla.qk_rope_head_dim} per "
            "token per layer (transformers >= 5 and vLLM); not divided by tensor parallelism"
        )
    if shared:
        notes.append(f"the last {shared} layers reuse earlier layers' KV (num_kv_shared_layers) and keep no cache")
    return layers


def _attn_bytes_per_token(layer: _Layer, dtype: str, engine: str, release: tuple[int, int] | None = None) -> int:
    """Bytes one token costs in one attention layer (per sequence, per GPU); release: the vLLM release whose page
    rules apply (None: the newest read)."""
    dtype = layer.kv_dtype or dtype
    if engine == "vllm" and is_vllm_quantized(dtype):
        assert layer.attn is not None
        return (quantized_bytes_per_token(dtype, layer.attn, layer.kv_heads, layer.dk, layer.dv, release)
                + index_bytes_per_token(layer, dtype, engine))
    if layer.attn == "mla":
        if engine == "vllm" and fp8_ds_mla(layer, dtype):
            # 656 B for DeepSeek-V3.2: kv_lora_rank fp8 values + one fp32 scale per 128 + the rope part in bf16
            b = layer.dk + layer.dk // 128 * 4 + layer.dv * 2
        elif engine == "vllm":  # vllm, v1/kv_cache_interface.py: MLAAttentionSpec: one row of kv_lora_rank + qk_rope_head_dim
            b = row_bytes(layer.dk + layer.dv, dtype)
        else:  # transformers: keys [.., kv_lora_rank], values [.., qk_rope_head_dim]
            b = row_bytes(layer.dk, dtype) + row_bytes(layer.dv, dtype)
    else:
        b = row_bytes(layer.kv_heads * layer.dk, dtype) + row_bytes(layer.kv_heads * layer.dv, dtype)
    return b + index_bytes_per_token(layer, dtype, engine)


def _state_bytes(layer: _Layer, engine: str) -> int:
    if engine == "vllm":
        return sum(cdiv(s.vllm_elements * _BITS[s.vllm_dtype], 8) for s in layer.states)
    return sum(cdiv(s.hf_elements * _BITS[s.hf_dtype], 8) for s in layer.states)


def _add(table: dict[str, dict[str, int]], label: str, **values: int) -> None:
    entry = table.setdefault(label, {"layers": 0, "tokens": 0, "bytes": 0})
    for key, value in values.items():
        if key == "tokens":
            entry["tokens"] = max(entry["tokens"], value)
        else:
            entry[key] = entry.get(key, 0) + value
