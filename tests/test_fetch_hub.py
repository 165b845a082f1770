"""hfmem against the local Hub through the real huggingface_hub client: requests made, revisions, errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

import hfmem
from hfmem import errors
from hub_server import RepoSpec

QWEN = "Qwen/Qwen2-7B-Instruct"


def _serve(hub_env, stub_repo, repo=QWEN, **spec):
    hub_env.add_repo(repo, RepoSpec(root=stub_repo(repo), **spec))
    return hub_env.repos[repo]


def _paths(hub):
    return [(r.method, r.path.split("?")[0]) for r in hub.requests]


def test_main_branch_uses_one_shot_metadata_endpoint(hub_env, stub_repo):
    spec = _serve(hub_env, stub_repo)
    report = hfmem.analyze(QWEN)
    assert report.parameters.total == 7_615_616_512
    assert report.source == "hub" and report.revision == spec.sha
    paths = _paths(hub_env)
    assert ("GET", f"/api/models/{QWEN}/safetensors-metadata/model.safetensors.index.json") in paths
    assert not any("resolve" in p and p.endswith(".safetensors") for _, p in paths), "never touches weight files"
    # config.json (commit from X-Repo-Commit), the index (its weight_map decides which tensors count: the one-shot
    # answer leaves it out) and every header in one request, all three in one round trip. Nothing else.
    assert sorted(paths) == sorted([
        ("GET", f"/{QWEN}/resolve/main/config.json"),
        ("GET", f"/{QWEN}/resolve/main/model.safetensors.index.json"),
        ("GET", f"/api/models/{QWEN}/safetensors-metadata/model.safetensors.index.json"),
    ]), paths


def test_repeat_run_uses_cached_config(hub_env, stub_repo):
    _serve(hub_env, stub_repo)
    hfmem.analyze(QWEN)
    hub_env.clear_log()
    hfmem.analyze(QWEN)
    assert [m for m, _ in _paths(hub_env)].count("GET") == 1  # config is a cached HEAD; headers one GET


def test_other_revision_reads_shards_by_range(hub_env, stub_repo, tmp_path):
    spec = _serve(hub_env, stub_repo)
    spec.revisions["refs/pr/4"] = ("a" * 40, spec.root)
    report = hfmem.analyze(QWEN, revision="refs/pr/4")
    assert report.revision == "a" * 40 and report.parameters.total == 7_615_616_512
    ranged = [r for r in hub_env.requests if r.range]
    assert len(ranged) == 4 and all(r.status == 206 for r in ranged)
    assert all("refs%2Fpr%2F4" in r.path or "a" * 40 in r.path for r in ranged)


def test_hub_without_sharded_endpoint_falls_back(hub_env, stub_repo):
    _serve(hub_env, stub_repo, sharded_endpoint=False)
    assert hfmem.analyze(QWEN).parameters.total == 7_615_616_512
    assert len([r for r in hub_env.requests if r.range]) == 4


def test_single_file_repo(hub_env, stub_repo):
    repo = "Qwen/Qwen2-0.5B-Instruct"
    _serve(hub_env, stub_repo, repo)
    report = hfmem.analyze(repo)
    assert report.parameters.total == 494_032_768


def test_errors_map_to_hfmem_errors(hub_env, stub_repo, tmp_path):
    _serve(hub_env, stub_repo)
    with pytest.raises(errors.RepoNotFound, match="nobody/nothing"):
        hfmem.analyze("nobody/nothing")
    with pytest.raises(errors.RevisionNotFound):
        hfmem.analyze(QWEN, revision="no-such-branch")
    _serve(hub_env, stub_repo, "meta-llama/Llama-3.1-8B-Instruct", gated=True)
    with pytest.raises(errors.GatedRepo, match="no token was sent"):
        hfmem.analyze("meta-llama/Llama-3.1-8B-Instruct")
    with pytest.raises(errors.GatedRepo, match="a token was sent"):
        hfmem.analyze("meta-llama/Llama-3.1-8B-Instruct", token="hf_not_allowed")
    no_cfg = tmp_path / "nocfg"
    shutil.copytree(stub_repo(QWEN), no_cfg)
    (no_cfg / "config.json").unlink()
    hub_env.add_repo("x/no-config", RepoSpec(root=no_cfg))
    with pytest.raises(errors.NoConfig):
        hfmem.analyze("x/no-config")
    no_st = tmp_path / "nost"
    no_st.mkdir()
    (no_st / "config.json").write_text('{"model_type": "llama"}')
    (no_st / "pytorch_model.bin.index.json").write_text('{"metadata": {"total_size": 999}, "weight_map": {}}')
    hub_env.add_repo("x/bin-only", RepoSpec(root=no_st))
    with pytest.raises(errors.NoSafetensors, match="999"):
        hfmem.analyze("x/bin-only")
    with pytest.raises(errors.UsageError):
        hfmem.analyze("not a repo id!")


def test_gated_repo_with_allowed_token(hub_env, stub_repo):
    _serve(hub_env, stub_repo, gated=True, allowed_tokens={"hf_sentinel_ok"})
    assert hfmem.analyze(QWEN, token="hf_sentinel_ok").parameters.total == 7_615_616_512


def test_cli_subprocess_against_hub_never_prints_token(hub_env, stub_repo):
    _serve(hub_env, stub_repo, gated=True, allowed_tokens={"hf_SENTINEL_token_123"})
    exe = shutil.which("hfmem", path=os.path.dirname(sys.executable)) or shutil.which("hfmem")
    env = dict(os.environ)
    ok = subprocess.run([exe, QWEN, "--format", "json"], capture_output=True, text=True, env=env | {"HF_TOKEN": "hf_SENTINEL_token_123"}, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["revision"] == hub_env.repos[QWEN].sha
    bad = subprocess.run([exe, QWEN, "--debug"], capture_output=True, text=True, env=env | {"HF_TOKEN": "hf_SENTINEL_wrong_456"}, timeout=120)
    assert bad.returncode == 12
    for out in (ok.stdout, ok.stderr, bad.stdout, bad.stderr):
        assert "SENTINEL" not in out


def test_offline_mode_without_cache_is_a_clear_network_error(hub_env, stub_repo, monkeypatch):
    from huggingface_hub import constants

    _serve(hub_env, stub_repo)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(errors.NetworkError, match="HF_HUB_OFFLINE"):
        hfmem.analyze(QWEN)


@pytest.mark.parametrize("revision", [None, "main", "v1.0", "refs/pr/4", "a" * 40, "feature/x y", "rév"])
@pytest.mark.parametrize("filename", ["config.json", "model.safetensors.index.json",
                                      "model-00001-of-00014.safetensors", "sub dir/ünï #1.safetensors"])
def test_file_urls_are_huggingface_hubs(hub_env, revision, filename):
    """hfmem builds resolve URLs from huggingface_hub's own template and quoting (file_download's import is too slow
    for the hot path): they must stay exactly hf_hub_url's, endpoint included."""
    from huggingface_hub import hf_hub_url

    from hfmem.hub.remote import HubContext

    for repo_id in ("Qwen/Qwen2-7B-Instruct", "gpt2"):
        ctx = HubContext(repo_id, revision, None, 10.0)
        assert ctx.file_url(filename, revision) == hf_hub_url(repo_id, filename, revision=revision)
        assert ctx.file_url(filename, revision).startswith(hub_env.url)
