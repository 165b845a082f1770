"""GGUF: exact parameters and bytes from headers written with llama.cpp's own gguf writer, KV per llama.cpp."""

from __future__ import annotations

import struct

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

from hfmem import errors  # noqa: E402
from hfmem.gguf.ggml import GGML_TYPES  # noqa: E402
from hfmem.gguf.reader import parse_gguf, read_local_gguf  # noqa: E402
from hfmem.gguf.model import group_gguf_files, read_gguf_report  # noqa: E402
from hfmem.memory.kv.llamacpp import gguf_kv  # noqa: E402
from hub_server import RepoSpec  # noqa: E402

T = gguf.GGMLQuantizationType

# A Llama-3-style model shrunk: 2 layers, 256 hidden, 4 heads, 2 KV heads, 1,024 vocab.
H, L, HEADS, KV, FF, V = 256, 2, 4, 2, 512, 1024


def _tensor_specs(weight_type):
    specs = [("token_embd.weight", (V, H), T.Q8_0), ("output_norm.weight", (H,), T.F32), ("output.weight", (V, H), T.Q6_K)]
    for i in range(L):
        specs += [
            (f"blk.{i}.attn_norm.weight", (H,), T.F32),
            (f"blk.{i}.attn_q.weight", (H, H), weight_type),
            (f"blk.{i}.attn_k.weight", (KV * H // HEADS, H), weight_type),
            (f"blk.{i}.attn_v.weight", (KV * H // HEADS, H), weight_type),
            (f"blk.{i}.attn_output.weight", (H, H), weight_type),
            (f"blk.{i}.ffn_norm.weight", (H,), T.F32),
            (f"blk.{i}.ffn_gate.weight", (FF, H), weight_type),
            (f"blk.{i}.ffn_up.weight", (FF, H), weight_type),
            (f"blk.{i}.ffn_down.weight", (H, FF), weight_type),
        ]
    return specs


def write_gguf(path, weight_type=T.Q4_K, arch="llama", extra=None, vocab_tokens=V):
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(L)
    w.add_embedding_length(H)
    w.add_feed_forward_length(FF)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV)
    w.add_context_length(8192)
    w.add_file_type(15)
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"tok{i}" for i in range(vocab_tokens)])  # a big array, like real tokenizer metadata
    for k, v in (extra or {}).items():
        w.add_uint32(k, v)
    for name, shape, qtype in _tensor_specs(weight_type):
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        numel = int(np.prod(shape))
        raw = np.zeros(numel // block * size, dtype=np.uint8)
        byte_shape = (*shape[:-1], shape[-1] // block * size)
        w.add_tensor(name, raw, raw_shape=byte_shape, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _expected(weight_type):
    params = nbytes = 0
    for _, shape, qtype in _tensor_specs(weight_type):
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        numel = int(np.prod(shape))
        params += numel
        nbytes += numel // block * size
    return params, nbytes


def test_type_table_matches_ggml():
    for qtype, (block, size) in gguf.GGML_QUANT_SIZES.items():
        assert GGML_TYPES[int(qtype)][1:] == (block, size), qtype.name


@pytest.mark.parametrize("weight_type", [T.Q4_K, T.Q8_0, T.Q5_K, T.F16])
def test_exact_parameters_and_bytes(tmp_path, weight_type):
    path = write_gguf(tmp_path / f"m-{weight_type.name}.gguf", weight_type)
    header = read_local_gguf(str(path))
    params, nbytes = _expected(weight_type)
    assert header.parameters == params
    assert header.weight_bytes == nbytes
    # The reference reader agrees tensor by tensor.
    reader = gguf.GGUFReader(str(path))
    assert sum(int(t.n_elements) for t in reader.tensors) == params
    assert sum(int(t.n_bytes) for t in reader.tensors) == nbytes


def test_metadata_architecture(tmp_path):
    report = read_gguf_report(str(write_gguf(tmp_path / "m-Q4_K_M.gguf")), contexts=[4096])
    a = report.architecture
    assert (a["architecture"], a["num_layers"], a["hidden_size"], a["num_kv_heads"], a["key_length"], a["vocab_size"]) == ("llama", L, H, KV, H // HEADS, V)
    # llama.cpp f16 cache: 2 layers x 2 KV heads x (64 + 64) x 2 bytes per cell.
    assert report.kv_cache[0].bytes_per_token == L * KV * 2 * (H // HEADS) * 2
    assert report.kv_cache[0].total_bytes == 4096 * L * KV * 2 * (H // HEADS) * 2


def test_kv_cache_types_and_padding():
    arch = {"architecture": "llama", "num_layers": 32, "num_kv_heads": 8, "key_length": 128, "value_length": 128, "sliding_window": None}
    f16 = gguf_kv(arch, 32768)
    assert f16.total_bytes == 32 * 8 * 256 * 2 * 32768  # 4 GiB for Llama-3-8B at 32k (published: 4.0 GiB)
    assert gguf_kv(arch, 32768, cache_type="q8_0").total_bytes == 32 * 8 * 256 // 32 * 34 * 32768
    assert gguf_kv(arch, 32768, cache_type="q4_0").total_bytes == 32 * 8 * 256 // 32 * 18 * 32768
    assert gguf_kv(arch, 1000).cells == 1024  # llama.cpp pads the cache to 256 cells


def test_sliding_window_layers_capped():
    arch = {"architecture": "gemma3", "num_layers": 12, "num_kv_heads": 4, "key_length": 256, "value_length": 256, "sliding_window": 1024}
    kv = gguf_kv(arch, 131072)
    assert kv.by_layer_type["full_attention"]["layers"] == 2 and kv.by_layer_type["sliding_attention"]["layers"] == 10
    assert kv.by_layer_type["sliding_attention"]["tokens"] == 1536  # pad(1024 + 512 ubatch, 256)


def test_sharded_and_mmproj_grouping():
    files = {"m-Q4_K_M-00001-of-00002.gguf": 10, "m-Q4_K_M-00002-of-00002.gguf": 5, "m-Q8_0.gguf": 30, "mmproj-m-f16.gguf": 3}
    groups = {g.name: g for g in group_gguf_files(files)}
    assert groups["m-Q4_K_M-00001-of-00002.gguf"].size_bytes == 15 and len(groups["m-Q4_K_M-00001-of-00002.gguf"].shards) == 2
    assert groups["m-Q4_K_M-00001-of-00002.gguf"].quant == "Q4_K_M"
    assert groups["mmproj-m-f16.gguf"].is_projector


def test_hub_range_reads_in_growing_chunks(hub_env, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    write_gguf(repo / "m-Q4_K_M.gguf", vocab_tokens=60_000)  # ~1 MB of tokenizer strings
    write_gguf(repo / "m-Q8_0.gguf", T.Q8_0)
    hub_env.add_repo("org/m-GGUF", RepoSpec(root=repo))
    listing = read_gguf_report("org/m-GGUF")
    assert listing.selected is None and {f.quant for f in listing.files} == {"Q4_K_M", "Q8_0"}
    hub_env.clear_log()
    report = read_gguf_report("org/m-GGUF", quant="Q4_K_M", contexts=[8192])
    params, nbytes = _expected(T.Q4_K)
    assert report.parameters()["total"] == params and report.parameters()["weight_bytes"] == nbytes
    ranged = [r for r in hub_env.requests if r.range]
    assert 1 <= len(ranged) <= 3  # 1 MiB, then 2 MiB: never the tensor data
    assert report.revision == hub_env.repos["org/m-GGUF"].sha


def test_server_ignoring_range_costs_the_header_not_the_file(hub_env, tmp_path):
    """A server that answers every range with 200 and the whole 256 MiB file: the reader stops at the bytes it asked
    for, so the socket takes a small part of the body before hfmem hangs up (the old reader took all of it)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    path = write_gguf(repo / "m-Q4_K_M.gguf", vocab_tokens=60_000)  # a header of ~1 MB: two growing range reads
    with open(path, "r+b") as fh:
        fh.truncate(256 * 2**20)  # sparse: the tensor data a hostile or naive server would push
    hub_env.add_repo("org/m-GGUF", RepoSpec(root=repo, ignore_range=True))
    report = read_gguf_report("org/m-GGUF", quant="Q4_K_M")
    params, nbytes = _expected(T.Q4_K)
    assert report.parameters()["total"] == params and report.parameters()["weight_bytes"] == nbytes
    gets = [r for r in hub_env.requests if r.method == "GET" and r.path.endswith(".gguf")]
    assert gets and all(r.status == 200 and r.bytes_sent == 256 * 2**20 for r in gets)  # the server did ignore Range
    assert sum(r.bytes_written for r in gets) < 64 * 2**20, [r.bytes_written for r in gets]


@pytest.mark.parametrize("cut", [3, 10, 30, 200])
def test_truncated_header_is_clear(tmp_path, cut):
    data = write_gguf(tmp_path / "m.gguf").read_bytes()
    with pytest.raises(errors.MalformedHeader):
        parse_gguf(lambda off, n: data[:cut][off : off + n], "m.gguf")


def test_hostile_counts_rejected():
    blob = b"GGUF" + struct.pack("<IQQ", 3, 2**40, 1)
    with pytest.raises(errors.MalformedHeader, match="implausible"):
        parse_gguf(lambda off, n: blob[off : off + n], "x.gguf")


def test_mutation_fuzz_never_crashes(tmp_path):
    import random

    data = bytearray(write_gguf(tmp_path / "m.gguf", vocab_tokens=50).read_bytes()[:4096])
    rng = random.Random(0)
    for _ in range(2000):
        blob = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            blob[rng.randrange(len(blob))] = rng.randrange(256)
        try:
            parse_gguf(lambda off, n: bytes(blob[off : off + n]), "fuzz.gguf")
        except errors.MalformedHeader:
            pass


def test_cli_on_local_gguf_file(tmp_path):
    from click.testing import CliRunner

    from hfmem.cli import main

    path = write_gguf(tmp_path / "m-Q4_K_M.gguf")
    result = CliRunner().invoke(main, [str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    import json

    data = json.loads(result.output)
    assert data["format"] == "gguf" and data["parameters"]["total"] == _expected(T.Q4_K)[0]
    text = CliRunner().invoke(main, [str(tmp_path)])
    assert text.exit_code == 0 and "Q4_K_M" in text.output


def test_cli_hub_repo_with_only_gguf_files_lists_them(hub_env, tmp_path):
    from click.testing import CliRunner

    from hfmem.cli import main

    repo = tmp_path / "only-gguf"
    repo.mkdir()
    write_gguf(repo / "llama-Q4_K_M.gguf")
    write_gguf(repo / "llama-Q8_0.gguf", T.Q8_0)
    hub_env.add_repo("org/llama", RepoSpec(root=repo))  # no config.json, no safetensors, name not *-GGUF
    result = CliRunner().invoke(main, ["org/llama", "--format", "json"])
    assert result.exit_code == 0, result.output
    data = __import__("json").loads(result.stdout)
    assert data["format"] == "gguf" and sorted(f["quant"] for f in data["gguf_files"]) == ["Q4_K_M", "Q8_0"]
    # A repo with neither config.json nor GGUF files keeps its own error.
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "README.md").write_text("nothing here")
    hub_env.add_repo("org/empty", RepoSpec(root=empty))
    assert CliRunner().invoke(main, ["org/empty"]).exit_code == 15
