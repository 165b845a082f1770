"""Parse a large local checkpoint's safetensors headers on two cores: a forked child parses the later shards while
this process parses the index and the earlier ones.

Decoding JSON holds the interpreter lock, so a thread would run after the main one, not beside it; a forked child
runs on another core. Kimi-K3 (497,220 tensors, 96 shards) has 76 MB of headers and a 59 MB index, each over a
second of parsing and validating in one process.

The child starts before the index is read, on the shard list a folder listing suggests (the ``*.safetensors``
files, sorted: what ``index_shards`` returns for every sharded checkpoint that holds nothing else), and runs the very
function the serial read runs on its shards, in order, stopping at the first failure. Its headers come back as
columns (``prefetch._columns``), and count only if the index names exactly the listed shards and every shard before
them read without error. Anything else (another shard list, a failure in the child, a child that dies or answers
garbage) is read again here, serially, so the result, and the first error with its message and exit code, are those
of the serial read by construction.

Linux only (where it is measured, and fork is safe: see ``prefetch.FORK``), only from a process with no other thread
(a forked child would inherit locks held by threads that do not exist in it) and allowed on two CPUs at least;
elsewhere the read is serial.
"""

from __future__ import annotations

import os
import stat
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from hfmem.hub.header import MAX_HEADER_BYTES, FileHeader

FORK = sys.platform.startswith("linux")  # False: always serial (tests compare the two)
# An index this large (about 170k tensor names) is where forking pays: DeepSeek-V3's 8.6 MB index (92k tensors)
# read in 0.31 s split instead of 0.33 s, for 0.1 s more CPU, no faster end to end.
MIN_INDEX_BYTES = 16_000_000
# The share of the header bytes this process parses itself. It parses the index first (about as long as 40 % of
# the headers on Kimi-K3 and DeepSeek-V3); the child's part costs it ~25 % more to pack, pickle and rebuild, and a
# child sharing its core with another job is slower still: at 0.35 the parent waited 0.1-0.8 s for Kimi-K3's child.
PARENT_SHARE = 0.4


def start(folder: Path, index_path: Path,
          read: Callable[[list[str]], list[FileHeader]]) -> tuple[ShardChild | None, int, list[str]]:
    """(a child running ``read`` on the later listed shards, the position where they start, the listing), or
    (None, 0, []) where forking does not pay (a small index) or is not safe."""
    if not (FORK and threading.active_count() == 1 and _cores() >= 2):
        return None, 0, []
    try:
        if index_path.stat().st_size < MIN_INDEX_BYTES:
            return None, 0, []
        # what index_shards returns when the index names every *.safetensors file of the folder
        listed = sorted(p.name for p in folder.glob("*.safetensors"))
    except OSError:
        return None, 0, []
    child_from = _split_point(folder, listed)
    if not 0 < child_from < len(listed):
        return None, 0, []
    later = listed[child_from:]
    return ShardChild(lambda: read(later)), child_from, listed


def _cores() -> int:
    """CPUs this process may run on (taskset, cgroup cpusets): with one, a child only takes turns with the parent."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _split_point(folder: Path, listed: list[str]) -> int:
    """Where the child's shards start: after PARENT_SHARE of the header bytes (each shard's 8-byte length prefix;
    shards are cut by tensor bytes, so their headers differ in size). A shard whose prefix cannot be read counts as
    empty here; the read proper reports it."""
    sizes = [_header_length(folder / name) for name in listed]
    target, running = PARENT_SHARE * sum(sizes), 0
    for i, size in enumerate(sizes):
        if running + size / 2 > target:
            return max(1, i)
        running += size
    return len(listed)


def _header_length(path: Path) -> int:
    # non-blocking and regular files only: a FIFO or device among the shards must not hang or feed this
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return 0
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return 0
        prefix = os.read(fd, 8)
    except OSError:
        return 0
    finally:
        os.close(fd)
    return min(int.from_bytes(prefix, "little"), MAX_HEADER_BYTES) if len(prefix) == 8 else 0


class ShardChild:
    """A forked child (hfmem.hub.forked) running ``read()`` (the serial read of some shards), answering with its
    headers as columns or with a failure, which the caller then reproduces by reading those shards itself."""

    def __init__(self, read: Callable[[], list[FileHeader]]) -> None:
        from hfmem.hub.forked import Forked
        from hfmem.hub.prefetch import _columns

        self.child = Forked(lambda after: _columns(read()), quiet_stderr=True)
        self.pid = self.child.pid

    def result(self) -> list[FileHeader] | None:
        """The child's headers, or None when it failed, died or answered something unreadable."""
        from hfmem.hub.prefetch import _headers

        try:
            kind, value = self.child.answer()
        finally:
            self.close()
        if kind != "ok":
            return None
        try:
            return _headers(*value)
        except Exception:
            return None

    def close(self) -> None:
        """End the child (whatever it is doing) and reap it; idempotent."""
        self.child.end(wait=False)
