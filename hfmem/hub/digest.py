"""Header digests: the config.json and validated tensor inventory hfmem read for a repo at a commit, on disk, so a
repeat run needs one request (to re-resolve the revision) or none."""

# Keyed by repo id + resolved commit sha (immutable content), so an entry never goes stale; a second file per
# revision name ("refs") remembers which sha a branch or tag pointed at last time. The layout follows the HF cache
# convention, under hfmem.hub.cachedir's root:
#
#   models--{org}--{name}/
#     refs/{revision, percent-encoded}   -> 40-hex commit sha
#     digests/{sha}.json                 -> versioned compact JSON (see ``_encode``)
#
# A corrupt, truncated or foreign entry is treated as a miss and rewritten.

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any
from urllib.parse import quote

from hfmem.hub.cachedir import atomic_write, cache_root, enabled
from hfmem.hub.files import is_sha
from hfmem.hub.header import FileHeader, TensorEntry

FORMAT = "hfmem-digest"
VERSION = 2


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


def _str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


__all__ = ["has", "load", "store", "read_ref", "write_ref", "FORMAT", "VERSION"]
