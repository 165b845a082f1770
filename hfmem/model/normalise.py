"""config.json normalised by transformers' config classes (``AutoConfig.for_model``: defaults filled in, derived
fields set; never remote code), with a cache that replays the outcome on later runs without importing transformers."""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import sys
import warnings as _warnings
from pathlib import Path
from typing import Any

from hfmem.hub.cachedir import atomic_write, cache_root, enabled

Normalised = tuple[Any, Any, str, list[str]]  # (full config, decoder text config, how, notes)
CUSTOM_CODE_NOTE = "config declares custom code (auto_map); analysed from the raw config and headers, code not run"


def normalise_config(config: dict[str, Any]) -> Normalised:
    """(full config object, decoder text config object, how, notes). Objects may be plain dicts (raw fallback) or
    ReplayedConfig (transformers' normalisation of this exact config.json from an earlier run: no import)."""
    from hfmem.model.fast_config import fallback_note, fast_normalise

    fast = fast_normalise(config)  # transformers' classes compiled into a table: no import
    if fast is not None:
        return fast[0], fast[1], "transformers", [CUSTOM_CODE_NOTE] if config.get("auto_map") else []
    hit = load_normalised(config)
    if hit is None:
        hit = _normalise_config(config)
        store_normalised(config, hit)
    full, text, how, notes = hit
    if how == "transformers":
        notes = [*notes, fallback_note(config.get("model_type"))]
    return full, text, how, notes


def _unknown_to_transformers(model_type: Any) -> bool:
    """A model_type the installed transformers does not know, by the compiled table's list of its known types (only
    when the table was verified under the installed release)."""
    from hfmem.model.config_table import TABLE
    from hfmem.model.fast_config import table_applies

    return (table_applies() and isinstance(model_type, str) and bool(model_type)  # table_applies selects the release
            and model_type not in TABLE["known_types"])


def _normalise_config(config: dict[str, Any]) -> Normalised:
    notes: list[str] = []
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        return _read_raw(config, ["config.json has no model_type; read raw"])
    if config.get("auto_map"):
        notes.append(CUSTOM_CODE_NOTE)
    if _unknown_to_transformers(model_type):
        # AutoConfig.for_model would raise "Unrecognized model" (below): the same raw reading, without the seconds of
        # importing transformers to be told so
        return _read_raw(config, [*notes, _unknown_note(model_type)])
    try:
        AutoConfig = _import_auto_config()
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        logging.getLogger("transformers").setLevel(logging.ERROR)
        with _warnings.catch_warnings():
            _warnings.simplefilter("ignore")
            # a copy: config classes edit nested dicts in place (RoPE parameters, a vision_config's model_type), and
            # the replay cache's key is the config.json as read, before and after this call
            kwargs = copy.deepcopy({k: v for k, v in config.items() if k != "model_type"})
            full = AutoConfig.for_model(model_type, **kwargs)
            text = full.get_text_config(decoder=True)
        return full, text, "transformers", notes
    except (ValueError, KeyError) as exc:
        if "Unrecognized model" in str(exc) or "not recognized" in str(exc) or isinstance(exc, KeyError):
            notes.append(_unknown_note(model_type))
        else:
            notes.append(f"transformers rejected config.json ({str(exc)[:100]}); read raw")
    except Exception as exc:  # config classes validate values; any failure falls back to the raw JSON
        notes.append(f"transformers could not load config.json ({type(exc).__name__}); read raw")
    return _read_raw(config, notes)


def _unknown_note(model_type: str) -> str:
    return f"model_type {model_type!r} is unknown to transformers; read raw config.json"


def _read_raw(config: dict[str, Any], notes: list[str]) -> Normalised:
    """config.json as it is: its text_config (if any) is the decoder's. A text_config of a model type the compiled
    table covers (Kimi-K3's kimi_linear under an unknown kimi_k3) is normalised by that type's rules, so derived fields
    such as its layer types are read as transformers reads them, not taken as absent."""
    from hfmem.model.fast_config import fast_normalise

    nested = config.get("text_config")
    if isinstance(nested, dict):
        known = fast_normalise(nested)
        if known is not None:
            notes = [*notes, f"its text_config (model_type {nested.get('model_type')!r}) read with transformers' "
                             f"{nested.get('model_type')} rules"]
            return config, known[0], "raw config.json", notes
        return config, nested, "raw config.json", notes
    return config, config, "raw config.json", notes


