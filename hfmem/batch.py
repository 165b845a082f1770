"""Many models at once: a bounded thread pool, results in input order, one failing repo never stops the others."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

from hfmem.errors import HfmemError, UsageError, redact

DEFAULT_JOBS = 8
MAX_JOBS = 64

R = TypeVar("R")


class InternalError(HfmemError):
    """An unexpected exception while analysing one repo (a bug); exit code 1 like the CLI's internal errors."""

    exit_code = 1

    def __init__(self, message: str, cause: BaseException | None = None):
        super().__init__(message)
        self.cause = cause


def parse_repo_list(text: str | bytes, name: str = "the repo list") -> list[str]:
    """One repo id (or path) per line; blank lines and # comments ignored. Bytes must be UTF-8 (a UsageError
    saying where they are not); a byte order mark, as editors on Windows write, is not part of the first repo."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise UsageError(f"{name}: not UTF-8 text (byte 0x{text[exc.start]:02x} at offset {exc.start}); "
                             "expected one repo id or path per line") from None
    text = text.removeprefix("\ufeff")
    refs = []
    for line in text.splitlines():
        ref = line.split("#", 1)[0].strip()
        if ref:
            refs.append(ref)
    return refs


def run_many(
    refs: Sequence[str],
    jobs: int,
    *,
    fn: Callable[..., R],
    revision: str | None = None,
    token: str | bool | None = None,
    timeout: float | None = None,
    progress: bool = False,
) -> list[R | HfmemError]:
    """``fn(ref, revision=, token=, timeout=)`` for each ref, at most ``jobs`` in flight (Hub work is network bound),
    results in input order: the value, or the ``HfmemError`` that repo met (a bug becomes an ``InternalError`` for
    that repo only). ``progress`` shows a tqdm bar."""
    if not isinstance(jobs, int) or isinstance(jobs, bool) or not 1 <= jobs <= MAX_JOBS:
        raise ValueError(f"jobs must be an integer from 1 to {MAX_JOBS}, got {jobs!r}")
    refs = list(refs)
    if not refs:
        return []
    bar = None
    lock = threading.Lock()
    if progress:
        from tqdm import tqdm

        from hfmem.safe_text import unwrapped

        # Past the CLI's SafeStream: the bar redraws its line with \r and shows only counts.
        bar = tqdm(total=len(refs), unit="repo", leave=False, file=unwrapped(sys.stderr))

    def one(ref: str) -> R | HfmemError:
        try:
            return fn(ref, revision=revision, token=token, timeout=timeout)
        except HfmemError as exc:
            return exc
        except Exception as exc:  # a bug for this repo only; the message is redacted
            return InternalError(f"{ref}: internal error: {type(exc).__name__}: {redact(str(exc), token)[:200]}", exc)
        finally:
            if bar is not None:
                with lock:
                    bar.update(1)

    from concurrent.futures import ThreadPoolExecutor  # the batch command's only; the CLI imports this module for its constants

    try:
        with ThreadPoolExecutor(max_workers=min(jobs, len(refs)), thread_name_prefix="hfmem-batch") as pool:
            futures = [pool.submit(one, ref) for ref in refs]
            try:
                return [f.result() for f in futures]
            except BaseException:  # KeyboardInterrupt: drop what has not started
                for f in futures:
                    f.cancel()
                raise
    finally:
        if bar is not None:
            bar.close()
