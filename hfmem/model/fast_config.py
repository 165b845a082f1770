"""transformers' config normalisation without importing transformers: config.json read against a table compiled from
transformers' config classes (``scripts/compile_configs.py`` writes ``hfmem.model.config_table``).

The table holds, per model_type, what ``AutoConfig.for_model(model_type, **config)`` does for the classes it covers:
the dataclass fields with their defaults and declared types, ``attribute_map``, and the names of the computations the
class's ``__post_init__`` and ``validate_*`` methods perform (matched by their source text when the table was
compiled, so an edited class is not covered until it is recompiled). This module replays the base
``PreTrainedConfig.__post_init__`` (transformers/configuration_utils.py) and those computations. Whatever it cannot
vouch for (a value of a type the strict dataclass would reject, nested or unknown RoPE parameters, per-layer
configs, a model_type or transformers version the table does not cover) returns None and the caller imports
transformers as before: the fast path never guesses.

The table covers every transformers release it was compiled and verified under (``TABLE["releases"]``): its body is
the newest release's knowledge, and each other release carries an overlay of what differs from it (per model_type
entries, the list of known types, base-class facts). table_applies() selects the installed release once, before any
other lookup, by applying its overlay to TABLE in place."""

from __future__ import annotations

import copy
from typing import Any

from hfmem.model.config_table import TABLE

_UNSET = object()


class _Fallback(Exception):
    """The table cannot say exactly what transformers would make of this config."""


_version_ok: bool | None = None
_installed: str | None = None  # the installed transformers version, once looked up (None: absent or not yet)


def table_applies() -> bool:
    """The table was compiled and verified under the installed transformers release (or transformers is absent: the
    table's newest release is then the only knowledge there is). Another version may have changed any class, so it
    falls back."""
    global _version_ok, _installed
    if _version_ok is None:
        try:
            from importlib.metadata import PackageNotFoundError, version

            try:
                _installed = version("transformers")
                _version_ok = select_release(TABLE, _installed)
            except PackageNotFoundError:
                _version_ok = True
        except Exception:
            _version_ok = False
    return _version_ok


def installed_transformers() -> str | None:
    """The installed transformers version (None when it is absent), looked up once with the table's release."""
    table_applies()
    return _installed


def select_release(table: dict[str, Any], release: str) -> bool:
    """Make ``table`` (the compiled body: the newest verified release) say what ``release`` does, by applying that
    release's overlay in place; False when the table was not verified under it. scripts/compile_configs.py writes the
    overlays (its _overlay) and reads them back with this."""
    releases = table.get("releases", {})
    if release not in releases:
        return False
    if table["transformers"] == release:
        return True
    for key, value in releases[release].items():
        if key == "types":  # per model_type: the entry this release compiles to, or None where it is not covered
            types = dict(table["types"])
            for model_type, entry in value.items():
                if entry is None:
                    types.pop(model_type, None)
                else:
                    types[model_type] = entry
            table["types"] = types
        elif key == "known_types":  # a long list: only what this release adds to or lacks from the body's
            table["known_types"] = sorted(set(table["known_types"]) - set(value["drop"]) | set(value["add"]))
        else:
            table[key] = value
    table["transformers"] = release
    return True


def covered(model_type: Any) -> bool:
    return table_applies() and isinstance(model_type, str) and model_type in TABLE["types"]  # the release first


def fallback_note(model_type: Any) -> str:
    """The note a report carries when transformers had to be imported (or replayed from the cache) instead."""
    if not table_applies():
        return (f"config normalised by importing transformers: hfmem's compiled config table is for transformers "
                f"{', '.join(TABLE['releases'])}, another version is installed"
                + (f" ({_installed})" if _installed else ""))
    if covered(model_type):
        return f"config normalised by importing transformers: this {model_type} config.json is outside hfmem's compiled table"
    return f"config normalised by importing transformers: model_type {model_type!r} is not in hfmem's compiled table"


