"""Parse and validate safetensors headers (8-byte little-endian length + UTF-8 JSON), never the data."""

# Validation mirrors the safetensors reader (safetensors, src/tensor.rs: Metadata::validate): every entry has a
# known-shaped dtype/shape/data_offsets, offsets are contiguous from 0 in order, and ``end - begin`` equals
# ``numel * bits / 8``. Nothing here allocates in proportion to a declared shape.

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any

from hfmem.errors import MalformedHeader
from hfmem.model.dtypes import dtype_bits

# The safetensors crate refuses headers over 100 MB; huggingface_hub refuses over 25 MB.
MAX_HEADER_BYTES = 100_000_000
_INT64_MAX = 2**63 - 1
# Tensor data a single file may claim: 16 TiB. The largest real single files are a few hundred GB (a 70B model
# in FP32 in one file is 280 GB), so this only refuses offsets that cannot describe a real file.
MAX_FILE_DATA_BYTES = 2**44


# Not frozen: a frozen dataclass's __init__ sets each field through object.__setattr__, 8x the cost of a plain slots
# one, and there is one of these per stored tensor (500k in the largest checkpoints). Treated as immutable all the
# same; unsafe_hash keeps them hashable and comparable by value.
@dataclass(slots=True, unsafe_hash=True)
class TensorEntry:
    name: str
    dtype: str
    shape: tuple[int, ...]
    numel: int
    nbytes: int
    file: str


@dataclass(frozen=True)
class FileHeader:
    file: str
    tensors: tuple[TensorEntry, ...]
    metadata: dict[str, str]
    warnings: tuple[str, ...] = ()


def header_length(prefix: bytes | bytearray, file: str, file_size: int | None = None) -> int:
    """Length N of the JSON header from the first 8 bytes, checked against the format's limit and the file."""
    if len(prefix) < 8:
        raise MalformedHeader(f"{file}: not a safetensors file (shorter than the 8-byte header length)", path=file)
    (length,) = struct.unpack("<Q", prefix[:8])
    if length > MAX_HEADER_BYTES:
        raise MalformedHeader(f"{file}: header length {length} exceeds the 100 MB safetensors limit", path=file)
    if file_size is not None and 8 + length > file_size:
        raise MalformedHeader(f"{file}: header length {length} is larger than the file ({file_size} bytes)", path=file)
    return length


