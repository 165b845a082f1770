"""One function run in a forked child process, its outcome handed back pickled through a pipe.

Parsing JSON and importing modules hold the interpreter lock, so a thread runs after the main one, not beside it; a
forked child runs on another core and starts with everything the parent has already imported. hfmem forks for a
repeat run's Hub read (hfmem/hub/prefetch.py) and for the later shards of a large local folder
(hfmem/hub/split_read.py); both check first that the platform is Linux and that the process has no other thread (a
child inherits locks held by threads that do not exist in it).
"""

from __future__ import annotations

import os
import pickle
import signal
from collections.abc import Callable
from typing import Any


class Forked:
    """``fn(after)`` running in a forked child. The child sends ("ok", its return value), ("error", the exception it
    raised) or ("crash", a description of one that would not pickle), then runs the callables ``fn`` appended to
    ``after`` (work the parent need not wait for, such as a cache write), then exits without running the parent's
    atexit handlers or flushing its buffers. ``quiet_stderr``: the child's stderr goes to /dev/null too (its stdout
    always does: it must not reach the parent's report)."""

    def __init__(self, fn: Callable[[list[Callable[[], None]]], Any], quiet_stderr: bool = False) -> None:
        read_end, write_end = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns
            os.close(read_end)
            _child(write_end, fn, quiet_stderr)
        os.close(write_end)
        self.pipe = read_end
        self.outcome: tuple[str, Any] | None = None
        self.reaped = False

    def answer(self) -> tuple[str, Any]:
        """("ok", value), ("error", exception) or ("crash", text), once the child has sent it (or died: "crash")."""
        if self.outcome is None:
            chunks = []
            try:
                with os.fdopen(self.pipe, "rb") as pipe:
                    while chunk := pipe.read(1 << 20):
                        chunks.append(chunk)
                outcome = pickle.loads(b"".join(chunks)) if chunks else ("crash", "the child ended without an answer")
            except Exception as exc:
                outcome = ("crash", f"the child's answer could not be read ({type(exc).__name__})")
            self.outcome = outcome
        return self.outcome

    @property
    def answered(self) -> bool:
        return self.outcome is not None

    def end(self, wait: bool) -> None:
        """Reap the child: ``wait`` for it to finish what it does after answering, else kill it first. Idempotent."""
        if self.reaped:
            return
        self.reaped = True
        try:
            if not wait:
                os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except OSError:
            pass
        if self.outcome is None:
            try:
                os.close(self.pipe)
            except OSError:
                pass


def _child(fd: int, fn: Callable[[list[Callable[[], None]]], Any], quiet_stderr: bool) -> None:
    code = 0
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1, 2) if quiet_stderr else (0, 1):
            os.dup2(devnull, target)
        after: list[Callable[[], None]] = []
        try:
            outcome: tuple[str, Any] = ("ok", fn(after))
        except BaseException as exc:  # the parent decides what it means
            outcome = ("error", exc)
        try:
            data = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            data = pickle.dumps(("crash", f"{type(outcome[1]).__name__}: {outcome[1]}"))
        with os.fdopen(fd, "wb") as pipe:
            pipe.write(data)
        for work in after:
            work()
    except BaseException:
        code = 1
    finally:
        os._exit(code)
