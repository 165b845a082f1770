"""Compile transformers' config classes into hfmem/model/config_table.py, the table hfmem.model.fast_config reads
config.json with (so a run imports no transformers for a covered model_type). Developers run it under each
transformers release hfmem supports; tests never do:

    python scripts/compile_configs.py            # compiles the installed release and merges it into the table
    python scripts/compile_configs.py --fresh    # the installed release only (forget the others)
    python scripts/compile_configs.py --drop 5.24.0   # stop claiming a release

The table covers several releases at once: its body is the newest verified release's knowledge, and TABLE["releases"]
maps every verified release to an overlay of what differs from the body (model_type entries, the known-types list as
added/dropped names, base-class facts); hfmem.model.fast_config.select_release applies the installed one's at run
time, and any other installed version falls back to importing transformers with a note. Supporting a new release is
one command in a venv that has it: ``pip install transformers==X && python scripts/compile_configs.py`` (the releases
already in the table are read back from it, so they stay), then raise the bound in pyproject.toml and run
tests/test_fast_config.py, tests/test_contract.py and the measured-cache tests (tests/test_kv_truth.py) under it.

A model_type is covered only when every part of what AutoConfig.for_model does for it is known here:
- no properties of its own but read-only ones whose getter is catalogued (KNOWN_PROPERTIES: Gemma 4 text's
  kv_sharing_modes, Falcon's head_dim and rotary, Mamba's layer_types); no override of a PreTrainedConfig method
  other than __post_init__ and validate_* (a convert_rope_params_to_dict or to_dict override only when its source is
  catalogued: KNOWN_ROPE, KNOWN_ROPE_CONVERT, KNOWN_TO_DICT; another method only when its source is catalogued as
  dead code, KNOWN_UNCALLED, and no line of the installed transformers names it but its definitions); a
  validate_layer_type / validate_rope / validate_architecture that does not call the base one is catalogued with
  "instead_of_base", and RoPE nested under _rope_type_labels needs such a validate_rope;
- the module-level constants and non-field class attributes its catalogued methods read are compiled with it
  (``constants``), so the rules read the release's values;
- sub-configs only as PreTrainedConfig.__post_init__ builds them from sub_configs_defaults
  (SubConfigSpec.create_subconfig), each default type covered too; get_text_config(decoder=True) is the config
  itself or one of those sub-configs, or (a legacy encoder-decoder without sub-configs: T5, Whisper) the base
  method's copy with its decoder_* keys renamed, when that method's source is catalogued (KNOWN_TEXT_SPLIT);
- its __post_init__ and validate_* methods have exactly the source text one of the named computations in
  hfmem/model/fast_config.py was written from (KNOWN_POST_INIT / KNOWN_VALIDATORS below, by sha256 of the
  dedented source); an edited or new class is left out until someone reads it and adds it;
- every dataclass field's declared type can be described for the strict type check (a field validator only when
  catalogued: KNOWN_FIELD_VALIDATORS, transformers' interval), and its default is JSON or an infinite float
  (Granite 4 hybrid's time_step_limit: the generated module imports math.inf for pprint's ``inf``; NaN never);
- the fast normaliser gives the same value as transformers for every field hfmem reads (fast_config.USED_ATTRS,
  USED_KEYS) on probes: the class defaults, every config of that type in fixtures/ and ../shared/models, and
  variations of them (KV heads / head_dim dropped, sliding window on, legacy rope_scaling/rope_theta, torch_dtype).
"""

from __future__ import annotations

import argparse
import ast
import copy
import dataclasses
import functools
import hashlib
import inspect
import json
import logging
import os
import pprint
import sys
import textwrap
import types
import typing
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

