"""Start reading a Hub repo before the analysis code is imported.

A Hub run spends most of its wall clock importing huggingface_hub's HTTP stack, building its client (its TLS
context loads the CA bundle) and waiting for the round trip. None of that needs the analysis code, and importing the
analysis code needs none of it, so the CLI starts the read in a thread as soon as it knows the model and imports the
rest meanwhile; ``read_model`` (or ``api._read_then``, which analyses a repeat run's cached entry while the request
re-resolving its revision is in flight) then takes the result instead of starting the same read.

The thread runs exactly ``read_hub`` with the arguments ``read_model`` will pass, so requests, errors and exit codes
are the same as without it; a read nobody takes (the command failed first) is simply abandoned with the process.

A repeat run, where the platform can fork (Linux) and the process has no other thread yet (the CLI, before it has
imported anything heavy), reads in a forked child process instead: importing and building the HTTP client is
~0.13 s of CPU, and in a thread it holds the interpreter lock that the analysis of the cached entry needs, so the
two ran one after the other; in a child they run on two cores. The child runs the same read_hub and hands back
the outcome through a pipe: when the commit is unchanged only that commit and the config (the parent analyses its
own copy of the entry), else the files as columns (per file the tensor names and indices into a table of distinct
(dtype, shape, numel, nbytes): for DeepSeek-V3's 92k tensors 0.03 s to pack and 0.04 s to rebuild, where pickling
the entries took 0.35 s + 0.22 s), or the error it raised. It writes a new digest entry after answering; the parent
waits for it at exit, as for the thread. A first run stays in a thread (_repeat_entry says why).
"""

from __future__ import annotations

import atexit
import sys
import threading
from typing import Any

_Key = tuple[str, "str | None", "str | bool | None", "float | None"]
_pending: dict[_Key, Any] = {}
_reads: list[_Read | _ForkedRead] = []  # every read started, taken or not (their finish runs at exit)
_lock = threading.Lock()
# Linux only: where it is measured, and where a forked child may use what the parent never initialised (macOS's
# system frameworks, which httpx's proxy lookup reaches through urllib, are not safe to use after fork).
FORK = sys.platform.startswith("linux")  # False: always a thread (tests compare the two)


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

    def finish(self) -> None:
        """At exit: let a read that has answered finish writing its cache entry (one still waiting on the network is
        abandoned with the process; writes are atomic, so an interrupted one leaves no partial entry)."""
        if self.done.is_set():
            self.written.wait()


class _ForkedRead:
    """One read_hub call running in a forked child process (hfmem.hub.forked); the same interface as _Read (see the
    module docstring). The child's answer is ("same", sha, config): the revision still names the commit whose entry
    the parent loads itself (wait_preloaded); or ("files", source, revision, config, index metadata, warnings, kinds,
    columns): anything else read_hub returned (_columns). A digest entry read_hub writes is written after answering.
    """

    def __init__(self, args: _Key, known: str) -> None:
        from hfmem.hub.forked import Forked

        self.args = args
        # The commit whose digest entry the child's read_hub preloads (HubContext.read_online), which the parent
        # loads and analyses itself instead of receiving it
        self.known = known
        self.preloaded: Any = None
        self.child = Forked(self._read)

    def _read(self, after: list[Any]) -> tuple[Any, ...]:
        """In the child: read_hub, and what to hand back of its result."""
        from hfmem.gcpause import gc_paused
        from hfmem.hub.remote import read_hub

        repo_id, revision, token, timeout = self.args
        preloaded: list[Any] = []
        with gc_paused():
            files = read_hub(repo_id, revision=revision, token=token, timeout=timeout,
                             on_preload=preloaded.append, deferred=after)
            if preloaded and files is preloaded[0]:
                return ("same", files.revision, files.config)
            return ("files", files.source, files.revision, files.config, files.index_metadata, files.warnings,
                    *_columns(files.headers))

    def wait_preloaded(self) -> Any:
        """The digest entry read_hub returns if the revision still names the commit it named last time (None when
        there is none), loaded here while the child's request is in flight."""
        if self.preloaded is None:
            from hfmem.hub.remote import _from_digest

            self.preloaded = _from_digest(self.args[0], self.known, None, "hub")
        return self.preloaded

    def wait(self) -> Any:
        from hfmem.gcpause import gc_paused
        from hfmem.hub.files import ModelFiles

        kind, value = self.child.answer()
        if kind == "error":
            raise value  # as read_hub raised it
        if kind == "crash":
            raise RuntimeError(f"the Hub read's process: {value}")
        repo_id = self.args[0]
        if value[0] == "same":
            _, sha, config = value
            files = self.wait_preloaded()
            if files is not None and files.revision == sha:
                files.config = config
                return files
            return self._read_here()  # the parent's copy of the entry would not load: read it in-process
        _, source, revision, config, index_metadata, warnings, kinds, columns = value
        with gc_paused():
            headers = _headers(kinds, columns)
        return ModelFiles(repo=repo_id, revision=revision, source=source, config=config, headers=headers,
                          index_metadata=index_metadata, warnings=warnings)

    def _read_here(self) -> Any:
        from hfmem.hub.remote import read_hub

        repo_id, revision, token, timeout = self.args
        return read_hub(repo_id, revision=revision, token=token, timeout=timeout)

    def finish(self) -> None:
        """At exit: wait for a child that has answered (it is writing the digest entry); end one that has not (a
        read still waiting on the network is abandoned, as the thread's is)."""
        self.child.end(wait=self.child.answered)