def fast_normalise(config: dict[str, Any]) -> tuple[Any, Any] | None:
    """(full, text) config objects equal to transformers' on every attribute and to_dict() key hfmem reads, or None
    where only transformers can say."""
    model_type = config.get("model_type")
    if not covered(model_type):  # auto_map (custom code) is never run: transformers uses its own class too
        return None
    try:
        obj = _build(TABLE["types"][model_type], {k: v for k, v in config.items() if k != "model_type"})
    except _Fallback:
        return None
    from hfmem.model.normalise import ReplayedConfig

    entry = TABLE["types"][model_type]
    attrs = dict(obj.items())
    for alias, target in entry["attribute_map"].items():
        attrs[alias] = obj.get(target)
    attrs["torch_dtype"] = obj.get("dtype")  # PreTrainedConfig.torch_dtype: a deprecated alias of dtype
    attrs["model_type"] = model_type
    attrs["name_or_path"] = ""
    attrs["num_labels"] = len(obj["id2label"]) if obj.get("id2label") else None
    as_dict = dict(obj.items())
    as_dict.update(model_type=model_type, transformers_version=TABLE["transformers"], output_attentions=False,
                   _name_or_path="")
    full = ReplayedConfig(attrs, as_dict)
    return full, full  # covered classes have no sub-configs: get_text_config(decoder=True) is the config itself


def _check(value: Any, spec: Any) -> bool:
    """A value against a field's declared type, as huggingface_hub's strict dataclasses check it (exact types: an int
    is not a float, a bool is not an int)."""
    kind = spec[0]
    if kind == "any":
        return True
    if kind == "none":
        return value is None
    if kind == "int":
        return type(value) is int
    if kind == "float":
        return type(value) is float
    if kind == "bool":
        return type(value) is bool
    if kind == "str":
        return type(value) is str
    if kind == "lit":  # huggingface_hub's _validate_literal: a bool matches only bools, an int only ints
        if isinstance(value, bool):
            return value in [x for x in spec[1] if isinstance(x, bool)]
        if isinstance(value, int):
            return value in [x for x in spec[1] if isinstance(x, int) and not isinstance(x, bool)]
        return value in spec[1]
    if kind == "list":
        return type(value) is list and all(_check(x, spec[1]) for x in value)
    if kind == "dict":
        return type(value) is dict and all(_check(k, spec[1]) and _check(v, spec[2]) for k, v in value.items())
    if kind == "union":
        return any(_check(value, s) for s in spec[1])
    return False  # "unknown": a type the compiler could not describe


def _set_field(obj: dict[str, Any], entry: dict[str, Any], name: str, value: Any) -> None:
    spec = entry["types"].get(name)
    if spec is not None and not _check(value, spec):
        raise _Fallback(name)  # transformers rejects it (and hfmem reads the raw config): let transformers say so
    obj[name] = copy.deepcopy(value)


class _Obj(dict):
    """A config object's __dict__ as PreTrainedConfig.__setattr__/__getattribute__ see it: every name goes through
    attribute_map (a dataclass field that is also an alias, Qwen3-MoE's num_experts, is stored under its target)."""

    def __init__(self, amap: dict[str, str]):
        super().__init__()
        self.amap = amap

    def __getitem__(self, key: str) -> Any:
        return super().__getitem__(self.amap.get(key, key))

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(self.amap.get(key, key), value)

    def __contains__(self, key: object) -> bool:
        return super().__contains__(self.amap.get(key, key) if isinstance(key, str) else key)

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(self.amap.get(key, key), default)


