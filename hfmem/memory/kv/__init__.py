"""Exact KV-cache bytes for every attention kind, as stored by vLLM (paged) or by transformers (DynamicCache).

Two engines, two different things stored:

* ``transformers`` (``DynamicCache(config=...)``, transformers 5.24; read from
  ``transformers/cache_utils.py``: ``DynamicLayer``, ``DynamicSlidingWindowLayer``, ``LinearAttentionLayer``,
  ``DummyLayer``, ``get_layer_types_and_kwargs``): what the cache object holds after a prefill of ``context``
  tokens. Full layers hold ``context`` tokens; sliding/chunked layers keep the last ``window - 1`` tokens (as
  *views*: after a one-shot prefill their storage still pins the whole prefill, see ``storage_bytes``); MLA
  layers hold the compressed latent (``kv_lora_rank`` keys + ``qk_rope_head_dim`` "values"); Mamba, gated
  DeltaNet, KDA and short-conv layers hold fixed conv states (full kernel width, model dtype) and recurrent
  states (float32 on the PyTorch paths); KV-sharing layers (Gemma 3n/4) and MLP-only layers hold nothing;
  encoder-decoder models add a cross-attention cache of ``encoder_len`` tokens per decoder layer; every sliding
  layer keeps one int64 scalar (``_sliding_window_tensor``, 8 bytes per cache, counted as ``bookkeeping_bytes``).
  Every one of these was measured (tests/test_kv_truth.py).
* ``vllm`` (V1 engine): what the block manager reserves for ``batch`` requests of ``context`` tokens — paged
  blocks of ``block_size`` tokens, rounded up, per layer spec, following ``vllm/v1/kv_cache_interface.py``
  (``FullAttentionSpec``/``MLAAttentionSpec`` page sizes, ``SlidingWindowSpec``/``ChunkedLocalAttentionSpec``/
  ``MambaSpec``/``CrossAttentionSpec.max_memory_usage_bytes``), ``vllm/v1/core/kv_cache_utils.py`` (uniform vs
  hybrid grouping, page unification, group padding, ``_max_memory_usage_bytes_from_groups``),
  ``vllm/model_executor/layers/mamba/mamba_utils.py`` (``MambaStateShapeCalculator``: state shapes, conv
  ``kernel - 1``) and ``vllm/model_executor/models/config.py`` (``HybridAttentionMambaModelConfig``: attention
  block size enlarged so one attention page >= one Mamba page, Mamba page padded to it). Summarised in
  MEMORY-FORMULAS.md §2.2/§2.4. vLLM moves fast: these rules are the versions read (commits 001cabc1, 02d71083,
  0144dd5b), and are flagged as assumptions in the output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from hfmem.errors import UsageError
from hfmem.units import fmt_bytes

ENGINES = ("vllm", "transformers")
KV_DTYPES = ("auto", "bf16", "fp16", "fp32", "fp8", "int8", "int4", "q8_0", "q4_0")

_BITS = {"bf16": 16, "fp16": 16, "fp32": 32, "fp8": 8, "int8": 8, "int4": 4}
# llama.cpp ggml block types: (values per block, bytes per block) - ggml/src/ggml-common.h block_q8_0 = fp16 d +
# 32 int8; block_q4_0 = fp16 d + 16 bytes of nibbles.
_GGML = {"q8_0": (32, 34), "q4_0": (32, 18)}
_TORCH_TO_SHORT = {
    "bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32",
    "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "float64": "fp32",
}
_SLIDING_BOOKKEEPING = 8  # DynamicSlidingWindowLayer._sliding_window_tensor: one int64 scalar per layer

# Layer-type names as they appear in normalised configs -> what the cache layer is.
_FULL = {"full_attention", "attention", "global_attention", "global"}
_SLIDING = {"sliding_attention", "sliding", "local_attention", "local"}
_CHUNKED = {"chunked_attention"}
_STATE = {"linear_attention", "mamba", "mamba2", "conv", "ssm", "gated_deltanet", "kda"}
_NONE = {"mlp", "moe", "mlp_only", "moe_only", "dummy", "none"}

# Which recurrent-state formula a model type's linear layers follow (each verified against transformers in
# tests/test_kv_truth.py where the model is in transformers; vLLM shapes from MambaStateShapeCalculator).
_STATE_FAMILY = {
    "mamba": "mamba1", "falcon_mamba": "mamba1", "jamba": "mamba1",
    "mamba2": "mamba2", "bamba": "mamba2", "granitemoehybrid": "mamba2", "nemotron_h": "mamba2",
    "falcon_h1": "mamba2", "zamba2": "mamba2",
    "qwen3_next": "gdn", "qwen3_5": "gdn", "qwen3_5_text": "gdn", "qwen3_5_moe": "gdn", "qwen3_5_moe_text": "gdn",
    "kimi_linear": "kda",
    "minimax": "linear",
    "lfm2": "short_conv", "lfm2_moe": "short_conv",
}
_ENCODER_ONLY = {"bert", "roberta", "xlm-roberta", "distilbert", "electra", "deberta", "deberta-v2", "albert",
                 "mpnet", "camembert", "modernbert", "nomic_bert", "xlm_roberta"}


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def row_bytes(values: int, dtype: str) -> int:
    """Bytes of one row of `values` elements in a KV dtype (ggml types: whole blocks, rounded up)."""
    if dtype in _GGML:
        per, size = _GGML[dtype]
        return cdiv(values, per) * size
    return cdiv(values * _BITS[dtype], 8)


# --------------------------------------------------------------------------------------------------------------
# Context parsing


_CTX_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*$")


def parse_context(text: str | int, arch: Any = None) -> list[int]:
    """'32768', '32k', '32K', '128k', '1M' (k = 1024, M = 1024**2), 'max' (max_position_embeddings), comma-separated."""
    if isinstance(text, int) and not isinstance(text, bool):
        parts: list[str] = [str(text)]
    else:
        parts = [p for p in str(text).split(",")]
    out: list[int] = []
    for part in parts:
        p = part.strip()
        if not p:
            raise UsageError(f"--ctx: empty value in {text!r}")
        if p.lower() == "max":
            max_pos = getattr(arch, "max_position_embeddings", None) if arch is not None else None
            if not max_pos:
                raise UsageError("--ctx max: the model's config has no max_position_embeddings; give a number")
            out.append(int(max_pos))
            continue
        m = _CTX_RE.match(p)
        if not m:
            raise UsageError(f"--ctx: {p!r} is not a token count (examples: 4096, 32k, 1M, max)")
        number, unit = m.groups()
        scale = {"": 1, "k": 1024, "m": 1024**2}[unit.lower()]
        if "." in number:
            whole, frac = number.split(".")
            numerator = int(whole + frac) * scale
            denominator = 10 ** len(frac)
            if numerator % denominator:
                raise UsageError(f"--ctx: {p!r} is not a whole number of tokens")
            value = numerator // denominator
        else:
            value = int(number) * scale
        if value <= 0:
            raise UsageError(f"--ctx: {p!r} must be at least 1 token")
        out.append(value)
    return out


# --------------------------------------------------------------------------------------------------------------
# Layer description (engine independent)


@dataclass
class _State:
    """One recurrent/conv state tensor of a layer, per sequence (transformers layout and vLLM layout)."""

    name: str
    hf_elements: int
    hf_dtype: str  # short dtype: bf16 / fp16 / fp32
    vllm_elements: int
    vllm_dtype: str


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


_ST_TO_SHORT = {"BF16": "bf16", "F16": "fp16", "F32": "fp32"}


def _model_dtype(arch: Any, engine: str, notes: list[str], weights_dtype: str | None = None) -> str:
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
            if stored:  # modeling_utils._get_dtype: dtype "auto" falls back to the stored weights' dtype
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


def _state_dims(arch: Any, family: str, cfg: dict[str, Any], tp: int, act: str, ssm_vllm: str) -> list[_State]:
    """Conv and recurrent state of one linear/SSM layer, per sequence.

    transformers keeps the conv window at the full kernel width and the recurrent state in float32 (measured);
    vLLM keeps ``kernel - 1`` conv columns and divides channels/heads by TP (MambaStateShapeCalculator)."""
    hidden = arch.hidden_size

    def div(n: int, what: str) -> int:
        if n % tp:
            raise UsageError(f"tensor parallel size {tp} does not divide {what} ({n})")
        return n // tp

    if family == "mamba1":
        inter = _int(cfg.get("mamba_expand")) and int(cfg["mamba_expand"] * hidden)
        if not inter:
            inter = _int(cfg.get("intermediate_size")) if arch.model_type in ("mamba", "falcon_mamba") else None
        inter = inter or int((cfg.get("expand") or 2) * hidden)
        n = _int(_first(cfg, "state_size", "mamba_d_state")) or 16
        k = _int(_first(cfg, "conv_kernel", "mamba_d_conv")) or 4
        return [
            _State("conv", inter * k, act, div(inter, "mamba intermediate size") * (k - 1), act),
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
            head_dim = _int(_first(cfg, "mamba_d_head", "mamba_headdim", "mamba_head_dim"))
            if head_dim is None and arch.model_type == "mamba2":
                head_dim = _int(cfg.get("head_dim"))
            head_dim = head_dim or (inter // heads if heads else 0)
        groups = _int(_first(cfg, "mamba_n_groups", "mamba_ngroups", "n_groups")) or 1
        n = _int(_first(cfg, "mamba_d_state", "ssm_state_size", "state_size")) or 128
        k = _int(_first(cfg, "mamba_d_conv", "conv_kernel")) or 4
        extra = 0 if groups % tp == 0 else tp - groups  # vLLM replicates groups to follow head shards
        conv_hf = inter + 2 * groups * n
        conv_vllm = div(inter + 2 * (groups + extra) * n, "mamba conv channels")
        return [
            _State("conv", conv_hf * k, act, conv_vllm * (k - 1), act),
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
            _State("conv", conv * k, act, div(conv, "gated-DeltaNet conv channels") * (k - 1), act),
            _State("recurrent", vh * kd * vd, "fp32", div(vh, "linear value heads") * vd * kd, ssm_vllm),
        ]
    if family == "kda":
        lin = cfg.get("linear_attn_config") if isinstance(cfg.get("linear_attn_config"), dict) else {}
        h = _int(_first(cfg, "linear_num_heads")) or _int(lin.get("num_heads")) or 0
        d = _int(_first(cfg, "linear_head_dim")) or _int(lin.get("head_dim")) or 0
        k = _int(_first(cfg, "linear_conv_kernel_dim")) or _int(lin.get("short_conv_kernel_size")) or 4
        conv = 3 * h * d  # q, k and v short convolutions
        return [
            _State("conv", conv * k, act, div(conv, "KDA conv channels") * (k - 1), act),
            _State("recurrent", h * d * d, "fp32", div(h, "KDA heads") * d * d, "fp32"),  # vLLM kda_state_dtype
        ]
    if family == "linear":  # MiniMax-Text-01 lightning attention: one [heads, d, d] state in the model dtype
        h = _int(cfg.get("num_attention_heads")) or arch.num_attention_heads
        d = _int(cfg.get("head_dim")) or arch.head_dim
        return [_State("recurrent", h * d * d, act, div(h, "attention heads") * d * d, act)]
    if family == "short_conv":  # LFM2: one conv window of conv_L_cache over hidden channels
        k = _int(cfg.get("conv_L_cache")) or 3
        return [_State("conv", hidden * k, act, div(hidden, "hidden size") * (k - 1), act)]
    return []


def _kv_heads_and_dim(arch: Any, cfg: dict[str, Any], index: int) -> tuple[int, int]:
    layer = _per_layer(cfg, index)
    if isinstance(cfg.get("per_layer_config"), dict):  # heterogeneous config: the dict holds the real base values (arch may not)
        heads = _int(layer.get("num_key_value_heads")) or arch.num_kv_heads
        dim = _int(layer.get("head_dim")) or arch.head_dim
    else:
        heads, dim = arch.num_kv_heads, arch.head_dim
    if arch.model_type == "falcon" and cfg.get("multi_query") and not cfg.get("new_decoder_architecture"):
        heads = 1  # FalconAttention: multi_query without the new architecture shares one K/V head
    return heads, dim


def _layer_names(arch: Any, cfg: dict[str, Any], n: int) -> list[str]:
    declared = cfg.get("layer_types")
    if isinstance(declared, list) and len(declared) >= n and all(isinstance(x, str) for x in declared):
        return list(declared[:n])
    names = list(arch.layer_type_list or [])
    if len(names) >= n:
        return names[:n]
    return names + ["full_attention"] * (n - len(names))


def describe_layers(
    arch: Any, engine: str = "transformers", tp: int = 1, encoder_len: int | None = None, notes: list[str] | None = None,
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
        window_default = window_default // 2 + 1  # Gemma4TextConfig.__post_init__ halves it for bidirectional use
    chunk = _int(cfg.get("attention_chunk_size"))
    mla = arch.mla
    unknown_state_warned = False

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
        elif not has_state:
            warnings.append(f"layer type {name!r} is not modelled; counted as full attention")
            attn = "full"
        layer = _Layer(i, "")
        if has_state:
            states = _state_dims(arch, family, cfg, tp, act, ssm_vllm) if family else []
            if not states and not unknown_state_warned:
                warnings.append(
                    f"recurrent state size of {name} layers is not modelled for model_type {arch.model_type!r}: "
                    "counted as 0 bytes"
                )
                unknown_state_warned = True
            layer.states = states
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
                layer.attn, layer.kv_heads, layer.dk, layer.dv = "mla", 1, mla["kv_lora_rank"], mla["qk_rope_head_dim"]
            else:
                heads, dim = _kv_heads_and_dim(arch, cfg, i)
                per_gpu = max(1, heads // tp)
                if tp > 1 and heads < tp:
                    notes.append(f"{heads} KV heads < tp {tp}: KV heads are replicated, 1 per GPU")
                layer.attn, layer.kv_heads, layer.dk, layer.dv, layer.window = attn, per_gpu, dim, dim, window
        if attn is None:
            layer.label = {"mamba1": "mamba", "mamba2": "mamba", "short_conv": "conv"}.get(family or "", "linear_attention")
        elif has_state:
            layer.label = "hybrid" if attn == "full" else "hybrid_sliding"
        else:
            layer.label = {"full": "full_attention", "mla": "mla", "sliding": "sliding_attention",
                           "chunked": "chunked_attention"}[layer.attn]
        layers.append(layer)

    if arch.is_encoder_decoder:
        heads = _int(cfg.get("decoder_attention_heads")) or arch.num_kv_heads
        dim = arch.head_dim
        if _int(cfg.get("decoder_attention_heads")) and not _int(cfg.get("d_kv")) and not _int(cfg.get("head_dim")):
            dim = arch.hidden_size // heads
        for j in range(n_layers):
            layers.append(_Layer(n_layers + j, "cross_attention", "cross", max(1, heads // tp), dim, dim, encoder_len))
    if mla is not None:
        notes.append(
            f"MLA: one latent of kv_lora_rank {mla['kv_lora_rank']} + qk_rope_head_dim {mla['qk_rope_head_dim']} per "
            "token per layer (transformers >= 5 and vLLM); not divided by tensor parallelism"
        )
    if shared:
        notes.append(f"the last {shared} layers reuse earlier layers' KV (num_kv_shared_layers) and keep no cache")
    return layers


# --------------------------------------------------------------------------------------------------------------
# The estimate


@dataclass
class KVCacheEstimate:
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
        else:
            out["bookkeeping_bytes"] = self.bookkeeping_bytes
            out["storage_bytes"] = dict(self.storage_bytes or {})
        if self.encoder_len is not None:
            out["encoder_len"] = self.encoder_len
        out["formulas"] = dict(self.formulas)
        out["assumptions"] = list(self.assumptions)
        out["warnings"] = list(self.warnings)
        return out

    def _title(self) -> str:
        per = " per GPU" if self.tp > 1 else ""
        return (f"KV cache ({self.engine}, {self.dtype}, {self.context:,} tokens x {self.batch} "
                f"sequence{'s' if self.batch != 1 else ''}{per})")

    def rows(self) -> list[list[Any]]:
        rows = []
        for name, e in self.by_layer_type.items():
            rows.append([
                name, e["layers"] if not e.get("padding_layers") else f"{e['layers']} (+{e['padding_layers']} padding)",
                f"{e['tokens']:,}" if e.get("tokens") else "-",
                f"{e['bytes_per_token']:,}" if e.get("bytes_per_token") else "-",
                f"{e['bytes']:,}", fmt_bytes(e["bytes"]),
                f"{e['state_bytes']:,}" if e.get("state_bytes") else "-",
            ])
        return rows

    def tables(self) -> list[tuple[str, list[str], list[list[Any]]]]:
        headers = ["layer type", "layers", "tokens held", "bytes/token", "bytes at context", "GiB", "state/seq"]
        rows = self.rows()
        states = sum(e.get("state_bytes", 0) for e in self.by_layer_type.values())
        rows.append(["total", "", "", f"{self.bytes_per_token:,}", f"{self.total_bytes:,}", fmt_bytes(self.total_bytes),
                     f"{states:,}" if states else "-"])
        summary = [[f"{label} (per sequence)", text] for label, text in self.formulas.items()]
        summary += [
            ["bytes per token (growing layers, per sequence)", f"{self.bytes_per_token:,}"],
            ["constant per sequence (windows, states, cross)", f"{self.constant_bytes:,} ({fmt_bytes(self.constant_bytes)})"],
            ["total", f"{self.total_bytes:,} ({fmt_bytes(self.total_bytes)})  [{self.total_is}]"],
        ]
        if self.page_reserved_total_bytes is not None and self.page_reserved_total_bytes != self.total_bytes:
            summary.append(["with full-length pages for sliding layers (hybrid KV manager off)",
                            f"{self.page_reserved_total_bytes:,} ({fmt_bytes(self.page_reserved_total_bytes)})"])
        if self.storage_bytes and self.storage_bytes.get("after_prefill") != self.total_bytes:
            summary.append(["storage pinned after one prefill (sliding views)",
                            f"{self.storage_bytes['after_prefill']:,} ({fmt_bytes(self.storage_bytes['after_prefill'])})"])
        for a in self.assumptions:
            summary.append(["assumption", a])
        for w in self.warnings:
            summary.append(["warning", w])
        return [(self._title(), headers, rows), ("KV cache summary", ["", ""], summary)]


@dataclass
class KVCacheSeries:
    """Several contexts: JSON is a list in the order given, the table one row per context."""

    estimates: list[KVCacheEstimate]

    def to_dict(self) -> list[dict[str, Any]]:  # type: ignore[override]
        return [e.to_dict() for e in self.estimates]

    def tables(self) -> list[tuple[str, list[str], list[list[Any]]]]:
        if len(self.estimates) == 1:
            return self.estimates[0].tables()
        first = self.estimates[0]
        rows = [[f"{e.context:,}", e.batch, f"{e.bytes_per_token:,}", f"{e.constant_bytes:,}", f"{e.total_bytes:,}",
                 fmt_bytes(e.total_bytes)] for e in self.estimates]
        per = " per GPU" if first.tp > 1 else ""
        heading = f"KV cache ({first.engine}, {first.dtype}{per}) by context [{first.total_is}]"
        headers = ["context", "batch", "bytes/token", "constant/seq", "total bytes", "GiB"]
        breakdown = []
        for e in self.estimates:
            for r in e.rows():
                breakdown.append([f"{e.context:,}", *r])
        seen: dict[tuple[str, str], None] = {}
        for e in self.estimates:
            for a in e.assumptions:
                seen.setdefault(("assumption", a))
            for w in e.warnings:
                seen.setdefault(("warning", w))
        notes = [list(k) for k in seen]
        out = [(heading, headers, rows),
               ("KV cache by layer type", ["context", "layer type", "layers", "tokens held", "bytes/token",
                                           "bytes at context", "GiB", "state/seq"], breakdown)]
        if notes:
            out.append(("KV cache notes", ["", ""], notes))
        return out


def _resolve_dtype(arch: Any, kv_dtype: str, engine: str, assumptions: list[str], weights_dtype: str | None) -> str:
    if kv_dtype not in KV_DTYPES:
        raise UsageError(f"--kv-dtype must be one of {', '.join(KV_DTYPES)}, got {kv_dtype!r}")
    if kv_dtype == "auto":
        return _model_dtype(arch, engine, assumptions, weights_dtype)
    if engine == "vllm" and kv_dtype in ("int4", "q8_0", "q4_0"):
        assumptions.append(f"vLLM has no {kv_dtype} KV cache; bytes assume its storage layout regardless")
    if engine == "vllm" and kv_dtype == "int8":
        assumptions.append("int8 = vLLM's int8_per_token_head: adds fp32 K and V scales per token per head")
    if engine == "transformers" and kv_dtype not in ("bf16", "fp16", "fp32"):
        assumptions.append(
            f"DynamicCache stores the model dtype; {kv_dtype} assumes a quantized cache with no scale/zero-point "
            "or full-precision residual overhead"
        )
    if kv_dtype in _GGML:
        per, size = _GGML[kv_dtype]
        assumptions.append(f"{kv_dtype}: llama.cpp blocks of {per} values in {size} bytes per K and V row")
    return kv_dtype


def _attn_bytes_per_token(layer: _Layer, dtype: str, engine: str) -> int:
    """Bytes one token costs in one attention layer (per sequence, per GPU)."""
    if layer.attn == "mla":
        if engine == "vllm":  # MLAAttentionSpec: one row of kv_lora_rank + qk_rope_head_dim
            b = row_bytes(layer.dk + layer.dv, dtype)
        else:  # transformers: keys [.., kv_lora_rank], values [.., qk_rope_head_dim]
            b = row_bytes(layer.dk, dtype) + row_bytes(layer.dv, dtype)
    else:
        b = row_bytes(layer.kv_heads * layer.dk, dtype) + row_bytes(layer.kv_heads * layer.dv, dtype)
    if engine == "vllm" and dtype == "int8":
        b += 2 * layer.kv_heads * 4  # AttentionSpec.page_size_bytes: per-token-head fp32 scales
    return b


def _state_bytes(layer: _Layer, engine: str) -> int:
    if engine == "vllm":
        return sum(cdiv(s.vllm_elements * _BITS[s.vllm_dtype], 8) for s in layer.states)
    return sum(cdiv(s.hf_elements * _BITS[s.hf_dtype], 8) for s in layer.states)


def _elem(dtype: str) -> str:
    if dtype in _GGML:
        per, size = _GGML[dtype]
        return f"{size}/{per} B"
    bits = _BITS[dtype]
    return f"{bits // 8} B" if bits % 8 == 0 else f"{bits}/8 B"


def _formulas(layers: list[_Layer], dtype: str, engine: str, context: int, mbt: int, bs: int) -> dict[str, str]:
    """How each layer type's bytes were computed, in words a reader can redo by hand (per sequence)."""
    groups: dict[str, dict[tuple, int]] = {}
    for l in layers:
        if l.label in ("kv_shared", "no_cache"):
            continue
        key = (l.attn, l.kv_heads, l.dk, l.dv, l.window, tuple((s.name, s.hf_elements, s.hf_dtype, s.vllm_elements,
                                                                   s.vllm_dtype) for s in l.states))
        groups.setdefault(l.label, {}).setdefault(key, 0)
        groups[l.label][key] += 1
    out: dict[str, str] = {}
    for label, shapes in groups.items():
        parts = []
        for (attn, heads, dk, dv, window, states), n in shapes.items():
            bits = []
            if attn == "mla":
                bits.append(f"{n} x (kv_lora_rank {dk} + qk_rope_head_dim {dv}) x {_elem(dtype)} per token")
            elif attn:
                bits.append(f"{n} x {heads} KV heads x ({dk} + {dv}) x {_elem(dtype)} per token")
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


