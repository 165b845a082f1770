"""What a hostile or broken server may cost: decoded bytes per answer and per read are capped, gzip is expanded a
step at a time, and the peak RSS of the CLI process that did the work stays under a stated bound. The largest real
checkpoint (Kimi-K3: a 58 MB index, 76 MB of headers) must still pass."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from entry import SRC, cli  # noqa: F401  (fixture)
from hub_server import RepoSpec, gzip_body
from stubs import header_bytes

from hfmem.hub import budget

QWEN = "Qwen/Qwen2-7B-Instruct"
RSS_BOUND_KB = 450_000  # measured ~295 MB: a 256 MB answer (or one 100 MB header and its text) plus the interpreter


def _run_measured(args: list[str], tmp_path: Path, timeout: float = 300) -> tuple[subprocess.CompletedProcess, int]:
    """The CLI in a child process, and that child's own peak RSS in kB."""
    rss_file = tmp_path / "rss"
    env = dict(os.environ, HFMEM_TEST_RSS_FILE=str(rss_file))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, str(SRC / "tests" / "rss_cli.py"), *args], capture_output=True, text=True, env=env, timeout=timeout
    )
    return result, int(rss_file.read_text())


def test_limits_cover_the_largest_real_checkpoint_with_margin():
    # Kimi-K3 (497,220 tensors, 96 shards), measured on its header-only stub: index 58,272,430 bytes, headers 75,661,432.
    index, headers = 58_272_430, 75_661_432
    assert budget.MAX_INDEX_BYTES >= 3 * index
    assert budget.MAX_METADATA_BYTES >= 3 * headers
    assert budget.MAX_READ_BYTES >= 2.5 * (index + headers)


def test_gzip_bomb_one_shot_answer_is_refused_within_the_bound(hub_env, stub_repo, tmp_path):
    hub_env.add_repo(QWEN, RepoSpec(root=stub_repo(QWEN)))
    # 1 MB on the wire, 1 GiB decoded: once 2.9 GB of RSS.
    hub_env.gzip_answers["safetensors-metadata"] = gzip_body(b'{"index":{},"headers":{"x":', 1 << 30, b"}}")
    result, peak_kb = _run_measured([QWEN], tmp_path)
    assert result.returncode == 17, result.stderr
    assert "safetensors-metadata: larger than 256,000,000 bytes" in result.stderr and result.stderr.count("\n") == 1
    print(f"peak RSS {peak_kb} kB")
    assert peak_kb < RSS_BOUND_KB, peak_kb