def _build(entry: dict[str, Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = entry["fields"]
    amap: dict[str, str] = entry["attribute_map"]
    obj = _Obj(amap)
    # wrap_init_to_accept_kwargs: dataclass fields from the input or their defaults; the rest goes to __post_init__
    for name, default in fields.items():
        if name in kwargs:
            _set_field(obj, entry, name, kwargs[name])
        else:
            obj[name] = copy.deepcopy(default)
    kwargs = {k: v for k, v in kwargs.items() if k not in fields}
    for rule in entry["rules"]:
        _RULES[rule](obj, kwargs)
    _base_post_init(entry, obj, kwargs)
    for rule in entry["validators"]:
        _VALIDATORS[rule](obj)
    _validate_layer_type(obj)
    _validate_rope(obj)
    return obj


def _base_post_init(entry: dict[str, Any], obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """PreTrainedConfig.__post_init__ (transformers/configuration_utils.py), for a class without sub-configs."""
    fields, amap = entry["fields"], entry["attribute_map"]
    torch_dtype = kwargs.pop("torch_dtype", None)
    if torch_dtype is not None:
        obj["dtype"] = obj["dtype"] if obj["dtype"] is not None else torch_dtype
    dtype = obj["dtype"]
    if dtype is not None and (not isinstance(dtype, str) or dtype not in TABLE["torch_dtypes"]):
        raise _Fallback("dtype")  # getattr(torch, dtype) fails, or a dtype map: transformers' business
    if obj["id2label"] is None:
        if "num_labels" in kwargs:
            raise _Fallback("num_labels")
        obj["id2label"] = {i: f"LABEL_{i}" for i in range(2)}
        obj["label2id"] = {f"LABEL_{i}": i for i in range(2)}
    else:
        try:
            obj["id2label"] = {int(k): v for k, v in obj["id2label"].items()}
        except (TypeError, ValueError, AttributeError) as exc:
            raise _Fallback("id2label") from exc
    if obj.get("problem_type") is not None or "num_labels" in kwargs:
        raise _Fallback("problem_type")
    if "rope_parameters" in fields:
        kwargs = _convert_rope(entry, obj, kwargs)
    elif kwargs.get("rope_scaling") and kwargs.get("rope_theta"):
        raise _Fallback("rope without rope_parameters")
    for name in TABLE["generation_params"]:
        kwargs.pop(name, None)
    for name in ("name_or_path", "_commit_hash", "output_attentions", "attn_implementation", "experts_implementation"):
        kwargs.pop(name, None)
    if kwargs.get("per_layer_config") is not None:
        raise _Fallback("per_layer_config")  # heterogeneous configs: HeterogeneousConfigMixin
    kwargs.pop("per_layer_config", None)
    ignored = TABLE["ignored_keys"]  # keys __post_init__ never sets (5.25 added the public-looking _attn_implementation)
    for key, value in kwargs.items():
        if key in ignored:
            continue
        if key in entry["properties"]:
            raise _Fallback(key)  # a property setter (or a read-only one that raises) runs in transformers
        if key in fields or amap.get(key, key) in fields:
            _set_field(obj, entry, key if key in fields else amap[key], value)
        else:
            obj[key] = copy.deepcopy(value)
    # remap_legacy_layer_types
    remap = TABLE["legacy_layer_types"]
    for key in ("layer_types", "mtp_layer_types"):
        if isinstance(obj.get(key), list):
            obj[key] = [remap.get(t, t) if isinstance(t, str) else t for t in obj[key]]
        elif obj.get(key) is not None:
            raise _Fallback(key)


def _convert_rope(entry: dict[str, Any], obj: dict[str, Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """RotaryEmbeddingConfigMixin.convert_rope_params_to_dict + standardize_rope_params (modeling_rope_utils.py),
    flat (one dict for every layer) parameters only."""
    rope_scaling = kwargs.pop("rope_scaling", None)
    rope = rope_scaling or obj["rope_parameters"]
    rope = copy.deepcopy(rope) if rope is not None else {}
    if not isinstance(rope, dict):
        raise _Fallback("rope_parameters")
    theta = kwargs.pop("rope_theta", obj.get("rope_theta", entry["default_theta"]))
    partial = kwargs.pop("partial_rotary_factor", obj.get("partial_rotary_factor"))
    labels = obj.get("layer_types") or ()
    if any(key in labels for key in rope):
        raise _Fallback("nested rope_parameters")
    rope.setdefault("rope_theta", theta)
    if partial is not None:
        rope.setdefault("partial_rotary_factor", partial)
    if rope or obj.get("rope_theta"):
        rope.setdefault("rope_type", rope.get("type", "default"))  # "type": the legacy name of rope_type
        rope.setdefault("rope_theta", obj.get("rope_theta"))
        if obj.get("partial_rotary_factor") is not None:
            rope.setdefault("partial_rotary_factor", obj["partial_rotary_factor"])
        if rope["rope_type"] in ("llama3", "yarn", "longrope"):
            if "original_max_position_embeddings" in obj:
                rope["original_max_position_embeddings"] = obj["original_max_position_embeddings"]
            else:
                rope.setdefault("original_max_position_embeddings", _attr(entry, obj, "max_position_embeddings"))
    obj["rope_parameters"] = rope
    return kwargs


def _attr(entry: dict[str, Any], obj: dict[str, Any], name: str) -> Any:
    name = entry["attribute_map"].get(name, name)
    if name not in obj:
        raise _Fallback(name)  # AttributeError in transformers
    return obj[name]


def _validate_layer_type(obj: dict[str, Any]) -> None:
    """PreTrainedConfig.validate_layer_type: known names, one per layer (it returns at the first absent list)."""
    for allowed, key in ((TABLE["allowed_attn_layer_types"], "layer_types"), (("sparse", "dense"), "mlp_layer_types")):
        layers = obj.get(key)
        if layers is None or "num_hidden_layers" not in obj:
            return
        if not all(t in allowed for t in layers):
            raise _Fallback(key)
        if obj["num_hidden_layers"] is not None and obj["num_hidden_layers"] != len(layers):
            raise _Fallback(key)


def _validate_rope(obj: dict[str, Any]) -> None:
    """RotaryEmbeddingConfigMixin.validate_rope: the required keys per rope_type, and an even rotary dimension."""
    rope = obj.get("rope_parameters")
    if not rope:
        return
    rope_type = rope.get("rope_type", "default")
    required = TABLE["rope_required"].get(rope_type)
    if required is None:
        raise _Fallback(f"rope_type {rope_type}")
    if set(required) - (set(rope) - {"type"}):  # _check_received_keys
        raise _Fallback("rope keys")  # KeyError in transformers
    head_dim = obj.get("head_dim")
    partial = rope.get("partial_rotary_factor", 1.0)
    if isinstance(head_dim, int) and head_dim > 4 and head_dim % 2:
        try:
            odd = int(head_dim * partial) == head_dim
        except (TypeError, ValueError) as exc:
            raise _Fallback("partial_rotary_factor") from exc
        if odd:
            raise _Fallback("odd rotary dimension")


# ---------------------------------------------------------------------------------------------------------------
# The computations of config classes' __post_init__ / validate_architecture, by name. The compiler maps a class to
# these names only when its method's source is exactly the one each was written from (see scripts/compile_configs.py).


def _head_dim_default(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    if obj["head_dim"] is None:
        obj["head_dim"] = _floordiv(obj["hidden_size"], obj["num_attention_heads"])


def _kv_heads_default(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    if obj["num_key_value_heads"] is None:
        obj["num_key_value_heads"] = obj["num_attention_heads"]


def _sliding_if_used(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    obj["sliding_window"] = obj["sliding_window"] if obj["use_sliding_window"] else None


def _layer_types_max_window(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """Qwen2/Qwen3: layers from max_window_layers on slide when a window is set."""
    if obj["layer_types"] is None:
        obj["layer_types"] = [
            "sliding_attention" if obj["sliding_window"] is not None and i >= obj["max_window_layers"] else "full_attention"
            for i in range(obj["num_hidden_layers"])
        ]


def _layer_types_alternating(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """gpt-oss: even layers slide, odd layers attend fully."""
    if obj["layer_types"] is None:
        obj["layer_types"] = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(obj["num_hidden_layers"])]


def _mlp_only_layers_default(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    obj["mlp_only_layers"] = [] if obj["mlp_only_layers"] is None else obj["mlp_only_layers"]


def _gpt_oss_rope_default(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    if obj["rope_parameters"] is None:
        obj["rope_parameters"] = {
            "rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
            "original_max_position_embeddings": 4096,
        }  # fmt: skip


def _partial_rotary_half(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    kwargs.setdefault("partial_rotary_factor", 0.5)


def _partial_rotary_quarter(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    kwargs.setdefault("partial_rotary_factor", 0.25)


def _gemma_legacy_gelu(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """Gemma's released configs say "gelu" and mean the tanh approximation."""
    if obj["hidden_act"] == "gelu":
        obj["hidden_act"] = "gelu_pytorch_tanh"


def _mla_head_dims(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """DeepSeek-V2/V3: qk_head_dim = nope + rope; head_dim (the rotary width) = qk_rope_head_dim."""
    try:
        obj["qk_head_dim"] = obj["qk_nope_head_dim"] + obj["qk_rope_head_dim"]
    except TypeError as exc:
        raise _Fallback("qk_head_dim") from exc
    obj["head_dim"] = obj["qk_rope_head_dim"]


def _sliding_if_used_zero(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """Qwen2-MoE: the window is 0 (not None) when sliding is off."""
    obj["sliding_window"] = obj["sliding_window"] if obj["use_sliding_window"] else 0


def _layer_types_odd_sliding(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """Qwen2-MoE: even-indexed layers below max_window_layers slide when sliding is on."""
    if obj["layer_types"] is None:
        try:
            obj["layer_types"] = [
                "sliding_attention"
                if bool((i + 1) % 2) and i < obj["max_window_layers"] and obj["use_sliding_window"]
                else "full_attention"
                for i in range(obj["num_hidden_layers"])
            ]
        except TypeError as exc:
            raise _Fallback("layer_types") from exc


def _layer_types_linear_interval(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """Qwen3-Next: every full_attention_interval-th layer attends fully, the others are linear attention."""
    if obj["layer_types"] is None:
        interval = kwargs.pop("full_attention_interval", 4)
        try:
            obj["layer_types"] = ["linear_attention" if bool((i + 1) % interval) else "full_attention"
                                  for i in range(obj["num_hidden_layers"])]
        except (TypeError, ZeroDivisionError) as exc:
            raise _Fallback("full_attention_interval") from exc


def _mlp_layer_types_first_dense(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """GLM-4.7-Flash (glm4_moe_lite): the first layer dense, MoE from the second on."""
    if obj["mlp_layer_types"] is None:
        try:
            obj["mlp_layer_types"] = ["dense"] + ["sparse"] * (obj["num_hidden_layers"] - 1)
        except TypeError as exc:
            raise _Fallback("mlp_layer_types") from exc


def _qk_head_dim_sum(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """MLA: qk_head_dim = nope + rope (head_dim left as it is)."""
    try:
        obj["qk_head_dim"] = obj["qk_nope_head_dim"] + obj["qk_rope_head_dim"]
    except TypeError as exc:
        raise _Fallback("qk_head_dim") from exc


def _floordiv(a: Any, b: Any) -> Any:
    try:
        return a // b
    except (TypeError, ZeroDivisionError) as exc:
        raise _Fallback("head_dim") from exc


def _hidden_divisible_by_heads(obj: dict[str, Any]) -> None:
    try:
        bad = obj["hidden_size"] % obj["num_attention_heads"] != 0
    except (TypeError, ZeroDivisionError) as exc:
        raise _Fallback("hidden_size") from exc
    if bad:
        raise _Fallback("hidden_size % num_attention_heads")


_RULES = {
    "head_dim_default": _head_dim_default,
    "kv_heads_default": _kv_heads_default,
    "sliding_if_used": _sliding_if_used,
    "layer_types_max_window": _layer_types_max_window,
    "layer_types_alternating": _layer_types_alternating,
    "mlp_only_layers_default": _mlp_only_layers_default,
    "gpt_oss_rope_default": _gpt_oss_rope_default,
    "partial_rotary_half": _partial_rotary_half,
    "partial_rotary_quarter": _partial_rotary_quarter,
    "gemma_legacy_gelu": _gemma_legacy_gelu,
    "mla_head_dims": _mla_head_dims,
    "sliding_if_used_zero": _sliding_if_used_zero,
    "layer_types_odd_sliding": _layer_types_odd_sliding,
    "layer_types_linear_interval": _layer_types_linear_interval,
    "mlp_layer_types_first_dense": _mlp_layer_types_first_dense,
    "qk_head_dim_sum": _qk_head_dim_sum,
}
_VALIDATORS = {"hidden_divisible_by_heads": _hidden_divisible_by_heads}
RULE_NAMES = frozenset(_RULES)
VALIDATOR_NAMES = frozenset(_VALIDATORS)


# ---------------------------------------------------------------------------------------------------------------
# What "the same as transformers" means, for scripts/compile_configs.py and the side-by-side test: every attribute
# hfmem.model.architecture reads off the config objects (the names it passes to _get), and every key of the text
# config's to_dict() (which hfmem keeps as Architecture.text_config and the KV, planner and training code read)
# except these, which hfmem never reads: the RoPE dict (hfmem reads partial_rotary_factor only where a class keeps
# it as a field), and serialisation bookkeeping.
NOT_READ = frozenset({"rope_parameters", "transformers_version", "_name_or_path", "output_attentions"})


def used_attrs() -> list[str]:
    """The attribute names hfmem.model.architecture passes to _get, read from its source."""
    import ast
    import inspect

    from hfmem.model import architecture

    names: set[str] = set()
    for node in ast.walk(ast.parse(inspect.getsource(architecture))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "_get":
            names.update(a.value for a in node.args[1:] if isinstance(a, ast.Constant) and isinstance(a.value, str))
    return sorted(names)


def _plain(v: Any) -> Any:
    if type(v).__module__ == "torch" and type(v).__name__ == "dtype":
        return str(v).replace("torch.", "")
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (set, frozenset)):
        return sorted(v, key=repr)
    return v


def used_view(full: Any, text: Any) -> dict[str, Any]:
    """Everything hfmem reads from a normalisation, as comparable plain values."""
    from hfmem.model.architecture import _get
    from hfmem.model.normalise import as_dict

    out: dict[str, Any] = {}
    for owner, obj in (("full", full), ("text", text)):
        for name in used_attrs():
            out[f"{owner}.{name}"] = _plain(_get(obj, name))
    d = as_dict(text)
    out["text_config keys"] = sorted(set(d) - NOT_READ)
    for key in sorted(set(d) - NOT_READ):
        out[f"text_config[{key}]"] = _plain(d[key])
    out["mrope_section"] = _plain(mrope_section(d))  # the one part of the RoPE dict hfmem reads
    return out


def mrope_section(text_config: dict[str, Any]) -> Any:
    """The multimodal RoPE sections of a text config (Qwen2-VL family), wherever this transformers version keeps
    them (``rope_scaling`` before v5, ``rope_parameters`` after), or None. The only part of the RoPE dict hfmem
    reads, so used_view compares it although the dict itself is NOT_READ."""
    for key in ("rope_scaling", "rope_parameters"):
        rope = text_config.get(key)
        if isinstance(rope, dict) and rope.get("mrope_section"):
            return rope["mrope_section"]
    return None
