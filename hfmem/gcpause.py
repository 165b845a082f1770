"""Cyclic garbage collection paused while a model's tensors are read and classified.

Reading a checkpoint creates one small object per tensor (497,220 for Kimi-K3), none of them in a reference cycle:
reference counting frees them. The cyclic collector still runs every 700 allocations and, as the survivors pile up,
re-scans all of them in its older generations: on a 500k-tensor repo that scanning was more than half the time of
parsing and validating the headers (CPython's gc module docs, "gc.set_threshold"; the same reasoning as
``gc.freeze`` for long-lived heaps). Collection resumes, and catches up in one pass, when the bulk work is done.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def gc_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def bulk(fn: F) -> F:
    """Run ``fn`` with the cyclic collector paused (nested uses keep it paused until the outermost returns)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with gc_paused():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
