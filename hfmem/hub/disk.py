"""Bytes on disk for `hfmem check`: a local model's size, what a download of a Hub repo would fetch, and the free
space where the HF cache would put it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def folder_size(path: str | Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            p = Path(root) / f
            if not p.is_symlink() or p.exists():
                total += p.stat().st_size
    return total


def hub_download_bytes(
    repo_id: str, revision: str | None = None, token: str | bool | None = None, timeout: float | None = None
) -> int:
    """Bytes a default ``snapshot_download`` fetches: every file of the repo tree at ``revision``."""
    return sum(size for _, size in hub_files(repo_id, revision, token, timeout))


def hub_files(
    repo_id: str, revision: str | None = None, token: str | bool | None = None, timeout: float | None = None
) -> list[tuple[str, int]]:
    """(path, size) of every file of the repo tree at ``revision`` (one listing request)."""
    from huggingface_hub import HfApi, constants

    from hfmem.hub.remote import HubContext

    ctx = HubContext(repo_id, revision, token, timeout if timeout is not None else constants.HF_HUB_DOWNLOAD_TIMEOUT)

    def call() -> list[tuple[str, int]]:
        listing = HfApi().list_repo_tree(repo_id, recursive=True, revision=revision, token=token)
        sizes = [(f.path, getattr(f, "size", None)) for f in listing]  # folders have no size
        return [(path, int(size)) for path, size in sizes if size is not None]

    # Through ctx.call like every Hub request: retried by hfmem within --timeout, and the client's own retry
    # warnings ("Retrying in 1s") kept off stderr, which carries one line per error.
    return ctx.guard(lambda: ctx.call(call))


def cache_free_bytes(where: str | None = None) -> tuple[str, int]:
    """(path, free bytes on its filesystem), using the nearest existing parent folder; ``where`` defaults to the HF
    cache (``HF_HUB_CACHE``)."""
    from huggingface_hub import constants

    path = Path(where or constants.HF_HUB_CACHE)
    probe = path
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    return str(path), shutil.disk_usage(probe).free
