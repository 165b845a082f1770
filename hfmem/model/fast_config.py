"""transformers' config normalisation without importing transformers: config.json read against a table compiled from
transformers' config classes (``scripts/compile_configs.py`` writes ``hfmem.model.config_table``).

The table holds, per model_type, what ``AutoConfig.for_model(model_type, **config)`` does for the classes it covers:
the dataclass fields with their defaults and declared types (an ``interval`` validator included), ``attribute_map``,
and the names of the computations the class's ``__post_init__`` and ``validate_*`` methods perform, and of the few
overrides of ``to_dict`` and ``convert_rope_params_to_dict`` and read-only properties it knows (matched by their
source text when the table was compiled, so an edited class is not covered until it is recompiled), the module and
class constants those methods read, and for composite (text + vision) classes the sub-configs
``sub_configs_defaults`` builds, and for a legacy encoder-decoder (T5, Whisper) the class attributes its decoder text
config reads. This module replays the base ``PreTrainedConfig.__post_init__`` (transformers/configuration_utils.py),
sub-configs and the per-layer overrides a class's own __post_init__ sets (HeterogeneousConfigMixin, Gemma 4)
included, those computations, the catalogued properties wherever transformers reads them, and
``get_text_config(decoder=True)``. Whatever it cannot vouch for (a value of a type
the strict dataclass would reject, RoPE parameters nested by layer type outside a catalogued conversion, an unknown
RoPE type, a config.json's own per_layer_config, a sub-config or model_type or transformers version the table does
not cover) returns None and the caller imports transformers as before: the fast path never guesses.

The table covers every transformers release it was compiled and verified under (``TABLE["releases"]``): its body is
the newest release's knowledge, and each other release carries an overlay of what differs from it (per model_type
entries, the list of known types, base-class facts). table_applies() selects the installed release once, before any
other lookup, by applying its overlay to TABLE in place."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
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
    entry = TABLE["types"][model_type]
    try:
        obj = _build(entry, {k: v for k, v in config.items() if k != "model_type"})
        full = _replayed(entry, str(model_type), obj)
        text = _text_config(full, obj, str(model_type))
    except _Fallback:
        return None
    return full, text


def _replayed(entry: dict[str, Any], model_type: str, obj: _Obj) -> Any:
    """The config object transformers would have built, as hfmem reads it: its attributes (attribute_map aliases
    included) and its to_dict() (PreTrainedConfig.to_dict: a sub-config serialised as its own to_dict() without
    transformers_version)."""
    from hfmem.model.normalise import ReplayedConfig

    attrs = dict(obj.items())
    for alias, target in entry["attribute_map"].items():
        if target not in entry.get("property_rules", {}):  # an alias of a property: with the properties below
            attrs[alias] = obj.get(target)
    attrs["torch_dtype"] = obj.get("dtype")  # PreTrainedConfig.torch_dtype: a deprecated alias of dtype
    attrs.setdefault("model_type", model_type)  # a "model_type" key of a sub-config dict is set on the instance
    attrs["name_or_path"] = ""
    attrs["num_labels"] = len(obj["id2label"]) if obj.get("id2label") else None
    # PreTrainedConfig.to_dict: a sub-config as its own dict, a tuple (Granite 4's time_step_limit) as a list
    as_dict = {k: (v.to_dict() if isinstance(v, ReplayedConfig) else _as_list(v) if isinstance(v, tuple) else v)
               for k, v in obj.items()}
    for key in entry.get("sub_configs", {}):
        if isinstance(as_dict.get(key), dict):
            as_dict[key].pop("transformers_version", None)
    as_dict.update(model_type=model_type, transformers_version=TABLE["transformers"], output_attentions=False,
                   _name_or_path="")
    if obj.per_layer is not None:  # HeterogeneousConfigMixin: _update_heterogeneous_to_dict_output
        width = len(str(max(obj.per_layer))) if obj.per_layer else 0
        as_dict["per_layer_config"] = {str(i).zfill(width): copy.deepcopy(o) for i, o in obj.per_layer.items()}
        attrs["is_heterogeneous"] = True
        attrs["per_layer_attributes"] = {attr for o in obj.per_layer.values() for attr in o}
    for rule in entry.get("to_dict_rules", ()):  # the class's own to_dict, after the base one
        _TO_DICT_RULES[rule](obj, as_dict)
    for name, rule in entry.get("property_rules", {}).items():  # the class's own properties, read as attributes
        aliases = _names_of(entry["attribute_map"], name)
        try:
            value = _PROPERTIES[rule](obj)
        except _Fallback:
            for alias in aliases:
                attrs.pop(alias, None)  # raises in transformers: getattr fails, as for an absent attribute
            continue
        for alias in aliases:
            attrs[alias] = copy.deepcopy(value) if alias != name else value
    return ReplayedConfig(attrs, as_dict)


def _as_list(value: Any) -> Any:
    """PreTrainedConfig.to_dict's to_list: tuples, nested ones too, as lists."""
    return [_as_list(v) for v in value] if isinstance(value, tuple) else value


# PreTrainedConfig.get_text_config(decoder=True): the one non-None attribute of these names, else the config itself
_DECODER_TEXT_NAMES = ("decoder", "generator", "text_config")


def _text_config(full: Any, obj: _Obj, model_type: str) -> Any:
    from hfmem.model.normalise import ReplayedConfig

    found = [name for name in _DECODER_TEXT_NAMES if getattr(full, name) is not None]
    if len(found) > 1:
        raise _Fallback("several text configs")  # ValueError in transformers
    if found:
        text = getattr(full, found[0])
        if not isinstance(text, ReplayedConfig):
            raise _Fallback(found[0])  # a text config that is not a config object: transformers' business
        return text
    if obj.get("is_encoder_decoder"):
        if "decoder_split" not in obj.entry:
            raise _Fallback("is_encoder_decoder")  # a class the compiler did not verify the split for
        return _decoder_split(full, obj, model_type)
    return full


def _names_of(attribute_map: dict[str, str], name: str) -> list[str]:
    """An attribute's name and every attribute_map alias that reads it (its own name first)."""
    return [name, *(alias for alias, target in attribute_map.items() if target == name)]


def _decoder_split(full: Any, obj: _Obj, model_type: str) -> Any:
    """PreTrainedConfig.get_text_config(decoder=True) on a legacy encoder-decoder config (T5, Whisper: no decoder
    sub-config): a deep copy whose to_dict() keys starting with "decoder" are renamed (decoder_layers ->
    num_hidden_layers, decoder_attention_heads -> num_attention_heads, else the rest of the name, then through
    attribute_map) by delattr + setattr. A deleted field then reads as its class attribute (the dataclass default,
    compiled as entry["decoder_split"]); anything else deleted is absent. Renames whose order would matter (two onto
    one name, or onto a name renamed too) fall back."""
    entry = obj.entry
    amap = entry["attribute_map"]
    pairs = []
    for key in full.to_dict():
        if not key.startswith("decoder"):
            continue
        new = ("num_hidden_layers" if key == "decoder_layers" else "num_attention_heads"
               if key == "decoder_attention_heads" else key[len("decoder") + 1:])
        pairs.append((key, amap.get(new, new)))
    targets = [new for _, new in pairs]
    if len(set(targets)) != len(targets) or set(targets) & {key for key, _ in pairs}:
        raise _Fallback("decoder keys")
    text = _Obj(amap)
    text.entry, text.per_layer = entry, obj.per_layer
    dict.update(text, copy.deepcopy(dict(obj)))
    for key, new in pairs:
        if not dict.__contains__(text, key):
            raise _Fallback(key)  # a to_dict() key that is not an instance attribute
        value = dict.pop(text, key)
        if new in entry["fields"]:
            _set_field(text, entry, new, value)  # the strict dataclass checks the assignment
        else:
            text[new] = value
    replayed = _replayed(entry, model_type, text)
    attrs = replayed.__dict__["_attrs"]
    class_attrs = entry["decoder_split"]
    for key, _ in pairs:  # read after delattr: the class attribute, else AttributeError (absent here)
        for name in _names_of(amap, key):
            if key in class_attrs:
                attrs[name] = copy.deepcopy(class_attrs[key])
            else:
                attrs.pop(name, None)
    return replayed


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
    if kind == "interval":  # transformers.utils.type_validators.interval: the type, then the bounds (None: open)
        _, low, high, exclude_low, exclude_high, inner = spec
        if not _check(value, inner):
            return False
        try:
            return ((low is None or (low < value if exclude_low else low <= value))
                    and (high is None or (value < high if exclude_high else value <= high)))
        except TypeError:
            return False
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
        self.entry: dict[str, Any] = {}  # the table entry being built (rules that read compiled facts of the class)
        # what the class's __post_init__ holds in local variables across its super().__post_init__ call (legacy
        # kwargs popped before it, read after it): the rules before "super" put them here for the rules after it
        self.local: dict[str, Any] = {}
        # HeterogeneousConfigMixin's per-layer overrides (layer index -> attributes) once per_layer_config is set
        self.per_layer: dict[int, dict[str, Any]] | None = None

    def __getitem__(self, key: str) -> Any:
        return super().__getitem__(self.amap.get(key, key))

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(self.amap.get(key, key), value)

    def __contains__(self, key: object) -> bool:
        return super().__contains__(self.amap.get(key, key) if isinstance(key, str) else key)

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(self.amap.get(key, key), default)


