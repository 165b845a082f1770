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

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .dtypes import dtype_bits
from .header import FileHeader, TensorEntry

FORMAT = "hfmem-digest"
VERSION = 1
_SHA_RE = re.compile(r"^[0-9a-f]{40}$")
_INT64_MAX = 2**63 - 1


def enabled() -> bool:
    return os.environ.get("HFMEM_DISABLE_CACHE", "").strip().lower() not in ("1", "true", "yes", "on")


def cache_root() -> Path:
    explicit = os.environ.get("HFMEM_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    from huggingface_hub import constants

    return Path(constants.HF_HOME) / "hfmem"


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
        return _decode(json.loads(raw), repo_id, sha)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
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
        data = json.dumps(_encode(repo_id, sha, config, headers, index_metadata, warnings), separators=(",", ":"))
        _atomic_write(_digest_path(repo_id, sha), data.encode("utf-8"))
    except (OSError, TypeError, ValueError):
        pass


def _encode(repo_id, sha, config, headers, index_metadata, warnings) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "repo": repo_id,
        "sha": sha,
        "config": config,
        "index_metadata": index_metadata,
        "warnings": list(warnings),
        # Per file, tensors in data-offset order: [name, dtype, shape, nbytes]. numel is recomputed on load.
        "files": [
            {
                "file": h.file,
                "metadata": h.metadata,
                "warnings": list(h.warnings),
                "tensors": [[t.name, t.dtype, list(t.shape), t.nbytes] for t in h.tensors],
            }
            for h in headers
        ],
    }


def _decode(obj: Any, repo_id: str, sha: str) -> tuple[dict[str, Any], list[FileHeader], dict[str, Any] | None, list[str]] | None:
    if not isinstance(obj, dict) or obj.get("format") != FORMAT or obj.get("version") != VERSION:
        return None
    if obj.get("repo") != repo_id or obj.get("sha") != sha:
        return None
    config, index_metadata, warnings, files = obj["config"], obj["index_metadata"], obj["warnings"], obj["files"]
    if not isinstance(config, dict) or not (index_metadata is None or isinstance(index_metadata, dict)):
        return None
    if not _str_list(warnings) or not isinstance(files, list):
        return None
    headers: list[FileHeader] = []
    for f in files:
        name, metadata, fwarn, tensors = f["file"], f["metadata"], f["warnings"], f["tensors"]
        if not isinstance(name, str) or not isinstance(metadata, dict) or not _str_list(fwarn) or not isinstance(tensors, list):
            return None
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            return None
        entries = []
        for t in tensors:
            tname, dtype, shape, nbytes = t  # ValueError/TypeError on a malformed row
            if not (isinstance(tname, str) and isinstance(dtype, str) and isinstance(shape, list) and _nonneg_int(nbytes)):
                return None
            numel = 1
            for d in shape:
                if not _nonneg_int(d):
                    return None
                numel *= d
            if numel > _INT64_MAX:
                return None
            bits = dtype_bits(dtype)
            if bits is not None and numel * bits != nbytes * 8:
                return None
            entries.append(TensorEntry(tname, dtype, tuple(shape), numel, nbytes, name))
        headers.append(FileHeader(name, tuple(entries), dict(metadata), tuple(fwarn)))
    return config, headers, index_metadata, list(warnings)


def _nonneg_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


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
