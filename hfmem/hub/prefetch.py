"""Start reading a Hub repo before the analysis code is imported.

A Hub run spends most of its wall clock importing huggingface_hub's HTTP stack, building its client (its TLS
context loads the CA bundle) and waiting for the round trip. None of that needs the analysis code, and importing the
analysis code needs none of it, so the CLI starts the read in a thread as soon as it knows the model and imports the
rest meanwhile; ``read_model`` (or ``api._read_then``, which analyses a repeat run's cached entry while the request
re-resolving its revision is in flight) then takes the result instead of starting the same read.

The thread runs exactly ``read_hub`` with the arguments ``read_model`` will pass, so requests, errors and exit codes
are the same as without it; a read nobody takes (the command failed first) is simply abandoned with the process.
"""

from __future__ import annotations

import atexit
import threading
from typing import Any

_Key = tuple[str, "str | None", "str | bool | None", "float | None"]
_pending: dict[_Key, _Read] = {}
_reads: list[_Read] = []  # every read started, taken or not (their cache writes are waited for at exit)
_lock = threading.Lock()


class _Read:
    """One read_hub call running in a daemon thread: its result, or the exception it raised."""

    def __init__(self, args: _Key) -> None:
        self.args = args
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None
        self.preloaded: Any = None  # the digest entry of the commit seen last, while its revision is re-resolved
        self.preload_or_done = threading.Event()
        self.deferred: list[Any] = []  # cache writes read_hub left to run after its answer (digest.store)
        self.written = threading.Event()
        self.sent = threading.Event()  # its first request has left (or the read ended without one)
        threading.Thread(target=self._run, name="hfmem-prefetch", daemon=True).start()

    def _run(self) -> None:
        try:
            from hfmem.gcpause import gc_paused
            from hfmem.hub.remote import read_hub

            repo_id, revision, token, timeout = self.args
            with gc_paused():
                self.result = read_hub(repo_id, revision=revision, token=token, timeout=timeout,
                                       on_preload=self._preloaded, deferred=self.deferred, sent=self.sent)
        except BaseException as exc:  # handed to the taker, who raises it as read_hub would have
            self.error = exc
        finally:
            self.sent.set()
            self.done.set()
            self.preload_or_done.set()
        # The digest entry is written while the taker analyses the answer; the process waits for it at exit.
        try:
            for write in self.deferred:
                write()
        finally:
            self.written.set()

    def _preloaded(self, files: Any) -> None:
        self.preloaded = files
        self.preload_or_done.set()

    def wait_preloaded(self) -> Any:
        """The digest entry read_hub returns if the revision still names the commit it named last time (None when
        there is none): available before the request that says so has answered."""
        self.preload_or_done.wait()
        return self.preloaded

    def wait(self) -> Any:
        self.done.wait()
        if self.error is not None:
            raise self.error
        return self.result


def start(ref: str, revision: str | None, token: str | bool | None, timeout: float | None) -> None:
    """Begin reading ``ref`` from the Hub if ``read_model(ref, revision, token, timeout)`` would (a repo id or Hub
    URL, not a local path), and return when its first request has left; anything it cannot vouch for is left to
    read_model, which reports it."""
    from hfmem.errors import HfmemError
    from hfmem.hub.local import looks_local
    from hfmem.hub.ref import is_gguf_ref, resolve_ref

    try:
        repo_id, revision = resolve_ref(ref, revision)
    except HfmemError:
        return
    if looks_local(repo_id) or is_gguf_ref(repo_id):
        return
    key = (repo_id, revision, token, timeout)
    with _lock:
        if key in _pending:
            return
        if not _pending and not _reads:
            atexit.register(_finish_writes)
        _pending[key] = read = _Read(key)
        _reads.append(read)
    # Return once its first request is on the wire (at most 2 s): the caller then imports the analysis code, which
    # would otherwise compete for the interpreter with the HTTP client's import and delay the request; while the
    # request waits on the network those imports cost nothing. A run's critical path is the client's import, then
    # the round trip.
    read.sent.wait(2.0)


def _finish_writes() -> None:
    """At exit: let every read that has answered finish writing its cache entry (a read still waiting on the
    network is abandoned, as before; writes are atomic, so an interrupted one leaves no partial entry)."""
    for read in _reads:
        if read.done.is_set():
            read.written.wait()


def take(repo_id: str, revision: str | None, token: str | bool | None, timeout: float | None) -> _Read | None:
    """The read started for exactly these arguments, if any (each read is taken once)."""
    with _lock:
        return _pending.pop((repo_id, revision, token, timeout), None)
