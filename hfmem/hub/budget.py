"""Bounds on what the Hub's answers may cost in memory: per answer, per model read, and in flight across the process.

Sizes count *decoded* bytes (what a gzip answer expands to), so a small compressed answer cannot cost more than a
large plain one. The limits come from the largest real repos, with margin: the 497,220-tensor Kimi-K3 checkpoint has
a 58 MB model.safetensors.index.json and 76 MB of shard headers over 96 files (its one-shot answer is about as large).
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

from hfmem.errors import MalformedHeader

MAX_INDEX_BYTES = 192_000_000  # one index file: 3.3x the largest real one
MAX_METADATA_BYTES = 256_000_000  # one one-shot answer (every shard header): 3.4x the largest real one
MAX_READ_BYTES = 384_000_000  # all answers of one model read together (index + headers): 2.8x the largest real
MAX_IN_FLIGHT_BYTES = 384_000_000  # bodies being received at once, by every read in the process (batch jobs share it)


class InFlight:
    """A byte semaphore: a body reserves its expected size before it is read and returns it when done.

    A reservation waits while others hold too much; one larger than the whole budget waits until nothing else is in
    flight, then proceeds alone, so every answer the per-answer limits allow can still be read.
    """

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.held = 0
        self._cond = threading.Condition()

    @contextmanager
    def hold(self, nbytes: int) -> Iterator[None]:
        nbytes = max(0, nbytes)
        with self._cond:
            self._cond.wait_for(lambda: self.held == 0 or self.held + nbytes <= self.capacity)
            self.held += nbytes
        try:
            yield
        finally:
            with self._cond:
                self.held -= nbytes
                self._cond.notify_all()


IN_FLIGHT = InFlight(MAX_IN_FLIGHT_BYTES)


class ReadTotal:
    """Decoded bytes received for one model read, all threads together; over MAX_READ_BYTES is exit 17."""

    def __init__(self, repo: str, limit: int = MAX_READ_BYTES):
        self.repo = repo
        self.limit = limit
        self.total = 0
        self._lock = threading.Lock()

    def add(self, nbytes: int) -> None:
        with self._lock:
            self.total += nbytes
            over = self.total > self.limit
        if over:
            raise MalformedHeader(
                f"{self.repo}: the Hub's answers for this model exceed {self.limit:,} bytes decoded (the largest real "
                "checkpoints need about a third of that); refused"
            )


def reservation(content_length: str | None, encoding: str, limit: int) -> int:
    """Bytes to reserve for a body: its length when it arrives uncompressed, else the most it may decode to."""
    if encoding == "identity" and content_length and content_length.isdigit():
        return min(int(content_length), limit)
    return limit


DECODABLE = ("identity", "gzip", "x-gzip", "deflate")
_STEP = 1 << 20  # decoded bytes per step: what one received chunk may add before the caller's limit is checked


MIN_RATE = 256 * 1024  # bytes/s on the wire that extend a body's deadline (a slow 2 Mbit/s link still gets there)


class BodyDecoder:
    """A body's bytes as received (identity) or decompressed a step at a time (gzip, deflate: RFC 9110 8.4.1), so a
    caller that stops at its limit never holds more than that plus one step."""

    def __init__(self, encoding: str):
        self.encoding = encoding
        # wbits 32 + MAX_WBITS: a gzip or zlib container, told apart by its header.
        self.inflater = None if encoding == "identity" else zlib.decompressobj(32 + zlib.MAX_WBITS)

    def feed(self, chunk: bytes) -> Iterator[bytes]:
        if self.inflater is None:
            yield chunk
            return
        data = chunk
        try:
            while data and not self.inflater.eof:
                out = self.inflater.decompress(data, _STEP)
                data = self.inflater.unconsumed_tail
                if out:
                    yield out
        except zlib.error as exc:
            raise MalformedHeader(f"answer is not valid {self.encoding} ({str(exc)[:60]})") from None
