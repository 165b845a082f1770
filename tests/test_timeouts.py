"""--timeout bounds the waiting: a server that trickles its answer (slow-loris: never silent long enough for a read
timeout) is cut off by the wall-clock deadline and reported with the --timeout it broke. Through the installed
entry point against the local Hub's trickle mode."""

from __future__ import annotations

import time

import pytest

from entry import cli  # noqa: F401  (fixture)
from hub_server import RepoSpec

QWEN = "Qwen/Qwen2-7B-Instruct"
TIMEOUT = 2
START_UP = 10  # interpreter and imports on a loaded machine


def _serve(hub, stub_repo, repo=QWEN):
    spec = RepoSpec(root=stub_repo(repo))
    spec.revisions["v1"] = ("b" * 40, spec.root)
    hub.add_repo(repo, spec)
    return spec


@pytest.mark.parametrize(
    "path, revision",
    [
        ("config.json", None),  # the first request of every run
        ("safetensors-metadata", None),  # the one-shot answer on main
        ("model-00002-of-00004.safetensors", "v1"),  # one shard's header range on another revision
    ],
)
def test_trickling_server_is_cut_off_at_the_timeout(hub_env, stub_repo, cli, path, revision):
    _serve(hub_env, stub_repo)
    hub_env.trickle_paths, hub_env.trickle_interval_s = {path}, 0.5  # 2 bytes/s: never 2 s of silence
    args = [QWEN, "--timeout", str(TIMEOUT)] + (["--revision", revision] if revision else [])
    started = time.monotonic()
    out = cli(args)
    elapsed = time.monotonic() - started
    assert out.returncode == 19, (out.returncode, out.stderr)
    assert out.stdout == "" and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert f"within {TIMEOUT} s (--timeout" in out.stderr and "within 60 s" not in out.stderr, out.stderr
    assert elapsed < 4 * TIMEOUT + START_UP, elapsed
    assert any(r.injected == "trickle" for r in hub_env.requests)


def test_trickling_gguf_range_reads_are_cut_off(hub_env, tmp_path, cli):
    from stubs import gguf_bytes

    repo = tmp_path / "gguf"
    repo.mkdir()
    (repo / "m-F32.gguf").write_bytes(gguf_bytes())
    hub_env.add_repo("org/m-GGUF", RepoSpec(root=repo))
    hub_env.trickle_paths, hub_env.trickle_interval_s = {"m-F32.gguf"}, 0.5
    started = time.monotonic()
    out = cli(["org/m-GGUF", "--timeout", str(TIMEOUT)])
    assert out.returncode == 19, (out.returncode, out.stderr)
    assert f"within {TIMEOUT} s" in out.stderr
    assert time.monotonic() - started < 4 * TIMEOUT + START_UP


def test_a_slow_but_steady_answer_within_the_timeout_arrives(hub_env, tmp_path, cli):
    """The deadline is wall-clock for the whole answer, not a cut at the first chunk: a trickle that ends within
    --timeout is a success."""
    from stubs import gguf_bytes

    repo = tmp_path / "tiny-gguf"
    repo.mkdir()
    (repo / "m-F32.gguf").write_bytes(gguf_bytes())
    hub_env.add_repo("org/tiny-GGUF", RepoSpec(root=repo))
    hub_env.trickle_paths, hub_env.trickle_interval_s = {"m-F32.gguf"}, 0.001  # ~250 bytes in ~0.3 s
    out = cli(["org/tiny-GGUF", "--timeout", "20", "--format", "json"])
    assert out.returncode == 0, out.stderr
    assert '"total": 128' in out.stdout
