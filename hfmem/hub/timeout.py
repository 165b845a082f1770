"""What --timeout (and HF_HUB_DOWNLOAD_TIMEOUT) may be: a finite number of seconds, checked before any request."""

from __future__ import annotations

import math
import os

from hfmem.errors import UsageError

MIN_TIMEOUT_S = 0.1
# A day. Beyond it nothing is a timeout any more, and inf or 1e308 overflow the thread waits (time_t).
MAX_TIMEOUT_S = 86_400.0


def check_timeout(value: object, what: str = "--timeout") -> float:
    """`value` as seconds, if it is a number from 0.1 to 86400; else a UsageError naming `what`."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not MIN_TIMEOUT_S <= value <= MAX_TIMEOUT_S
    ):
        raise UsageError(f"{what}: {value!r} is not a number of seconds from {MIN_TIMEOUT_S:g} to {MAX_TIMEOUT_S:g}")
    return float(value)


def env_timeout() -> float | None:
    """HF_HUB_DOWNLOAD_TIMEOUT checked as huggingface_hub reads it, before the client is imported (constants.py:
    ``int()`` of it at import, so "abc" or "1.5" would make the import itself fail; 0 or unset means its default).
    None when the client's default applies."""
    raw = os.environ.get("HF_HUB_DOWNLOAD_TIMEOUT")
    if raw is None:
        return None
    try:
        seconds = int(raw)
    except ValueError:
        raise UsageError(f"HF_HUB_DOWNLOAD_TIMEOUT={raw[:40]!r}: not a whole number of seconds") from None
    if seconds == 0:
        return None
    return check_timeout(seconds, "HF_HUB_DOWNLOAD_TIMEOUT")
