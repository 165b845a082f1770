"""Read config.json and safetensors headers from a local folder or a snapshot in the HF cache, never following a
symlink out of the model's own folder."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, BinaryIO

from hfmem.errors import HfmemError, LocalPathError, MalformedHeader, NoConfig, NoSafetensors
from hfmem.hub import split_read
from hfmem.hub.budget import MAX_INDEX_BYTES
from hfmem.hub.files import (
    BIN_INDEX_FILE,
    INDEX_FILE,
    SINGLE_FILE,
    ModelFiles,
    approximate_from_bin_index,
    fallback_safetensors,
    index_shards,
    is_sha,
    load_json_text,
    no_safetensors,
    read_bounded,
    select_indexed,
)
from hfmem.hub.header import FileHeader, read_local_header


def looks_local(ref: str) -> bool:
    return (
        ref.startswith((".", "/", "~"))
        or os.sep in ref.rstrip(os.sep) and os.path.exists(ref)
        or os.path.isdir(ref)
        or ref.count("/") > 1
    )


def read_local(path_str: str) -> ModelFiles:
    path = Path(path_str).expanduser()
    if not path.exists():
        raise LocalPathError(f"{path_str}: no such file or directory", path=path_str)
    if not path.is_dir():
        raise LocalPathError(f"{path_str}: not a model folder (expected a directory with config.json)", path=path_str)
    root = path.resolve()
    snapshot = _snapshot_revision(root)
    try:
        return _read_folder(path, root, path_str, snapshot)
    except HfmemError as exc:
        exc.fill(repo_id=snapshot[0] if snapshot else None, revision=snapshot[1] if snapshot else None, path=path_str)
        raise


def _read_folder(path: Path, root: Path, path_str: str, snapshot: tuple[str, str] | None) -> ModelFiles:
    # Files may be symlinks only to places inside the folder the user named; in an HF cache snapshot, into the
    # repo's own blobs/ folder (models--org--name/), which is how the cache stores them.
    allowed = root.parent.parent if snapshot else root
    config_path = path / "config.json"
    if not is_regular(config_path, path_str):
        raise NoConfig(f"{path_str}: no config.json in this folder")
    _check_inside(config_path, allowed, path_str)
    config = load_json_text(read_bounded(config_path, named=path_str), "config.json")
    warnings: list[str] = []
    index = None
    index_path = path / INDEX_FILE
    child: split_read.ShardChild | None = None
    try:
        if is_regular(index_path, path_str):
            _check_inside(index_path, allowed, path_str)
            # for a large index, the later shards parse in a child while the index and the earlier ones parse here
            child, child_from, listed = split_read.start(
                path, index_path, lambda shards: _read_shards(path, allowed, path_str, shards))
            # max_depth=None: only the flat weight_map and metadata are read, and json.loads bounds recursion itself.
            index = load_json_text(read_bounded(index_path, MAX_INDEX_BYTES, path_str), INDEX_FILE, MalformedHeader, MAX_INDEX_BYTES, None)
            shards = index_shards(index, INDEX_FILE)
            if child is not None and shards == listed:
                headers = _read_shards(path, allowed, path_str, shards[:child_from])
                later = child.result()
                if later is None:  # the child failed: the serial read of its shards, its first error included
                    later = _read_shards(path, allowed, path_str, shards[child_from:])
                return _files(path_str, snapshot, config, headers + later, index, warnings)
        elif is_regular(path / SINGLE_FILE, path_str):
            shards = [SINGLE_FILE]
        else:
            shards = fallback_safetensors([p.name for p in path.glob("*.safetensors")], warnings)
    finally:
        if child is not None:
            child.close()
    if not shards:
        bin_index = path / BIN_INDEX_FILE
        approx = approximate_from_bin_index(read_bounded(bin_index, named=path_str) if bin_index.is_file() else None, bin_index.name)
        raise no_safetensors(path_str, approx)
    return _files(path_str, snapshot, config, _read_shards(path, allowed, path_str, shards), index, warnings)


def _read_shards(path: Path, allowed: Path, path_str: str, shards: list[str]) -> list[FileHeader]:
    """The headers of these shards, read in order; the first that fails raises."""
    headers = []
    for shard in shards:
        shard_path = _check_inside(path / shard, allowed, path_str)
        if not is_regular(shard_path, path_str):
            raise NoSafetensors(f"{path_str}: {INDEX_FILE} names {shard!r}, which is missing", path=shard)
        try:
            headers.append(read_local_header(shard_path, shard))
        except OSError as exc:
            raise LocalPathError(
                f"{path_str}: cannot read {shard!r} ({exc.strerror or type(exc).__name__})", path=str(shard_path)
            ) from None
    return headers


def _files(path_str: str, snapshot: tuple[str, str] | None, config: dict[str, Any], headers: list[FileHeader],
           index: dict[str, Any] | None, warnings: list[str]) -> ModelFiles:
    return ModelFiles(
        repo=snapshot[0] if snapshot else path_str,
        revision=snapshot[1] if snapshot else None,
        source="cache" if snapshot else "local",
        config=config,
        headers=select_indexed(headers, index, warnings),
        index_metadata=(index or {}).get("metadata") if index else None,
        warnings=warnings,
    )


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):  # fmt: skip
        if test(mode):
            return name
    return "not a regular file"


def is_regular(path: Path, named: str) -> bool:
    """True for a regular file (after symlinks), False when nothing is there; a LocalPathError for anything else:
    opening a FIFO blocks until a writer comes, a device (/dev/zero) never ends, a directory cannot be read."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if path.is_symlink():
            raise LocalPathError(f"{named}: {path.name!r} is a broken symlink", path=str(path)) from None
        return False
    except OSError as exc:
        raise LocalPathError(f"{named}: cannot read {path.name!r} ({exc.strerror or type(exc).__name__})", path=str(path)) from None
    if not stat.S_ISREG(mode):
        raise LocalPathError(f"{named}: {path.name!r} is {_kind(mode)}, not a regular file", path=str(path))
    return True