# sha256 (first 16 hex) of a method's dedented source -> the computations it performs, in order
KNOWN_POST_INIT: dict[str, list[str]] = {}
KNOWN_VALIDATORS: dict[str, list[str]] = {}
# convert_rope_params_to_dict overrides that adjust the kwargs and then call the base conversion
KNOWN_ROPE: dict[str, list[str]] = {}
KNOWN_ROPE_CONVERT: dict[str, str] = {}
KNOWN_TO_DICT: dict[str, list[str]] = {}
KNOWN_FIELD_VALIDATORS: dict[str, str] = {}  # a field's own validator (transformers.utils.type_validators)
KNOWN_PROPERTIES: dict[str, str] = {}  # read-only properties of a class: the fast_config._PROPERTIES entry replaying it
# overrides nothing in transformers calls (Hunyuan-V1-MoE's _rope_parameters_validation): the source read by a person,
# and each compile checks that the name still appears nowhere in transformers but its own definitions (_uncalled)
KNOWN_UNCALLED: dict[str, str] = {}
# PreTrainedConfig.get_text_config sources whose legacy encoder-decoder branch (a copy with its decoder_* keys renamed)
# fast_config._decoder_split replays
KNOWN_TEXT_SPLIT: dict[str, str] = {}
# The model types worth covering (the families hfmem is used on most); anything else falls back to transformers.
CANDIDATES = [
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gpt_oss", "glm4_moe", "minimax_m2",
    "bert", "gpt2", "phi", "phi3", "gemma", "gemma2", "deepseek_v2", "deepseek_v3", "glm4_moe_lite", "qwen3_next",
    "kimi_linear", "falcon", "mamba", "granitemoehybrid", "falcon_h1", "mamba2", "t5", "whisper", "starcoder2", "olmo2", "granite", "cohere", "stablelm",
    # composite (text + vision) and frontier families
    "gemma3", "gemma3_text", "gemma4", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "llama4",
    "mistral3", "glm_moe_dsa", "deepseek_v4", "hunyuan_v1_moe",
    "smollm3", "olmo3", "seed_oss", "ernie4_5", "hunyuan_v1_dense", "exaone4", "lfm2", "apertus",
    "glm4", "glm",
]  # fmt: skip

_SOURCES: dict[str, str] = {}
# what @dataclass (and huggingface_hub's strict wrapper) write into every config class
_GENERATED = frozenset({"__init__", "__eq__", "__repr__", "__hash__", "__setattr__", "__delattr__", "__match_args__",
                        "__getstate__", "__setstate__", "__replace__", "__dataclass_fields__", "__dataclass_params__",
                        "validate"})


def _src_key(fn: Any) -> str:
    src = textwrap.dedent(inspect.getsource(fn))
    key = hashlib.sha256(src.encode()).hexdigest()[:16]
    _SOURCES[key] = src
    return key


def _load_known() -> None:
    """The catalogue: each entry names the computations a method's source performs (read by a person)."""
    entries = json.loads((ROOT / "scripts" / "compile_configs_known.json").read_text())
    KNOWN_POST_INIT.update(entries["post_init"])
    KNOWN_VALIDATORS.update(entries["validators"])
    KNOWN_ROPE.update(entries.get("rope", {}))
    KNOWN_ROPE_CONVERT.update(entries.get("rope_convert", {}))
    KNOWN_TO_DICT.update(entries.get("to_dict", {}))
    KNOWN_PROPERTIES.update(entries.get("properties", {}))
    KNOWN_FIELD_VALIDATORS.update(entries.get("field_validators", {}))
    KNOWN_UNCALLED.update(entries.get("uncalled", {}))
    KNOWN_TEXT_SPLIT.update(entries.get("text_split", {}))


@functools.cache
def _transformers_sources() -> str:
    import transformers

    return "\n".join(p.read_text(errors="replace") for p in Path(transformers.__file__).parent.rglob("*.py"))


def _uncalled(name: str) -> bool:
    """No line of the installed transformers names ``name`` but its own ``def`` lines (so no code calls it, nor
    builds its name: a getattr of an f-string would still have to spell the rest of it)."""
    stem = name.strip("_")
    for line in _transformers_sources().splitlines():
        if stem in line and not line.lstrip().startswith(f"def {name}("):
            return False
    return True


