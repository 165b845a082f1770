"""Check config.json values before anything trusts them (transformers' config classes included)."""

# A config is written by strangers. transformers builds lists in proportion to some values (``layer_types`` has
# ``num_hidden_layers`` entries), and hfmem divides by others, so absurd values are refused here, with the file and
# the field named, before they reach either. Checks apply to every nested object (``text_config``,
# ``vision_config``, ...), since transformers builds those sub-configs too.

from __future__ import annotations

from typing import Any

from hfmem.errors import MalformedConfig

# (keys, smallest, largest). None is always allowed: it means "not set".
_LIMITS: tuple[tuple[tuple[str, ...], int, int], ...] = (
    (
        ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "num_decoder_layers", "decoder_layers",
         "encoder_layers", "num_encoder_layers"),
        0, 10_000,
    ),
    (
        ("num_attention_heads", "n_head", "num_heads", "num_key_value_heads", "num_kv_heads", "n_head_kv",
         "multi_query_group_num", "encoder_attention_heads", "decoder_attention_heads"),
        0, 1_000_000,
    ),
    (
        ("hidden_size", "n_embd", "d_model", "intermediate_size", "d_ff", "ffn_dim", "head_dim", "d_kv",
         "moe_intermediate_size", "shared_expert_intermediate_size", "kv_lora_rank", "q_lora_rank",
         "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "ffn_hidden_size"),
        0, 100_000_000,
    ),
    (("vocab_size", "padded_vocab_size"), 1, 1_000_000_000),
    # a window of tokens (0: off in some configs); the KV estimators, the planner and the roofline read it as a count
    (("sliding_window",), 0, 1 << 40),
    (
        ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts", "num_experts_per_tok",
         "n_shared_experts", "num_shared_experts", "first_k_dense_replace", "decoder_sparse_step"),
        0, 1_000_000,
    ),
)  # fmt: skip
_LIMIT_OF = {key: (lo, hi) for keys, lo, hi in _LIMITS for key in keys}
# Keys that must be positive in the decoder config that hfmem analyses (0 is refused there, allowed elsewhere).
# kv_lora_rank: the width of MLA's cached latent (DeepSeek-V2, arXiv 2405.04434 section 2.1.2); 0 would be a cache
# of nothing, which no MLA model has (q_lora_rank may be 0 or null: DeepSeek-V2-Lite projects queries directly).
_POSITIVE = ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "hidden_size", "n_embd", "d_model", "vocab_size",
             "kv_lora_rank")
_QUANT_INTS = {"bits": (1, 64), "w_bit": (1, 64), "num_bits": (1, 64), "group_size": (-1, 1 << 30), "q_group_size": (-1, 1 << 30)}


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return None


def _check_int(obj: dict[str, Any], key: str, lo: int, hi: int, where: str, file: str) -> None:
    value = obj.get(key)
    if value is None:
        return
    as_int = _as_int(value)
    if as_int is None:
        raise MalformedConfig(f"{file}: {where}{key} must be an integer, got {_show(value)}", path=file)
    if not lo <= as_int <= hi:
        raise MalformedConfig(f"{file}: {where}{key} = {as_int} is out of range ({lo}..{hi})", path=file)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_config(config: dict[str, Any], file: str = "config.json") -> list[str]:
    """Raise MalformedConfig naming the file and field for values no real model has; return warnings."""
    warnings: list[str] = []
    for key, kind in (("model_type", str), ("architectures", list)):
        value = config.get(key)
        if value is not None and not isinstance(value, kind):
            raise MalformedConfig(f"{file}: {key} must be a {'string' if kind is str else 'list'}, got {_show(value)}", path=file)
    arch = config.get("architectures")
    if isinstance(arch, list) and not all(isinstance(a, str) for a in arch):
        raise MalformedConfig(f"{file}: architectures must be a list of strings", path=file)
    # Every nested object, iteratively (depth is already bounded by load_json_text).
    stack: list[tuple[dict[str, Any], str]] = [(config, "")]
    while stack:
        obj, where = stack.pop()
        for key, (lo, hi) in _LIMIT_OF.items():
            if key in obj:
                _check_int(obj, key, lo, hi, where, file)
        # vLLM's get_rope refuses a factor outside (0, 1] (rotary_embedding/__init__.py), as transformers' rope checks do
        part = obj.get("partial_rotary_factor")
        if part is not None and (isinstance(part, bool) or not isinstance(part, (int, float)) or not 0 < part <= 1):
            raise MalformedConfig(f"{file}: {where}partial_rotary_factor must be a number in (0, 1], got {_show(part)}",
                                  path=file)
        tie = obj.get("tie_word_embeddings")
        if tie is not None and not isinstance(tie, bool):
            raise MalformedConfig(f"{file}: {where}tie_word_embeddings must be true or false, got {_show(tie)}", path=file)
        for key, value in obj.items():
            if isinstance(value, dict) and key != "quantization_config":
                stack.append((value, f"{where}{key}."))
    text_config = config.get("text_config")
    text: dict[str, Any] = text_config if isinstance(text_config, dict) else config
    prefix = "text_config." if text is not config else ""
    for key in _POSITIVE:
        value = _as_int(text.get(key))
        if value is not None and value <= 0:
            raise MalformedConfig(f"{file}: {prefix}{key} = {value} must be positive", path=file)
    heads = _as_int(text.get("num_attention_heads"))
    if heads == 0 and text.get("model_type") not in ("mamba", "mamba2", "falcon_mamba"):
        raise MalformedConfig(f"{file}: {prefix}num_attention_heads = 0 must be positive", path=file)
    _check_quantization(config, file)
    return warnings


def _check_quantization(config: dict[str, Any], file: str) -> None:
    holders = [("", config)]
    if isinstance(config.get("text_config"), dict):
        holders.append(("text_config.", config["text_config"]))
    for where, holder in holders:
        q = holder.get("quantization_config")
        if q is None:
            continue
        name = f"{where}quantization_config"
        if not isinstance(q, dict):
            raise MalformedConfig(f"{file}: {name} must be an object, got {_show(q)}", path=file)
        for key in ("quant_method", "quant_type", "fmt", "format"):
            if q.get(key) is not None and not isinstance(q[key], str):
                raise MalformedConfig(f"{file}: {name}.{key} must be a string, got {_show(q[key])}", path=file)
        for key, (lo, hi) in _QUANT_INTS.items():
            _check_int(q, key, lo, hi, name + ".", file)
        groups = q.get("config_groups")
        if groups is not None:
            if not isinstance(groups, dict) or not all(isinstance(g, dict) or g is None for g in groups.values()):
                raise MalformedConfig(f"{file}: {name}.config_groups must map names to objects", path=file)
            for gname, group in groups.items():
                weights = (group or {}).get("weights")
                if weights is None:
                    continue
                if not isinstance(weights, dict):
                    raise MalformedConfig(f"{file}: {name}.config_groups.{gname}.weights must be an object", path=file)
                for key in ("num_bits", "group_size"):
                    _check_int(weights, key, *_QUANT_INTS[key], f"{name}.config_groups.{gname}.weights.", file)
        block = q.get("weight_block_size")
        if block is not None and not (
            isinstance(block, list) and all(0 < (_as_int(b) or 0) <= 1 << 20 for b in block)
        ):
            raise MalformedConfig(f"{file}: {name}.weight_block_size must be a list of positive integers", path=file)
