"""Header digests: the config.json and validated tensor inventory hfmem read for a repo at a commit, on disk, so a
repeat run needs one request (to re-resolve the revision) or none."""

# Keyed by repo id + resolved commit sha (immutable content), so an entry never goes stale; a second file per
# revision name ("refs") remembers which sha a branch or tag pointed at last time. The layout follows the HF cache
# convention, under hfmem.hub.cachedir's root:
#
#   models--{org}--{name}/
#     refs/{revision, percent-encoded}   -> 40-hex commit sha
#     digests/{sha}.json                 -> checksum + versioned compact JSON (see ``_encode``)
#
# A corrupt, truncated or foreign entry is treated as a miss and rewritten.

from __future__ import annotations

import hashlib
import json
from operator import attrgetter
from pathlib import Path
from typing import Any
from urllib.parse import quote

from hfmem.errors import MalformedHeader
from hfmem.hub.cachedir import atomic_write, cache_root, enabled
from hfmem.hub.files import MAX_JSON_DEPTH, is_sha, json_depth
from hfmem.hub.header import FileHeader, TensorEntry, tensor_entry

FORMAT = "hfmem-digest"
VERSION = 4  # 3: the checksum covers config and metadata too; entries are validated on load. 4: tensor kinds table


def _repo_dir(repo_id: str) -> Path:
    return cache_root() / ("models--" + repo_id.replace("/", "--"))


def _ref_path(repo_id: str, revision: str) -> Path:
    return _repo_dir(repo_id) / "refs" / quote(revision, safe="")


def _digest_path(repo_id: str, sha: str) -> Path:
    return _repo_dir(repo_id) / "digests" / f"{sha}.json"


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
    return sha if is_sha(sha) else None


def write_ref(repo_id: str, revision: str | None, sha: str) -> None:
    revision = revision or "main"
    if not enabled() or is_sha(revision) or not is_sha(sha):
        return
    try:
        atomic_write(_ref_path(repo_id, revision), sha.encode("ascii"))
    except OSError:
        pass  # best effort, like store()


# ---------------------------------------------------------------------------------------------------------------
# digests


def has(repo_id: str, sha: str | None) -> bool:
    """Whether an entry exists (cheap; it may still turn out corrupt on load)."""
    return enabled() and sha is not None and is_sha(sha) and _digest_path(repo_id, sha).is_file()


def load(repo_id: str, sha: str | None) -> tuple[dict[str, Any], list[FileHeader], dict[str, Any] | None, list[str]] | None:
    """(config, headers, index metadata, warnings) stored for repo@sha, or None on a miss or a bad entry."""
    if not enabled() or not sha or not is_sha(sha):
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
    if not enabled() or not sha or not is_sha(sha):
        return
    try:
        atomic_write(_digest_path(repo_id, sha), _encode(repo_id, sha, config, headers, index_metadata, warnings))
    except (OSError, TypeError, ValueError):
        pass


def _encode(
    repo_id: str,
    sha: str,
    config: dict[str, Any],
    headers: list[FileHeader],
    index_metadata: dict[str, Any] | None,
    warnings: list[str],
) -> bytes:
    """Three lines: the sha256 of the other two; compact JSON of everything but the tensors; the tensors as
    [kinds, files]: ``kinds`` the distinct [dtype, shape, nbytes] of the checkpoint (a few hundred, even for 500k
    tensors), ``files`` per file in data-offset order [names, kind index per tensor]. Loading then validates each kind
    once and builds each tensor from its name and an index (no per-tensor shape list to parse and check). The sum
    detects a damaged entry; it is no defence against an edited one (whoever can write the cache can recompute it),
    which is why load() validates too."""
    kinds: dict[tuple[Any, ...], int] = {}
    files = []
    for h in headers:
        indices = []
        for t in h.tensors:
            key = (t.dtype, t.shape, t.nbytes)
            index = kinds.get(key)
            if index is None:
                index = kinds[key] = len(kinds)
            indices.append(index)
        files.append(f"[{_json_names(list(map(_name_of, h.tensors)))},{json.dumps(indices, separators=_COMPACT)}]")
    table = [[dtype, list(shape), nbytes] for dtype, shape, nbytes in kinds]
    # json.dumps([table, [[names, indices], ...]], separators=_COMPACT), each file's part written once
    body = f"[{json.dumps(table, separators=_COMPACT)},[{','.join(files)}]]".encode()
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "repo": repo_id,
        "sha": sha,
        "config": config,
        "index_metadata": index_metadata,
        "warnings": list(warnings),
        "files": [{"file": h.file, "metadata": h.metadata, "warnings": list(h.warnings)} for h in headers],
    }
    head = json.dumps(meta, separators=_COMPACT).encode("utf-8")
    checksum = hashlib.sha256(head)
    checksum.update(b"\n")
    checksum.update(body)
    return b"".join((checksum.hexdigest().encode("ascii"), b"\n", head, b"\n", body))