def _import_auto_config() -> Any:
    """transformers' AutoConfig, imported without its import-time advice ("PyTorch was not found ...") on stderr:
    hfmem needs only the config classes, which work without torch."""
    if "transformers" in sys.modules:
        from transformers import AutoConfig

        return AutoConfig
    previous = os.environ.get("TRANSFORMERS_NO_ADVISORY_WARNINGS")
    os.environ["TRANSFORMERS_NO_ADVISORY_WARNINGS"] = "1"
    try:
        from transformers import AutoConfig
    finally:
        if previous is None:
            os.environ.pop("TRANSFORMERS_NO_ADVISORY_WARNINGS", None)
        else:
            os.environ["TRANSFORMERS_NO_ADVISORY_WARNINGS"] = previous
    return AutoConfig


def as_dict(cfg: Any) -> dict[str, Any]:
    """A config object's to_dict() (a plain dict as it is), with a derived layer_types made explicit."""
    if isinstance(cfg, dict):
        return dict(cfg)
    try:
        out = cfg.to_dict()
    except Exception:
        return {}
    if not isinstance(out.get("layer_types"), list):  # some configs derive it (property / attribute_map)
        try:
            derived = getattr(cfg, "layer_types", None)
        except Exception:
            derived = None
        if isinstance(derived, (list, tuple)) and all(isinstance(x, str) for x in derived):
            out["layer_types"] = list(derived)
    return out


# ---------------------------------------------------------------------------------------------------------------
# The replay cache
#
# Importing transformers (and the torch it pulls in) costs seconds: more than everything else an analysis does.
# Its normalisation is a pure function of config.json and the transformers version, so the outcome is stored as
# JSON under configs/{sha256 of config + version}.json (hfmem.hub.cachedir's root) and replayed on the next run.

_FORMAT = "hfmem-digest-config"
_VERSION = 2
_code_digest: str | None = None


def _transformers_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("transformers")
    except Exception:
        return None


def _code_version() -> str:
    """A digest of the code that turns a config into what is stored (this module), so an edited hfmem never
    replays stale normalisations (the version number alone does not change between development builds)."""
    global _code_digest
    if _code_digest is None:
        try:
            code = Path(__file__).read_bytes()
        except OSError:
            code = __name__.encode()
        _code_digest = hashlib.sha256(code).hexdigest()[:16]
    return _code_digest


def _config_key(config: dict[str, Any]) -> str | None:
    tf = _transformers_version()
    if tf is None:
        return None
    tf = f"{tf}\0{_code_version()}"
    try:
        canonical = json.dumps(config, sort_keys=True, separators=(",", ":"), allow_nan=True)
    except (TypeError, ValueError):
        return None
    return hashlib.sha256(f"{_VERSION}\0{tf}\0{canonical}".encode()).hexdigest()


class ReplayedConfig:
    """Stands in for a transformers config object: every public attribute it had (properties and attribute_map
    aliases included) and its to_dict(), as recorded when transformers built it. Unknown attributes read as None,
    as ``getattr(obj, name, None)`` does for a real one."""

    def __init__(self, attrs: dict[str, Any], to_dict: dict[str, Any]):
        self.__dict__["_attrs"] = attrs
        self.__dict__["_as_dict"] = to_dict

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self.__dict__["_attrs"].get(name)

    def to_dict(self) -> dict[str, Any]:
        return _unpack(_pack(self.__dict__["_as_dict"]))  # a fresh copy


class _Unfaithful(Exception):
    pass


def _record(obj: Any, depth: int = 0) -> dict[str, Any]:
    """Every public, non-callable attribute of a config object, sub-configs recorded the same way."""
    if depth > 4:
        raise _Unfaithful("nested too deep")
    names = {n for n in dir(obj) if not n.startswith("_")} | set(getattr(type(obj), "attribute_map", {}) or {})
    attrs: dict[str, Any] = {}
    for name in sorted(names):
        try:
            value = getattr(obj, name)
        except Exception:
            # raises on the real object (a heterogeneous per-layer config's attribute that differs by layer):
            # architecture._get then reads the instance's stored value, so the replay answers that value
            try:
                value = object.__getattribute__(obj, "__dict__").get(name)
            except Exception:
                value = None
            if value is None:
                continue
        if callable(value) and not hasattr(value, "to_dict"):
            continue
        recorded = _record_value(value, depth)
        if recorded is not _OPAQUE:
            attrs[name] = recorded
    return {"__hfmem_config__": attrs, "__dict__": _pack(as_dict(obj))}