def open_regular(path: Path, named: str) -> BinaryIO:
    """`path` opened for reading if it is a regular file, else a LocalPathError (what is_regular refuses). The open
    is non-blocking, so a FIFO swapped in after a check cannot hang it either; fstat then refuses it."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise LocalPathError(f"{named}: cannot read {path.name!r} ({exc.strerror or type(exc).__name__})", path=str(path)) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise LocalPathError(f"{named}: {path.name!r} is {_kind(mode)}, not a regular file", path=str(path))
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def model_root(folder: Path) -> Path:
    """Where symlinks of files in `folder` may point: the folder itself, or for an HF cache snapshot, its repo folder
    (the snapshot links into blobs/)."""
    root = folder.resolve()
    return root.parent.parent if _snapshot_revision(root) else root


def check_inside(path: Path, allowed: Path, named: str) -> Path:
    """The resolved path, if it (after following symlinks) stays inside `allowed`; else a LocalPathError."""
    return _check_inside(path, allowed, named)


def _check_inside(path: Path, allowed: Path, named: str) -> Path:
    """The resolved path, if it (after following symlinks) stays inside `allowed`; else a LocalPathError."""
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):  # symlink loops
        raise LocalPathError(f"{named}: cannot resolve {path.name!r} (symlink loop?)", path=str(path)) from None
    if resolved != allowed and allowed not in resolved.parents:
        raise LocalPathError(f"{named}: {path.name!r} points outside the model folder; not followed", path=str(path))
    return resolved


def _snapshot_revision(root: Path) -> tuple[str, str] | None:
    """A folder inside the HF cache (models--org--name/snapshots/<sha>) names its repo and commit."""
    if root.parent.name == "snapshots" and is_sha(root.name):
        repo_dir = root.parent.parent.name
        if repo_dir.startswith("models--"):
            return repo_dir[len("models--") :].replace("--", "/"), root.name
    return None


def cached_snapshot(repo_id: str, revision: str | None = None) -> Path | None:
    """The cached snapshot folder of a repo when it holds config.json and safetensors weights, else None."""
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(repo_id, "config.json", revision=revision)
    except Exception:
        return None
    if not isinstance(found, str):
        return None
    folder = Path(found).parent
    if (folder / INDEX_FILE).is_file() or (folder / SINGLE_FILE).is_file():
        return folder
    return None


def cached_sha(repo_id: str, revision: str | None) -> str | None:
    """The commit the HF cache resolves `revision` to (via its refs), if config.json of it is cached."""
    try:
        from huggingface_hub import try_to_load_from_cache

        path = try_to_load_from_cache(repo_id, "config.json", revision=revision)
    except Exception:
        return None
    return _sha_from_cache_path(path) if isinstance(path, str) else None


def _sha_from_cache_path(path: str) -> str | None:
    parts = Path(path).parts
    if "snapshots" in parts:
        candidate = parts[parts.index("snapshots") + 1]
        if is_sha(candidate):
            return candidate
    return None