def _build(entry: dict[str, Any], kwargs: dict[str, Any]) -> _Obj:
    fields: dict[str, Any] = entry["fields"]
    amap: dict[str, str] = entry["attribute_map"]
    if kwargs.get("per_layer_config") is not None:
        raise _Fallback("per_layer_config")  # a config.json's own heterogeneous per-layer configs (only a rule's)
    obj = _Obj(amap)
    obj.entry = entry
    # wrap_init_to_accept_kwargs: dataclass fields from the input or their defaults; the rest goes to __post_init__
    for name, default in fields.items():
        if name in kwargs:
            _set_field(obj, entry, name, kwargs[name])
        else:
            obj[name] = copy.deepcopy(default)
    kwargs = {k: v for k, v in kwargs.items() if k not in fields}
    rules: list[str] = entry["rules"]
    # "super": where the class's __post_init__ calls PreTrainedConfig.__post_init__ when it computes more after it
    split = rules.index("super") if "super" in rules else len(rules)
    for rule in rules[:split]:
        name, *args = rule.split(":")
        _RULES[name](obj, kwargs, *args)
    # the class's own code after super().__post_init__(**kwargs) still sees its kwargs as they were (the base
    # pops from its own copy)
    own_kwargs = dict(kwargs)
    _base_post_init(entry, obj, kwargs)
    for rule in rules[split + 1:]:
        name, *args = rule.split(":")
        _RULES[name](obj, own_kwargs, *args)
    for rule in entry["validators"]:
        _VALIDATORS[rule](obj)
    replaced = entry.get("replaced_validators", ())  # the class's own validate_* (in its validators) instead
    if "validate_architecture" not in replaced:
        _validate_architecture(obj)
    if "validate_layer_type" not in replaced:
        _validate_layer_type(obj)
    if "validate_rope" not in replaced:
        _validate_rope(obj)
    return obj


