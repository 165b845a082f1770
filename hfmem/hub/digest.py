"""A small on-disk cache of what hfmem read from the Hub: config.json and the validated tensor inventory.

Keyed by repo id + resolved commit sha (immutable content), so an entry never goes stale; a second file per
revision name ("refs") remembers which sha a branch or tag pointed at last time, so a repeat run needs one request
(to re-resolve the revision) or none with ``HF_HUB_OFFLINE=1``. The layout follows the HF cache convention::

    $HFMEM_CACHE (default: $HF_HOME/hfmem, i.e. ~/.cache/huggingface/hfmem)
      models--{org}--{name}/
        refs/{revision, percent-encoded}   -> 40-hex commit sha
        digests/{sha}.json                 -> versioned compact JSON (see ``_encode``)

Writes are atomic (temporary file in the same folder + ``os.replace``). A corrupt, truncated or foreign entry is
treated as a miss and rewritten. ``HFMEM_DISABLE_CACHE=1`` turns the cache off.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import quote

from hfmem.hub.header import FileHeader, TensorEntry

FORMAT = "hfmem-digest"
VERSION = 2
_SHA_RE = re.compile(r"^[0-9a-f]{40}$")


def enabled() -> bool:
    return os.environ.get("HFMEM_DISABLE_CACHE", "").strip().lower() not in ("1", "true", "yes", "on")


def cache_root() -> Path:
    explicit = os.environ.get("HFMEM_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:  # already imported (any Hub run): the client's own answer
        return Path(constants.HF_HOME) / "hfmem"
    # huggingface_hub/constants.py's rule, without importing the client (~0.3 s) for a local or offline run
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(home).expanduser() / "hfmem"


def _repo_dir(repo_id: str) -> Path:
    return cache_root() / ("models--" + repo_id.replace("/", "--"))


def _ref_path(repo_id: str, revision: str) -> Path:
    return _repo_dir(repo_id) / "refs" / quote(revision, safe="")


def _digest_path(repo_id: str, sha: str) -> Path:
    return _repo_dir(repo_id) / "digests" / f"{sha}.json"


def is_sha(revision: str | None) -> bool:
    return bool(revision) and bool(_SHA_RE.match(revision))  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------------------
# refs


def read_ref(repo_id: str, revision: str | None) -> str | None:
    """The commit sha `revision` pointed at when last seen (a full sha is its own answer)."""
    revision = revision or "main"
    if is_sha(revision):
        return revision
    if not enabled():
        return None
    try:
        sha = _ref_path(repo_id, revision).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return sha if _SHA_RE.match(sha) else None


def write_ref(repo_id: str, revision: str | None, sha: str) -> None:
    revision = revision or "main"
    if not enabled() or is_sha(revision) or not _SHA_RE.match(sha):
        return
    try:
        _atomic_write(_ref_path(repo_id, revision), sha.encode("ascii"))
    except OSError:
        pass  # best effort, like store()


# ---------------------------------------------------------------------------------------------------------------
# digests


def has(repo_id: str, sha: str | None) -> bool:
    """Whether an entry exists (cheap; it may still turn out corrupt on load)."""
    return enabled() and bool(sha) and bool(_SHA_RE.match(sha)) and _digest_path(repo_id, sha).is_file()  # type: ignore[arg-type]


def load(repo_id: str, sha: str | None) -> tuple[dict[str, Any], list[FileHeader], dict[str, Any] | None, list[str]] | None:
    """(config, headers, index metadata, warnings) stored for repo@sha, or None on a miss or a bad entry."""
    if not enabled() or not sha or not _SHA_RE.match(sha):
        return None
    try:
        raw = _digest_path(repo_id, sha).read_bytes()
    except OSError:
        return None
    try:
        return _decode(raw, repo_id, sha)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError, OverflowError):
        return None  # corrupt or foreign: a miss; the caller rewrites it


def store(
    repo_id: str,
    sha: str | None,
    config: dict[str, Any],
    headers: list[FileHeader],
    index_metadata: dict[str, Any] | None,
    warnings: list[str],
) -> None:
    """Best effort: a cache that cannot be written (read-only home, full disk) never fails the analysis."""
    if not enabled() or not sha or not _SHA_RE.match(sha):
        return
    try:
        _atomic_write(_digest_path(repo_id, sha), _encode(repo_id, sha, config, headers, index_metadata, warnings))
    except (OSError, TypeError, ValueError):
        pass


def _encode(repo_id, sha, config, headers, index_metadata, warnings) -> bytes:
    """Two lines of compact JSON. Line 2, the bulk: per file, tensors in data-offset order as columns
    [names, dtypes, shapes, nbytes]. Line 1: everything else, with the sha256 of line 2, which is what makes a
    damaged entry detectable without re-validating 100k tensors on every load."""
    columns = [
        [[t.name for t in h.tensors], [t.dtype for t in h.tensors], [list(t.shape) for t in h.tensors], [t.nbytes for t in h.tensors]]
        for h in headers
    ]
    body = json.dumps(columns, separators=(",", ":")).encode("utf-8")
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "repo": repo_id,
        "sha": sha,
        "config": config,
        "index_metadata": index_metadata,
        "warnings": list(warnings),
        "files": [{"file": h.file, "metadata": h.metadata, "warnings": list(h.warnings)} for h in headers],
        "tensors_sha256": hashlib.sha256(body).hexdigest(),
    }
    return json.dumps(meta, separators=(",", ":")).encode("utf-8") + b"\n" + body


def _decode(raw: bytes, repo_id: str, sha: str) -> tuple[dict[str, Any], list[FileHeader], dict[str, Any] | None, list[str]] | None:
    head, newline, body = raw.partition(b"\n")
    if not newline:
        return None
    obj = json.loads(head)
    if not isinstance(obj, dict) or obj.get("format") != FORMAT or obj.get("version") != VERSION:
        return None
    if obj.get("repo") != repo_id or obj.get("sha") != sha:
        return None
    if hashlib.sha256(body).hexdigest() != obj["tensors_sha256"]:
        return None  # truncated or altered since it was written
    config, index_metadata, warnings, files = obj["config"], obj["index_metadata"], obj["warnings"], obj["files"]
    if not isinstance(config, dict) or not (index_metadata is None or isinstance(index_metadata, dict)):
        return None
    columns = json.loads(body)
    if not _str_list(warnings) or not isinstance(files, list) or not isinstance(columns, list) or len(columns) != len(files):
        return None
    headers: list[FileHeader] = []
    prod = math.prod
    for f, (names, dtypes, shapes, sizes) in zip(files, columns):
        name, metadata, fwarn = f["file"], f["metadata"], f["warnings"]
        if not isinstance(name, str) or not isinstance(metadata, dict) or not _str_list(fwarn):
            return None
        if not len(names) == len(dtypes) == len(shapes) == len(sizes):
            return None
        entries = tuple(
            TensorEntry(n, d, tuple(shape), prod(shape), size, name) for n, d, shape, size in zip(names, dtypes, shapes, sizes)
        )
        headers.append(FileHeader(name, entries, dict(metadata), tuple(fwarn)))
    return config, headers, index_metadata, list(warnings)


# ---------------------------------------------------------------------------------------------------------------
# transformers' normalisation of a config.json (AutoConfig.for_model: defaults filled in, derived fields set)
#
# Importing transformers (and the torch it pulls in) costs seconds: more than everything else an analysis does.
# Its normalisation is a pure function of config.json and the transformers version, so the outcome is stored as
# JSON under configs/{sha256 of config + version}.json and replayed as plain dicts on the next run.


def _transformers_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("transformers")
    except Exception:
        return None


_code_digest: str | None = None


def _code_version() -> str:
    """A digest of the code that turns a config into what is stored, so an edited hfmem never replays stale
    normalisations (the version number alone does not change between development builds)."""
    global _code_digest
    if _code_digest is None:
        h = hashlib.sha256()
        for name in ("architecture.py", "cache.py"):
            try:
                h.update((Path(__file__).with_name(name)).read_bytes())
            except OSError:
                h.update(name.encode())
        _code_digest = h.hexdigest()[:16]
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
    return hashlib.sha256(f"{VERSION}\0{tf}\0{canonical}".encode()).hexdigest()


class ReplayedConfig:
    """Stands in for a transformers config object: every public attribute it had (properties and attribute_map
    aliases included) and its to_dict(), as recorded when transformers built it. Unknown attributes read as None,
    as ``getattr(obj, name, None)`` does for a real one."""

    def __init__(self, attrs: dict[str, Any], as_dict: dict[str, Any]):
        self.__dict__["_attrs"] = attrs
        self.__dict__["_as_dict"] = as_dict

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self.__dict__["_attrs"].get(name)

    def to_dict(self) -> dict[str, Any]:
        return _unpack(_pack(self.__dict__["_as_dict"]))  # a fresh copy

    def get_text_config(self, decoder: bool = False) -> Any:
        text = self.__dict__["_attrs"].get("__text__")
        return text if text is not None else self


class _Unfaithful(Exception):
    pass


def _record(obj: Any, as_dict: Any, depth: int = 0) -> dict[str, Any]:
    """Every public, non-callable attribute of a config object, sub-configs recorded the same way."""
    if depth > 4:
        raise _Unfaithful("nested too deep")
    names = {n for n in dir(obj) if not n.startswith("_")} | set(getattr(type(obj), "attribute_map", {}) or {})
    attrs: dict[str, Any] = {}
    for name in sorted(names):
        try:
            value = getattr(obj, name)
        except Exception:
            continue  # raises on the real object too; _get treats that as absent, and so does the replay
        if callable(value) and not hasattr(value, "to_dict"):
            continue
        recorded = _record_value(value, as_dict, depth)
        if recorded is not _OPAQUE:
            attrs[name] = recorded
    return {"__hfmem_config__": attrs, "__dict__": _pack(as_dict(obj))}


def _record_value(value: Any, as_dict: Any, depth: int) -> Any:
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
        if isinstance(value, dict) and all(isinstance(v, type) for v in value.values()):
            return _OPAQUE  # sub_configs: {name: config class}, class metadata hfmem never reads
        raise _Unfaithful(type(value).__name__)
    if type(value).__module__ == "torch" and type(value).__name__ == "dtype":
        return str(value)  # "torch.bfloat16": what hfmem does with it is str(dtype).replace("torch.", "")
    if isinstance(value, (set, frozenset)) and all(isinstance(x, (str, int)) for x in value):
        return {_SET: sorted(value, key=repr)}
    if hasattr(value, "to_dict") and hasattr(value, "model_type"):
        return _record(value, as_dict, depth + 1)
    if type(value).__module__.startswith("transformers.") and type(value).__name__.startswith("_"):
        return _OPAQUE  # transformers-internal views (per_layer_config): hfmem reads those from to_dict()
    raise _Unfaithful(type(value).__name__)  # e.g. a torch.dtype: not stored, transformers runs each time


def _replay(obj: Any) -> Any:
    if isinstance(obj, dict) and "__hfmem_config__" in obj:
        attrs = {k: _replay(v) for k, v in obj["__hfmem_config__"].items()}
        return ReplayedConfig(attrs, _unpack(obj["__dict__"]))
    return _unpack(obj)


def load_normalised(config: dict[str, Any]) -> tuple[Any, Any, str, list[str]] | None:
    """(full, text, how, notes) as architecture.normalise_config returns them, from a previous run; or None."""
    if not enabled():
        return None
    key = _config_key(config)
    if key is None:
        return None
    try:
        obj = json.loads((cache_root() / "configs" / f"{key}.json").read_bytes())
        if obj.get("format") != FORMAT + "-config" or obj.get("version") != VERSION or obj.get("key") != key:
            return None
        how, notes = obj["how"], obj["notes"]
        if not isinstance(how, str) or not _str_list(notes):
            return None
        full = _replay(obj["full"])
        text = full if obj["text"] == "full" else _replay(obj["text"])
        if not isinstance(full, ReplayedConfig) or not isinstance(text, ReplayedConfig):
            return None
        full.__dict__["_attrs"]["__text__"] = text
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None
    return full, text, how, list(notes)


def store_normalised(config: dict[str, Any], result: tuple[Any, Any, str, list[str]], as_dict: Any) -> None:
    """Remember what transformers made of this config. Raw fallbacks are not stored (they cost no import)."""
    full, text, how, notes = result
    if not enabled() or how != "transformers":
        return
    key = _config_key(config)
    if key is None:
        return
    try:
        record = {
            "format": FORMAT + "-config", "version": VERSION, "key": key, "how": how, "notes": list(notes),
            "full": _record(full, as_dict), "text": "full" if text is full else _record(text, as_dict),
        }
        data = json.dumps(record, separators=(",", ":"))
        _atomic_write(cache_root() / "configs" / f"{key}.json", data.encode("utf-8"))
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


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


__all__ = ["cache_root", "enabled", "has", "load", "store", "read_ref", "write_ref", "is_sha", "FORMAT", "VERSION"]