def _default_encoder_len(arch: Any) -> int | None:
    cfg = arch.text_config or {}
    for key in ("max_source_positions", "max_encoder_position_embeddings", "n_positions", "max_position_embeddings"):
        v = _int(cfg.get(key))
        if v:
            return v
    return arch.max_position_embeddings


def estimate_kv(
    arch: Any,
    context: int,
    batch: int = 1,
    kv_dtype: str = "auto",
    engine: str = "vllm",
    encoder_len: int | None = None,
    tp: int = 1,
    block_size: int = 16,
    max_batched_tokens: int = 8192,
    weights_dtype: str | None = None,
) -> KVCacheEstimate:
    """KV cache for `batch` sequences of `context` tokens under `engine`; exact integer bytes (per GPU if tp > 1).

    weights_dtype: the stored tensors' dominant float dtype ("BF16", ...), used when config.json has no dtype."""
    if engine not in ENGINES:
        raise UsageError(f"--engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    for name, value in (("context", context), ("batch", batch), ("tp", tp), ("block_size", block_size),
                        ("max_batched_tokens", max_batched_tokens)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UsageError(f"{name} must be a positive integer, got {value!r}")
    assumptions: list[str] = []
    warnings: list[str] = []
    dtype = _resolve_dtype(arch, kv_dtype, engine, assumptions, weights_dtype)
    if arch.is_encoder_decoder and encoder_len is None:
        encoder_len = _default_encoder_len(arch)
        if encoder_len is None:
            raise UsageError("encoder-decoder model without a maximum source length: give --encoder-len")
    layers = describe_layers(arch, engine, tp, encoder_len, assumptions, warnings, weights_dtype)
    limit = _int((arch.text_config or {}).get("max_target_positions")) or arch.max_position_embeddings
    if limit and context > limit:
        warnings.append(f"context {context:,} exceeds the model's {limit:,} positions (vLLM refuses it unless overridden)")
    if arch.is_encoder_decoder:
        assumptions.append(f"cross-attention cache sized by an encoder input of {encoder_len:,} tokens (--encoder-len)")
    if tp > 1:
        assumptions.append(f"per-GPU bytes at tensor parallel size {tp} (KV heads max(1, n_kv // tp); MLA not split)")
    if engine == "transformers":
        est = _transformers(layers, dtype, context, batch)
    else:
        est = _vllm(arch, layers, dtype, context, batch, block_size, max_batched_tokens, assumptions, warnings)
        if arch.is_encoder_decoder and arch.model_type not in ("whisper",):
            warnings.append(f"vLLM V1 may not serve {arch.model_type} (encoder-decoder support is limited to a few models)")
    est.tp, est.encoder_len = tp, encoder_len if arch.is_encoder_decoder else None
    est.formulas = _formulas(layers, dtype, engine, context, max_batched_tokens, est.block_size or block_size)
    est.assumptions = assumptions + est.assumptions
    est.warnings = warnings + est.warnings
    return est


def _add(table: dict[str, dict[str, int]], label: str, **values: int) -> None:
    entry = table.setdefault(label, {"layers": 0, "tokens": 0, "bytes": 0})
    for key, value in values.items():
        if key == "tokens":
            entry["tokens"] = max(entry["tokens"], value)
        else:
            entry[key] = entry.get(key, 0) + value


def _transformers(layers: list[_Layer], dtype: str, context: int, batch: int) -> KVCacheEstimate:
    by: dict[str, dict[str, int]] = {}
    per_token = 0
    constant = 0
    bookkeeping = 0
    prefill_storage = 0
    decode_storage = 0
    for layer in layers:
        bpt = _attn_bytes_per_token(layer, dtype, "transformers") if layer.attn else 0
        states = _state_bytes(layer, "transformers")
        tokens = 0
        grow = 0
        bounded = states
        prefill_tokens = decode_tokens = 0
        if layer.attn in ("full", "mla"):
            tokens = prefill_tokens = decode_tokens = context
            grow = bpt
        elif layer.attn in ("sliding", "chunked"):
            tokens = min(context, layer.window - 1)  # DynamicSlidingWindowLayer keeps the last window - 1 tokens
            bounded += tokens * bpt
            bookkeeping += _SLIDING_BOOKKEEPING
            prefill_tokens = context  # the kept slice is a view of the full prefill concatenation
            decode_tokens = min(context, layer.window)  # after a decode step: a view of (window - 1) + 1 tokens
        elif layer.attn == "cross":
            tokens = prefill_tokens = decode_tokens = layer.window or 0
            bounded += tokens * bpt
        per_token += grow
        constant += bounded
        layer_bytes = batch * (grow * context + bounded)
        prefill_storage += batch * (prefill_tokens * bpt + states)
        decode_storage += batch * (decode_tokens * bpt + states)
        if layer.label in ("kv_shared", "no_cache"):
            _add(by, layer.label, layers=1)
            continue
        _add(by, layer.label, layers=1, tokens=tokens, bytes=layer_bytes, bytes_per_token=bpt, state_bytes=states)
    for entry in by.values():
        entry.setdefault("bytes_per_token", 0)
        entry.setdefault("state_bytes", 0)
    total = batch * (per_token * context + constant) + bookkeeping
    return KVCacheEstimate(
        engine="transformers", dtype=dtype, context=context, batch=batch, bytes_per_token=per_token,
        constant_bytes=constant, total_bytes=total, by_layer_type=by, total_is=(
            "bytes of the tensors DynamicCache holds after a prefill of the context (sliding layers: window - 1 tokens)"
        ),
        bookkeeping_bytes=bookkeeping,
        storage_bytes={"after_prefill": prefill_storage + bookkeeping, "while_decoding": decode_storage + bookkeeping},
        assumptions=["transformers 5.24 DynamicCache; recurrent states float32 as on its PyTorch paths"]
        if any(l.states for l in layers) else ["transformers 5.24 DynamicCache"],
    )


# ---- vLLM -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Spec:
    """One layer's vLLM KV cache spec (per GPU)."""

    kind: str  # full | sliding | chunked | mamba | cross
    block_size: int
    page: int  # bytes of one block of this layer
    window: int | None = None

    def usage(self, context: int, mbt: int, encoder_len: int | None) -> int:
        """max_memory_usage_bytes with max_model_len = context (kv_cache_interface.py)."""
        bs = self.block_size
        if self.kind == "full":
            return cdiv(context, bs) * self.page
        if self.kind == "sliding":  # SlidingWindowSpec: +1 because the window may start mid-block
            return (cdiv(min(self.window - 1 + mbt, context), bs) + 1) * self.page
        if self.kind == "chunked":  # ChunkedLocalAttentionSpec
            return cdiv(min(self.window + mbt, context), bs) * self.page
        if self.kind == "mamba":  # MambaSpec, mamba_cache_mode "none", no speculative blocks
            return self.page
        if self.kind == "cross":  # CrossAttentionSpec: max_num_encoder_input_tokens
            return cdiv(encoder_len or 0, bs) * self.page
        raise AssertionError(self.kind)


def _vllm_specs(layers: list[_Layer], dtype: str, block_size: int, full_only: bool,
                assumptions: list[str]) -> tuple[dict[int, _Spec], int]:
    """Per-layer specs after HybridAttentionMambaModelConfig's block-size/padding rule."""
    attn_layers = [l for l in layers if l.attn]
    state_layers = [l for l in layers if l.states]
    bs = block_size
    if attn_layers and state_layers:
        # models/config.py HybridAttentionMambaModelConfig: attention page (per token) from the first attention
        # layer; block size = 16 * cdiv(mamba_page, 16 * attn_page_1_token) if larger than the configured one.
        p1 = _attn_bytes_per_token(attn_layers[0], dtype, "vllm")
        mamba_page = max(_state_bytes(l, "vllm") for l in state_layers)
        needed = 16 * cdiv(mamba_page, 16 * p1)
        if bs < needed:
            assumptions.append(f"hybrid attention/state model: vLLM raises the attention block size to {needed} tokens "
                               "so one attention page holds one state page (state page padded to it)")
            bs = needed
    specs: dict[int, _Spec] = {}
    attn_page_for_state = None
    if attn_layers and state_layers:
        attn_page_for_state = bs * _attn_bytes_per_token(attn_layers[0], dtype, "vllm")
    for l in layers:
        if l.attn:
            kind = {"mla": "full", "full": "full", "sliding": "sliding", "chunked": "chunked", "cross": "cross"}[l.attn]
            if full_only and kind in ("sliding", "chunked"):
                kind = "full"
            page = bs * _attn_bytes_per_token(l, dtype, "vllm")
            specs[l.index] = _Spec(kind, bs, page, l.window if kind in ("sliding", "chunked") else None)
        if l.states:
            page = _state_bytes(l, "vllm")
            padded = max(page, attn_page_for_state or 0)
            # a hybrid layer (attention + state in one layer, e.g. Falcon-H1) registers two specs in vLLM
            specs[-1 - l.index if l.attn else l.index] = _Spec("mamba", bs, padded)
    return specs, bs


def _vllm_groups(specs: dict[int, _Spec], assumptions: list[str]) -> tuple[list[tuple[_Spec, list[int]]], int, bool]:
    """(groups as (spec, member layer keys), group_size, general_case) following get_kv_cache_groups."""
    values = list(specs.values())
    if not values:
        return [], 0, False
    if all(v == values[0] for v in values):  # is_kv_cache_spec_uniform
        return [(values[0], list(specs))], len(values), False
    kinds = {(v.kind, v.window, v.block_size) for v in values}
    if len(kinds) == 1:  # UniformTypeKVCacheSpecs: one group, pages summed per layer
        return [(v, [k]) for k, v in specs.items()], 1, False
    # unify_kv_cache_spec_page_size: enlarge the block size of smaller pages to the largest page
    max_page = max(v.page for v in values)
    unified: dict[int, _Spec] = {}
    for key, v in specs.items():
        if v.page == max_page:
            unified[key] = v
            continue
        if max_page % v.page:
            raise UsageError("vLLM cannot unify this model's KV page sizes (not divisible); no vLLM estimate")
        ratio = max_page // v.page
        unified[key] = replace(v, block_size=v.block_size * ratio, page=max_page)
    same: dict[_Spec, list[int]] = {}
    for key, v in unified.items():
        same.setdefault(v, []).append(key)
    counts = [len(m) for m in same.values()]
    group_size = min(counts)
    if max(counts) < group_size * 1.5:
        group_size = max(counts)
    groups: list[tuple[_Spec, list[int]]] = []
    for spec, members in same.items():
        n_groups = cdiv(len(members), group_size)
        pad = n_groups * group_size - len(members)
        if pad:
            assumptions.append(f"vLLM pads {len(members)} {spec.kind} layers to {n_groups * group_size} "
                               f"(groups of {group_size}): {pad} padding layer(s) of pages")
        for g in range(n_groups):
            groups.append((spec, members[g::n_groups]))
    return groups, group_size, True


def _vllm_per_request(layers: list[_Layer], specs: dict[int, _Spec], context: int, mbt: int,
                      assumptions: list[str]) -> tuple[int, int, dict[str, dict[str, int]], int]:
    """(bytes one request of `context` tokens reserves, of which in growing full-attention pages, per-label split,
    bytes of one pool block across layers: the divisor of get_num_blocks and get_max_concurrency_for_kv_cache_config)."""
    groups, group_size, general = _vllm_groups(specs, assumptions)
    label_of = {}
    for l in layers:
        if l.attn:
            label_of[l.index] = l.label
        if l.states:
            label_of[-1 - l.index if l.attn else l.index] = l.label
    enc = next((l.window for l in layers if l.attn == "cross"), None)
    by: dict[str, dict[str, int]] = {}
    total = growing = 0
    if general:
        bytes_per_block = group_size * groups[0][0].page
    else:
        bytes_per_block = sum(spec.page * len(members) for spec, members in groups)
    for spec, members in groups:
        blocks = cdiv(spec.usage(context, mbt, enc), spec.page)
        if general:  # _max_memory_usage_bytes_from_groups: group_size pools, one layer of every group each
            group_bytes = group_size * spec.page * blocks
            _add(by, label_of[members[0]], bytes=group_bytes, padding_slots=group_size - len(members),
                 tokens=blocks * spec.block_size if spec.kind != "mamba" else 0)
        else:  # uniform spec / uniform type: every layer its own pages
            group_bytes = len(members) * spec.page * blocks
            for key in members:
                _add(by, label_of[key], bytes=spec.page * blocks,
                     tokens=blocks * spec.block_size if spec.kind != "mamba" else 0)
        total += group_bytes
        if spec.kind == "full":
            growing += group_bytes
    return total, growing, by, bytes_per_block


def _vllm(arch: Any, layers: list[_Layer], dtype: str, context: int, batch: int, block_size: int, mbt: int,
          assumptions: list[str], warnings: list[str]) -> KVCacheEstimate:
    local: list[str] = []
    specs, bs = _vllm_specs(layers, dtype, block_size, False, local)
    per_request, growing, by_req, bytes_per_block = _vllm_per_request(layers, specs, context, mbt, local)
    has_window = any(l.attn in ("sliding", "chunked") for l in layers)
    reserved = per_request
    if has_window:
        full_specs, _ = _vllm_specs(layers, dtype, block_size, True, [])
        reserved, _, _, _ = _vllm_per_request(layers, full_specs, context, mbt, [])
    by: dict[str, dict[str, int]] = {}
    per_token = 0
    for l in layers:
        if l.label in ("kv_shared", "no_cache"):
            _add(by, l.label, layers=1)
            continue
        bpt = _attn_bytes_per_token(l, dtype, "vllm") if l.attn else 0
        if l.attn in ("full", "mla"):
            per_token += bpt
        _add(by, l.label, layers=1, bytes_per_token=bpt, state_bytes=_state_bytes(l, "vllm"))
    for label, entry in by_req.items():
        target = by.setdefault(label, {"layers": 0})
        target["bytes"] = batch * entry.get("bytes", 0)
        target["tokens"] = entry.get("tokens", 0)
        if entry.get("padding_slots"):
            target["padding_layers"] = entry["padding_slots"]
    for entry in by.values():
        for key in ("tokens", "bytes", "bytes_per_token", "state_bytes"):
            entry.setdefault(key, 0)
    assumptions_v = [f"vLLM V1 paged KV cache: block_size {bs}, rounded up to whole blocks per layer group"]
    if has_window:
        assumptions_v.append(
            f"sliding/chunked layers: vLLM's admission bound min(window - 1 + max_num_batched_tokens ({mbt:,}), "
            "context) + 1 block; page_reserved_total_bytes gives them full-length pages "
            "(--disable-hybrid-kv-cache-manager)"
        )
    if arch.mla is not None:
        assumptions_v.append("MLA backends that force a larger block size (FlashMLA: 64) round to that instead")
    if any(l.states for l in layers):
        assumptions_v.append("state layers: one state page per request (mamba_cache_mode 'none', no speculative decoding)")
    return KVCacheEstimate(
        engine="vllm", dtype=dtype, context=context, batch=batch, bytes_per_token=per_token,
        constant_bytes=per_request - growing, total_bytes=batch * per_request, by_layer_type=by, block_size=bs,
        page_reserved_total_bytes=batch * reserved, bytes_per_block=bytes_per_block,
        blocks_per_request=cdiv(per_request, bytes_per_block) if bytes_per_block else 0,
        total_is=("window-capped: hybrid KV cache manager on (vLLM default)" if has_window
                  else "blocks vLLM reserves for the requests"),
        assumptions=assumptions_v + local,
    )


# --------------------------------------------------------------------------------------------------------------
# The section the CLI / planner attaches to a Report


def stored_float_dtype(by_dtype: dict[str, int] | None) -> str | None:
    """The dominant floating dtype of the stored tensors (Parameters.by_dtype), e.g. "BF16"."""
    floats = {k: v for k, v in (by_dtype or {}).items() if k in _ST_TO_SHORT}
    return max(floats, key=floats.get) if floats else None


def kv_section(
    arch: Any, contexts: list[int], batch: int = 1, kv_dtype: str = "auto", engine: str = "vllm",
    encoder_len: int | None = None, tp: int = 1, weights_dtype: str | None = None,
) -> KVCacheEstimate | KVCacheSeries:
    estimates = [estimate_kv(arch, c, batch=batch, kv_dtype=kv_dtype, engine=engine, encoder_len=encoder_len, tp=tp,
                             weights_dtype=weights_dtype) for c in contexts]
    return estimates[0] if len(estimates) == 1 else KVCacheSeries(estimates)
