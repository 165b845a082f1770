"""Architecture facts from config.json (normalised by hfmem.model.normalise, else read raw), cross-checked
against the safetensors header shapes."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Literal, overload

from hfmem.errors import MalformedConfig
from hfmem.hub.header import TensorEntry
from hfmem.model.normalise import as_dict, normalise_config

_MAMBA_TYPES = {"mamba", "mamba2", "falcon_mamba"}
_ABSURD = 10**9  # no real model has a billion layers, heads or a trillion-entry vocab


@dataclass
class MoeFacts:
    """Mixture-of-experts settings from the config (the tensors' view is ``moe.MoeSummary``)."""

    num_experts: int
    experts_per_token: int | None
    shared_experts: int
    moe_intermediate_size: int | None
    first_k_dense_replace: int | None
    decoder_sparse_step: int | None
    mlp_only_layers: list[int] | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "num_experts": self.num_experts, "experts_per_token": self.experts_per_token,
            "shared_experts": self.shared_experts, "moe_intermediate_size": self.moe_intermediate_size,
            "first_k_dense_replace": self.first_k_dense_replace, "decoder_sparse_step": self.decoder_sparse_step,
            "mlp_only_layers": self.mlp_only_layers,
        }  # fmt: skip


@dataclass
class MlaFacts:
    """Multi-head latent attention (DeepSeek-V2 paper, arXiv:2405.04434 section 2.1): the cache keeps one latent of
    ``kv_lora_rank`` plus a shared rotary key of ``qk_rope_head_dim`` per token and layer."""

    kv_lora_rank: int
    q_lora_rank: int | None
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "kv_lora_rank": self.kv_lora_rank, "q_lora_rank": self.q_lora_rank, "qk_nope_head_dim": self.qk_nope_head_dim,
            "qk_rope_head_dim": self.qk_rope_head_dim, "v_head_dim": self.v_head_dim,
        }  # fmt: skip


@dataclass
class Architecture:
    model_type: str
    architectures: list[str]
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    max_position_embeddings: int | None
    tie_word_embeddings: bool
    layer_types: dict[str, int]
    layer_type_list: list[str] = field(repr=False, default_factory=list)
    intermediate_size: int | None = None
    attention_kind: str = "gqa"  # mha | gqa | mqa | mla | none
    sliding_window: int | None = None
    torch_dtype: str | None = None
    is_encoder_decoder: bool = False
    num_decoder_layers: int | None = None
    moe: MoeFacts | None = None
    mla: MlaFacts | None = None
    normalised_by: str = "transformers"  # or "raw config.json"
    text_config: dict[str, Any] = field(repr=False, default_factory=dict)
    # Sparse-attention index key width (DSA indexer wk rows / MiniMax-M3 indexer k_proj rows) when the weights
    # were checked; None: the config's value is used. Not in to_dict (the JSON contract).
    index_head_dim: int | None = field(default=None, repr=False)
    # The lines cross_check wrote where the weights overrode a cache-shaping config value (reported as warnings).
    weight_overrides: list[str] = field(default_factory=list, repr=False)
    # The config's vision_config as stored (vLLM's profile runs the vision tower: hfmem/memory/vllm_encoder.py).
    # Not in to_dict (the JSON contract).
    vision_config: dict[str, Any] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_type": self.model_type,
            "architectures": list(self.architectures),
            "num_layers": self.num_layers,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_attention_heads": self.num_attention_heads,
            "num_kv_heads": self.num_kv_heads,
            "head_dim": self.head_dim,
            "attention_kind": self.attention_kind,
            "vocab_size": self.vocab_size,
            "max_position_embeddings": self.max_position_embeddings,
            "tie_word_embeddings": self.tie_word_embeddings,
            "sliding_window": self.sliding_window,
            "layer_types": dict(self.layer_types),
            "torch_dtype": self.torch_dtype,
            "is_encoder_decoder": self.is_encoder_decoder,
            "num_decoder_layers": self.num_decoder_layers,
            "moe": self.moe.to_dict() if self.moe else None,
            "mla": self.mla.to_dict() if self.mla else None,
            "normalised_by": self.normalised_by,
        }


