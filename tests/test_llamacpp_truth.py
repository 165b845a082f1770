"""hfmem's llama.cpp memory against llama.cpp itself.

fixtures/llamacpp/cases.json holds what llama.cpp allocated when it loaded tiny random-weight GGUF models
(scripts/record_llamacpp.py: llama-cpp-python built from source, its vendored llama.cpp, verbose log lines plus the
exact byte size of each buffer it allocated). Each model's GGUF header is stored alone (<case>.header.gguf: all
hfmem reads); the tests rebuild a sparse file of the recorded size from it. For every recorded load, hfmem's KV
cache (per cache object: cells, streams, layers, K and V bytes) and recurrent state (R and S bytes) must equal
llama.cpp's exact buffer bytes and print as llama.cpp's own MiB figures; loads llama.cpp refused must be refused.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from hfmem.errors import UsageError
from hfmem.gguf.model import architecture_from_metadata, read_gguf_report
from hfmem.memory.kv import KV_DTYPES
from hfmem.memory.kv.llamacpp import gguf_kv, llamacpp_memory

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "llamacpp"
DATA = json.loads((FIXTURES / "cases.json").read_text())
RESULTS = DATA["results"]
FAMILIES = {"llama", "gemma3", "gemma4", "deepseek_v3", "qwen3_5", "qwen3_next", "jamba", "mamba", "mamba2", "lfm2", "falcon_h1"}


def _mib(n: int, float32: bool) -> str:
    """A byte count as llama.cpp prints it: %.2f of bytes / 2^20 (the 'size =' line divides in float)."""
    v = n / (1024.0 * 1024.0)
    if float32:
        v = struct.unpack("f", struct.pack("f", n))[0] / struct.unpack("f", struct.pack("f", 1024.0 * 1024.0))[0]
        v = struct.unpack("f", struct.pack("f", v))[0]
    return f"{v:.2f}"


@pytest.fixture(scope="module")
def gguf_paths(tmp_path_factory) -> dict[str, Path]:
    """Each header-only fixture written out as a sparse file of the real file's size."""
    root = tmp_path_factory.mktemp("gguf")
    out = {}
    for name, f in DATA["files"].items():
        path = root / f"{name}.gguf"
        header = (FIXTURES / f["file"]).read_bytes()
        assert len(header) == f["header_bytes"] < f["file_size"]
        with open(path, "wb") as fh:
            fh.write(header)
            fh.truncate(f["file_size"])
        out[name] = path
    return out


@pytest.fixture(scope="module")
def archs(gguf_paths) -> dict[str, dict]:
    return {name: read_gguf_report(str(path)).architecture for name, path in gguf_paths.items()}


def _hfmem(arch: dict, r: dict) -> dict:
    return llamacpp_memory(
        arch, r["n_ctx"], r["n_seq_max"], r["cache_type"],
        kv_unified=bool(r["kv_unified"]),  # None: llama_context_default_params (false)
        swa_full=True if r["swa_full"] is None else r["swa_full"],  # None: llama_context_default_params (true)
        flash_attn=r["flash_attn"],
    )  # fmt: skip


def test_fixtures_cover_every_family():
    recorded = {r["case"] for r in RESULTS if r["rc"] == 0}
    assert recorded == FAMILIES
    assert DATA["recorded_with"]["llama_cpp_python"] == "0.3.36"
    # every successful load logged its caches, with exact buffer sizes for (nearly) all of them
    for r in RESULTS:
        assert (r["rc"] == 0) == bool(r["memory"]), r
    exact = [m for r in RESULTS for m in r["memory"] if m["buffer_bytes"] is not None]
    assert len(exact) >= 0.9 * sum(len(r["memory"]) for r in RESULTS)