def parse_header_bytes(raw: bytes | bytearray, file: str, file_size: int | None = None) -> FileHeader:
    """Parse the JSON part of a header (without the 8-byte prefix); `file_size`, when known, is the whole file's."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedHeader(f"{file}: header is not valid UTF-8 (byte {exc.start})", path=file) from None
    obj, plain = loads_header_json(text, file, _entries_of_header)
    return validate_header(obj, file, _data_bytes(file_size, len(raw)), plain)


def _entries_of_header(obj: Any) -> int:
    return len(obj) - ("__metadata__" in obj) if isinstance(obj, dict) else 0


def loads_header_json(text: str, file: str, count_entries: Callable[[Any], int]) -> tuple[Any, bool]:
    """(decoded JSON, whether every number in it is a plain integer and it holds no true/false). `count_entries`
    says how many tensor entries the decoded value holds (one header, or every header of a one-shot answer).

    Duplicate keys are refused, as the safetensors reader does. Checking every object with an object_pairs_hook
    costs a Python call per tensor; instead the text's counts of the keys "data_offsets", "dtype" and "shape" are
    compared with the entries decoded: a duplicate tensor name, or a duplicate key inside an entry, leaves more
    occurrences than entries. These quoted words cannot occur inside a JSON string (a quote there is escaped), so
    equal counts mean no duplicate among the entries; any difference re-parses with the hook, which names the
    duplicate or finds none. (A duplicate key inside __metadata__, strings only, is not looked for.)
    """
    floats: list[str] = []

    def note_float(literal: str) -> float:
        floats.append(literal)
        return float(literal)

    try:
        obj = json.loads(text, parse_float=note_float)
    except (ValueError, RecursionError) as exc:
        raise MalformedHeader(f"{file}: header is not JSON ({str(exc)[:80]})", path=file) from None
    entries = count_entries(obj)
    if any(text.count(key) != entries for key in ('"data_offsets"', '"dtype"', '"shape"')):
        try:
            obj = json.loads(text, object_pairs_hook=_reject_duplicates)
        except _DuplicateKey as exc:
            raise MalformedHeader(f"{file}: duplicate tensor name {str(exc.args[0])[:120]!r} in header", path=file) from None
    plain = not floats and "true" not in text and "false" not in text
    return obj, plain


def _data_bytes(file_size: int | None, header_len: int) -> int | None:
    """Bytes after the header, or None when unknown or when the file is a header-only stub (no data at all, as the
    test fixtures are): only a file that holds data can be too short for its offsets."""
    if file_size is None or file_size <= 8 + header_len:
        return None
    return file_size - 8 - header_len


def parse_file_bytes(data: bytes, file: str, file_size: int | None = None) -> FileHeader:
    """Parse a header from the first bytes of a safetensors file (8-byte prefix + JSON; the rest is ignored)."""
    length = header_length(data[:8], file, file_size)
    raw = data[8 : 8 + length]
    if len(raw) < length:
        raise MalformedHeader(f"{file}: header truncated ({len(raw)} of {length} bytes)", path=file)
    return parse_header_bytes(raw, file, file_size)


def read_local_header(path: Path, file: str | None = None) -> FileHeader:
    """Read only the first 8 + N bytes of a local safetensors file."""
    name = file or path.name
    size = path.stat().st_size
    with open(path, "rb") as fh:
        length = header_length(fh.read(8), name, size)
        raw = fh.read(length)
    if len(raw) < length:
        raise MalformedHeader(f"{name}: header truncated ({len(raw)} of {length} bytes)", path=name)
    return parse_header_bytes(raw, name, size)


class _DuplicateKey(Exception):
    pass


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def tensor_entry(name: str, dtype: Any, shape: Any, nbytes: Any, file: str) -> TensorEntry:
    """One tensor, checked by the rules of the safetensors reader (safetensors, src/tensor.rs: Metadata::validate):
    a list of non-negative integer dimensions whose product fits int64, and a byte size that is the product times
    the dtype's bits / 8. A dtype hfmem does not know needs 1 to 64 bits an element, or the shape is not this span's.
    Fresh headers and the digest cache (hfmem.hub.digest) both go through here, so a cached entry obeys the same rules.
    """
    where = f"{file}: tensor {name[:120]!r}"
    if not isinstance(dtype, str):
        raise MalformedHeader(f"{where}: dtype is not a string", path=file)
    if not isinstance(shape, list) or not all(_is_int(d) for d in shape):
        raise MalformedHeader(f"{where}: shape must be a list of integers", path=file)
    numel = 1
    for d in shape:
        if d < 0:
            raise MalformedHeader(f"{where}: negative dimension in shape {str(shape)[:80]}", path=file)
        numel *= d
        if numel > _INT64_MAX:
            raise MalformedHeader(f"{where}: shape product overflows int64", path=file)
    if not _is_int(nbytes) or nbytes < 0:
        raise MalformedHeader(f"{where}: invalid byte size {str(nbytes)[:40]}", path=file)
    if nbytes > MAX_FILE_DATA_BYTES:
        raise MalformedHeader(f"{where}: {nbytes} bytes, beyond the 16 TiB a file can hold", path=file)
    bits = dtype_bits(dtype)
    if bits is None:
        if not numel <= nbytes * 8 <= numel * 64:
            raise MalformedHeader(
                f"{where}: unknown dtype {dtype[:40]!r} with shape {str(shape)[:80]} ({numel} elements) in {nbytes} "
                "bytes: not 1 to 64 bits an element",
                path=file,
            )
    elif numel * bits != nbytes * 8:
        raise MalformedHeader(
            f"{where}: data_offsets span {nbytes} bytes but shape {str(shape)[:80]} of {dtype} needs {numel * bits / 8:g}",
            path=file,
        )
    return TensorEntry(name, dtype, tuple(shape), numel, nbytes, file)


_by_offsets = itemgetter(0, 1)


def _checked_entry(name: str, info: Any, file: str) -> TensorEntry:
    """One entry of a header, every rule checked, with an error naming the file and the tensor."""
    where = f"{file}: tensor {name[:120]!r}"
    if not isinstance(info, dict):
        raise MalformedHeader(f"{where}: entry is not an object", path=file)
    for key in ("dtype", "shape", "data_offsets"):
        if key not in info:
            raise MalformedHeader(f"{where}: missing {key!r}", path=file)
    offsets = info["data_offsets"]
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_int(o) for o in offsets)):
        raise MalformedHeader(f"{where}: data_offsets must be two integers", path=file)
    begin, end = offsets
    if begin < 0 or end < begin:
        raise MalformedHeader(f"{where}: invalid data_offsets {str(offsets)[:80]}", path=file)
    if end > MAX_FILE_DATA_BYTES:
        raise MalformedHeader(f"{where}: data_offsets end at {end} bytes, beyond the 16 TiB a file can hold", path=file)
    return tensor_entry(name, info["dtype"], info["shape"], end - begin, file)


def validate_header(obj: Any, file: str, data_bytes: int | None = None, plain: bool = False) -> FileHeader:
    """Validate a decoded header object and turn it into tensor entries (sorted by data offset).

    `data_bytes`: the bytes the file holds after its header, when known; the offsets must end within them.
    `plain`: the JSON held no float and no true/false (loads_header_json), so a shape that equals one already checked
    is the same list of integers (1.0 and True would compare equal to 1): checked once per (dtype, shape, bytes).
    """
    if not isinstance(obj, dict):
        raise MalformedHeader(f"{file}: header is not a JSON object", path=file)
    metadata = obj.get("__metadata__", {})
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise MalformedHeader(f"{file}: __metadata__ must map strings to strings", path=file)
    unknown: dict[str, int] = {}
    entries: list[tuple[int, int, TensorEntry]] = []
    # (dtype, shape, nbytes) -> (numel, shape): for plain JSON only; the entries of one shape share its tuple (a few
    # hundred tuples instead of one per tensor)
    checked: dict[tuple[Any, ...], tuple[int, tuple[int, ...]]] = {}
    for name, info in obj.items():
        if name == "__metadata__":
            continue
        if plain and type(info) is dict and len(info) == 3:
            try:
                dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
                hit = checked.get((dtype, tuple(shape), end - begin))
            except (KeyError, TypeError, ValueError):
                hit = None
            if hit is not None and 0 <= begin <= end <= MAX_FILE_DATA_BYTES:
                entries.append((begin, end, TensorEntry(name, dtype, hit[1], hit[0], end - begin, file)))
                continue
        entry = _checked_entry(name, info, file)
        begin, end = info["data_offsets"]
        if dtype_bits(entry.dtype) is None:
            unknown[entry.dtype] = unknown.get(entry.dtype, 0) + 1
        elif plain:
            checked[(entry.dtype, entry.shape, entry.nbytes)] = (entry.numel, entry.shape)
        entries.append((begin, end, entry))
    entries.sort(key=_by_offsets)
    position = 0
    for begin, end, entry in entries:
        if begin != position:
            kind = "overlapping" if begin < position else "gapped"
            raise MalformedHeader(f"{file}: tensor {entry.name[:120]!r} has {kind} data_offsets (starts at {begin}, expected {position})", path=file)
        position = end
    if data_bytes is not None and position > data_bytes:
        raise MalformedHeader(
            f"{file}: tensor data ends at byte {position} but the file holds {data_bytes} bytes after its header", path=file
        )
    warnings = tuple(
        f"{file}: {n} tensor(s) of unknown dtype {dtype[:40]!r}; stored bytes from data_offsets, elements from the shape"
        for dtype, n in unknown.items()
    )
    return FileHeader(file, tuple(e for _, _, e in entries), dict(metadata), warnings)
