"""Cyclic garbage collection paused while a model's tensors are read and classified.

Reading a checkpoint creates one small object per tensor (497,220 for Kimi-K3), none of them in a reference cycle:
reference counting frees them. The cyclic collector still runs every 700 allocations and, as the survivors pile up,
re-scans all of them in its older generations: on a 500k-tensor repo that scanning was more than half the time of
parsing and validating the headers (CPython's gc module docs, "gc.set_threshold"; the same reasoning as
``gc.freeze`` for long-lived heaps). Collection resumes when the bulk work is done.

Resuming naively costs the scans all the same, later: every object allocated in the pause is still in the youngest
generation, so the next allocation triggers a collection of all of them (0.17 s after reading Kimi-K3's headers),
and they are scanned again when promoted to the middle generation (0.26 s): half a second of a 5 s run.
``gc.freeze()`` followed at once by ``gc.unfreeze()`` moves every tracked object into the oldest generation without
scanning it (CPython Modules/gcmodule.c: gc_freeze_impl merges every generation into the permanent one and resets
the young count, gc_unfreeze_impl merges that back into the oldest), which is where long-lived survivors go anyway;
cyclic garbage there is still found by the next full collection. Skipped when the process has frozen objects of
its own (``gc.get_freeze_count()``), which unfreeze would release.
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
            if not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def bulk(fn: F) -> F:
    """Run ``fn`` with the cyclic collector paused (nested uses keep it paused until the outermost returns)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with gc_paused():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