def _columns(headers: list[Any]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Headers as (kinds, columns): the distinct (dtype, shape, numel, nbytes), and per file (name, metadata,
    warnings, tensor names, kind index per tensor). Pickled, these are a few strings and ints per tensor, where
    the entries themselves are an object each (pickle's slowest case)."""
    kinds: dict[tuple[Any, ...], int] = {}
    columns = []
    for h in headers:
        indices = [kinds.setdefault((t.dtype, t.shape, t.numel, t.nbytes), len(kinds)) for t in h.tensors]
        columns.append((h.file, h.metadata, h.warnings, [t.name for t in h.tensors], indices))
    return list(kinds), columns


def _headers(kinds: list[tuple[Any, ...]], columns: list[tuple[Any, ...]]) -> list[Any]:
    """_columns undone (the entries were validated in the child, by the same code, as they were read)."""
    from hfmem.hub.header import FileHeader, TensorEntry

    return [FileHeader(file, tuple(TensorEntry(n, k[0], k[1], k[2], k[3], file)
                                   for n, k in zip(names, map(kinds.__getitem__, indices))), metadata, warnings)
            for file, metadata, warnings, names, indices in columns]


def start(ref: str, revision: str | None, token: str | bool | None, timeout: float | None, fork: bool = True) -> None:
    """Begin reading ``ref`` from the Hub if ``read_model(ref, revision, token, timeout)`` would (a repo id or Hub
    URL, not a local path): in a forked child where FORK allows it and ``fork`` (False: the caller makes Hub requests
    of its own, which then share the client the read builds), else in a thread, returning when its first request
    has left. Anything it cannot vouch for is left to read_model, which reports it."""
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
        known = _repeat_entry(repo_id, revision) if fork and FORK and threading.active_count() == 1 else None
        if known is not None:
            forked = _ForkedRead(key, known)
            _pending[key] = forked
            _reads.append(forked)
            return
        _pending[key] = read = _Read(key)
        _reads.append(read)
    # Return once its first request is on the wire (at most 2 s): the caller then imports the analysis code, which
    # would otherwise compete for the interpreter with the HTTP client's import and delay the request; while the
    # request waits on the network those imports cost nothing. A run's critical path is the client's import, then
    # the round trip.
    read.sent.wait(2.0)


def _repeat_entry(repo_id: str, revision: str | None) -> str | None:
    """The commit of the digest entry read_hub analyses beside the request re-resolving ``revision`` (a repeat run
    online: HubContext.read_online's first branch), or None. Only then does a child pay: the parent has that
    analysis to run meanwhile, and the child's answer is a commit. On a first run the parent has nothing to do but
    wait, and handing the files over costs time in proportion to the tensors (Kimi-K3's 497,220 from the local hub:
    ~1 s slower forked than in a thread)."""
    from huggingface_hub import constants

    from hfmem.hub import digest
    from hfmem.hub.files import is_sha

    if constants.HF_HUB_OFFLINE or is_sha(revision):  # no request, or a miss that fetches the files
        return None
    known = digest.read_ref(repo_id, revision)
    return known if known is not None and digest.has(repo_id, known) else None


def _finish_writes() -> None:
    """At exit: every read started, taken or not, finishes its cache write or is abandoned (its finish)."""
    for read in _reads:
        read.finish()


def take(repo_id: str, revision: str | None, token: str | bool | None, timeout: float | None) -> _Read | None:
    """The read started for exactly these arguments, if any (each read is taken once)."""
    with _lock:
        return _pending.pop((repo_id, revision, token, timeout), None)
