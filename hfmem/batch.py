"""Analyse many models concurrently; one failing repo never stops the others.

``analyze_many`` is the engine of the (future) ``hfmem batch`` command: a bounded thread pool (Hub work is network
bound), results in input order, each either a ``Report`` or the ``HfmemError`` that repo met. A bug (an unexpected
exception) in one repo becomes an ``InternalError`` for that repo only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hfmem.errors import HfmemError, redact

DEFAULT_JOBS = 8
MAX_JOBS = 64


class InternalError(HfmemError):
    """An unexpected exception while analysing one repo (a bug); exit code 1 like the CLI's internal errors."""

    exit_code = 1

    def __init__(self, message: str, cause: BaseException | None = None):
        super().__init__(message)
        self.cause = cause


def analyze_many(
    refs: Sequence[str],
    jobs: int = DEFAULT_JOBS,
    *,
    revision: str | None = None,
    token: str | bool | None = None,
    timeout: float | None = None,
    fn: Callable[..., Any] | None = None,
) -> list[Any]:
    """[Report | HfmemError] for each ref, in input order; at most `jobs` repos in flight at once.

    `fn(ref, revision=, token=, timeout=)` defaults to ``hfmem.api.analyze``; a caller (the batch command)
    may pass its own, e.g. one that also plans GPUs.
    """
    if not isinstance(jobs, int) or isinstance(jobs, bool) or not 1 <= jobs <= MAX_JOBS:
        raise ValueError(f"jobs must be an integer from 1 to {MAX_JOBS}, got {jobs!r}")
    if fn is None:
        from hfmem.api import analyze as fn
    refs = list(refs)
    if not refs:
        return []

    def one(ref: str) -> Any:
        try:
            return fn(ref, revision=revision, token=token, timeout=timeout)
        except HfmemError as exc:
            return exc
        except Exception as exc:  # a bug for this repo only; the message is redacted
            return InternalError(f"{ref}: internal error: {type(exc).__name__}: {redact(str(exc), token)[:200]}", exc)

    with ThreadPoolExecutor(max_workers=min(jobs, len(refs)), thread_name_prefix="hfmem-batch") as pool:
        futures = [pool.submit(one, ref) for ref in refs]
        try:
            return [f.result() for f in futures]
        except BaseException:  # KeyboardInterrupt: drop what has not started
            for f in futures:
                f.cancel()
            raise
