"""The one-shot safetensors-metadata answer decoded shard by shard (hfmem/hub/answer.py) gives what decoding it whole
gives: the same headers on every sharded fixture, and on hostile answers the same error (the shard-by-shard walk
steps aside, so the whole-answer path raises it)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hfmem.errors import MalformedHeader
from hfmem.hub.answer import decode_answer, decode_by_shard, decode_whole
from stubs import DTYPE_BITS, fixture_repo_ids, load_inventory


def _shards(repo_id: str) -> dict[str, dict[str, Any]]:
    """Each shard's header object, as the Hub's answer carries it (stored order, offsets from 0)."""
    shards: dict[str, dict[str, Any]] = {}
    offsets: dict[str, int] = {}
    for name, dtype, shape, file in load_inventory(repo_id)["tensors"]:
        numel = 1
        for d in shape:
            numel *= d
        size = numel * DTYPE_BITS[dtype] // 8
        start = offsets.get(file, 0)
        header = shards.setdefault(file, {"__metadata__": {"format": "pt"}})
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [start, start + size]}
        offsets[file] = start + size
    return shards


# sharded fixtures small enough to decode twice in a test (the largest, 90k-500k tensors, take seconds each)
def _small_sharded(repo_id: str) -> bool:
    tensors = load_inventory(repo_id)["tensors"]
    return len(tensors) < 40_000 and len({t[3] for t in tensors}) > 1


SHARDED = [r for r in fixture_repo_ids() if _small_sharded(r)]
SMALL = "Qwen/Qwen2-7B-Instruct"


def _facts(decoded: tuple[list, dict[str, Any]]) -> tuple[list, dict[str, Any]]:
    headers, index = decoded
    return [(h.file, h.tensors, h.metadata, h.warnings) for h in headers], index


def _outcome(decode, text: str) -> Any:
    try:
        return _facts(decode(text))
    except MalformedHeader as exc:
        return ("error", exc.message, exc.exit_code)


def test_every_sharded_fixture_decodes_alike_and_by_shard():
    assert len(SHARDED) >= 20
    for repo in SHARDED:
        answer = {"index": {"metadata": {"total_size": 1}}, "headers": _shards(repo)}
        texts = [json.dumps(answer), json.dumps(answer, separators=(",", ":"))]
        if repo == SMALL:  # whitespace anywhere JSON allows it, the keys in the other order
            texts += [json.dumps(answer, indent=2), json.dumps({"headers": answer["headers"], "index": answer["index"]}) + "\n"]
        for text in texts:
            by_shard = decode_by_shard(text)
            assert by_shard is not None, repo  # the honest answer takes the shard-by-shard path
            assert _facts(by_shard) == _facts(decode_whole(text)), repo


def _variants() -> dict[str, str]:
    shards = _shards(SMALL)
    first, second = sorted(shards)[:2]
    name = next(n for n in shards[first] if n != "__metadata__")
    entry = json.dumps(shards[first][name])
    honest = json.dumps({"index": {"metadata": {}}, "headers": shards})

    def edited(**changes: Any) -> str:
        copy = json.loads(honest)
        for path, value in changes.items():
            node = copy["headers"][first][name]
            node[path] = value
        return json.dumps(copy)

    odd = json.loads(honest)
    odd["headers"][first]['we}}ird "dtype" true, name\\'] = odd["headers"][first].pop(name)
    odd["headers"][second]["__metadata__"] = {"note": "1.5 false }}"}
    unicode_shard = json.loads(honest)
    unicode_shard["headers"]["modèle-\u2028.safetensors"] = unicode_shard["headers"].pop(second)
    # a shape equal to one checked before in the shard: validate_header's plain-JSON shortcut would take [true] and
    # [1.0] for [1]; only the per-shard float and true/false checks keep the shortcut off them
    tiny = '{"index": {}, "headers": {"a": {"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, ' \
           '"y": {"dtype": "F32", "shape": [%s], "data_offsets": [4, 8]}}, "b": {"z": {"dtype": "F32", "shape": [1], ' \
           '"data_offsets": [0, 4]}}}}'
    return {
        "tiny": tiny % "1",
        "true for 1 in a repeated shape": tiny % "true",
        "1.0 for 1 in a repeated shape": tiny % "1.0",
        "honest": honest,
        "odd names and metadata": json.dumps(odd),
        "non-ASCII shard name": json.dumps(unicode_shard, ensure_ascii=False),
        "escaped shard name": json.dumps(unicode_shard),
        "float in the index": honest.replace('"index": {"metadata": {}}', '"index": {"metadata": {"total_size": 1.5}}', 1),
        "float in a shape": edited(shape=[float(d) for d in shards[first][name]["shape"]]),
        "true in a shape": honest.replace(entry, entry.replace('"shape": [', '"shape": [true, ', 1), 1),
        "NaN offset": honest.replace(entry, entry.replace('"data_offsets": [0,', '"data_offsets": [NaN,', 1), 1),
        "negative dimension": edited(shape=[-1]),
        "gapped offsets": edited(data_offsets=[8, 8 + shards[first][name]["data_offsets"][1]]),
        "duplicate dtype in an entry": honest.replace(entry, entry.replace('{"dtype"', '{"dtype": "F64", "dtype"', 1), 1),
        "duplicate tensor": honest.replace(f'"{name}": {entry}', f'"{name}": {entry}, "{name}": {entry}', 1),
        "duplicate shard": honest.replace(f'"{second}": ', f'"{first}": ', 1),
        "duplicate headers": honest[:-1] + ', "headers": {}}',
        "duplicate index": honest[:-1] + ', "index": {}}',
        "extra top-level key": honest[:-1] + ', "other": 1}',
        "no index": json.dumps({"headers": shards}),
        "index not an object": json.dumps({"index": [], "headers": shards}),
        "headers not an object": json.dumps({"index": {}, "headers": list(shards)}),
        "a shard that is a list": honest.replace(f'"{second}": {{', f'"{second}": [{{', 1).replace('}}}', '}]}}', 1),
        "an empty shard": json.dumps({"index": {}, "headers": {**shards, "z.safetensors": {}}}),
        "no shards": json.dumps({"index": {}, "headers": {}}),
        "empty object": "{}",
        "trailing comma": honest[:-2] + "},}",
        "trailing data": honest + " []",
        "truncated": honest[: len(honest) // 2],
        "a byte-order mark": "\ufeff" + honest,
        "not an object": json.dumps([honest]),
        "deeply nested": '{"index": {}, "headers": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}",
    }


@pytest.mark.parametrize("case", list(_variants()))
def test_hostile_answers_decode_as_the_whole_answer_does(case):
    text = _variants()[case]
    assert _outcome(decode_answer, text) == _outcome(decode_whole, text)


def test_the_walk_steps_aside_where_the_whole_answer_path_must_decide():
    variants = _variants()
    for case in ("duplicate tensor", "duplicate dtype in an entry", "duplicate shard", "duplicate headers",
                 "extra top-level key", "trailing comma", "gapped offsets", "a byte-order mark"):
        assert decode_by_shard(variants[case]) is None, case
    for case in ("honest", "odd names and metadata", "non-ASCII shard name", "float in the index", "no shards"):
        assert decode_by_shard(variants[case]) is not None, case