def _spec(tp: Any) -> Any:
    """A declared field type as fast_config._check reads it (huggingface_hub.dataclasses.type_validator)."""
    if tp is Any:
        return ["any"]
    if tp is None or tp is type(None):
        return ["none"]
    if isinstance(tp, (str, typing.ForwardRef)):
        return ["any"]  # strict skips forward references
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return ["union", [_spec(a) for a in args]]
    if origin is typing.Literal:
        return ["lit", list(args)]
    if origin is list:
        return ["list", _spec(args[0]) if args else ["any"]]
    if origin is dict:
        return ["dict", _spec(args[0]), _spec(args[1])] if args else ["dict", ["any"], ["any"]]
    if tp is list:
        return ["list", ["any"]]
    if tp is dict:
        return ["dict", ["any"], ["any"]]
    if tp in (int, float, bool, str):
        return [tp.__name__]
    return ["unknown"]  # TypedDict, torch.dtype, tuples, ...: values of these kinds fall back


def _jsonable(v: Any) -> Any:
    if isinstance(v, tuple):
        return [_jsonable(x) for x in v]
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        if not all(isinstance(k, str) for k in v):
            raise TypeError("non-string key")
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, float) and v != v:
        raise TypeError("NaN")  # equal to nothing, so no probe could agree on it
    # an infinite float (Granite 4 hybrid's time_step_limit bound) is written as pprint does, `inf`, which the
    # generated module defines (from math import inf)
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise TypeError(type(v).__name__)


