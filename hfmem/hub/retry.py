"""Bounded retries with exponential backoff, and a wall-clock deadline, around one Hub operation."""

# huggingface_hub retries some calls itself (HEAD inside ``hf_hub_download``, body reads) but not others
# (``model_info``, ``get_sharded_safetensors_metadata``, ``parse_safetensors_file_metadata``), and after a failed HEAD
# it retries with a 60 s timeout of its own (``file_download._ETAG_RETRY_TIMEOUT``). So hfmem wraps each Hub operation:
#
# * transient failures (HTTP 408/429/5xx, dropped or refused connections, DNS failures, timeouts, truncated bodies)
#   are retried up to ``RetryPolicy.attempts`` times, with exponential backoff and jitter; a 429's ``Retry-After`` is
#   honoured (the wait is exactly what the server asked, when it fits);
# * every attempt and wait fits in one wall-clock deadline: each attempt runs in a daemon thread and is abandoned
#   when the deadline passes, so a stalled server gives ``DeadlineExceeded`` on time whatever the client does
#   (remote.py picks the deadline and what is retryable per kind of call).
#
# Nothing here knows about hfmem's errors; ``hfmem.hub.errors.HubErrors.guard`` translates what comes out.

from __future__ import annotations

import contextvars
import logging
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4  # tries in all (1 = no retry)
    base_s: float = 0.2  # first backoff; doubles each retry
    max_wait_s: float = 4.0  # longest backoff between two tries
    max_retry_after_s: float = 60.0  # a 429 asking for longer than this is reported, not waited out
    jitter: float = 0.25  # +- fraction of each backoff, so parallel workers do not retry in lock-step

    def backoff(self, retry: int, rng: random.Random | None = None) -> float:
        wait = min(self.max_wait_s, self.base_s * 2 ** (retry - 1))
        return wait * (1 + self.jitter * (2 * (rng or random).random() - 1))


DEFAULT_POLICY = RetryPolicy()


class DeadlineExceeded(Exception):
    """The operation (all its attempts) did not finish within the deadline.

    ``last_client_message`` is the last retry warning huggingface_hub logged inside the abandoned attempt (it
    retries some failures itself, with sleeps of its own), so the error can say what was really going on:
    ``last_status`` (e.g. 500) or ``last_error`` (e.g. "[Errno 111] Connection refused").
    """

    def __init__(self, seconds: float, attempts: int, last_client_message: str | None = None):
        super().__init__(f"no answer within {seconds:g} s")
        self.seconds = seconds
        self.attempts = attempts
        self.last_client_message = last_client_message
        self.last_status: int | None = None
        self.last_error: str | None = None
        if last_client_message:
            m = _STATUS_MSG_RE.search(last_client_message)
            if m:
                self.last_status = int(m.group(1))
            m = _ERROR_MSG_RE.search(last_client_message)
            if m and self.last_status is None:
                self.last_error = (m.group(1) or m.group(2) or "").strip()[:160] or None


_STATUS_MSG_RE = re.compile(r"HTTP Error (\d{3}) thrown")
_ERROR_MSG_RE = re.compile(r"^'(.+)' thrown while requesting|^Error while downloading from \S+: (.+)", re.S)


# -- huggingface_hub's own retry warnings -------------------------------------------------------------------------
# The client logs "Retrying in 1s" etc. to stderr for its internal retries. Inside hfmem's Hub calls these are
# captured (for DeadlineExceeded) and kept off stderr, which carries one line per error; --debug shows them.
_CLIENT_LOGGERS = ("huggingface_hub.utils._http", "huggingface_hub.file_download")
_ours: dict[int, str | None] = {}  # thread ident of a running attempt -> last client warning in it
_ours_lock = threading.Lock()
show_client_logs = False  # set by the CLI's --debug