def _get(obj: Any, *names: str, default: Any = None) -> Any:
    """First present, non-None attribute/key. Heterogeneous per-layer configs (Gemma 4) raise on attributes whose
    value differs by layer: then the stored (config.json) value is used."""
    for name in names:
        try:
            value = obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)
        except Exception:
            try:
                value = object.__getattribute__(obj, "__dict__").get(name)
            except Exception:
                value = None
        if value is not None:
            return value
    return default


@overload
def _positive_int(value: Any, field_name: str, required: Literal[True] = ...) -> int: ...


@overload
def _positive_int(value: Any, field_name: str, required: bool) -> int | None: ...


def _positive_int(value: Any, field_name: str, required: bool = True) -> int | None:
    if value is None:
        if required:
            raise MalformedConfig(f"config.json: missing {field_name}", path="config.json")
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise MalformedConfig(f"config.json: {field_name} must be an integer, got {value!r}"[:160], path="config.json")
    if value <= 0 or value > _ABSURD * (1000 if field_name == "vocab_size" else 1):
        raise MalformedConfig(f"config.json: {field_name} = {value} is out of range", path="config.json")
    return value


def build_architecture(config: dict[str, Any], entries: list[TensorEntry] | None = None) -> tuple[Architecture, list[str]]:
    full, text, how, notes = normalise_config(config)
    warnings: list[str] = []
    nested = config.get("text_config")
    raw_text: dict[str, Any] = nested if isinstance(nested, dict) else config
    model_type = str(_get(full, "model_type", default=config.get("model_type") or "unknown"))
    text_type = str(_get(text, "model_type", default=model_type))

    declared_layers = _get(text, "num_hidden_layers", "n_layer", "num_layers", "n_layers")
    if declared_layers is None:
        # transformers 5 saves Nemotron-H with its block list only (NemotronHConfig drops num_hidden_layers)
        blocks = _get(text, "layers_block_type", "hybrid_override_pattern")
        declared_layers = len(blocks) if isinstance(blocks, (list, str)) and blocks else None
    num_layers = _positive_int(declared_layers, "num_hidden_layers")
    hidden = _positive_int(_get(text, "hidden_size", "n_embd", "d_model", "dim"), "hidden_size")
    vocab = _positive_int(_get(text, "vocab_size", "padded_vocab_size"), "vocab_size")
    is_mamba = text_type in _MAMBA_TYPES
    heads = _positive_int(_get(text, "num_attention_heads", "n_head", "num_heads"), "num_attention_heads", required=not is_mamba) or 0
    kv_heads = _get(text, "num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num")
    if _get(text, "multi_query", default=False) is True and not _get(text, "new_decoder_architecture", default=False):
        kv_heads = 1  # Falcon-7B style multi-query: configs may still carry num_kv_heads = num_attention_heads
    kv_heads = _positive_int(kv_heads, "num_key_value_heads", required=False) or heads
    head_dim = _get(text, "head_dim", "hidden_size_per_head", "d_kv", "attention_head_dim")
    mla = None
    if _get(text, "kv_lora_rank") is not None:
        nope = int(_get(text, "qk_nope_head_dim", default=0))
        rope = int(_get(text, "qk_rope_head_dim", default=0))
        mla = MlaFacts(
            kv_lora_rank=int(_get(text, "kv_lora_rank")),
            q_lora_rank=_get(text, "q_lora_rank"),
            qk_nope_head_dim=nope,
            qk_rope_head_dim=rope,
            v_head_dim=int(_get(text, "v_head_dim", default=nope)),
        )
        head_dim = nope + rope  # the query/key head size; the cache holds the latent instead
        declared_qk = raw_text.get("qk_head_dim")  # transformers recomputes it; the file's own value is evidence
        if isinstance(declared_qk, int) and not isinstance(declared_qk, bool) and declared_qk != head_dim and not entries:
            warnings.append(
                f"config.json qk_head_dim {declared_qk} != qk_nope_head_dim {nope} + qk_rope_head_dim {rope}: the MLA "
                f"rope width (cached per token) is uncertain without the weights; using qk_rope_head_dim {rope}"
            )
    if head_dim is None and heads:
        if hidden % heads:
            raise MalformedConfig(
                f"config.json: hidden_size {hidden} is not divisible by num_attention_heads {heads} and head_dim is absent",
                path="config.json",
            )
        head_dim = hidden // heads
    head_dim = _positive_int(head_dim, "head_dim", required=False) or 0
    if heads and kv_heads > heads:
        warnings.append(f"config.json: num_key_value_heads {kv_heads} > num_attention_heads {heads}")

    layer_list = _layer_types(text, raw_text, text_type, num_layers)
    if mla is not None:
        attention_kind = "mla"
    elif is_mamba or not heads:
        attention_kind = "none"
    elif kv_heads == heads:
        attention_kind = "mha"
    elif kv_heads == 1:
        attention_kind = "mqa"
    else:
        attention_kind = "gqa"

    tie = _get(full, "tie_word_embeddings")
    if tie is None:
        tie = _get(text, "tie_word_embeddings", default=False)
    max_pos = _get(text, "max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length")
    max_pos = max_pos if isinstance(max_pos, int) and not isinstance(max_pos, bool) and max_pos > 0 else None
    sliding = _get(text, "sliding_window")
    if _get(text, "use_sliding_window") is False or not isinstance(sliding, int) or "sliding_attention" not in layer_list:
        sliding = None if "sliding_attention" not in layer_list else sliding
    # transformers' from_pretrained(dtype="auto") applies the top-level config dtype to every sub-config
    dtype = _get(full, "torch_dtype", "dtype") or _get(text, "torch_dtype", "dtype")
    dtype = str(dtype).replace("torch.", "") if dtype is not None else None
    is_enc_dec = bool(_get(full, "is_encoder_decoder", default=False))
    # The full config: Whisper's decoder view of its config carries a stale default decoder_layers (4).
    num_decoder_layers = _get(full, "decoder_layers", "num_decoder_layers") if is_enc_dec else None

    arch = Architecture(
        model_type=model_type,
        architectures=list(config.get("architectures") or []),
        num_layers=num_layers,
        hidden_size=hidden,
        intermediate_size=_get(text, "intermediate_size", "n_inner", "d_ff", "ffn_dim", "ffn_hidden_size"),
        num_attention_heads=heads,
        num_kv_heads=kv_heads if heads else 0,
        head_dim=head_dim,
        vocab_size=vocab,
        max_position_embeddings=max_pos,
        tie_word_embeddings=bool(tie),
        layer_types=dict(Counter(layer_list)),
        layer_type_list=layer_list,
        attention_kind=attention_kind,
        sliding_window=sliding,
        torch_dtype=dtype,
        is_encoder_decoder=is_enc_dec,
        num_decoder_layers=num_decoder_layers,
        moe=_moe_facts(text),
        mla=mla,
        normalised_by=how,
        text_config=as_dict(text),
        vision_config=dict(config["vision_config"]) if isinstance(config.get("vision_config"), dict) else {},
    )
    if entries:
        warnings.extend(cross_check(arch, entries))
    return arch, notes + warnings