def compile_type(model_type: str) -> tuple[dict[str, Any] | None, str]:
    from transformers.configuration_utils import PreTrainedConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if model_type not in CONFIG_MAPPING:
        return None, "unknown to transformers"
    cls = CONFIG_MAPPING[model_type]
    sub_configs: dict[str, Any] = {}
    for key, spec in (getattr(cls, "sub_configs_defaults", None) or {}).items():
        if key == "backbone_config":
            return None, "backbone sub-config"  # consolidate_backbone_kwargs_to_config: not replayed
        try:
            init_kwargs = _jsonable(dict(spec.init_kwargs))
        except TypeError:
            return None, f"init_kwargs of {key} are not JSON"
        sub_configs[key] = {"model_type": spec.model_type, "auto": not issubclass(spec.config_class, PreTrainedConfig),
                            "init_kwargs": init_kwargs, "optional": bool(spec.optional)}
    mro = [c for c in cls.__mro__ if issubclass(c, PreTrainedConfig) and c is not PreTrainedConfig]
    # Only __post_init__ and validate_* are replayed (by catalogued source); a class that overrides any other method
    # of PreTrainedConfig or its mixins (to_dict, __setattr__, convert_rope_params_to_dict, get_text_config, ...)
    # computes something this table does not know. The dataclass decorator's own methods are generated.
    # (every class of the model's own modules, mixins too, not only PreTrainedConfig subclasses)
    own = [c for c in cls.__mro__ if c.__module__.startswith("transformers.models.")]
    overridden = sorted({n for c in own for n, v in vars(c).items()
                         if callable(v) and not isinstance(v, type) and n != "__post_init__"
                         and not (n.startswith("validate") and n != "validate")
                         and not (n in _GENERATED and (n not in ("__setattr__", "validate")
                                                       or "strict." in getattr(v, "__qualname__", "")))})
    # catalogued overrides: a convert_rope_params_to_dict that adjusts the kwargs before the base conversion
    # (KNOWN_ROPE) or replaces it (KNOWN_ROPE_CONVERT), a to_dict that edits the base serialisation (KNOWN_TO_DICT)
    rope_rules: list[str] = []
    rope_convert: str | None = None
    to_dict_rules: list[str] = []
    for name in list(overridden):
        owners = [c for c in own if name in vars(c)]
        key = _src_key(vars(owners[0])[name])
        if len(owners) > 1:
            continue  # an override of an override: its super() is not the base method
        if name == "convert_rope_params_to_dict" and key in KNOWN_ROPE:
            rope_rules = KNOWN_ROPE[key]
        elif name == "convert_rope_params_to_dict" and key in KNOWN_ROPE_CONVERT:
            rope_convert = KNOWN_ROPE_CONVERT[key]
        elif name == "to_dict" and key in KNOWN_TO_DICT:
            to_dict_rules = KNOWN_TO_DICT[key]
        elif KNOWN_UNCALLED.get(key) == name and _uncalled(name):
            pass  # dead code: AutoConfig.for_model never runs it
        else:
            continue
        overridden.remove(name)
    if overridden:
        return None, f"overrides {overridden}"
    # the class's own properties: only catalogued getters (KNOWN_PROPERTIES), replayed as attributes
    property_rules: dict[str, str] = {}
    own_props = sorted({n for c in mro for n, v in vars(c).items() if isinstance(v, property)})
    for name in list(own_props):
        owners = [c for c in mro if name in vars(c)]
        prop = vars(owners[0])[name]
        if len(owners) == 1 and prop.fset is None and _src_key(prop.fget) in KNOWN_PROPERTIES:
            property_rules[name] = KNOWN_PROPERTIES[_src_key(prop.fget)]
            own_props.remove(name)
    if own_props:
        return None, f"properties {own_props}"
    # _rope_type_labels (DeepSeek-V4): the RoPE dict is nested under these labels instead of layer types
    # (RotaryEmbeddingConfigMixin.nested_rope_parameter_keys); replayed only with the class's own validate_rope
    rope_labels = getattr(cls, "_rope_type_labels", None)
    if rope_labels and "validate_rope" not in vars(cls):
        return None, "rope type labels without its own validate_rope"
    default_rope_type = getattr(cls, "default_rope_type", "default")
    if default_rope_type != "default" and default_rope_type not in rope_required():
        return None, f"default rope type {default_rope_type}"
    post = [c for c in mro if "__post_init__" in vars(c)]
    rules: list[str] = []
    if len(post) > 1:
        return None, "chained __post_init__"
    if post:
        key = _src_key(vars(post[0])["__post_init__"])
        if key not in KNOWN_POST_INIT:
            return None, f"__post_init__ {key} not catalogued"
        rules = KNOWN_POST_INIT[key]
    flat_text_params: list[str] | None = None
    if "text_config_from_flat" in rules:  # the text class's __init__ parameters, as that rule's source reads them
        text_cls = cls.sub_configs_defaults["text_config"].config_class
        flat_text_params = list(inspect.signature(text_cls.__init__).parameters)
    validators: list[str] = []
    replaced: list[str] = []  # base validators fast_config replays that the class overrides (its rules replace them)
    methods = [vars(post[0])["__post_init__"]] if post else []
    for name in sorted(n for n in dir(cls) if n.startswith("validate")):
        owner = next(c for c in cls.__mro__ if name in vars(c))
        module = getattr(vars(owner)[name], "__module__", "") or ""
        if owner is PreTrainedConfig or module.startswith(("transformers.configuration_utils",
                                                           "transformers.modeling_rope_utils", "huggingface_hub")):
            continue  # replayed by fast_config itself (validate_layer_type, validate_rope) or warnings only
        key = _src_key(vars(owner)[name])
        if key not in KNOWN_VALIDATORS:
            return None, f"{name} {key} not catalogued"
        checks = KNOWN_VALIDATORS[key]
        if "instead_of_base" in checks:  # catalogued as not calling super(): fast_config skips its replay of the base
            if name not in ("validate_layer_type", "validate_rope", "validate_architecture"):
                return None, f"{name} replaces a base validator fast_config does not replay"
            replaced.append(name)
        validators += [r for r in checks if r != "instead_of_base"]
        methods.append(vars(owner)[name])
    constants = _constants(cls, methods)
    fields: dict[str, Any] = {}
    specs: dict[str, Any] = {}
    hints = typing.get_type_hints(cls, localns={"torch": __import__("torch")})
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            return None, f"field {f.name} has no default"
        try:
            fields[f.name] = _jsonable(default)
        except TypeError:
            return None, f"default of {f.name} is not JSON"
        specs[f.name] = _spec(hints.get(f.name, f.type))
        # huggingface_hub's validated_field: validators besides the type check (Llama's initializer_range interval)
        for check in f.metadata.get("validator") or []:
            key = _src_key(check)
            if KNOWN_FIELD_VALIDATORS.get(key) != "interval":
                return None, f"validator {key} of field {f.name} not catalogued"
            cells = dict(zip(check.__code__.co_freevars, (c.cell_contents for c in check.__closure__ or ())))
            bounds = [None if abs(cells[b]) == float("inf") else cells[b] for b in ("min", "max")]
            specs[f.name] = ["interval", *bounds, cells["exclude_min"], cells["exclude_max"], specs[f.name]]
    if {"head_dim", "num_heads", "embed_dim"} <= set(fields):
        return None, "base validate_architecture applies"
    instance = cls()
    text = instance.get_text_config(decoder=True)
    decoder_split: dict[str, Any] | None = None
    if text is not instance and not any(text is getattr(instance, key, None) for key in sub_configs):
        # a legacy encoder-decoder (T5, Whisper): the base get_text_config's copy with decoder_* keys renamed, replayed
        # when that method's source is catalogued; a deleted key then reads as the class attribute (compiled here)
        if not (instance.is_encoder_decoder and not sub_configs
                and KNOWN_TEXT_SPLIT.get(_src_key(PreTrainedConfig.get_text_config)) == "legacy_decoder_split"):
            return None, "text config is neither the config itself nor one of its sub-configs"
        decoder_split = {}
        for name in dir(cls):
            if name.startswith("decoder"):
                try:
                    decoder_split[name] = _jsonable(getattr(cls, name))
                except TypeError:
                    return None, f"class attribute {name} is not JSON"
    properties = sorted({n for c in cls.__mro__ for n, v in vars(c).items() if isinstance(v, property)})
    return {
        "fields": fields, "types": specs, "attribute_map": dict(cls.attribute_map), "rules": rules,
        "validators": validators, "properties": properties, "default_theta": getattr(cls, "default_theta", None),
        **({"default_rope_type": default_rope_type} if default_rope_type != "default" else {}),
        **({"rope_rules": rope_rules} if rope_rules else {}),
        **({"rope_convert": rope_convert} if rope_convert else {}),
        **({"to_dict_rules": to_dict_rules} if to_dict_rules else {}),
        **({"flat_text_params": flat_text_params} if flat_text_params is not None else {}),
        **({"rope_type_labels": list(rope_labels)} if rope_labels else {}),
        **({"replaced_validators": replaced} if replaced else {}),
        **({"constants": constants} if constants else {}),
        **({"property_rules": property_rules} if property_rules else {}),
        **({"sub_configs": sub_configs} if sub_configs else {}),
        **({"decoder_split": decoder_split} if decoder_split is not None else {}),
    }, "ok"  # fmt: skip