def _record_value(value: Any, depth: int) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple, dict)):
        try:
            packed = _pack(value)
            faithful = _unpack(json.loads(json.dumps(packed))) == value
        except (TypeError, ValueError):
            faithful = False
        if faithful:
            return packed
        if isinstance(value, dict) and all(_class_metadata(v) for v in value.values()):
            # sub_configs ({name: config class}) and sub_configs_defaults ({name: SubConfigSpec}): class metadata
            # hfmem never reads
            return _OPAQUE
        raise _Unfaithful(type(value).__name__)
    if type(value).__module__ == "torch" and type(value).__name__ == "dtype":
        return str(value)  # "torch.bfloat16": what hfmem does with it is str(dtype).replace("torch.", "")
    if isinstance(value, (set, frozenset)) and all(isinstance(x, (str, int)) for x in value):
        return {_SET: sorted(value, key=repr)}
    if hasattr(value, "to_dict") and hasattr(value, "model_type"):
        return _record(value, depth + 1)
    if type(value).__module__.startswith("transformers.") and type(value).__name__.startswith("_"):
        return _OPAQUE  # transformers-internal views (per_layer_config): hfmem reads those from to_dict()
    raise _Unfaithful(type(value).__name__)  # e.g. a torch.dtype: not stored, transformers runs each time


def _class_metadata(value: Any) -> bool:
    """A config class, or a transformers object that is not a config (configuration_utils.SubConfigSpec)."""
    return isinstance(value, type) or (type(value).__module__.startswith("transformers.")
                                       and not hasattr(value, "to_dict"))


def _replay(obj: Any) -> Any:
    if isinstance(obj, dict) and "__hfmem_config__" in obj:
        attrs = {k: _replay(v) for k, v in obj["__hfmem_config__"].items()}
        return ReplayedConfig(attrs, _unpack(obj["__dict__"]))
    return _unpack(obj)


def load_normalised(config: dict[str, Any]) -> Normalised | None:
    """(full, text, how, notes) as normalise_config returns them, from a previous run; or None."""
    if not enabled():
        return None
    key = _config_key(config)
    if key is None:
        return None
    try:
        obj = json.loads((cache_root() / "configs" / f"{key}.json").read_bytes())
        if obj.get("format") != _FORMAT or obj.get("version") != _VERSION or obj.get("key") != key:
            return None
        how, notes = obj["how"], obj["notes"]
        if not isinstance(how, str) or not _str_list(notes):
            return None
        full = _replay(obj["full"])
        text = full if obj["text"] == "full" else _replay(obj["text"])
        if not isinstance(full, ReplayedConfig) or not isinstance(text, ReplayedConfig):
            return None
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None
    return full, text, how, list(notes)


def store_normalised(config: dict[str, Any], result: Normalised) -> None:
    """Remember what transformers made of this config. Raw fallbacks are not stored (they cost no import)."""
    full, text, how, notes = result
    if not enabled() or how != "transformers":
        return
    key = _config_key(config)
    if key is None:
        return
    try:
        record = {
            "format": _FORMAT, "version": _VERSION, "key": key, "how": how, "notes": list(notes),
            "full": _record(full), "text": "full" if text is full else _record(text),
        }
        data = json.dumps(record, separators=(",", ":"))
        atomic_write(cache_root() / "configs" / f"{key}.json", data.encode("utf-8"))
    except (_Unfaithful, OSError, TypeError, ValueError, RecursionError):
        pass


_PAIRS, _TUPLE, _SET = "__hfmem_pairs__", "__hfmem_tuple__", "__hfmem_set__"
_OPAQUE = object()


def _pack(v: Any) -> Any:
    """JSON-ready form that keeps non-string dict keys (id2label: {0: ...}) and tuples as they were."""
    if isinstance(v, dict):
        if all(isinstance(k, str) for k in v) and not {_PAIRS, _TUPLE, _SET} & v.keys():
            return {k: _pack(x) for k, x in v.items()}
        return {_PAIRS: [[k, _pack(x)] for k, x in v.items()]}
    if isinstance(v, tuple):
        return {_TUPLE: [_pack(x) for x in v]}
    if isinstance(v, list):
        return [_pack(x) for x in v]
    return v


def _unpack(v: Any) -> Any:
    if isinstance(v, dict):
        if len(v) == 1 and _PAIRS in v:
            return {k: _unpack(x) for k, x in v[_PAIRS]}
        if len(v) == 1 and _TUPLE in v:
            return tuple(_unpack(x) for x in v[_TUPLE])
        if len(v) == 1 and _SET in v:
            return set(v[_SET])
        return {k: _unpack(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_unpack(x) for x in v]
    return v


def _str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)
