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
from itertools import repeat
from pathlib import Path
from typing import Any
from urllib.parse import quote

from hfmem.errors import MalformedHeader
from hfmem.hub.cachedir import atomic_write, cache_root, enabled
from hfmem.hub.files import MAX_JSON_DEPTH, is_sha, json_depth
from hfmem.hub.header import FileHeader, TensorEntry, tensor_entry

FORMAT = "hfmem-digest"
VERSION = 3  # 3: the checksum covers config and metadata too; entries are validated on load


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
    """Three lines: the sha256 of the other two; compact JSON of everything but the tensors; the tensors, per file in
    data-offset order as columns [names, dtypes, shapes, nbytes]. The sum detects a damaged entry; it is no defence
    against an edited one (whoever can write the cache can recompute it), which is why load() validates too."""
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
    }
    head = json.dumps(meta, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(head + b"\n" + body).hexdigest().encode("ascii") + b"\n" + head + b"\n" + body


def _decode(raw: bytes, repo_id: str, sha: str) -> tuple[dict[str, Any], list[FileHeader], dict[str, Any] | None, list[str]] | None:
    """The entry, if intact and valid by the rules fresh input obeys (hfmem.hub.header.tensor_entry for every tensor,
    the config as load_json_text accepts it); None otherwise, so the caller fetches and rewrites it."""
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
    floats: list[str] = []
    columns = json.loads(body, parse_float=floats.append)
    # Like fresh headers (header.validate_header): in JSON without floats or true/false, a shape equal to one already
    # checked is the same integers, so each (dtype, shape, bytes) goes through tensor_entry once.
    plain = not floats and b"true" not in body and b"false" not in body
    seen: dict[tuple[Any, ...], tuple[int, tuple[int, ...]]] = {}  # -> (numel, the shape tuple the entries share)

    def checked_entry(tname: Any, dtype: Any, shape: Any, nbytes: Any, file: str) -> TensorEntry:
        if plain and type(tname) is str:
            try:
                hit = seen.get((dtype, tuple(shape), nbytes))
            except TypeError:
                hit = None
            if hit is not None:
                return TensorEntry(tname, dtype, hit[1], hit[0], nbytes, file)
        entry = tensor_entry(tname, dtype, shape, nbytes, file)
        if plain:
            seen[(entry.dtype, entry.shape, entry.nbytes)] = (entry.numel, entry.shape)
        return entry

    if not _str_list(warnings) or not isinstance(files, list) or not isinstance(columns, list) or len(columns) != len(files):
        return None
    headers: list[FileHeader] = []
    try:
        for f, column in zip(files, columns):
            if not isinstance(f, dict) or not isinstance(column, list) or len(column) != 4:
                return None
            name, metadata, fwarn = f["file"], f["metadata"], f["warnings"]
            if not isinstance(name, str) or not _str_dict(metadata) or not _str_list(fwarn):
                return None
            names, dtypes, shapes, sizes = column
            if not _str_list(names) or not isinstance(dtypes, list) or not isinstance(shapes, list) or not isinstance(sizes, list):
                return None
            if not len(names) == len(dtypes) == len(shapes) == len(sizes):
                return None
            entries = tuple(map(checked_entry, names, dtypes, shapes, sizes, repeat(name)))
            headers.append(FileHeader(name, entries, dict(metadata), tuple(fwarn)))
    except MalformedHeader:
        return None
    return config, headers, index_metadata, list(warnings)


def _str_dict(v: Any) -> bool:
    return isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, str) for k, x in v.items())


def _str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


__all__ = ["has", "load", "store", "read_ref", "write_ref", "FORMAT", "VERSION"]