def _constants(cls: Any, methods: list[Any]) -> dict[str, Any]:
    """The data a catalogued method reads besides its source (so a release that changes one recompiles to another
    table instead of keeping a stale copy in a rule): module-level constants (DeepSeek-V4's
    _COMPRESS_RATIO_TO_LAYER_TYPE) and class attributes that are not dataclass fields (its default_compress_rates),
    found among the names its code objects use. Only plain literals (other values are left out: a rule that reads one
    falls back without it)."""
    fields = {f.name for f in dataclasses.fields(cls)}
    out: dict[str, Any] = {}
    for fn in methods:
        codes, names = [fn.__code__], set()
        while codes:
            code = codes.pop()
            names.update(code.co_names)
            codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
        for name in sorted(names):
            if name in fn.__globals__:
                value = fn.__globals__[name]
            elif name not in fields and name in {n for c in cls.__mro__ for n in vars(c)} and not name.startswith("__"):
                value = getattr(cls, name)
            else:
                continue
            if isinstance(value, (type, types.ModuleType, property, classmethod, staticmethod)) or callable(value):
                continue
            if not isinstance(value, (tuple, list, dict, set, frozenset, str, int, float, bool, type(None))):
                continue  # a logger, a sentinel: not data a rule reads
            if name in ("model_type", "attribute_map", "default_theta", "default_rope_type", "_rope_type_labels"):
                continue  # compiled on their own
            try:
                out[name] = _literal(value)
            except TypeError:
                continue  # config classes, a sentinel: a rule that needed one falls back when it is missing
    return out


