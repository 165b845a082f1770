"""Header values that cannot describe a real file are exit 17 naming the file and tensor, through the installed CLI,
from a local folder and from the local Hub (range reads, where the Hub declares the file's size)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from entry import cli  # noqa: F401  (fixture)
from hub_server import RepoSpec

CONFIG = {
    "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 512,
    "max_position_embeddings": 256, "torch_dtype": "bfloat16",
}  # fmt: skip
GOOD = {"model.embed_tokens.weight": {"dtype": "BF16", "shape": [512, 64], "data_offsets": [0, 65536]}}


def _folder(tmp_path: Path, header: dict, data: bytes = b"") -> Path:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(CONFIG))
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return folder


@pytest.mark.parametrize(
    ("tensor", "needle"),
    [
        # An unknown dtype with a zero byte span once added 4.6e18 parameters.
        ({"dtype": "X9", "shape": [2**62], "data_offsets": [65536, 65536]}, "unknown dtype 'X9'"),
        ({"dtype": "BOOL", "shape": [2**50], "data_offsets": [65536, 65536 + 2**50]}, "beyond the 16 TiB"),
        ({"dtype": "U8", "shape": [4], "data_offsets": [65536, 2**64 + 5]}, "beyond the 16 TiB"),
    ],
)
def test_impossible_tensor_is_exit_17(tmp_path, cli, tensor, needle):
    r = cli([str(_folder(tmp_path, {**GOOD, "evil.weight": tensor}))])
    assert r.returncode == 17, (r.returncode, r.stderr)
    assert needle in r.stderr and "'evil.weight'" in r.stderr and "model.safetensors" in r.stderr
    assert r.stderr.count("\n") == 1


def test_plausible_unknown_dtype_is_counted_with_one_warning(tmp_path, cli):
    header = {**GOOD}
    for n in range(3):  # three tensors of a future 3-bit dtype: one warning with the count, not three
        header[f"future.{n}"] = {"dtype": "F3_NEW", "shape": [8], "data_offsets": [65536 + 3 * n, 65536 + 3 * n + 3]}
    r = cli([str(_folder(tmp_path, header)), "--format", "json"])
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["parameters"]["total"] == 512 * 64 + 24
    assert [w for w in out["warnings"] if "unknown dtype" in w] == [
        "model.safetensors: 3 tensor(s) of unknown dtype 'F3_NEW'; stored bytes from data_offsets, elements from the shape"
    ]


def test_offsets_past_the_end_of_a_file_with_data(tmp_path, cli):
    folder = _folder(tmp_path, GOOD, data=b"\0" * 1000)  # has data, but 64 KiB short of what the header claims
    r = cli([str(folder)])
    assert r.returncode == 17 and "tensor data ends at byte 65536 but the file holds 1000 bytes" in r.stderr, r.stderr


def test_offsets_past_the_declared_size_on_the_hub(hub_env, tmp_path, cli):
    folder = _folder(tmp_path, GOOD, data=b"\0" * 1000)
    hub_env.add_repo("org/short", RepoSpec(root=folder))
    sha = hub_env.repos["org/short"].sha
    for args in (["org/short"], ["org/short", "--revision", sha]):
        r = cli(args)
        assert r.returncode == 17 and "but the file holds 1000 bytes" in r.stderr, (args, r.stderr)


def test_header_only_stub_is_fine(tmp_path, cli):
    r = cli([str(_folder(tmp_path, GOOD)), "--format", "json"])  # no data at all: a stub, as fixtures are
    assert r.returncode == 0 and json.loads(r.stdout)["parameters"]["total"] == 512 * 64, r.stderr


def test_duplicate_names_are_found_without_the_per_object_hook():
    # Duplicates are detected by counting the "data_offsets" key against the decoded entries; names that spell the
    # key (escaped inside their JSON string) or contain true/false must not fool it either way.
    from hfmem.errors import MalformedHeader
    from hfmem.hub.header import parse_header_bytes

    entry = '{"dtype":"U8","shape":[4],"data_offsets":[%d,%d]}'
    tricky = '"x\\"data_offsets\\"true"'
    ok = "{" + tricky + ":" + entry % (0, 4) + ',"b":' + entry % (4, 8) + "}"
    header = parse_header_bytes(ok.encode(), "m.safetensors")
    assert [t.name for t in header.tensors] == ['x"data_offsets"true', "b"]
    dup = "{" + '"a":' + entry % (0, 4) + ',"a":' + entry % (4, 8) + "}"
    with pytest.raises(MalformedHeader, match="duplicate tensor name 'a'"):
        parse_header_bytes(dup.encode(), "m.safetensors")
    inner = '{"a":{"dtype":"U8","dtype":"U8","shape":[4],"data_offsets":[0,4]}}'
    with pytest.raises(MalformedHeader, match="duplicate"):
        parse_header_bytes(inner.encode(), "m.safetensors")


def test_duplicate_tensor_in_the_one_shot_answer_is_exit_17(hub_env, tmp_path, cli):
    # The one-shot answer is one JSON document: a tensor named twice in a shard's header is refused like a file's.
    from hub_server import gzip_body

    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(CONFIG))
    shard = "model-00001-of-00001.safetensors"
    raw = json.dumps(GOOD).encode()
    raw += b" " * (-len(raw) % 8)
    (folder / shard).write_bytes(struct.pack("<Q", len(raw)) + raw)
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": {"model.embed_tokens.weight": shard}})
    )
    hub_env.add_repo("org/dup", RepoSpec(root=folder))
    entry = '{"dtype":"BF16","shape":[512,64],"data_offsets":[0,65536]}'
    text = '{"index":{"metadata":{}},"headers":{"%s":{"model.embed_tokens.weight":%s,"model.embed_tokens.weight":%s}}}' % (
        shard, entry, entry)
    hub_env.gzip_answers["safetensors-metadata"] = gzip_body(text.encode(), 0)
    r = cli(["org/dup"])
    assert r.returncode == 17 and "duplicate tensor name 'model.embed_tokens.weight'" in r.stderr, r.stderr
