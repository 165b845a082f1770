"""The installed transformers release, for the few figures that depend on it (transformers-engine cache bookkeeping,
torch-path activations). Looked up once, with the config table's release (hfmem.model.fast_config.table_applies,
importlib.metadata: no transformers import)."""

from __future__ import annotations


def installed() -> str | None:
    """The installed transformers version, or None when it is absent."""
    from hfmem.model.fast_config import installed_transformers

    return installed_transformers()


def at_least(major: int, minor: int, release: str | None = None) -> bool:
    """``release`` (default: the installed one) is major.minor or newer. Without transformers installed the newest
    release hfmem was verified against (the config table's body) is assumed, as the config table does."""
    if release is None:
        release = installed()
    if release is None:
        from hfmem.model.config_table import TABLE

        release = TABLE["transformers"]
    parts: list[int] = []
    for piece in release.split(".")[:2]:  # "5.25.0", "5.26.0.dev0", "5.25rc1": the leading digits of major, minor
        parts.append(int(piece[: len(piece) - len(piece.lstrip("0123456789"))] or 0))
    return tuple(parts) >= (major, minor)