@pytest.mark.parametrize("r", [r for r in RESULTS if r["rc"] == 0], ids=lambda r: f"{r['case']}-{r['n_ctx']}x{r['n_seq_max']}-u{r['kv_unified']}-swa{r['swa_full']}-{r['cache_type']}")
def test_memory_equals_llamacpp(archs, r):
    ours = _hfmem(archs[r["case"]], r)
    logged_kv = [m for m in r["memory"] if m["kind"] == "kv"]
    logged_rs = [m for m in r["memory"] if m["kind"] == "recurrent"]
    # llama_kv_cache_iswa logs the non-SWA cache first, then the SWA one; hybrids log KV before the state
    kinds = ["full_attention", "sliding_attention"] if len(logged_kv) == 2 else list(ours["kv"])
    assert len(kinds) == len(logged_kv)
    for kind, m in zip(kinds, logged_kv):
        c = ours["kv"].get(kind, {"layers": 0, "cells": m["cells"], "streams": m["streams"], "k_bytes": 0, "v_bytes": 0})
        assert (c["cells"], c["streams"], c["layers"]) == (m["cells"], m["streams"], m["layers"]), kind
        if m["buffer_bytes"] is not None:
            assert c["k_bytes"] + c["v_bytes"] == m["buffer_bytes"], kind
        assert (_mib(c["k_bytes"], True), _mib(c["v_bytes"], True)) == (m["k_mib"], m["v_mib"]), kind
        assert _mib(c["k_bytes"] + c["v_bytes"], True) == m["size_mib"]
    if logged_rs:
        (m,) = logged_rs
        rec = ours["recurrent"]
        assert rec is not None and rec["cells"] == m["cells"]
        if m["buffer_bytes"] is not None:
            assert rec["r_bytes"] + rec["s_bytes"] == m["buffer_bytes"]
        assert (_mib(rec["r_bytes"], True), _mib(rec["s_bytes"], True)) == (m["r_mib"], m["s_mib"])
    else:
        assert ours["recurrent"] is None


@pytest.mark.parametrize("r", [r for r in RESULTS if r["rc"] != 0], ids=lambda r: f"{r['case']}-{r['cache_type']}")
def test_refused_by_llamacpp_is_refused(archs, r):
    assert any("does not divide" in line for line in r["log"])
    with pytest.raises(UsageError, match="does not divide"):
        _hfmem(archs[r["case"]], r)


def _total(r: dict) -> int:
    return sum(m["buffer_bytes"] or 0 for m in r["memory"])


