"""GGUF headers (llama.cpp / Ollama / LM Studio files): parse metadata and tensor infos, never tensor data.

Layout (ggml/docs/gguf.md): magic "GGUF", u32 version (2 or 3), u64 tensor_count, u64 kv_count, kv pairs
(gguf string key, u32 value type, value), then tensor infos (name, u32 n_dims, u64 dims[n_dims], u32 ggml type,
u64 offset). Weight bytes per ggml type: ``hfmem.gguf.ggml``. The remote reader fetches the header with range
requests in growing chunks, because metadata (tokenizer arrays) can be megabytes.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hfmem.errors import MalformedHeader
from hfmem.gguf.ggml import GGML_TYPES

if TYPE_CHECKING:
    from hfmem.hub.remote import HubContext

_MAGIC = b"GGUF"
_MAX_TENSORS = 10_000_000
_MAX_KV = 1_000_000
_MAX_STRING = 64 * 2**20
_MAX_DIMS = 8
_MAX_HEADER = 512 * 2**20
_KEEP_ARRAY = 64  # longer arrays (tokenizer vocab) are skipped, only their length kept

# value types: fmt for fixed-size scalars
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True, slots=True)
class GGUFTensor:
    name: str
    ggml_type: str
    shape: tuple[int, ...]
    numel: int
    nbytes: int


@dataclass
class GGUFHeader:
    file: str
    version: int
    metadata: dict[str, Any]
    tensors: list[GGUFTensor]
    header_bytes: int
    array_lengths: dict[str, int] = field(default_factory=dict)

    @property
    def parameters(self) -> int:
        return sum(t.numel for t in self.tensors)

    @property
    def weight_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)

    def by_type(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tensors:
            out[t.ggml_type] = out.get(t.ggml_type, 0) + t.numel
        return dict(sorted(out.items()))


class _Reader:
    """Sequential reader over a byte source ``fetch(offset, size) -> bytes`` with a growing buffer."""

    def __init__(self, fetch: Callable[[int, int], bytes], file: str, first_chunk: int = 1 << 20):
        self.fetch = fetch
        self.file = file
        self.buf = b""
        self.pos = 0
        self.chunk = first_chunk
        self.eof = False

    def _need(self, n: int) -> None:
        while len(self.buf) - self.pos < n:
            if self.eof:
                raise MalformedHeader(f"{self.file}: GGUF header truncated at byte {len(self.buf)}")
            if len(self.buf) > _MAX_HEADER:
                raise MalformedHeader(f"{self.file}: GGUF header larger than {_MAX_HEADER} bytes")
            data = self.fetch(len(self.buf), self.chunk)
            if len(data) < self.chunk:
                self.eof = True
            self.buf += data
            self.chunk = min(self.chunk * 2, 64 << 20)

    def take(self, n: int) -> bytes:
        self._need(n)
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self, what: str) -> str:
        n = self.unpack("<Q")
        if n > _MAX_STRING:
            raise MalformedHeader(f"{self.file}: {what} string of {n} bytes is too long")
        raw = self.take(n)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedHeader(f"{self.file}: {what} is not UTF-8") from None

    def skip(self, n: int) -> None:
        self._need(n)
        self.pos += n


def _value(r: _Reader, vtype: int, key: str, lengths: dict[str, int]) -> Any:
    if vtype in _SCALARS:
        return r.unpack(_SCALARS[vtype])
    if vtype == _STRING:
        return r.string(key)
    if vtype == _ARRAY:
        etype = r.unpack("<I")
        count = r.unpack("<Q")
        if count > 100_000_000:
            raise MalformedHeader(f"{r.file}: array {key!r} declares {count} elements")
        lengths[key] = count
        if etype in _SCALARS and count > _KEEP_ARRAY:
            r.skip(count * struct.calcsize(_SCALARS[etype]))
            return None
        items = []
        for _ in range(count):
            item = _value(r, etype, key, lengths) if etype != _ARRAY else _value(r, _ARRAY, key, {})
            if count <= _KEEP_ARRAY:
                items.append(item)
        return items if count <= _KEEP_ARRAY else None
    raise MalformedHeader(f"{r.file}: unknown GGUF value type {vtype} for key {key!r}")


def parse_gguf(fetch: Callable[[int, int], bytes], file: str, first_chunk: int = 1 << 20) -> GGUFHeader:
    r = _Reader(fetch, file, first_chunk)
    if r.take(4) != _MAGIC:
        raise MalformedHeader(f"{file}: not a GGUF file (bad magic)")
    version = r.unpack("<I")
    if version not in (2, 3):
        raise MalformedHeader(f"{file}: unsupported GGUF version {version}")
    n_tensors = r.unpack("<Q")
    n_kv = r.unpack("<Q")
    if n_tensors > _MAX_TENSORS or n_kv > _MAX_KV:
        raise MalformedHeader(f"{file}: implausible counts ({n_tensors} tensors, {n_kv} keys)")
    metadata: dict[str, Any] = {}
    lengths: dict[str, int] = {}
    for _ in range(n_kv):
        key = r.string("key")
        metadata[key] = _value(r, r.unpack("<I"), key, lengths)
    tensors = []
    for _ in range(n_tensors):
        name = r.string("tensor name")
        n_dims = r.unpack("<I")
        if n_dims > _MAX_DIMS:
            raise MalformedHeader(f"{file}: tensor {name!r} has {n_dims} dimensions")
        dims = tuple(r.unpack("<Q") for _ in range(n_dims))
        type_id = r.unpack("<I")
        r.unpack("<Q")  # data offset, not needed
        if type_id not in GGML_TYPES:
            raise MalformedHeader(f"{file}: tensor {name!r} has unknown ggml type {type_id}")
        type_name, block, size = GGML_TYPES[type_id]
        numel = 1
        for d in dims:
            numel *= d
        if numel > 2**63 - 1:
            raise MalformedHeader(f"{file}: tensor {name!r} shape overflows int64")
        if dims and dims[0] % block:
            raise MalformedHeader(f"{file}: tensor {name!r} row of {dims[0]} is not a multiple of the {type_name} block {block}")
        # GGUF lists dims innermost first; report them in torch order.
        tensors.append(GGUFTensor(name, type_name, tuple(reversed(dims)), numel, numel // block * size))
    return GGUFHeader(file, version, metadata, tensors, r.pos, lengths)


def read_local_gguf(path: str | os.PathLike[str], named: str | None = None) -> GGUFHeader:
    """The header of a local .gguf file: a regular file only (hfmem.hub.local.open_regular), read errors as
    LocalPathError naming `named` (the path the user gave)."""
    from hfmem.errors import LocalPathError
    from hfmem.hub.local import open_regular

    file = Path(path)
    named = named or str(path)
    with open_regular(file, named) as fh:

        def fetch(offset: int, size: int) -> bytes:
            try:
                fh.seek(offset)
                return fh.read(size)
            except OSError as exc:
                raise LocalPathError(f"{named}: cannot read {file.name!r} ({exc.strerror or type(exc).__name__})", path=str(file)) from None

        return parse_gguf(fetch, file.name)


def remote_fetcher(ctx: HubContext, filename: str, revision: str | None, counter: list[int] | None = None) -> Callable[[int, int], bytes]:
    """Range reads through the Hub context's bounded GET (huggingface_hub's session, URL builder, auth headers)."""
    url = ctx.file_url(filename, revision)

    def fetch(offset: int, size: int) -> bytes:
        # get_once stops reading at offset + size decoded bytes: a server that ignores Range (200 with the whole
        # file from byte 0) or sends a compressed body that expands without bound never costs the weights.
        data, response = ctx.get_once(url, offset + size, {"Range": f"bytes={offset}-{offset + size - 1}"})
        if response.status_code == 416:
            return b""
        if counter is not None:
            counter.append(size)
        return bytes(data[offset : offset + size] if response.status_code == 200 else data[:size])

    return fetch