def _literal(value: Any) -> Any:
    """A constant as the table writes it: tuples and sets as lists, dicts with any literal keys (pprint writes a
    Python literal, not JSON)."""
    if isinstance(value, (tuple, list)):
        return [_literal(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(_literal(v) for v in value)
    if isinstance(value, dict):
        if not all(isinstance(k, (str, int)) and not isinstance(k, bool) for k in value):
            raise TypeError("dict keys")
        return {k: _literal(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
            raise TypeError("non-finite float")
        return value
    raise TypeError(type(value).__name__)


@functools.cache
def rope_required() -> dict[str, list[str]]:
    """required_keys of each RotaryEmbeddingConfigMixin._validate_{rope_type}_rope_parameters, read from its source."""
    from transformers.modeling_rope_utils import RotaryEmbeddingConfigMixin

    out: dict[str, list[str]] = {}
    for name, fn in vars(RotaryEmbeddingConfigMixin).items():
        if not (name.startswith("_validate_") and name.endswith("_rope_parameters")):
            continue
        rope_type = name[len("_validate_"):-len("_rope_parameters")]
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        required = None
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "required_keys" for t in node.targets):
                required = ast.literal_eval(node.value)
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == f"_validate_{'default'}_rope_parameters":
                required = {"rope_type"}  # delegates (axial)
        if isinstance(required, set):
            out[rope_type] = sorted(required)
    return out


def ignored_keys() -> list[str]:
    """The config.json keys PreTrainedConfig.__post_init__ (transformers/configuration_utils.py) skips in its loop over
    the remaining kwargs (``if key not in ...: setattr(self, key, value)``), read from its source: a tuple literal in
    5.24, an ``ignored_keys`` set (with the public ``_attn_implementation`` / ``_experts_implementation``) in 5.25."""
    from transformers.configuration_utils import PreTrainedConfig

    tree = ast.parse(textwrap.dedent(inspect.getsource(PreTrainedConfig.__post_init__)))
    assigned = {t.id: n.value for n in ast.walk(tree) if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    for loop in ast.walk(tree):
        if not (isinstance(loop, ast.For) and ast.unparse(loop.iter) == "kwargs.items()"):
            continue
        for node in ast.walk(loop):
            if (isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == "key"
                    and isinstance(node.ops[0], ast.NotIn)):
                target = node.comparators[0]
                if isinstance(target, ast.Name):
                    target = assigned[target.id]
                return sorted(ast.literal_eval(target))
    raise SystemExit("PreTrainedConfig.__post_init__ changed: read it and teach ignored_keys() its kwargs loop")


def globals_table() -> dict[str, Any]:
    import torch
    import transformers
    from transformers import configuration_utils as cu
    from transformers.generation.configuration_utils import GenerationConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return {
        "transformers": transformers.__version__,
        # Every model_type this transformers knows: another is unknown to it without importing it to ask
        # (normalise.normalise_config reads such a config raw, as AutoConfig.for_model's ValueError leads to).
        "known_types": sorted(CONFIG_MAPPING_NAMES),
        "generation_params": sorted(GenerationConfig._get_default_generation_params()),
        "legacy_layer_types": dict(cu._LEGACY_LAYER_TYPE_REMAP),
        "allowed_attn_layer_types": list(cu.ALLOWED_ATTN_LAYER_TYPES),
        "torch_dtypes": sorted(n for n in dir(torch) if isinstance(getattr(torch, n, None), torch.dtype)),
        "rope_required": rope_required(),
        "ignored_keys": ignored_keys(),
    }


# ---------------------------------------------------------------------------------------------------------------
# Verification


def probe_configs(model_type: str) -> list[dict[str, Any]]:
    """The configs of this type in fixtures/ and ../shared/models, and variations of each."""
    found: list[dict[str, Any]] = []
    roots = [ROOT / "fixtures", ROOT.parent / "shared" / "models", Path("/work/shared/models")]
    for root in roots:
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("config.json")):
            try:
                cfg = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(cfg, dict) and cfg.get("model_type") == model_type:
                found.append(cfg)
            if isinstance(cfg, dict):  # a composite's sub-config of this type (Gemma 3's text_config, ...)
                found += [dict(v, model_type=model_type) for v in cfg.values()
                          if isinstance(v, dict) and v.get("model_type") == model_type]
    out: list[dict[str, Any]] = _variations({"model_type": model_type})  # the defaults and their variations
    for cfg in found:
        for key, sub in cfg.items():  # a composite: its sub-configs varied as configs of their own
            if isinstance(sub, dict) and isinstance(sub.get("model_type"), str) and key.endswith("_config"):
                out += [dict(cfg, **{key: v}) for v in _variations(sub)[1:]]
        out += _variations(cfg)
    return out


def _variations(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    """A config and variations of it that make config classes compute values (or reject them)."""
    out = [cfg]
    for drop in ("num_key_value_heads", "head_dim", "layer_types", "sliding_window", "rope_parameters", "dtype"):
        if drop in cfg:
            out.append({k: v for k, v in cfg.items() if k != drop})
    v = copy.deepcopy(cfg)
    v["use_sliding_window"] = True
    v.setdefault("sliding_window", 4096)
    v.pop("layer_types", None)
    out.append(v)
    v = {k: x for k, x in cfg.items() if k not in ("rope_parameters", "dtype")}
    v.update(rope_theta=500000.0, torch_dtype="float16",
             rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                           "original_max_position_embeddings": 8192})
    out.append(v)
    v = {k: x for k, x in cfg.items() if k != "rope_parameters"}
    v.update(rope_scaling={"rope_type": "yarn", "factor": 4.0}, partial_rotary_factor=0.5)
    out.append(v)
    v = dict(cfg, num_attention_heads=7)  # often not a divisor: validators must agree on the rejection
    out.append(v)
    v = dict(cfg, rope_parameters={"rope_type": "llama3", "factor": 8.0})  # missing keys: KeyError
    out.append(v)
    out.append(dict(cfg, _attn_implementation="eager"))  # a property in 5.24, skipped by 5.25's __post_init__
    return out


def transformers_view(config: dict[str, Any]) -> Any:
    from hfmem.model.normalise import _normalise_config

    full, text, how, notes = _normalise_config(config)
    return (full, text) if how == "transformers" else None


def verify(model_type: str, table: dict[str, Any]) -> list[str]:
    from hfmem.model import fast_config

    saved = dict(fast_config.TABLE)
    fast_config.TABLE.clear()
    fast_config.TABLE.update(table, releases={table["transformers"]: {}})
    fast_config._version_ok = True
    problems: list[str] = []
    try:
        for cfg in probe_configs(model_type):
            fast = fast_config.fast_normalise(cfg)
            slow = transformers_view(cfg)
            if fast is None:
                continue  # a fallback is always safe
            if slow is None:
                problems.append(f"transformers rejects a config the table accepts: {sorted(cfg)[:8]}")
                continue
            a, b = fast_config.used_view(*fast), fast_config.used_view(*slow)
            diff = {k: (a[k], b.get(k)) for k in a if a[k] != b.get(k)}
            if diff:
                problems.append(f"differs: {str(diff)[:300]}")
    finally:
        fast_config.TABLE.clear()
        fast_config.TABLE.update(saved)
        fast_config._version_ok = None
    return problems


# ---------------------------------------------------------------------------------------------------------------
# Several releases in one table


def _has_inf(value: Any) -> bool:
    """An infinite float anywhere in the table (pprint writes it ``inf``, a name the generated module must define)."""
    if isinstance(value, float):
        return value in (float("inf"), float("-inf"))
    if isinstance(value, dict):
        return any(_has_inf(v) for v in value.values())
    return isinstance(value, (list, tuple)) and any(_has_inf(v) for v in value)


def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else -1 for p in release.replace("rc", ".").split("."))


def read_releases(path: Path) -> dict[str, dict[str, Any]]:
    """Every release the table at ``path`` was verified under, each as the full table compile() made for it."""
    if not path.is_file():
        return {}
    namespace: dict[str, Any] = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    table = namespace["TABLE"]
    if "releases" not in table:  # a table from before the multi-release format: one release
        return {table["transformers"]: table}
    from hfmem.model.fast_config import select_release

    out = {}
    for release in table["releases"]:
        one = copy.deepcopy(table)
        assert select_release(one, release)
        del one["releases"]
        out[release] = one
    return out


def _overlay(body: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """What ``other`` says differently from ``body``, in the form fast_config.select_release applies."""
    if set(body) != set(other):
        raise SystemExit(f"releases disagree on the table's keys {sorted(set(body) ^ set(other))}: recompile both")
    out: dict[str, Any] = {}
    for key in sorted(body):
        if key in ("transformers", "types", "known_types") or body[key] == other[key]:
            continue
        out[key] = other[key]
    types = {t: other["types"].get(t) for t in sorted(set(body["types"]) | set(other["types"]))
             if body["types"].get(t) != other["types"].get(t)}
    if types:
        out["types"] = types
    known, theirs = set(body["known_types"]), set(other["known_types"])
    if known != theirs:
        out["known_types"] = {"add": sorted(theirs - known), "drop": sorted(known - theirs)}
    return out


def merge(releases: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One table for every release: the newest one's body, an overlay per release (empty for the body's own)."""
    from hfmem.model.fast_config import select_release

    order = sorted(releases, key=_release_key)
    body = copy.deepcopy(releases[order[-1]])
    body["releases"] = {r: _overlay(releases[order[-1]], releases[r]) for r in order}
    for release in order:  # the overlays must give back each release's table exactly
        one = copy.deepcopy(body)
        assert select_release(one, release) and {k: v for k, v in one.items() if k != "releases"} == releases[release], release
    return body


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "hfmem" / "model" / "config_table.py"))
    ap.add_argument("--fresh", action="store_true", help="the installed release only (do not keep the table's others)")
    ap.add_argument("--drop", action="append", default=[], metavar="VERSION", help="remove a release from the table")
    ap.add_argument("--show-sources", action="store_true", help="print uncatalogued method sources")
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    _load_known()
    table = globals_table()
    table["types"] = {}
    outcome: dict[str, bool] = {}

    def cover(model_type: str) -> bool:
        """Compile and verify a type, its sub-configs' default types first (a composite is covered only with them)."""
        if model_type in outcome:
            return outcome[model_type]
        outcome[model_type] = False
        entry, why = compile_type(model_type)
        if entry is not None:
            missing = [s["model_type"] for s in entry.get("sub_configs", {}).values() if not cover(s["model_type"])]
            if missing:
                entry, why = None, f"sub-config types not covered: {missing}"
        if entry is None:
            print(f"left out {model_type}: {why}")
            return False
        trial = dict(table, types={**table["types"], model_type: entry})
        problems = verify(model_type, trial)
        if problems:
            print(f"left out {model_type}: {len(problems)} probe(s) disagree, e.g. {problems[0]}")
            return False
        table["types"][model_type] = entry
        outcome[model_type] = True
        print(f"covered  {model_type}")
        return True

    for model_type in CANDIDATES:
        cover(model_type)
    if args.show_sources:
        for key, src in _SOURCES.items():
            if not any(key in known for known in (KNOWN_POST_INIT, KNOWN_VALIDATORS, KNOWN_ROPE, KNOWN_ROPE_CONVERT,
                                                  KNOWN_TO_DICT, KNOWN_PROPERTIES, KNOWN_FIELD_VALIDATORS)):
                print(f"--- {key}\n{src}")
    releases = {} if args.fresh else read_releases(Path(args.out))
    releases[table["transformers"]] = table
    for release in args.drop:
        releases.pop(release, None)
    merged = merge(releases)
    names = ", ".join(merged["releases"])
    body = pprint.pformat(merged, width=120, sort_dicts=True)
    Path(args.out).write_text(
        '"""Generated by scripts/compile_configs.py from the config classes of transformers ' + names + " (the releases"
        " it was verified under; the body is " + merged["transformers"] + "'s, the others are overlays in"
        ' TABLE["releases"]): do not edit."""\n\n' + ("from math import inf\n" if _has_inf(merged) else "")
        + "from typing import Any\n\nTABLE: dict[str, Any] = " + body + "\n"
    )
    for release, overlay in merged["releases"].items():
        print(f"release {release}: " + (", ".join(f"{k} {len(v)}" for k, v in overlay.items()) or "the body"))
    print(f"wrote {args.out}: {len(table['types'])} model types, transformers {names}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