_COMPACT = (",", ":")
_name_of = attrgetter("name")
_CONTROL = bytes(range(0x20)) + b"\x7f"


def _json_names(names: list[str]) -> str:
    """json.dumps(names, separators=_COMPACT). Names of printable ASCII without '"' or a backslash, as checkpoints
    name their tensors, are written as they are (json/encoder.py: ESCAPE_ASCII escapes exactly '"', the backslash and
    what lies outside ' '..'~'), so they are joined instead: a few C passes over the text where the encoder checks
    each string (DeepSeek-V3's 91,991 names: ~4 ms instead of ~16 ms)."""
    joined = '","'.join(names)
    if names and joined.isascii() and "\\" not in joined and joined.count('"') == 2 * (len(names) - 1):
        raw = joined.encode("ascii")
        if len(raw.translate(None, _CONTROL)) == len(raw):  # no control character either
            return f'["{joined}"]'
    return json.dumps(names, separators=_COMPACT)


def _decode(raw: bytes, repo_id: str, sha: str) -> tuple[dict[str, Any], list[FileHeader], dict[str, Any] | None, list[str]] | None:
    """The entry, if intact and valid by the rules fresh input obeys (hfmem.hub.header.tensor_entry for every kind of
    tensor, a valid kind for every tensor, the config as load_json_text accepts it); None otherwise, so the caller
    fetches and rewrites it."""
    checksum, _, rest = raw.partition(b"\n")
    if hashlib.sha256(rest).hexdigest().encode("ascii") != checksum:
        return None  # truncated, altered, or an older format
    head, newline, body = rest.partition(b"\n")
    if not newline:
        return None
    obj = json.loads(head)
    if not isinstance(obj, dict) or obj.get("format") != FORMAT or obj.get("version") != VERSION:
        return None
    if obj.get("repo") != repo_id or obj.get("sha") != sha:
        return None
    config, index_metadata, warnings, files = obj["config"], obj["index_metadata"], obj["warnings"], obj["files"]
    if not isinstance(config, dict) or json_depth(config) > MAX_JSON_DEPTH:
        return None
    if not (index_metadata is None or isinstance(index_metadata, dict)):
        return None
    table, columns = json.loads(body)
    if not _str_list(warnings) or not isinstance(files, list) or not isinstance(columns, list) or len(columns) != len(files):
        return None
    if not isinstance(table, list) or not all(isinstance(k, list) and len(k) == 3 for k in table):
        return None
    headers: list[FileHeader] = []
    try:
        # Every kind by the rules fresh headers obey (header.tensor_entry), once; a tensor is then its name and a
        # valid index into them.
        kinds = [(e.dtype, e.shape, e.numel, e.nbytes)
                 for e in (tensor_entry("", dtype, shape, nbytes, "digest") for dtype, shape, nbytes in table)]
        for f, column in zip(files, columns):
            if not isinstance(f, dict) or not isinstance(column, list) or len(column) != 2:
                return None
            name, metadata, fwarn = f["file"], f["metadata"], f["warnings"]
            if not isinstance(name, str) or not _str_dict(metadata) or not _str_list(fwarn):
                return None
            names, indices = column
            if not _str_list(names) or not isinstance(indices, list) or len(names) != len(indices):
                return None
            if indices and (not all(type(i) is int for i in indices) or min(indices) < 0 or max(indices) >= len(kinds)):
                return None
            entries = tuple(TensorEntry(n, k[0], k[1], k[2], k[3], name) for n, k in zip(names, map(kinds.__getitem__, indices)))
            headers.append(FileHeader(name, entries, dict(metadata), tuple(fwarn)))
    except MalformedHeader:
        return None
    return config, headers, index_metadata, list(warnings)


def _str_dict(v: Any) -> bool:
    return isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, str) for k, x in v.items())


def _str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


__all__ = ["has", "load", "store", "read_ref", "write_ref", "FORMAT", "VERSION"]