def _layer_types(text: Any, raw: dict[str, Any], text_type: str, num_layers: int) -> list[str]:
    if text_type in _MAMBA_TYPES:
        return ["mamba"] * num_layers
    pattern = _get(text, "hybrid_override_pattern")
    if isinstance(pattern, str) and pattern:  # Nemotron-H: M = Mamba2, * = attention, - = MLP only
        names = {"M": "mamba", "*": "full_attention", "-": "mlp_only", "E": "moe_only"}
        return [names.get(ch, "other") for ch in pattern]
    hybrid = _get(text, "hybrid_layer_pattern")
    if isinstance(hybrid, list) and len(hybrid) >= num_layers and all(x in (0, 1) for x in hybrid):
        # MiMo-V2 (remote-code config): 1 marks a sliding-window layer, 0 a full-attention one (vllm,
        # model_executor/models/mimo_v2.py: MiMoV2DecoderLayer.is_compressed_softmax_layer)
        return ["sliding_attention" if x == 1 else "full_attention" for x in hybrid[:num_layers]]
    block_types = _get(text, "layers_block_type")
    if isinstance(block_types, list) and block_types:  # Jamba / Zamba / Bamba / Falcon-H1 (transformers' names)
        block_names = {"linear_attention": "linear_attention", "hybrid": "hybrid", "mlp": "mlp_only", "moe": "moe_only"}
        return [
            "mamba" if str(b).startswith("mamba") else block_names.get(str(b), "full_attention") for b in block_types
        ]
    declared = _get(text, "layer_types")
    if isinstance(declared, list) and declared and all(isinstance(x, str) for x in declared):
        return list(declared)[:num_layers] if len(declared) >= num_layers else list(declared)
    window = _get(text, "sliding_window")
    if isinstance(window, int) and window > 0 and _get(text, "use_sliding_window") is not False:
        return ["sliding_attention"] * num_layers
    return ["full_attention"] * num_layers