class _CaptureClientLogs(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        with _ours_lock:
            if record.thread not in _ours:
                return True  # not an hfmem call: leave it alone
            if record.levelno >= logging.WARNING and not record.getMessage().startswith("Retrying in"):
                _ours[record.thread] = record.getMessage()[:400]
        return show_client_logs


_capture = _CaptureClientLogs()


def _install_capture() -> None:
    for name in _CLIENT_LOGGERS:
        logger = logging.getLogger(name)
        if _capture not in logger.filters:
            logger.addFilter(_capture)


def status_of(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


def retry_after(exc: BaseException) -> float | None:
    """Seconds from a Retry-After header (delay-seconds form only), if the error carries one."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        value = headers.get("Retry-After")
    except Exception:
        return None
    if isinstance(value, str) and value.strip().isdigit():
        return float(value.strip())
    return None


def is_transient(exc: BaseException) -> bool:
    """Worth another try: a server hiccup or a network failure, not an answer about the repo."""
    status = status_of(exc)
    if status is not None:
        return status in RETRY_STATUSES
    name = type(exc).__name__
    module = type(exc).__module__ or ""
    if name == "LocalEntryNotFoundError":
        # hf_hub_download wraps "could not reach the Hub" in this; offline mode raises it with no cause.
        cause = exc.__cause__ or exc.__context__
        return cause is not None and is_transient(cause)
    if module.startswith(("httpx", "httpcore")):
        # TransportError: ConnectError (refused, DNS), ReadError, RemoteProtocolError (drop, truncation), timeouts.
        return any(c.__name__ == "TransportError" for c in type(exc).__mro__) and name not in (
            "ProxyError",
            "UnsupportedProtocol",
            "InvalidURL",
        )
    return isinstance(exc, (ConnectionError, TimeoutError))


def is_incomplete_body(exc: BaseException) -> bool:
    """A response cut short (Content-Length not reached), as opposed to a connection dropped before answering."""
    text = str(exc)
    return "complete message body" in text or "incomplete" in text.lower()


def is_timeout(exc: BaseException) -> bool:
    return "Timeout" in type(exc).__name__ or isinstance(exc, TimeoutError)


def transient_not_timeout(exc: BaseException) -> bool:
    """For calls whose client timeout is --timeout itself: a timeout already took the whole budget."""
    return is_transient(exc) and not is_timeout(exc)


def transient_for_downloads(exc: BaseException) -> bool:
    """For hf_hub_download, which already resumes a cut-short body 5 times itself: do not multiply that."""
    return is_transient(exc) and not is_incomplete_body(exc)


def _run_bounded(fn: Callable[[], T], seconds: float) -> T:
    """Run fn in a daemon thread; raise TimeoutError if it has not returned after `seconds`."""
    _install_capture()
    done = threading.Event()
    box: dict[str, Any] = {}
    ctx = contextvars.copy_context()

    def target() -> None:
        ident = threading.get_ident()
        with _ours_lock:
            _ours[ident] = None
        try:
            box["value"] = ctx.run(fn)
        except BaseException as exc:  # handed to the caller
            box["error"] = exc
        finally:
            with _ours_lock:
                box["last"] = _ours.pop(ident, None)
            done.set()

    # A daemon, so an abandoned (stalled) attempt never keeps the process alive at exit.
    thread = threading.Thread(target=target, name="hfmem-hub-call", daemon=True)
    thread.start()
    if not done.wait(max(seconds, 0.0)):
        with _ours_lock:
            raise _Abandoned(_ours.get(thread.ident) if thread.ident is not None else None)
    if "error" in box:
        raise box["error"]
    return box["value"]


class _Abandoned(Exception):
    def __init__(self, last: str | None):
        super().__init__(last)
        self.last = last


def call_with_retries(
    fn: Callable[[], T],
    *,
    deadline_s: float,
    policy: RetryPolicy = DEFAULT_POLICY,
    retryable: Callable[[BaseException], bool] = is_transient,
    sleep: Callable[[float], None] = time.sleep,
    on_retry: Callable[[int, BaseException, float], None] | None = None,
    max_retry_after_s: float | None = None,
) -> T:
    """fn(), retried on transient errors; all attempts and waits within deadline_s seconds.

    The last error is re-raised as is (with ``hfmem_attempts`` set on it) when retries run out, when a wait
    would overrun the deadline, or when a Retry-After exceeds the policy's limit; ``DeadlineExceeded`` when an
    attempt is still running at the deadline.
    """
    end = time.monotonic() + deadline_s
    longest_asked = policy.max_retry_after_s if max_retry_after_s is None else max_retry_after_s
    attempt = 0
    while True:
        attempt += 1
        remaining = end - time.monotonic()
        if remaining <= 0:
            raise DeadlineExceeded(deadline_s, attempt - 1)
        try:
            return _run_bounded(fn, remaining)
        except _Abandoned as abandoned:
            raise DeadlineExceeded(deadline_s, attempt, abandoned.last) from None
        except Exception as exc:
            _mark(exc, attempt)
            if attempt >= policy.attempts or not retryable(exc):
                raise
            asked = retry_after(exc) if status_of(exc) in (429, 503) else None
            if asked is not None and asked > longest_asked:
                raise
            wait = asked if asked is not None else policy.backoff(attempt)
            if time.monotonic() + wait >= end:
                raise  # no time left for another try: report what happened, not a timeout
            if on_retry is not None:
                on_retry(attempt, exc, wait)
            sleep(wait)


def _mark(exc: BaseException, attempt: int) -> None:
    try:
        exc.hfmem_attempts = attempt  # type: ignore[attr-defined]
    except Exception:
        pass


def attempts_of(exc: BaseException) -> int:
    value = getattr(exc, "hfmem_attempts", 1)
    return value if isinstance(value, int) else 1