def _base_post_init(entry: dict[str, Any], obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """PreTrainedConfig.__post_init__ (transformers/configuration_utils.py)."""
    fields, amap = entry["fields"], entry["attribute_map"]
    for key, spec in entry.get("sub_configs", {}).items():
        _create_subconfig(obj, key, spec)
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
    if "rope_parameters" in fields and entry.get("rope_convert"):
        kwargs = _ROPE_CONVERSIONS[entry["rope_convert"]](entry, obj, kwargs)
    elif "rope_parameters" in fields:
        kwargs = _convert_rope(entry, obj, kwargs)
    elif kwargs.get("rope_scaling") and kwargs.get("rope_theta"):
        # a class without the field (a composite whose config.json repeats its text keys flat, as Qwen2.5-VL's do):
        # transformers warns and converts anyway, setting rope_parameters as a plain attribute
        obj["rope_parameters"] = None
        kwargs = _convert_rope(entry, obj, kwargs)
    for name in TABLE["generation_params"]:
        kwargs.pop(name, None)
    for name in ("name_or_path", "_commit_hash", "output_attentions", "attn_implementation", "experts_implementation"):
        kwargs.pop(name, None)
    per_layer = kwargs.pop("per_layer_config", None)  # set by a rule (Gemma 4's): _build refuses a config.json's
    ignored = TABLE["ignored_keys"]  # keys __post_init__ never sets (5.25 added the public-looking _attn_implementation)
    for key, value in kwargs.items():
        if key in ignored:
            continue
        if key in entry["properties"] or amap.get(key, key) in entry["properties"]:
            raise _Fallback(key)  # a property setter (or a read-only one that raises) runs in transformers
        if key in fields or amap.get(key, key) in fields:
            _set_field(obj, entry, key if key in fields else amap[key], value)
        else:
            obj[key] = copy.deepcopy(value)
    if per_layer is not None:  # set last, as the base does, when every other attribute is
        _set_per_layer(entry, obj, per_layer)
    # remap_legacy_layer_types
    remap = TABLE["legacy_layer_types"]
    for key in ("layer_types", "mtp_layer_types"):
        if isinstance(obj.get(key), list):
            obj[key] = [remap.get(t, t) if isinstance(t, str) else t for t in obj[key]]
        elif obj.get(key) is not None:
            raise _Fallback(key)


def _set_per_layer(entry: dict[str, Any], obj: Any, per_layer: Any) -> None:
    """HeterogeneousConfigMixin's per_layer_config setter (transformers/integrations/heterogeneity/
    configuration_utils.py, _apply_heterogeneous_config): layer indices within num_hidden_layers, no layer with both a
    sliding window and an attention chunk size, overrides equal to the global value dropped and then empty layers.
    validate_architecture later builds every layer's config by assigning its overrides, which the strict dataclass
    type-checks. Overrides of an attribute the config lacks, or a "skip" list, fall back."""
    if not isinstance(per_layer, dict):
        raise _Fallback("per_layer_config")
    try:
        overrides = {int(i): copy.deepcopy(dict(o)) for i, o in per_layer.items()}
    except (TypeError, ValueError) as exc:
        raise _Fallback("per_layer_config") from exc
    layers = obj["num_hidden_layers"]
    try:
        if overrides and any(i < 0 or i >= layers for i in overrides):
            raise _Fallback("per_layer_config index")  # ValueError in transformers
        for i in range(layers):  # _validate_sliding_window_and_attention_chunk_size
            o = overrides.get(i, {})
            if (o.get("sliding_window", obj.get("sliding_window")) is not None
                    and o.get("attention_chunk_size", obj.get("attention_chunk_size")) is not None):
                raise _Fallback("sliding_window and attention_chunk_size")
    except TypeError as exc:
        raise _Fallback("num_hidden_layers") from exc
    explicit = {attr for o in overrides.values() for attr in o}
    if "skip" in explicit or any(attr not in obj for attr in explicit):
        raise _Fallback("per_layer_config attributes")
    for attr in explicit:  # _modify_config_and_create_heterogeneity_spec
        for o in overrides.values():
            if attr in o and o[attr] == obj[attr]:
                del o[attr]
    overrides = {i: o for i, o in overrides.items() if o}
    for o in overrides.values():
        for attr, value in o.items():
            spec = entry["types"].get(entry["attribute_map"].get(attr, attr))
            if spec is not None and not _check(value, spec):
                raise _Fallback(attr)
    obj.per_layer = overrides


def _create_subconfig(obj: dict[str, Any], key: str, spec: dict[str, Any]) -> None:
    """SubConfigSpec.create_subconfig (transformers/configuration_utils.py) for one of ``sub_configs_defaults``: a
    dict builds the spec's class (under AutoConfig specs, the class of the dict's own model_type, else the spec's
    default), None builds it from the spec's init_kwargs unless the spec is optional. The class must be in the
    table too."""
    value = obj.get(key)
    if value is None and spec["optional"]:
        return
    if value is not None and not isinstance(value, dict):
        raise _Fallback(key)  # a config instance cannot come from JSON; anything else is a TypeError in transformers
    model_type = spec["model_type"]
    if spec["auto"] and value is not None:
        model_type = value.get("model_type", model_type)
        if not isinstance(model_type, str) or not model_type:
            raise _Fallback(key)
    sub_entry = TABLE["types"].get(model_type) if isinstance(model_type, str) else None
    if sub_entry is None:
        raise _Fallback(f"{key} of type {model_type}")
    kwargs = copy.deepcopy(value) if value is not None else copy.deepcopy(spec["init_kwargs"])
    sub = _build(sub_entry, kwargs)
    obj[key] = _replayed(sub_entry, model_type, sub)


def _convert_rope(entry: dict[str, Any], obj: dict[str, Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """RotaryEmbeddingConfigMixin.convert_rope_params_to_dict + standardize_rope_params (modeling_rope_utils.py),
    flat (one dict for every layer) parameters only."""
    for rule in entry.get("rope_rules", ()):  # the class's own convert_rope_params_to_dict, before the base one
        _RULES[rule](obj, kwargs)
    rope = _given_rope(obj, kwargs)
    theta = kwargs.pop("rope_theta", obj.get("rope_theta", entry["default_theta"]))
    partial = kwargs.pop("partial_rotary_factor", obj.get("partial_rotary_factor"))
    nested = _nested_rope_keys(obj, rope)
    if nested and not entry.get("rope_type_labels"):
        raise _Fallback("nested rope_parameters")  # by layer type: only the catalogued conversions
    for params in [rope[key] for key in nested] or [rope]:  # nested by DeepSeek-V4's labels: the defaults in each
        if params is None:
            continue
        if not isinstance(params, dict):
            raise _Fallback("rope_parameters")
        params.setdefault("rope_theta", theta)
        if partial is not None:
            params.setdefault("partial_rotary_factor", partial)
    obj["rope_parameters"] = rope
    _standardize_rope(entry, obj)
    return kwargs


def _given_rope(obj: dict[str, Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """convert_rope_params_to_dict's first step: the legacy rope_scaling (popped) or rope_parameters, {} when
    neither; a copy, as transformers edits it in place."""
    rope_scaling = kwargs.pop("rope_scaling", None)
    rope = rope_scaling or obj["rope_parameters"]
    rope = copy.deepcopy(rope) if rope is not None else {}
    if not isinstance(rope, dict):
        raise _Fallback("rope_parameters")
    return rope


def _gemma3_rope(entry: dict[str, Any], obj: dict[str, Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Gemma 3 text's convert_rope_params_to_dict: parameters per attention kind (full layers take rope_scaling and
    rope_theta, default theta "global"; sliding layers rope_local_base_freq, default "local"), both keys popped
    whatever the dict holds; then standardize_rope_params."""
    theta = entry["default_theta"]
    if not isinstance(theta, dict):
        raise _Fallback("default_theta")
    return _rope_per_kind(entry, obj, kwargs, (("full_attention", "rope_theta", theta["global"]),
                                               ("sliding_attention", "rope_local_base_freq", theta["local"])))


def _olmo3_rope(entry: dict[str, Any], obj: dict[str, Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """OLMo 3's convert_rope_params_to_dict: Gemma 3's per-kind parameters, both kinds popping rope_theta (so the
    sliding layers get the class's default_theta unless their dict has one)."""
    theta = entry["default_theta"]
    return _rope_per_kind(entry, obj, kwargs, (("full_attention", "rope_theta", theta),
                                               ("sliding_attention", "rope_theta", theta)))


def _rope_per_kind(entry: dict[str, Any], obj: dict[str, Any], kwargs: dict[str, Any],
                   kinds: tuple[tuple[str, str, Any], ...]) -> dict[str, Any]:
    """RoPE parameters nested by attention kind (full layers take rope_scaling), each kind's theta popped from the
    kwargs in order with its default; then standardize_rope_params."""
    rope_scaling = kwargs.pop("rope_scaling", None)
    rope = obj["rope_parameters"]
    rope = copy.deepcopy(rope) if rope is not None else {"sliding_attention": {"rope_type": "default"},
                                                         "full_attention": {"rope_type": "default"}}
    if not isinstance(rope, dict):
        raise _Fallback("rope_parameters")
    if rope_scaling is not None:
        if not isinstance(rope.get("full_attention"), dict) or not isinstance(rope_scaling, dict):
            raise _Fallback("rope_scaling")
        rope["full_attention"].update(rope_scaling)
    for kind, key, default in kinds:
        if rope.get(kind) is None:
            rope[kind] = {"rope_type": "default"}
        kind_theta = kwargs.pop(key, default)
        if not isinstance(rope[kind], dict):
            raise _Fallback("rope_parameters")
        rope[kind].setdefault("rope_theta", kind_theta)
    obj["rope_parameters"] = rope
    _standardize_rope(entry, obj)
    return kwargs


def _mrope_as_default_rope(entry: dict[str, Any], obj: dict[str, Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Qwen2.5-VL text's convert_rope_params_to_dict: rope_scaling or rope_parameters, rope_theta from the kwargs
    (popped whatever the dict holds) or the class default, the legacy rope_type "mrope" read as "default" (its
    mrope_section stays); no partial_rotary_factor; then standardize_rope_params."""
    rope = _given_rope(obj, kwargs)
    theta = kwargs.pop("rope_theta", entry["default_theta"])
    rope.setdefault("rope_theta", theta)
    if rope.get("rope_type", rope.get("type")) == "mrope":
        rope["rope_type"] = "default"
    obj["rope_parameters"] = rope
    _standardize_rope(entry, obj)
    return kwargs


def _phi3_rope(entry: dict[str, Any], obj: dict[str, Any], kwargs: dict[str, Any], legacy_after: bool = False
               ) -> dict[str, Any]:
    """Phi-3's convert_rope_params_to_dict: rope_theta from the kwargs (popped) or 10,000 (its own default argument,
    not the class's default_theta), partial_rotary_factor from the kwargs (read, not popped) or 1.0, the legacy rope
    types "su" and "yarn" read as "longrope", then standardize_rope_params. In transformers 5.24 (``legacy_after``)
    the legacy type is renamed after standardizing and only when it is the rope_type, so a longrope dict then misses
    the original_max_position_embeddings standardizing would have copied in (and validation rejects it)."""
    rope = _given_rope(obj, kwargs)
    theta = kwargs.pop("rope_theta", 10_000.0)
    rope.setdefault("rope_theta", theta)
    rope.setdefault("partial_rotary_factor", kwargs.get("partial_rotary_factor", 1.0))
    if not legacy_after and rope.get("rope_type", rope.get("type")) in ("su", "yarn"):
        rope["rope_type"] = "longrope"
    obj["rope_parameters"] = rope
    _standardize_rope(entry, obj)
    rope = obj["rope_parameters"]
    if legacy_after and isinstance(rope, dict) and rope.get("rope_type") in ("su", "yarn"):
        rope["rope_type"] = "longrope"
    return kwargs


def _phi3_rope_524(entry: dict[str, Any], obj: dict[str, Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    return _phi3_rope(entry, obj, kwargs, legacy_after=True)


def _standardize_rope(entry: dict[str, Any], obj: dict[str, Any]) -> None:
    """RotaryEmbeddingConfigMixin.standardize_rope_params: one dict, or one per layer type when its keys are this
    config's layer types (nested_rope_parameter_keys)."""
    rope = obj["rope_parameters"] or {}
    theta, partial = obj.get("rope_theta"), obj.get("partial_rotary_factor")
    default_type = entry.get("default_rope_type", "default")
    nested = _nested_rope_keys(obj, rope)
    if not (rope or theta):
        return
    if not nested:
        if not isinstance(rope, dict):
            raise _Fallback("rope_parameters")
        _rope_defaults(rope, theta, partial)
        if default_type != "default" and rope["rope_type"] == "default":
            rope["rope_type"] = default_type
        if rope["rope_type"] in ("llama3", "yarn", "longrope"):
            if "original_max_position_embeddings" in obj:
                rope["original_max_position_embeddings"] = obj["original_max_position_embeddings"]
            else:
                rope.setdefault("original_max_position_embeddings", _attr(entry, obj, "max_position_embeddings"))
        obj["rope_parameters"] = rope
        return
    for layer_type in nested:
        params = rope[layer_type]
        if params is None:
            continue
        if not isinstance(params, dict):
            raise _Fallback("rope_parameters")
        _rope_defaults(params, theta, partial)
        if params["rope_type"] in ("llama3", "yarn", "longrope"):
            params.setdefault("original_max_position_embeddings", _attr(entry, obj, "max_position_embeddings"))
        if default_type != "default" and params["rope_type"] == "default":
            params["rope_type"] = default_type


def _rope_defaults(params: dict[str, Any], theta: Any, partial: Any) -> None:
    """standardize_rope_params on one dict: rope_type (its legacy name "type", else default), the config's theta and
    partial rotary factor where the dict has none. (The two branches differ after this: where the class's
    default_rope_type applies and where original_max_position_embeddings comes from.)"""
    params.setdefault("rope_type", params.get("type", "default"))
    params.setdefault("rope_theta", theta)
    if partial is not None:
        params.setdefault("partial_rotary_factor", partial)


def _nested_rope_keys(obj: dict[str, Any], rope: Any) -> list[str]:
    """RotaryEmbeddingConfigMixin.nested_rope_parameter_keys: the keys of the dict that are the class's
    _rope_type_labels (DeepSeek-V4's "main" / "compress"), else this config's layer types."""
    labels = getattr(obj, "entry", {}).get("rope_type_labels") or _read(obj, "layer_types") or ()
    return [key for key in rope if key in labels] if isinstance(rope, dict) else []


def _bidirectional_all_window(obj: dict[str, Any], as_dict: dict[str, Any]) -> None:
    """Gemma 4 text's to_dict: bidirectional attention on "all" tokens serialises the window __post_init__
    converted from."""
    if obj.get("use_bidirectional_attention") == "all":
        try:
            as_dict["sliding_window"] = (obj["sliding_window"] - 1) * 2
        except TypeError as exc:
            raise _Fallback("sliding_window") from exc


def _keep_rope(entry: dict[str, Any], obj: dict[str, Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Gemma 4 text's convert_rope_params_to_dict: nothing converted or standardized (rope_scaling and rope_theta,
    if a config has them, become plain attributes)."""
    return kwargs


def _bidirectional_window(obj: dict[str, Any], as_dict: dict[str, Any]) -> None:
    """Gemma 3 text's to_dict: a bidirectional model serialises the window __post_init__ converted from."""
    if obj.get("use_bidirectional_attention"):
        try:
            as_dict["sliding_window"] = (obj["sliding_window"] - 1) * 2
        except TypeError as exc:
            raise _Fallback("sliding_window") from exc


def _attr(entry: dict[str, Any], obj: dict[str, Any], name: str) -> Any:
    name = entry["attribute_map"].get(name, name)
    if name not in obj:
        raise _Fallback(name)  # AttributeError in transformers
    return obj[name]


def _read(obj: Any, name: str) -> Any:
    """``getattr(config, name, None)`` inside transformers' own code: through attribute_map, a read-only property the
    class defines (Mamba's layer_types, Falcon's head_dim, Falcon-H1's layers_block_type that its layer_types names)
    is computed by its catalogued getter, anything else is the stored attribute."""
    entry = getattr(obj, "entry", {})
    name = entry.get("attribute_map", {}).get(name, name)
    rule = entry.get("property_rules", {}).get(name)
    return _PROPERTIES[rule](obj) if rule else obj.get(name)


def _validate_layer_type(obj: dict[str, Any]) -> None:
    """PreTrainedConfig.validate_layer_type: known names, one per layer (it returns at the first absent list)."""
    for allowed, key in ((TABLE["allowed_attn_layer_types"], "layer_types"), (("sparse", "dense"), "mlp_layer_types")):
        layers = _read(obj, key)
        if layers is None or "num_hidden_layers" not in obj:
            return
        if not all(t in allowed for t in layers):
            raise _Fallback(key)
        if obj["num_hidden_layers"] is not None and obj["num_hidden_layers"] != len(layers):
            raise _Fallback(key)


def _validate_architecture(obj: Any) -> None:
    """PreTrainedConfig.validate_architecture: head_dim * num_heads must be embed_dim where a config has all three
    (a heterogeneous config checks each layer's instead, which the per-layer overrides never name)."""
    if obj.per_layer is not None or not all(name in obj for name in ("num_heads", "embed_dim")):
        return
    head_dim = _read(obj, "head_dim")
    if head_dim is None and "head_dim" not in obj and "head_dim" not in obj.entry.get("property_rules", {}):
        return
    try:
        bad = head_dim * obj["num_heads"] != obj["embed_dim"]
    except TypeError as exc:
        raise _Fallback("head_dim * num_heads") from exc
    if bad:
        raise _Fallback("embed_dim")


def _validate_rope(obj: dict[str, Any]) -> None:
    """RotaryEmbeddingConfigMixin.validate_rope: the required keys per rope_type, and an even rotary dimension, for
    the one dict or each dict nested by layer type."""
    rope = obj.get("rope_parameters")
    if not rope:
        return
    nested = _nested_rope_keys(obj, rope)
    for params in ([rope[key] for key in nested] if nested else [rope]):
        if params is None:
            continue  # a NoPE layer type
        if not isinstance(params, dict):
            raise _Fallback("rope_parameters")
        rope_type = params.get("rope_type", params.get("type", "default"))
        params["rope_type"] = rope_type
        required = TABLE["rope_required"].get(rope_type)
        if required is None:
            raise _Fallback(f"rope_type {rope_type}")
        if set(required) - (set(params) - {"type"}):  # _check_received_keys
            raise _Fallback("rope keys")  # KeyError in transformers
        _rope_values_compare(obj, params)
        # a heterogeneous config's head_dim cannot be read globally: the base skips the check for it
        head_dim = None if getattr(obj, "per_layer", None) is not None else _read(obj, "head_dim")
        partial = params.get("partial_rotary_factor", 1.0)
        if isinstance(head_dim, int) and head_dim > 4 and head_dim % 2:
            try:
                odd = int(head_dim * partial) == head_dim
            except (TypeError, ValueError) as exc:
                raise _Fallback("partial_rotary_factor") from exc
            if odd:
                raise _Fallback("odd rotary dimension")


def _rope_values_compare(obj: dict[str, Any], params: dict[str, Any]) -> None:
    """The comparisons RotaryEmbeddingConfigMixin's _validate_yarn_rope_parameters and
    _validate_llama3_rope_parameters make only to warn, which raise (and so reject the config) on values that do not
    compare: a zero or non-number original_max_position_embeddings, a string beta or frequency factor."""
    rope_type = params["rope_type"]
    try:
        if rope_type == "yarn":
            _ = (params.get("beta_fast") or 32) < (params.get("beta_slow") or 1)
            _ = obj["max_position_embeddings"] / params["original_max_position_embeddings"]
        elif rope_type == "llama3":
            _ = params["high_freq_factor"] <= params["low_freq_factor"]
            _ = params["original_max_position_embeddings"] >= obj["max_position_embeddings"]
    except (TypeError, ZeroDivisionError, KeyError) as exc:
        raise _Fallback(f"rope_type {rope_type} values") from exc


def _deepseek_v4_rope_checks(obj: Any) -> None:
    """DeepSeek-V4's validate_rope (replacing the base one): each dict under a _rope_type_labels label ("main",
    "compress") validated as its rope_type's own (an unknown type is not validated), no even-dimension check."""
    rope = obj.get("rope_parameters") or {}
    if not isinstance(rope, dict):
        raise _Fallback("rope_parameters")
    ignore = set(obj.entry.get("constants", {}).get("ignore_keys_at_rope_validation", ()))
    if obj.get("partial_rotary_factor") is not None:  # convert_rope_params_to_dict adds it to the ignored keys
        ignore.add("partial_rotary_factor")
    for label in obj.entry["rope_type_labels"]:
        params = rope.get(label)
        if not isinstance(params, dict):
            continue
        rope_type = params.get("rope_type", params.get("type", "default"))
        params["rope_type"] = rope_type
        if not isinstance(rope_type, str):
            raise _Fallback("rope_type")
        required = TABLE["rope_required"].get(rope_type)
        if required is None:
            continue  # no _validate_{rope_type}_rope_parameters: transformers skips it
        if set(required) - (set(params) - {"type"} - ignore):  # _check_received_keys
            raise _Fallback("rope keys")
        _rope_values_compare(obj, params)


def _deepseek_v4_layer_checks(obj: Any) -> None:
    """DeepSeek-V4's validate_layer_type (replacing the base one): one entry per layer, each of its own attention
    and MLP kinds (DEEPSEEK_V4_LAYER_TYPES, DEEPSEEK_V4_MLP_LAYER_TYPES, compiled from its module)."""
    constants = obj.entry.get("constants", {})
    if obj["num_hidden_layers"] is None:
        return
    for key, allowed in (("layer_types", "DEEPSEEK_V4_LAYER_TYPES"), ("mlp_layer_types", "DEEPSEEK_V4_MLP_LAYER_TYPES")):
        layers = obj[key]
        if layers is None:
            continue
        if allowed not in constants or len(layers) != obj["num_hidden_layers"]:
            raise _Fallback(key)
        if any(t not in constants[allowed] for t in layers):
            raise _Fallback(key)


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
        obj["layer_types"] = _every_nth_full(obj["num_hidden_layers"], interval, "linear_attention",
                                             "full_attention_interval")


def _kimi_linear_layers(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """Kimi-Linear, after the base __post_init__: the linear-attention sizes from the checkpoint's
    linear_attn_config dict, the layer types from its 1-indexed full_attn_layers / kda_layers lists (else every
    fourth layer from the fourth attends fully), dense MLP layers below first_k_dense_replace as the kwargs give it
    (1 when it is a field, as there)."""
    linear = kwargs.get("linear_attn_config", {})
    try:
        obj["linear_head_dim"] = linear.get("head_dim", obj["linear_head_dim"])
        obj["linear_num_heads"] = linear.get("num_heads", obj["linear_num_heads"])
        obj["linear_conv_kernel_dim"] = linear.get("short_conv_kernel_size", obj["linear_conv_kernel_dim"])
        if obj["layer_types"] is None:
            layers = obj["num_hidden_layers"]
            if "full_attn_layers" in linear and "kda_layers" in linear:
                types: list[Any] = [None] * layers
                for layer in linear["full_attn_layers"]:
                    types[layer - 1] = "full_attention"
                for layer in linear["kda_layers"]:
                    types[layer - 1] = "linear_attention"
                obj["layer_types"] = types
            else:
                obj["layer_types"] = ["full_attention" if i and i % 4 == 0 else "linear_attention" for i in range(layers)]
        if obj["mlp_layer_types"] is None:
            dense = kwargs.get("first_k_dense_replace", 1)
            obj["mlp_layer_types"] = ["dense" if i < dense else "sparse" for i in range(obj["num_hidden_layers"])]
    except (AttributeError, TypeError, IndexError) as exc:
        raise _Fallback("linear_attn_config") from exc


def _layer_types_every_fourth_full(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """OLMo 3: every fourth layer attends fully, the others slide."""
    if obj["layer_types"] is None:
        obj["layer_types"] = _every_nth_full(obj["num_hidden_layers"], 4, "sliding_attention", "num_hidden_layers")


def _smollm3_layers(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """SmolLM3: every no_rope_layer_interval-th layer has no RoPE; with a sliding window switched on, the NoPE
    layers slide."""
    try:
        if obj["no_rope_layers"] is None:
            interval = obj["no_rope_layer_interval"]
            obj["no_rope_layers"] = [int((i + 1) % interval != 0) for i in range(obj["num_hidden_layers"])]
        if obj["layer_types"] is None:
            sliding = obj["use_sliding_window"] and obj["sliding_window"] is not None
            obj["layer_types"] = ["sliding_attention" if sliding and not obj["no_rope_layers"][i] else "full_attention"
                                  for i in range(obj["num_hidden_layers"])]
    except (TypeError, ValueError, IndexError, ZeroDivisionError) as exc:
        raise _Fallback("no_rope_layers") from exc


def _exaone4_layers(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """EXAONE 4: without a window the pattern is 0 (and a layout computed from it raises, as in transformers);
    otherwise every sliding_window_pattern-th layer attends fully."""
    if obj["sliding_window"] is None:
        obj["sliding_window_pattern"] = 0
    if obj["layer_types"] is None:
        try:
            layers, pattern = obj["num_hidden_layers"], obj["sliding_window_pattern"]
            obj["layer_types"] = ["sliding_attention" if ((i + 1) % pattern != 0 and i < layers) else "full_attention"
                                  for i in range(layers)]
        except (TypeError, ZeroDivisionError) as exc:
            raise _Fallback("sliding_window_pattern") from exc


def _lfm2_layers(obj: Any, kwargs: dict[str, Any]) -> None:
    """LFM2: full attention on full_attn_idxs (every layer by default), short convolutions elsewhere; the legacy
    tie_embedding and block_ff_dim keys (popped) set tie_word_embeddings and intermediate_size, type-checked as the
    strict dataclass checks an assignment."""
    try:
        if obj["layer_types"] is None:
            if obj["full_attn_idxs"] is None:
                obj["full_attn_idxs"] = list(range(obj["num_hidden_layers"]))
            obj["layer_types"] = ["full_attention" if i in obj["full_attn_idxs"] else "conv"
                                  for i in range(obj["num_hidden_layers"])]
    except TypeError as exc:
        raise _Fallback("full_attn_idxs") from exc
    _set_field(obj, obj.entry, "tie_word_embeddings", kwargs.pop("tie_embedding", obj["tie_word_embeddings"]))
    _set_field(obj, obj.entry, "intermediate_size", kwargs.pop("block_ff_dim", obj["intermediate_size"]))


def _apertus_rope_default(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """Apertus: llama3-type RoPE (theta 12e6, factor 8 over 8,192 positions) when the config gives none."""
    if obj["rope_parameters"] is None:
        obj["rope_parameters"] = {"rope_type": "llama3", "rope_theta": 12000000.0, "factor": 8.0,
                                  "original_max_position_embeddings": 8192, "low_freq_factor": 1.0,
                                  "high_freq_factor": 4.0}


def _gemma4_text_layers(obj: Any, kwargs: dict[str, Any]) -> None:
    """Gemma 4 text: a window for bidirectional attention on "all" tokens halved plus one (and is_causal False);
    every sixth layer attends fully unless layer_types says, and the last layer always does (forced in place); the
    class's RoPE defaults per attention kind; global_head_dim (512 unless given) and num_global_key_value_heads
    (when attention_k_eq_v) popped into per-layer overrides of every full-attention layer, which the base applies as
    per_layer_config unless the config gives one (then _build has fallen back)."""
    try:
        if obj["use_bidirectional_attention"] == "all":
            obj["is_causal"] = False
            _set_field(obj, obj.entry, "sliding_window", (obj["sliding_window"] // 2) + 1)
        if obj["layer_types"] is None:
            _set_field(obj, obj.entry, "layer_types", _every_nth_full(obj["num_hidden_layers"], 6, "sliding_attention",
                                                                      "num_hidden_layers"))
        if obj["layer_types"] and obj["layer_types"][-1] != "full_attention":
            obj["layer_types"][-1] = "full_attention"
    except (TypeError, IndexError) as exc:
        raise _Fallback("gemma4 layers") from exc
    if obj["rope_parameters"] is None:
        obj["rope_parameters"] = {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
            "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1_000_000.0},
        }  # fmt: skip
    global_head_dim = kwargs.pop("global_head_dim", 512)
    global_kv_heads = kwargs.pop("num_global_key_value_heads", None)
    if "per_layer_config" not in kwargs:
        overrides: dict[str, Any] = {"head_dim": global_head_dim}
        kv_heads = global_kv_heads if obj.get("attention_k_eq_v", True) else None
        if kv_heads is not None:
            overrides["num_key_value_heads"] = kv_heads
        kwargs["per_layer_config"] = {i: overrides for i, kind in enumerate(obj["layer_types"])
                                      if kind == "full_attention"}


def _channels_as_list(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """Gemma 4 audio: a tuple subsampling_conv_channels (its default) as a list (the compiled default already is
    one, and JSON has no tuples)."""
    if isinstance(obj["subsampling_conv_channels"], tuple):
        obj["subsampling_conv_channels"] = list(obj["subsampling_conv_channels"])


def _kv_sharing_modes(obj: dict[str, Any]) -> list[str | None]:
    """Gemma 4 text's kv_sharing_modes property: the last num_kv_shared_layers layers reuse the KV of the last
    earlier layer of their attention kind, which stores it; ValueError (an absent attribute here) when a kind of
    the shared layers has no earlier layer."""
    try:
        layers, shared, kinds = obj["num_hidden_layers"], obj["num_kv_shared_layers"], obj["layer_types"]
        if shared == layers:
            return ["reuse"] * layers
        first_shared = layers - shared
        modes: list[str | None] = [None if i < first_shared else "reuse" for i in range(layers)]
        unshared = kinds[0:first_shared][::-1]
        if sorted(set(unshared)) != sorted(set(kinds)):
            raise _Fallback("kv_sharing_modes")
        for kind in set(kinds):
            modes[first_shared - 1 - unshared.index(kind)] = "store"
        return modes
    except (TypeError, ValueError, IndexError) as exc:
        raise _Fallback("kv_sharing_modes") from exc


def _falcon_sizes(obj: Any, kwargs: dict[str, Any], kv_heads: str = "") -> None:
    """FalconConfig.__post_init__: the legacy n_embed (popped) is the hidden size, KV heads default to the attention
    heads, the FFN is four hidden sizes unless given; with ``kv_heads`` (5.25 on) also num_key_value_heads, the heads
    the attention layers produce: num_kv_heads with the new decoder architecture or without multi-query, else 1.
    Its head_dim property divides by the attention heads: zero heads raise there, which only transformers can say."""
    n_embed = kwargs.pop("n_embed", None)
    if n_embed is not None:
        _set_field(obj, obj.entry, "hidden_size", n_embed)
    if obj["num_kv_heads"] is None:
        obj["num_kv_heads"] = obj["num_attention_heads"]
    if kv_heads:
        obj["num_key_value_heads"] = (obj["num_kv_heads"] if (obj["new_decoder_architecture"] or not obj["multi_query"])
                                      else 1)
    if obj["ffn_hidden_size"] is None:
        obj["ffn_hidden_size"] = obj["hidden_size"] * 4
    if obj["num_attention_heads"] == 0:
        raise _Fallback("num_attention_heads")


def _falcon_head_dim(obj: Any) -> Any:
    """FalconConfig.head_dim (a read-only property): hidden_size // num_attention_heads."""
    return _floordiv(obj["hidden_size"], obj["num_attention_heads"])


def _not_alibi(obj: Any) -> bool:
    """FalconConfig.rotary (a read-only property): RoPE unless ALiBi."""
    return not obj["alibi"]


def _linear_attention_layers(obj: Any) -> list[str]:
    """MambaConfig.layer_types (a read-only property): every layer a linear-attention (SSM) layer."""
    return ["linear_attention"] * obj["num_hidden_layers"]


def _mamba_sizes(obj: Any, kwargs: dict[str, Any]) -> None:
    """MambaConfig.__post_init__: intermediate_size = int(expand * hidden_size) (a plain attribute, so a config.json's
    own intermediate_size, set later by the base, wins), time_step_rank "auto" = ceil(hidden_size / 16)."""
    try:
        obj["intermediate_size"] = int(obj["expand"] * obj["hidden_size"])
    except (TypeError, ValueError, OverflowError) as exc:
        raise _Fallback("intermediate_size") from exc
    _time_step_rank_auto(obj, kwargs)


def _mamba_intermediate(obj: Any, d_ssm: bool) -> Any:
    """The Mamba mixer's width: mamba_expand * hidden_size, or Falcon-H1's mamba_d_ssm (``d_ssm``) when it is set."""
    if d_ssm and obj["mamba_d_ssm"] is not None:
        return obj["mamba_d_ssm"]
    return obj["mamba_expand"] * obj["hidden_size"]


def _granite_hybrid_mamba(obj: Any, kwargs: dict[str, Any], falcon_h1: str = "") -> None:
    """GraniteMoeHybridConfig.__post_init__ after its KV-heads default: mamba_d_head "auto" = mamba_expand *
    hidden_size // mamba_n_heads, time_step_limit as a tuple (its default holds an infinite bound), every layer
    linear attention (Mamba) unless layer_types is given. FalconH1Config.__post_init__ (``falcon_h1``) is the same but
    for the width (mamba_d_ssm when set) and, instead of the layer kinds, MLP and SSM multipliers of 1.0 unless given."""
    try:
        intermediate = _mamba_intermediate(obj, bool(falcon_h1))
        if obj["mamba_d_head"] == "auto":
            _set_field(obj, obj.entry, "mamba_d_head", intermediate // obj["mamba_n_heads"])
        limit = obj["time_step_limit"]
        obj["time_step_limit"] = tuple(limit) if limit is not None else None
        if falcon_h1:
            if obj["mlp_multipliers"] is None:
                obj["mlp_multipliers"] = [1.0, 1.0]
            if obj["ssm_multipliers"] is None:
                obj["ssm_multipliers"] = [1.0, 1.0, 1.0, 1.0, 1.0]
        elif obj["layer_types"] is None:
            obj["layer_types"] = ["linear_attention"] * obj["num_hidden_layers"]
    except (TypeError, ValueError, ZeroDivisionError) as exc:
        raise _Fallback("mamba_d_head") from exc


def _t5_activation(obj: Any, kwargs: dict[str, Any]) -> None:
    """T5Config.__post_init__: decoder layers as many as the encoder's unless given, the dense activation and gating
    from feed_forward_proj ("gated-gelu" is gelu_new), scale_decoder_outputs unless tie_word_embeddings (popped) is
    False, and tie_word_embeddings always True."""
    if obj["num_decoder_layers"] is None:
        obj["num_decoder_layers"] = obj["num_layers"]
    act_info = obj["feed_forward_proj"].split("-")
    obj["dense_act_fn"] = act_info[-1]
    obj["is_gated_act"] = act_info[0] == "gated"
    if obj["feed_forward_proj"] == "gated-gelu":
        obj["dense_act_fn"] = "gelu_new"
    obj["scale_decoder_outputs"] = kwargs.pop("tie_word_embeddings", None) is not False
    obj["tie_word_embeddings"] = True


def _t5_activation_checks(obj: Any) -> None:
    """T5Config.validate_architecture (instead of the base one): feed_forward_proj is "ACT" or "gated-ACT"."""
    act_info = obj["feed_forward_proj"].split("-")
    if len(act_info) > 1 and act_info[0] != "gated" or len(act_info) > 2:
        raise _Fallback("feed_forward_proj")


def _granite_hybrid_mamba_checks(obj: Any, d_ssm: bool = False) -> None:
    """GraniteMoeHybridConfig.validate_architecture (instead of the base one): mamba_n_heads divides mamba_expand *
    hidden_size, and mamba_d_head * mamba_n_heads equals it (Falcon-H1's, ``d_ssm``: its mixer width)."""
    try:
        intermediate = _mamba_intermediate(obj, d_ssm)
        bad = intermediate % obj["mamba_n_heads"] != 0 or obj["mamba_d_head"] * obj["mamba_n_heads"] != intermediate
    except (TypeError, ValueError, ZeroDivisionError) as exc:
        raise _Fallback("mamba_n_heads") from exc
    if bad:
        raise _Fallback("mamba_d_head")


def _falcon_h1_mamba_checks(obj: Any) -> None:
    _granite_hybrid_mamba_checks(obj, d_ssm=True)


def _hybrid_blocks(obj: Any) -> list[str]:
    """FalconH1Config.layers_block_type (a read-only property): every layer "hybrid" (attention and Mamba-2)."""
    return ["hybrid" for _ in range(obj["num_hidden_layers"])]


def _time_step_rank_auto(obj: Any, kwargs: dict[str, Any]) -> None:
    """Mamba2Config.__post_init__: time_step_rank "auto" = ceil(hidden_size / 16)."""
    if obj["time_step_rank"] == "auto":
        try:
            obj["time_step_rank"] = math.ceil(obj["hidden_size"] / 16)
        except (TypeError, ValueError, OverflowError) as exc:
            raise _Fallback("time_step_rank") from exc


def _mamba2_heads_checks(obj: Any) -> None:
    """Mamba2Config.validate_architecture (instead of the base one): hidden_size * expand == num_heads * head_dim."""
    try:
        bad = obj["hidden_size"] * obj["expand"] != obj["num_heads"] * obj["head_dim"]
    except TypeError as exc:
        raise _Fallback("num_heads * head_dim") from exc
    if bad:
        raise _Fallback("hidden_size * expand")


_DSV4_LEGACY = ("compress_ratios", "compress_rate_csa", "compress_rate_hca", "num_hash_layers", "qk_rope_head_dim")


def _deepseek_v4_legacy(obj: Any, kwargs: dict[str, Any]) -> None:
    """DeepSeek-V4, before the base __post_init__: the V3-style keys its released checkpoints ship are popped (so
    they are never set as attributes) and held for the rule after it."""
    for key in _DSV4_LEGACY:
        obj.local[key] = kwargs.pop(key, None)


def _deepseek_v4_layers(obj: Any, kwargs: dict[str, Any]) -> None:
    """DeepSeek-V4, after the base __post_init__: expert_dtype copied into a quantization_config dict; compress
    rates (the class's default_compress_rates, legacy per-kind rates folded in); layer types from the legacy
    per-layer compress_ratios (0 / 4 / 128, via _COMPRESS_RATIO_TO_LAYER_TYPE) or two heavily compressed layers then
    CSA / HCA alternating, cut to num_hidden_layers; MLP kinds (num_hash_layers hash-routed first);
    partial_rotary_factor from the legacy qk_rope_head_dim (else default_partial_rotary_factor) and
    qk_rope_head_dim from it; the RoPE dict nested as "main" (plain, rope_theta) and "compress" (the given
    scaling, compress_rope_theta; a yarn one with attention_factor 1.0). Field assignments are type-checked as the
    strict dataclass checks them."""
    entry, legacy, constants = obj.entry, obj.local, obj.entry.get("constants", {})
    needed = ("_COMPRESS_RATIO_TO_LAYER_TYPE", "default_compress_rates", "default_num_hash_layers",
              "default_partial_rotary_factor")
    if any(name not in constants for name in needed):
        raise _Fallback("constants")
    n = obj["num_hidden_layers"]
    quantization, expert_dtype = obj.get("quantization_config"), obj.get("expert_dtype")
    if isinstance(quantization, dict) and expert_dtype is not None and "expert_dtype" not in quantization:
        obj["quantization_config"] = {**quantization, "expert_dtype": expert_dtype}
    try:
        if obj["compress_rates"] is None:
            _set_field(obj, entry, "compress_rates", dict(constants["default_compress_rates"]))
        if legacy["compress_rate_csa"] is not None:
            obj["compress_rates"]["compressed_sparse_attention"] = legacy["compress_rate_csa"]
        if legacy["compress_rate_hca"] is not None:
            obj["compress_rates"]["heavily_compressed_attention"] = legacy["compress_rate_hca"]
        if obj["layer_types"] is None and legacy["compress_ratios"] is not None:
            ratio_type = constants["_COMPRESS_RATIO_TO_LAYER_TYPE"]
            _set_field(obj, entry, "layer_types", [ratio_type[r] for r in legacy["compress_ratios"]])
        if obj["layer_types"] is None:
            interleave = ["compressed_sparse_attention" if i % 2 else "heavily_compressed_attention"
                          for i in range(max(n - 2, 0))]
            _set_field(obj, entry, "layer_types", ["heavily_compressed_attention"] * min(n, 2) + interleave)
        _set_field(obj, entry, "layer_types", list(obj["layer_types"][:n]))
        if obj["mlp_layer_types"] is None:
            n_hash = (legacy["num_hash_layers"] if legacy["num_hash_layers"] is not None
                      else constants["default_num_hash_layers"])
            _set_field(obj, entry, "mlp_layer_types", ["hash_moe"] * min(n, n_hash) + ["moe"] * max(0, n - n_hash))
        _set_field(obj, entry, "mlp_layer_types", list(obj["mlp_layer_types"][:n]))
        if obj["partial_rotary_factor"] is None:
            qk_rope = legacy["qk_rope_head_dim"]
            _set_field(obj, entry, "partial_rotary_factor", qk_rope / obj["head_dim"] if qk_rope is not None
                       else constants["default_partial_rotary_factor"])
        obj["qk_rope_head_dim"] = int(obj["head_dim"] * obj["partial_rotary_factor"])
    except (TypeError, ValueError, KeyError, IndexError, ZeroDivisionError, OverflowError, AttributeError) as exc:
        raise _Fallback("deepseek_v4 layers") from exc
    rope = obj["rope_parameters"] or {}
    if not isinstance(rope, dict):
        raise _Fallback("rope_parameters")
    if isinstance(rope.get("main"), dict) and isinstance(rope.get("compress"), dict):
        nested = {"main": rope["main"], "compress": rope["compress"]}  # already nested: other keys dropped
    else:
        scaling = {k: v for k, v in rope.items() if k not in ("main", "compress")}
        partial = obj["partial_rotary_factor"]
        compress = {**scaling, "rope_theta": obj["compress_rope_theta"], "partial_rotary_factor": partial}
        compress.setdefault("rope_type", "default")
        if compress["rope_type"] == "yarn":
            compress.setdefault("attention_factor", 1.0)
        nested = {"main": {"rope_type": "default", "rope_theta": obj["rope_theta"], "partial_rotary_factor": partial},
                  "compress": compress}
    _set_field(obj, entry, "rope_parameters", nested)


def _glm_eos_default(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """GLM / GLM-4: half the head is rotary unless the config says, and GLM's three end-of-turn tokens."""
    kwargs.setdefault("partial_rotary_factor", 0.5)
    if obj["eos_token_id"] is None:
        obj["eos_token_id"] = [151329, 151336, 151338]


def _every_nth_full(num_layers: Any, interval: Any, other: str, what: str) -> list[str]:
    """Every ``interval``-th layer "full_attention", the rest ``other`` (``bool((i + 1) % interval)``, as the config
    classes write it); a value that raises there falls back."""
    try:
        return [other if bool((i + 1) % interval) else "full_attention" for i in range(num_layers)]
    except (TypeError, ZeroDivisionError) as exc:
        raise _Fallback(what) from exc


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


def _head_dim_or(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """Qwen3-VL-MoE text: ``head_dim or hidden_size // num_attention_heads`` (a head_dim of 0 is recomputed too)."""
    obj["head_dim"] = obj["head_dim"] or _floordiv(obj["hidden_size"], obj["num_attention_heads"])


def _head_dim_always(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """Pixtral's vision config: head_dim is always hidden_size // num_attention_heads."""
    obj["head_dim"] = _floordiv(obj["hidden_size"], obj["num_attention_heads"])


def _sliding_none(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    obj["sliding_window"] = None


def _gemma3_sliding_pattern(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """Gemma 3 text: a bidirectional window is halved plus one; every ``sliding_window_pattern``-th layer (6 unless
    the config says) attends fully. The pattern is read, not popped, so it is also set as an attribute later."""
    if obj["use_bidirectional_attention"]:
        try:
            obj["sliding_window"] = (obj["sliding_window"] // 2) + 1
        except TypeError as exc:
            raise _Fallback("sliding_window") from exc
    pattern = kwargs.get("sliding_window_pattern", 6)
    obj["_sliding_window_pattern"] = pattern
    if obj["layer_types"] is None:
        obj["layer_types"] = _every_nth_full(obj["num_hidden_layers"], pattern, "sliding_attention",
                                             "sliding_window_pattern")


def _llama4_layers(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """Llama 4 text: KV heads, the NoPE layers (every no_rope_layer_interval-th layer has no RoPE), head_dim, the
    MoE layers (every interleave_moe_layer_step-th) and, with attention_chunk_size, chunked attention on RoPE
    layers."""
    if obj["num_key_value_heads"] is None:
        obj["num_key_value_heads"] = obj["num_attention_heads"]
    try:
        default_no_rope = [int((i + 1) % obj["no_rope_layer_interval"] != 0) for i in range(obj["num_hidden_layers"])]
        obj["no_rope_layers"] = obj["no_rope_layers"] if obj["no_rope_layers"] else default_no_rope
        if obj["head_dim"] is None:
            obj["head_dim"] = obj["hidden_size"] // obj["num_attention_heads"]
        if obj["moe_layers"] is None:
            step = obj["interleave_moe_layer_step"]
            obj["moe_layers"] = list(range(step - 1, obj["num_hidden_layers"], step))
        if obj["layer_types"] is None:
            chunked = obj["attention_chunk_size"] is not None
            obj["layer_types"] = ["chunked_attention" if no_rope and chunked else "full_attention"
                                  for no_rope in obj["no_rope_layers"]]
    except (TypeError, ValueError, ZeroDivisionError) as exc:
        raise _Fallback("llama4 layers") from exc


def _glm_dsa_layers(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """GLM-5 (glm_moe_dsa): the indexer per layer (an "F"/"S" pattern, else every index_topk_freq-th layer from
    index_skip_topk_offset keeps its own top-k), the MLA head dims, dense layers first, every layer indexed
    attention, and num_experts as the routed experts. The index_* keys are read, not popped."""
    try:
        if obj["indexer_types"] is None:
            pattern = kwargs.get("index_topk_pattern")
            if pattern is not None:
                obj["indexer_types"] = ([{"F": "full", "S": "shared"}[c] for c in pattern] if isinstance(pattern, str)
                                        else list(pattern))
            else:
                freq = max(kwargs.get("index_topk_freq", 1), 1)
                offset = kwargs.get("index_skip_topk_offset", 2)
                obj["indexer_types"] = ["full" if (max(i - offset + 1, 0) % freq) == 0 else "shared"
                                        for i in range(obj["num_hidden_layers"])]
        obj["qk_head_dim"] = obj["qk_nope_head_dim"] + obj["qk_rope_head_dim"]
        obj["head_dim"] = obj["qk_rope_head_dim"]
        if obj["mlp_layer_types"] is None:
            n_dense = min(obj["first_k_dense_replace"], obj["num_hidden_layers"])
            obj["mlp_layer_types"] = ["dense"] * n_dense + ["sparse"] * (obj["num_hidden_layers"] - n_dense)
        if obj["layer_types"] is None:
            obj["layer_types"] = ["indexed_attention"] * obj["num_hidden_layers"]
    except (TypeError, ValueError, KeyError, ZeroDivisionError) as exc:
        raise _Fallback("glm_moe_dsa layers") from exc
    if (num_experts := kwargs.get("num_experts")) is not None:
        obj["n_routed_experts"] = num_experts


def _vision_type_fix(obj: dict[str, Any], kwargs: dict[str, Any], old: str, new: str) -> None:
    """Qwen-VL composites: an old checkpoint's vision_config names the composite's model_type; the vision type is
    meant (the dict is changed in place, as transformers does)."""
    vision = obj["vision_config"]
    if isinstance(vision, dict) and vision.get("model_type") == old:
        vision["model_type"] = new


def _partial_from_rotary_dim(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """MiniMax-M2's convert_rope_params_to_dict: a legacy rotary_dim sets partial_rotary_factor (rotary_dim /
    head_dim) unless the config gives one."""
    rotary_dim = kwargs.get("rotary_dim", obj.get("rotary_dim"))
    if rotary_dim is not None:
        try:
            kwargs.setdefault("partial_rotary_factor", rotary_dim / obj["head_dim"])
        except (TypeError, ZeroDivisionError, KeyError) as exc:
            raise _Fallback("rotary_dim") from exc


def _text_config_from_flat(obj: Any, kwargs: dict[str, Any]) -> None:
    """Qwen2.5-VL: a config.json without text_config (the released checkpoints are flat) has its text config made
    of the keys the text class's __init__ takes (its signature, compiled: entry["flat_text_params"]) plus the RoPE
    keys, popped from the composite's kwargs; its dtype is torch_dtype (or dtype) as given, read not popped."""
    if obj["text_config"] is None:
        params = [*obj.entry["flat_text_params"], "rope_parameters", "rope_scaling", "rope_theta"]
        text = {key: kwargs.pop(key) for key in params if key in kwargs}
        text["dtype"] = kwargs.get("torch_dtype", kwargs.get("dtype"))
        obj["text_config"] = text


def _tie_from_text(obj: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """Qwen2.5-VL, after the base __post_init__: a text config that ties its embeddings ties the composite's."""
    if not obj["tie_word_embeddings"] and getattr(obj["text_config"], "tie_word_embeddings", False):
        obj["tie_word_embeddings"] = True


def _floordiv(a: Any, b: Any) -> Any:
    try:
        return a // b
    except (TypeError, ZeroDivisionError) as exc:
        raise _Fallback("head_dim") from exc


def _phi3_rope_checks(obj: dict[str, Any]) -> None:
    """Phi-3's validate_rope after the base one: the type default or longrope, and short/long factors lists of
    numbers of rotary dimension / 2 entries each."""
    rope = obj.get("rope_parameters")
    if not isinstance(rope, dict):
        raise _Fallback("rope_parameters")
    try:
        rotary_ndims = int(obj["hidden_size"] // obj["num_attention_heads"] * rope["partial_rotary_factor"])
    except (TypeError, ValueError, KeyError, ZeroDivisionError) as exc:
        raise _Fallback("partial_rotary_factor") from exc
    if rope.get("rope_type") not in ("default", "longrope"):
        raise _Fallback("rope_type")
    for key in ("short_factor", "long_factor"):
        factor = rope.get(key)
        if factor is None:
            continue
        if not (isinstance(factor, list) and all(isinstance(x, (int, float)) for x in factor)):
            raise _Fallback(key)
        if len(factor) != rotary_ndims // 2:
            raise _Fallback(key)


def _hidden_divisible_by_heads(obj: dict[str, Any]) -> None:
    try:
        bad = obj["hidden_size"] % obj["num_attention_heads"] != 0
    except (TypeError, ZeroDivisionError) as exc:
        raise _Fallback("hidden_size") from exc
    if bad:
        raise _Fallback("hidden_size % num_attention_heads")


_RULES: dict[str, Callable[..., None]] = {
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
    "head_dim_or": _head_dim_or,
    "head_dim_always": _head_dim_always,
    "sliding_none": _sliding_none,
    "gemma3_sliding_pattern": _gemma3_sliding_pattern,
    "llama4_layers": _llama4_layers,
    "glm_dsa_layers": _glm_dsa_layers,
    "vision_type_fix": _vision_type_fix,
    "partial_from_rotary_dim": _partial_from_rotary_dim,
    "text_config_from_flat": _text_config_from_flat,
    "tie_from_text": _tie_from_text,
    "kimi_linear_layers": _kimi_linear_layers,
    "smollm3_layers": _smollm3_layers,
    "layer_types_every_fourth_full": _layer_types_every_fourth_full,
    "exaone4_layers": _exaone4_layers,
    "lfm2_layers": _lfm2_layers,
    "apertus_rope_default": _apertus_rope_default,
    "glm_eos_default": _glm_eos_default,  # with two arguments: "vision_type_fix:<old type>:<new type>"
    "gemma4_text_layers": _gemma4_text_layers,
    "channels_as_list": _channels_as_list,
    "deepseek_v4_legacy": _deepseek_v4_legacy,
    "deepseek_v4_layers": _deepseek_v4_layers,
    "falcon_sizes": _falcon_sizes,  # "falcon_sizes:kv_heads" from 5.25 on
    "mamba_sizes": _mamba_sizes,
    "granite_hybrid_mamba": _granite_hybrid_mamba,
    "t5_activation": _t5_activation,
    "time_step_rank_auto": _time_step_rank_auto,  # "granite_hybrid_mamba:falcon_h1" for Falcon-H1
}
_ROPE_CONVERSIONS = {"gemma3": _gemma3_rope, "mrope_as_default": _mrope_as_default_rope, "phi3": _phi3_rope,
                     "phi3_524": _phi3_rope_524,
                     "olmo3": _olmo3_rope, "keep": _keep_rope}
_TO_DICT_RULES = {"bidirectional_window": _bidirectional_window, "bidirectional_all_window": _bidirectional_all_window}
_PROPERTIES: dict[str, Callable[[Any], Any]] = {"kv_sharing_modes": _kv_sharing_modes, "falcon_head_dim": _falcon_head_dim,
                                                "not_alibi": _not_alibi,
                                                "linear_attention_layers": _linear_attention_layers,
                                                "hybrid_blocks": _hybrid_blocks}
_VALIDATORS = {"hidden_divisible_by_heads": _hidden_divisible_by_heads, "phi3_rope_checks": _phi3_rope_checks,
               "deepseek_v4_layer_checks": _deepseek_v4_layer_checks, "deepseek_v4_rope_checks": _deepseek_v4_rope_checks,
               "granite_hybrid_mamba_checks": _granite_hybrid_mamba_checks, "t5_activation_checks": _t5_activation_checks,
               "falcon_h1_mamba_checks": _falcon_h1_mamba_checks, "mamba2_heads_checks": _mamba2_heads_checks}
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
    out["mrope_section"] = _plain(mrope_section(d))  # the parts of the RoPE dict hfmem reads
    out["rope per layer type"] = _plain(rope_per_layer_type(d))
    out["yarn positions"] = yarn_positions(d)
    return out


def yarn_positions(text_config: dict[str, Any]) -> int | None:
    """original_max_position_embeddings x factor of the config's YaRN RoPE (the positions a YaRN cos/sin cache covers
    in vLLM's DeepSeek rotary embeddings), wherever this transformers version keeps it: ``rope_scaling`` before v5,
    ``rope_parameters`` after, itself or one of its per-kind entries (DeepSeek-V4's "main" and "compress"); else None.
    used_view compares it."""
    candidates: list[Any] = [text_config.get("rope_scaling")]
    rope = text_config.get("rope_parameters")
    if isinstance(rope, dict):
        candidates += [rope, *rope.values()]
    for entry in candidates:
        if isinstance(entry, dict) and (entry.get("rope_type") or entry.get("type")) == "yarn":
            factor, original = entry.get("factor"), entry.get("original_max_position_embeddings")
            if (isinstance(factor, (int, float)) and not isinstance(factor, bool) and 0 < factor < 1e6
                    and isinstance(original, int) and not isinstance(original, bool) and 0 < original < 1 << 40):
                return int(original * factor)
    return None


def rope_per_layer_type(text_config: dict[str, Any]) -> dict[str, dict[str, Any]] | None:
    """The RoPE parameters of each layer type where the config gives them per type (``rope_parameters`` keyed by the
    ``layer_types`` values: Gemma 3, Gemma 4), else None. vLLM builds one rotary embedding per distinct set
    (hfmem.memory.planner, the rotary caches); used_view compares it."""
    rope, kinds = text_config.get("rope_parameters"), text_config.get("layer_types")
    if not (isinstance(rope, dict) and isinstance(kinds, list) and kinds and all(isinstance(k, str) for k in kinds)):
        return None
    if not all(isinstance(rope.get(k), dict) for k in kinds):
        return None
    return {k: dict(rope[k]) for k in sorted(set(kinds))}


def mrope_section(text_config: dict[str, Any]) -> Any:
    """The multimodal RoPE sections of a text config (Qwen2-VL family), wherever this transformers version keeps
    them (``rope_scaling`` before v5, ``rope_parameters`` after), or None. The only part of the RoPE dict hfmem
    reads, so used_view compares it although the dict itself is NOT_READ."""
    for key in ("rope_scaling", "rope_parameters"):
        rope = text_config.get(key)
        if isinstance(rope, dict) and rope.get("mrope_section"):
            return rope["mrope_section"]
    return None