def _moe_facts(text: Any) -> MoeFacts | None:
    experts = _get(text, "num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
    if not isinstance(experts, int) or experts <= 1:
        return None
    return MoeFacts(
        num_experts=experts,
        experts_per_token=_get(text, "num_experts_per_tok", "num_experts_per_token", "moe_top_k", "top_k"),
        shared_experts=_get(text, "n_shared_experts", "num_shared_experts", default=0) or (
            1 if _get(text, "shared_expert_intermediate_size") else 0
        ),
        moe_intermediate_size=_get(text, "moe_intermediate_size", "expert_intermediate_size"),
        first_k_dense_replace=_get(text, "first_k_dense_replace"),
        decoder_sparse_step=_get(text, "decoder_sparse_step"),
        mlp_only_layers=_get(text, "mlp_only_layers"),
    )


_name_of = attrgetter("name")


def cross_check(arch: Architecture, entries: list[TensorEntry]) -> list[str]:
    """Compare config facts with what the header shapes say; disagreements become warnings."""
    warnings: list[str] = []
    warnings.extend(_cache_shapes_from_weights(arch, entries))
    is_lm = any(a.endswith(("ForCausalLM", "ForConditionalGeneration", "LMHeadModel")) for a in arch.architectures)
    # (from the end: checkpoints store the output head in their last shards)
    if is_lm and not arch.tie_word_embeddings and not any(
        (n.endswith(("lm_head.weight", "embed_out.weight")) or n in ("head.weight", "output.weight")) and "mtp" not in n
        for n in map(_name_of, reversed(entries))
    ):
        warnings.append(
            "config says tie_word_embeddings is false but no lm_head is stored: the runtime will allocate "
            f"(and randomly initialise) a {arch.vocab_size} x {arch.hidden_size} lm_head"
        )
    return warnings


def _first_layer_tensor(arch: Architecture, entries: list[TensorEntry], *suffixes: str,
                        any_layer: bool = False, ndim: int = 2) -> TensorEntry | None:
    """The language model's first attention layer's `ndim`-D tensor ending in one of `suffixes` (not a vision/audio
    tower's, a talker's or an MTP layer's); any_layer: the lowest-numbered layer that has one (sparse-attention
    indexers are absent from some layers)."""
    import re

    from hfmem.model.inventory import classify_component

    best: tuple[int, TensorEntry] | None = None
    for t in entries:
        if not t.name.endswith(suffixes) or len(t.shape) != ndim or "talker" in t.name or "vision" in t.name:
            continue
        m = re.search(r"\.layers\.(\d+)\.", t.name)
        if m is None or (int(m.group(1)) != 0 and not any_layer) or int(m.group(1)) >= arch.num_layers:
            continue
        if classify_component(t.name, arch.num_layers) != "attention":
            continue
        if best is None or int(m.group(1)) < best[0]:
            best = (int(m.group(1)), t)
    return best[1] if best else None


# every suffix _cache_shapes_from_weights asks _first_layer_tensor for
_CACHE_SHAPE_SUFFIXES = ("self_attn.kv_a_proj_with_mqa.weight", "self_attn.kv_a_layernorm.weight",
                         "self_attn.indexer.wk.weight", "self_attn.indexer.k_proj.weight",
                         "self_attn.index_k_proj.weight", "self_attn.k_proj.weight")


def _cache_shapes_from_weights(arch: Architecture, entries: list[TensorEntry]) -> list[str]:
    """Cache-shaping config values checked against the projection that produces the cached rows. Where they
    disagree the weights win (the runtime could not load the checkpoint otherwise) and one line says which value
    was used: kv_lora_rank + qk_rope_head_dim vs kv_a_proj_with_mqa rows (MLA, DeepSeek-V2 paper section 2.1),
    index_head_dim vs the sparse-attention indexer's key projection rows, KV heads x head_dim vs k_proj rows."""
    out: list[str] = []
    # one pass over the tensors instead of one per look-up below (each filters on its own suffixes first, in order)
    entries = [t for t in entries if t.name.endswith(_CACHE_SHAPE_SUFFIXES)]

    def override(line: str) -> None:
        out.append(line)
        arch.weight_overrides.append(line)

    mla = arch.mla
    if mla is not None:
        kv_a = _first_layer_tensor(arch, entries, "self_attn.kv_a_proj_with_mqa.weight")
        if kv_a is not None and kv_a.shape[1] == arch.hidden_size and kv_a.shape[0] != mla.kv_lora_rank + mla.qk_rope_head_dim:
            norm = _first_layer_tensor(arch, entries, "self_attn.kv_a_layernorm.weight", ndim=1)
            rows = kv_a.shape[0]
            rank = mla.kv_lora_rank
            if norm is None or norm.shape[0] == rank:  # the latent is right: the rope part takes the rest
                if rows > rank:
                    override(
                        f"config.json qk_rope_head_dim {mla.qk_rope_head_dim} disagrees with the weights: "
                        f"kv_a_proj_with_mqa has {rows} rows = kv_lora_rank {rank} + {rows - rank}; using "
                        f"qk_rope_head_dim {rows - rank}"
                    )
                    mla.qk_rope_head_dim = rows - rank
                    arch.head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim
            else:
                out.append(f"kv_a_proj_with_mqa has {rows} rows but config gives kv_lora_rank {rank} + "
                           f"qk_rope_head_dim {mla.qk_rope_head_dim}; kv_a_layernorm has {norm.shape[0]}")
    sparse = _first_layer_tensor(arch, entries, "self_attn.indexer.wk.weight", "self_attn.indexer.k_proj.weight",
                                 "self_attn.index_k_proj.weight", any_layer=True)
    text = arch.text_config or {}
    declared = text.get("index_head_dim")
    if declared is None and isinstance(text.get("sparse_attention_config"), dict):
        declared = text["sparse_attention_config"].get("sparse_index_dim")
    if sparse is not None and sparse.shape[1] == arch.hidden_size:  # packed layouts (bitsandbytes [n, 1]) say nothing
        rows = sparse.shape[0]
        if isinstance(declared, int) and declared != rows:
            override(
                f"config.json index_head_dim {declared} disagrees with the weights: the indexer's key projection "
                f"{sparse.name.split('self_attn.')[-1]} has {rows} rows; using index_head_dim {rows}"
            )
        arch.index_head_dim = rows
    k_proj = _first_layer_tensor(arch, entries, "self_attn.k_proj.weight")
    if k_proj is not None and arch.attention_kind not in ("mla", "none") and arch.head_dim:
        rows = k_proj.shape[0]
        declared_kv = arch.num_kv_heads * arch.head_dim
        if rows != declared_kv:
            text_of = f"k_proj is [{rows}, {k_proj.shape[1]}] but config gives {arch.num_kv_heads} KV heads x head_dim " \
                      f"{arch.head_dim} = {declared_kv}"
            heterogeneous = isinstance(text.get("per_layer_config"), dict) or len(set(arch.layer_type_list)) > 1
            if (not heterogeneous and k_proj.shape[1] == arch.hidden_size and rows % arch.head_dim == 0
                    and rows // arch.head_dim <= max(arch.num_attention_heads, 1)):
                override(f"{text_of}; using {rows // arch.head_dim} KV heads")
                arch.num_kv_heads = rows // arch.head_dim
            else:  # layers differ (or the rows fit no head count): the KV figure keeps the config's value
                out.append(text_of)
    return out
