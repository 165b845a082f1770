"""The one-shot safetensors-metadata answer (``{"index": {...}, "headers": {shard: header, ...}}``) decoded and
validated one shard header at a time.

Decoding the whole answer first holds every shard's JSON objects at once (DeepSeek-V3: 91,991 entries, each a dict,
two lists and their numbers, ~60 MB) before any is validated. Decoded and validated shard by shard, the objects of
one shard are freed before the next is decoded, so the same memory is reused while it is still in the CPU's caches
and no new pages are faulted in: on DeepSeek-V3's 12.7 MB answer 0.185 s -> 0.148 s of CPU and 19,200 -> 6,700 page
faults (decoding, the duplicate-key counts and validation; the development machine).

``decode_by_shard`` walks the answer's two outer objects and decodes each key and value with the JSON module's own
decoder (json/decoder.py: ``JSONDecoder.raw_decode``, the scanner ``json.loads`` runs) and returns what the whole-answer path returns, or None
wherever the two could differ: anything but exactly "index" and "headers" at the top, a shard named twice, a value
that is not an object, a JSON or validation error, or key counts that call for the duplicate-key re-parse
(header.loads_header_json). The caller then runs the whole-answer path, so every error keeps its message and exit
code. The plain-JSON shortcut of header.validate_header is decided per shard (no float and no true/false in that
shard's own text), which is all the shortcut relies on: it compares one shard's entries with each other.
"""

from __future__ import annotations

import json
import re
from typing import Any

from hfmem.errors import MalformedHeader
from hfmem.hub.header import FileHeader, loads_header_json, validate_header

_SPACE = re.compile(r"[ \t\n\r]*")  # JSON's whitespace (RFC 8259, section 2)
_DUPLICATE_KEYS = ('"data_offsets"', '"dtype"', '"shape"')  # what loads_header_json counts


class _Shape(Exception):
    """The answer is not in the shape decoded here: the whole-answer path decides."""


def decode_answer(text: str) -> tuple[list[FileHeader], dict[str, Any]]:
    """(the validated shard headers sorted by name, the answer's index object): decode_by_shard, else decode_whole."""
    return decode_by_shard(text) or decode_whole(text)


def decode_whole(text: str) -> tuple[list[FileHeader], dict[str, Any]]:
    """The whole answer decoded at once, then each shard validated in name order: the reference decode_by_shard
    returns the same as, and where it returns None, the one that raises the error."""
    body, plain = loads_header_json(text, "safetensors-metadata", entries_of_answer)
    if not isinstance(body, dict):
        raise MalformedHeader("safetensors-metadata: expected a JSON object")
    shard_headers, index = body.get("headers"), body.get("index")
    if not isinstance(shard_headers, dict) or not isinstance(index, dict):
        raise MalformedHeader("safetensors-metadata: expected 'headers' and 'index' objects")
    return [validate_header(shard_headers[name], name, None, plain) for name in sorted(shard_headers)], index


def entries_of_answer(body: Any) -> int:
    """Tensor entries of a one-shot answer: every header's keys but its __metadata__."""
    headers = body.get("headers") if isinstance(body, dict) else None
    if not isinstance(headers, dict):
        return 0
    return sum(len(h) - ("__metadata__" in h) for h in headers.values() if isinstance(h, dict))


def decode_by_shard(text: str) -> tuple[list[FileHeader], dict[str, Any]] | None:
    """What decode_whole returns, or None (see the module docstring)."""
    floats: list[str] = []

    def note_float(literal: str) -> float:
        floats.append(literal)
        return float(literal)

    scan = json.JSONDecoder(parse_float=note_float).raw_decode  # one JSON value at a position: (value, end)
    index: dict[str, Any] | None = None
    headers: dict[str, FileHeader] | None = None
    entries = 0
    try:
        pos = _expect(text, _SPACE.match(text).end(), "{")  # type: ignore[union-attr]
        while True:
            key, pos = _key(text, pos, scan)
            if key == "index" and index is None:
                index, pos = scan(text, pos)
                if not isinstance(index, dict):
                    return None
            elif key == "headers" and headers is None:
                pos = _expect(text, pos, "{")
                headers = {}
                while text[pos] != "}":
                    name, pos = _key(text, pos, scan)
                    start = pos
                    del floats[:]
                    header, pos = scan(text, pos)
                    if name in headers or type(header) is not dict:
                        return None
                    plain = not floats and text.find("true", start, pos) < 0 and text.find("false", start, pos) < 0
                    headers[name] = validate_header(header, name, None, plain)
                    entries += len(header) - ("__metadata__" in header)
                    del header
                    pos = _next(text, pos)
                pos += 1
            else:
                return None
            pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
            if text[pos] == "}":
                break
            pos = _expect(text, pos, ",")
        if index is None or headers is None or _SPACE.match(text, pos + 1).end() != len(text):  # type: ignore[union-attr]
            return None
    except Exception:  # _Shape, a JSON or validation error, or anything else: the whole-answer path decides
        return None
    if any(text.count(key) != entries for key in _DUPLICATE_KEYS):
        return None  # a duplicate key somewhere, or a count the whole-answer path re-parses to find out
    return [headers[name] for name in sorted(headers)], index


def _expect(text: str, pos: int, char: str) -> int:
    """The position after ``char`` at ``pos`` and the whitespace that follows it."""
    if text[pos] != char:
        raise _Shape
    return _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]


def _key(text: str, pos: int, scan: Any) -> tuple[str, int]:
    """An object's key at ``pos`` (a JSON string), and the position of its value."""
    if text[pos] != '"':
        raise _Shape
    key, pos = scan(text, pos)
    return key, _expect(text, _SPACE.match(text, pos).end(), ":")  # type: ignore[union-attr]


def _next(text: str, pos: int) -> int:
    """After a member: the position of the next key, or of the closing brace."""
    pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
    if text[pos] == ",":
        pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
        if text[pos] != '"':
            raise _Shape  # a trailing comma: not JSON
        return pos
    if text[pos] != "}":
        raise _Shape
    return pos