def test_gzip_bomb_shard_headers_at_a_revision_are_refused_within_the_bound(hub_env, tmp_path):
    # 32 shards read by range (a revision other than main), each answering 100 MB of header from ~100 kB of gzip:
    # once 2.6 GB of RSS and exit 0 with 0 parameters.
    root = tmp_path / "repo"
    root.mkdir()
    (root / "config.json").write_text(json.dumps({"model_type": "llama"}))
    weight_map = {}
    for s in range(32):
        file = f"model-{s + 1:05d}-of-00032.safetensors"
        (root / file).write_bytes(header_bytes([(f"layers.{s}.w", "BF16", [8, 4])], {"format": "pt"}))
        weight_map[f"layers.{s}.w"] = file
    (root / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    hub_env.add_repo("org/bomb", RepoSpec(root=root, revisions={"v1": ("b" * 40, root)}))
    length = 99_999_992
    hub_env.gzip_answers["-of-00032.safetensors"] = gzip_body(struct.pack("<Q", length) + b"{", length - 2, b"}")
    result, peak_kb = _run_measured(["org/bomb", "--revision", "v1"], tmp_path)
    assert result.returncode == 17, result.stderr
    assert "exceed 384,000,000 bytes decoded" in result.stderr and result.stderr.count("\n") == 1
    print(f"peak RSS {peak_kb} kB")
    assert peak_kb < RSS_BOUND_KB, peak_kb


def test_index_larger_than_the_old_20_mb_cap_is_read(hub_env, stub_repo, tmp_path, cli):
    # Real indexes reach 58 MB (Kimi-K3); this one is 21 MB of which most is JSON whitespace, local and from the Hub.
    folder = tmp_path / "big-index"
    src = stub_repo(QWEN)
    folder.mkdir()
    for p in src.iterdir():
        (folder / p.name).write_bytes(p.read_bytes())
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    (folder / "model.safetensors.index.json").write_text(json.dumps(index) + " " * 21_000_000)
    hub_env.add_repo("org/big-index", RepoSpec(root=folder, revisions={"v1": ("c" * 40, folder)}))
    for args in ([str(folder)], ["org/big-index"], ["org/big-index", "--revision", "v1"]):
        r = cli([*args, "--format", "json"])
        assert r.returncode == 0, (args, r.stderr)
        assert json.loads(r.stdout)["parameters"]["total"] == 7_615_616_512


def test_unknown_content_encoding_is_refused(hub_env, stub_repo, cli):
    hub_env.add_repo(QWEN, RepoSpec(root=stub_repo(QWEN)))
    hub_env.gzip_answers["config.json"] = b"\x00not gzip at all"
    r = cli([QWEN])
    assert r.returncode == 17 and "not valid gzip" in r.stderr, r.stderr


def test_in_flight_budget_lets_an_oversized_body_through_alone():
    import threading

    flight = budget.InFlight(100)
    entered, release = threading.Event(), threading.Event()

    def big():
        with flight.hold(200):
            entered.set()
            release.wait(5)

    with flight.hold(60):
        t = threading.Thread(target=big)
        t.start()
        assert not entered.wait(0.3), "a body larger than what is free waits"
    assert entered.wait(5) and flight.held == 200, "then goes alone"
    release.set()
    t.join(5)
    assert flight.held == 0


@pytest.mark.slow
def test_kimi_k3_scale_repo_passes(hub_env, tmp_path, cli):
    # Kimi-K3's shape of checkpoint: 497,220 tensors in 96 shards, names as long as its own (a 58 MB index).
    root = tmp_path / "k3"
    root.mkdir()
    (root / "config.json").write_text(json.dumps({"model_type": "llama"}))
    weight_map = {}
    per = 497_220 // 96 + 1
    n = 0
    for s in range(96):
        file = f"model-{s + 1:05d}-of-00096.safetensors"
        tensors = []
        for _ in range(per):
            if n == 497_220:
                break
            tensors.append((f"language_model.model.layers.{n // 5000}.mlp.experts.{n % 5000}.down_proj.weight_packed", "U8", [8, 4]))
            n += 1
        (root / file).write_bytes(header_bytes(tensors, {"format": "pt"}))
        weight_map.update({t[0]: file for t in tensors})
    (root / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}, indent=2))
    hub_env.add_repo("org/k3", RepoSpec(root=root))
    for args in ([str(root)], ["org/k3"]):
        r = cli([*args, "--format", "json"], timeout=600)
        assert r.returncode == 0, r.stderr


def test_gzip_bomb_gguf_range_costs_what_was_asked(hub_env, tmp_path):
    # A GGUF repo whose file answers every range with 200 and a gzip body: the real header, then 1 GiB of zeros.
    # The reader asks for the header's bytes only; the body is decoded a step at a time and cut there.
    from stubs import gguf_bytes

    repo = tmp_path / "repo"
    repo.mkdir()
    data = gguf_bytes(n_tensors=4)
    (repo / "m-Q4_K_M.gguf").write_bytes(data + b"\0" * 4096)
    hub_env.add_repo("org/m-GGUF", RepoSpec(root=repo))
    hub_env.gzip_answers["m-Q4_K_M.gguf"] = gzip_body(data, 1 << 30, fill=b"\0")
    result, peak_kb = _run_measured(["org/m-GGUF", "--quant", "Q4_K_M", "--format", "json"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["parameters"]["total"] == 4 * 32 * 4
    print(f"peak RSS {peak_kb} kB")
    assert peak_kb < RSS_BOUND_KB, peak_kb
