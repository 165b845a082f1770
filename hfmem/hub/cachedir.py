"""Where hfmem keeps what it remembers between runs (``$HFMEM_CACHE``, default ``$HF_HOME/hfmem``; off with
``HFMEM_DISABLE_CACHE=1``), and how it writes there: atomically (a temporary file, then ``os.replace``)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path


def enabled() -> bool:
    return os.environ.get("HFMEM_DISABLE_CACHE", "").strip().lower() not in ("1", "true", "yes", "on")


def cache_root() -> Path:
    explicit = os.environ.get("HFMEM_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:  # already imported (any Hub run): the client's own answer
        return Path(constants.HF_HOME) / "hfmem"
    # huggingface_hub, constants.py: HF_HOME's rule, without importing the client (~0.3 s) for a local or offline run
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(home).expanduser() / "hfmem"


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that a reader sees the old content or the new, never a part."""
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