def test_gguf_kv_defaults_match_their_recordings(archs):
    """gguf_kv's named defaults give llama.cpp's totals: llama-cpp-python's Llama() (llama_context_default_params:
    a stream per sequence, full-size SWA) and llama-server's (one unified stream, window-sized SWA)."""
    checked = 0
    for r in RESULTS:
        if r["rc"] or r["cache_type"] != "f16" or any(m["buffer_bytes"] is None for m in r["memory"]):
            continue
        if r["kv_unified"] is None and r["swa_full"] is None and not r["flash_attn"]:
            defaults = "llama-cpp-python"
        elif r["kv_unified"] and r["swa_full"] is False and r["flash_attn"]:
            defaults = "llama-server"
        else:
            continue
        kv = gguf_kv(archs[r["case"]], r["n_ctx"] // r["n_seq_max"], r["n_seq_max"], "f16", defaults)
        assert kv.total_bytes == _total(r), (r["case"], defaults)
        assert kv.kv_bytes + kv.recurrent_bytes == kv.total_bytes
        checked += 1
    assert checked >= 20


def test_the_fixed_defects_would_fail(archs):
    """The comparisons above can fail: the old model of each defect is off against the same recordings."""
    r = next(r for r in RESULTS if r["case"] == "deepseek_v3" and r["n_ctx"] == 4096 and r["n_seq_max"] == 1 and r["cache_type"] == "f16")
    with_v = _hfmem({**archs["deepseek_v3"], "is_mla": False}, r)["kv"]["full_attention"]
    assert with_v["k_bytes"] + with_v["v_bytes"] != _total(r)  # MLA with a V cache: the old +67 % here
    r = next(r for r in RESULTS if r["case"] == "qwen3_5" and r["n_ctx"] == 4096 and r["n_seq_max"] == 1 and r["cache_type"] == "f16")
    every_layer = {**archs["qwen3_5"], "recurrent_layers": [False] * 4}
    assert sum(c["k_bytes"] + c["v_bytes"] for c in _hfmem(every_layer, r)["kv"].values()) != r["memory"][0]["buffer_bytes"]
    r = next(r for r in RESULTS if r["case"] == "gemma3" and r["kv_unified"] and r["swa_full"] is False)
    full = _hfmem(archs["gemma3"], {**r, "swa_full": True})["kv"]["sliding_attention"]
    assert full["k_bytes"] + full["v_bytes"] != r["memory"][1]["buffer_bytes"]
    # gemma4: shared-KV layers keep no cache; without flash attention V rows are padded to the widest layer
    r = next(r for r in RESULTS if r["case"] == "gemma4" and r["n_ctx"] == 4096 and r["n_seq_max"] == 1 and r["cache_type"] == "f16")
    unpadded = _hfmem(archs["gemma4"], {**r, "flash_attn": True})["kv"]["sliding_attention"]
    assert unpadded["k_bytes"] + unpadded["v_bytes"] != r["memory"][1]["buffer_bytes"]
    unshared = _hfmem({**archs["gemma4"], "shared_kv_layers": None}, r)["kv"]["full_attention"]
    assert unshared["layers"] != r["memory"][0]["layers"]
    mamba = next(r for r in RESULTS if r["case"] == "mamba" and r["rc"] == 0)
    assert _total(mamba) > 0 and _hfmem(archs["mamba"], mamba)["recurrent"]["s_bytes"] > 0


def test_header_only_file_reads_like_the_real_one(gguf_paths):
    """The sparse copy gives the metadata the converter wrote (MLA keys, recurrent layers, SSM sizes)."""
    a = read_gguf_report(str(gguf_paths["deepseek_v3"])).architecture
    assert a["is_mla"] and a["num_kv_heads"] == 1 and a["key_length"] == a["kv_lora_rank"] + a["rope_dimension_count"]
    q = read_gguf_report(str(gguf_paths["qwen3_5"])).architecture
    assert q["recurrent_layers"] == [True, True, True, False] and q["full_attention_interval"] == 4
    m = read_gguf_report(str(gguf_paths["mamba"])).architecture
    assert m["ssm"] == {"d_conv": 4, "d_inner": 128, "d_state": 16}


def test_interval_without_the_layer_array():
    """Older qwen3next GGUFs have only full_attention_interval: recurrent unless (i + 1) % interval == 0."""
    md = {"general.architecture": "qwen3next", "qwen3next.block_count": 8, "qwen3next.embedding_length": 64,
          "qwen3next.attention.head_count": 2, "qwen3next.attention.head_count_kv": 1,
          "qwen3next.attention.key_length": 32, "qwen3next.attention.value_length": 32,
          "qwen3next.full_attention_interval": 4, "qwen3next.ssm.conv_kernel": 4, "qwen3next.ssm.inner_size": 64,
          "qwen3next.ssm.state_size": 16, "qwen3next.ssm.group_count": 2}  # fmt: skip
    m = llamacpp_memory(architecture_from_metadata(md, {}), 4096)
    assert m["kv"]["full_attention"]["layers"] == 2  # layers 3 and 7
    assert m["recurrent"]["layers"] == 6
    assert m["recurrent"]["r_bytes"] == 6 * 3 * (64 + 2 * 2 * 16) * 4


def test_nextn_layers_get_no_kv():
    md = {"general.architecture": "glm4moe", "glm4moe.block_count": 5, "glm4moe.nextn_predict_layers": 1,
          "glm4moe.embedding_length": 64, "glm4moe.attention.head_count": 2, "glm4moe.attention.head_count_kv": 1,
          "glm4moe.attention.key_length": 32, "glm4moe.attention.value_length": 32}  # fmt: skip
    assert llamacpp_memory(architecture_from_metadata(md, {}), 256)["kv"]["full_attention"]["layers"] == 4


def test_llamacpp_cache_type_names(tmp_path):
    for name in ("f16", "bf16", "f32", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"):
        assert name in KV_DTYPES
    docs = (ROOT / "docs" / "gguf.md").read_text() + (ROOT / "docs" / "kv.md").read_text()
    for name in KV_DTYPES:
        assert f"`{name}`" in docs or f"|{name}|" in docs or f"{name}`" in docs, name


def test_safetensors_engines_refuse_llamacpp_only_names():
    from hfmem.memory.kv.estimate import _resolve_dtype

    with pytest.raises(UsageError, match="llama.cpp cache type"):
        _resolve_dtype(None, "q5_1", "vllm", [], None)  # type: ignore[arg-type]
    assert _resolve_dtype(None, "f16", "vllm", [], None) == "fp16"  # type: ignore[arg-type]


def test_cli_takes_llamacpp_names_and_defaults(gguf_paths):
    from click.testing import CliRunner

    from hfmem.cli import main

    path = str(gguf_paths["gemma3"])
    r = next(r for r in RESULTS if r["case"] == "gemma3" and r["n_ctx"] == 4096 and r["n_seq_max"] == 1 and r["cache_type"] == "f16")
    out = CliRunner().invoke(main, [path, "--ctx", "4096", "--kv-dtype", "f16", "--llamacpp-defaults", "llama-cpp-python",
                                    "--format", "json"])
    assert out.exit_code == 0, out.output
    kv = json.loads(out.output)["kv_cache"]
    assert kv["total_bytes"] == _total(r) and kv["defaults"] == "llama-cpp-python" and kv["swa_full"] is True
    server = json.loads(CliRunner().invoke(main, [path, "--ctx", "4096", "--format", "json"]).output)["kv_cache"]
    assert server["defaults"] == "llama-server" and server["total_bytes"] < kv["total_bytes"]  # window-sized SWA
    for name in ("iq4_nl", "q5_1", "bf16", "f32"):
        assert CliRunner().invoke(main, [path, "--ctx", "4k", "--kv-dtype", name]).exit_code == 0, name
    mamba = CliRunner().invoke(main, [str(gguf_paths["mamba"]), "--ctx", "4k", "--format", "json"])
    assert json.loads(mamba.output)["kv_cache"]["recurrent_bytes"] == 19456


def test_cli_safetensors_refuses_llamacpp_only_names():
    from click.testing import CliRunner

    from hfmem.cli import main

    model = str(ROOT / "fixtures" / "models" / "Qwen" / "Qwen2-7B-Instruct")
    out = CliRunner().invoke(main, [model, "--ctx", "4k", "--kv-dtype", "q5_1"])
    assert out.exit_code == 2 and "llama.cpp cache type" in out.output and "Traceback" not in out.output
    assert CliRunner().invoke(main, [model, "--ctx", "4k", "--kv-dtype", "f16"]).exit_code == 0
    out = CliRunner().invoke(main, [model, "--ctx", "4k", "--llamacpp-defaults", "llama-server"])
    assert out.exit_code == 2 and "GGUF" in out.output


def test_malformed_memory_keys_are_ignored():
    """Values of the wrong type for the memory keys leave them out instead of crashing the report."""
    md = {"general.architecture": "qwen35", "qwen35.block_count": 4, "qwen35.embedding_length": 64,
          "qwen35.attention.head_count": 2, "qwen35.attention.head_count_kv": 1, "qwen35.nextn_predict_layers": "x",
          "qwen35.attention.recurrent_layers": ["a"], "qwen35.ssm.conv_kernel": -3, "qwen35.full_attention_interval": 0,
          "qwen35.attention.key_length_mla": "64", "qwen35.attention.value_length_mla": 32}  # fmt: skip
    arch = architecture_from_metadata(md, {})
    assert not {"trunk_layers", "recurrent_layers", "ssm", "is_mla", "full_attention_interval"} & set(arch)
    m = llamacpp_memory(arch, 512)
    assert m["kv"]["full_attention"]["layers"] == 1 and m["recurrent"]["layers"] == 3
