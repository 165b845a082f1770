"""Every error a user can meet, through the installed `hfmem` entry point: its exit code (README table), one line
on stderr that says what happened, nothing on stdout, and never a traceback (unless --debug)."""

from __future__ import annotations

import json
import shutil
import socket

import pytest

from entry import cli  # noqa: F401  (fixture)
from hfmem.errors import EXIT_CODES
from hub_server import RepoSpec

QWEN = "Qwen/Qwen2-7B-Instruct"
SMALL = "Qwen/Qwen2-0.5B-Instruct"


def _one_line_error(out, code: int, *needles: str) -> str:
    assert out.returncode == code, (out.returncode, out.stderr)
    assert out.stdout == ""
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("hfmem: error: ") or code == 2, lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def _serve(hub, stub_repo, repo, name=None, **spec):
    hub.add_repo(name or repo, RepoSpec(root=stub_repo(repo), **spec))


def test_exit_codes_are_distinct():
    assert len(set(EXIT_CODES.values())) == len(EXIT_CODES)


def test_repo_not_found(hub_env, cli):
    _one_line_error(cli(["nobody/nothing-here"]), 11, "'nobody/nothing-here'", "not found", hub_env.url)


def test_gated_repo_without_token(hub_env, stub_repo, cli):
    _serve(hub_env, stub_repo, SMALL, "meta-llama/Gated", gated=True)
    line = _one_line_error(cli(["meta-llama/Gated"]), 12, "meta-llama/Gated", "gated", "accept its terms")
    assert "no token was sent" in line


def test_gated_repo_with_a_token_that_has_no_access(hub_env, stub_repo, cli):
    _serve(hub_env, stub_repo, SMALL, "meta-llama/Gated", gated=True, allowed_tokens={"hf_someoneelse"})
    line = _one_line_error(cli(["meta-llama/Gated", "--token", "hf_mytoken_without_access"]), 12, "gated", "a token was sent")
    assert "hf_mytoken" not in line


def test_private_repo_without_token(hub_env, stub_repo, cli):
    _serve(hub_env, stub_repo, SMALL, "corp/secret", private=True, allowed_tokens={"hf_corp"})
    _one_line_error(cli(["corp/secret"]), 11, "'corp/secret'", "private", "no token was sent")


def test_revision_not_found(hub_env, stub_repo, cli):
    _serve(hub_env, stub_repo, SMALL)
    _one_line_error(cli([SMALL, "--revision", "no-such-branch"]), 13, "'no-such-branch'", SMALL)


def test_no_safetensors_in_repo(hub_env, tmp_path, cli):
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama"}')
    (folder / "pytorch_model.bin").write_bytes(b"\0" * 16)
    hub_env.add_repo("old/bin-only", RepoSpec(root=folder))
    _one_line_error(cli(["old/bin-only"]), 14, "old/bin-only", "no safetensors")


def test_no_config_in_repo(hub_env, stub_repo, tmp_path, cli):
    folder = tmp_path / "nocfg"
    shutil.copytree(stub_repo(SMALL), folder)
    (folder / "config.json").unlink()
    hub_env.add_repo("x/no-config", RepoSpec(root=folder))
    _one_line_error(cli(["x/no-config"]), 15, "x/no-config", "config.json")


def test_local_path_missing_or_not_a_folder(tmp_path, cli):
    _one_line_error(cli([str(tmp_path / "missing")]), 16, "missing", "no such file")
    (tmp_path / "file.txt").write_text("hi")
    _one_line_error(cli([str(tmp_path / "file.txt")]), 16, "not a model folder")


def test_local_folder_without_config(tmp_path, cli):
    _one_line_error(cli([str(tmp_path)]), 15, "config.json")


def test_malformed_header(tmp_path, stub_repo, cli):
    folder = tmp_path / "m"
    shutil.copytree(stub_repo(SMALL), folder)
    (folder / "model.safetensors").write_bytes((200_000_000).to_bytes(8, "little") + b"{}")
    _one_line_error(cli([str(folder)]), 17, "model.safetensors", "100 MB")


def test_malformed_config(tmp_path, stub_repo, cli):
    folder = tmp_path / "c"
    shutil.copytree(stub_repo(SMALL), folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "num_attention_heads": 0}))
    _one_line_error(cli([str(folder)]), 18, "config.json", "num_attention_heads")
    (folder / "config.json").write_text("{not json")
    _one_line_error(cli([str(folder)]), 18, "config.json", "not valid JSON")


@pytest.mark.parametrize(
    "args, needle",
    [
        (["not a repo id!"], "invalid repo id"),
        ([SMALL, "--revision", "../../etc"], "invalid revision"),
        ([SMALL, "--timeout", "soon"], "--timeout"),
        ([SMALL, "--timeout", "0"], "--timeout"),
        ([SMALL, "--format", "yaml"], "--format"),
        ([SMALL, "--no-such-option"], "no-such-option"),
        ([SMALL, "--ctx", "banana"], "--ctx"),
        ([SMALL, "--ctx", "-5"], "--ctx"),
        ([SMALL, "--gpus", "0"], "--gpus"),
    ],
)
def test_usage_errors(hub_env, cli, args, needle):
    out = cli(args)
    assert out.returncode == 2 and out.stdout == "" and "Traceback" not in out.stderr, out.stderr
    assert needle in out.stderr
    assert hub_env.requests == [], "nothing is sent for an invalid id or revision"


def test_network_unreachable(hub_env, cli):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    line = _one_line_error(cli([SMALL, "--timeout", "3"], env={"HF_ENDPOINT": f"http://127.0.0.1:{port}"}), 19)
    assert f"127.0.0.1:{port}" in line and "Connection refused" in line


def test_timeout(hub_env, stub_repo, cli):
    _serve(hub_env, stub_repo, SMALL)
    hub_env.stall_paths, hub_env.stall_s = {"config.json"}, 60
    _one_line_error(cli([SMALL, "--timeout", "1"]), 19, "timed out", "within 1 s")


def test_rate_limited(hub_env, stub_repo, cli):
    _serve(hub_env, stub_repo, QWEN)
    hub_env.rate_limit_once = {"safetensors-metadata"}  # Retry-After: 1 does not fit in --timeout 0.8
    _one_line_error(cli([QWEN, "--timeout", "0.8"]), 20, "429", QWEN)


def test_server_error(hub_env, stub_repo, cli):
    _serve(hub_env, stub_repo, SMALL)
    hub_env.fail_rate, hub_env.fail_kinds = 1.0, ("500",)
    _one_line_error(cli([SMALL, "--timeout", "2"]), 21, "HTTP 500", SMALL)


def test_debug_shows_the_traceback(tmp_path, cli):
    out = cli([str(tmp_path / "missing"), "--debug"])
    assert out.returncode == 16 and "Traceback" in out.stderr and "LocalPathError" in out.stderr


def test_unknown_gpu_is_a_usage_error(fixtures_dir, cli):
    out = cli([str(fixtures_dir / "models/Qwen/Qwen2-7B-Instruct"), "--gpu", "banana"])
    _one_line_error(out, 2, "unknown GPU 'banana'")


def test_errors_carry_repo_revision_path_and_status(hub_env, stub_repo, tmp_path):
    """Beyond the message, an error names what it is about (as huggingface_hub's errors do): repo_id, revision,
    path and the HTTP status, each None when unknown."""
    from hfmem.api import read_model
    from hfmem.errors import GatedRepo, LocalPathError, RepoNotFound, RevisionNotFound

    with pytest.raises(RepoNotFound) as missing:
        read_model("nobody/nothing-here")
    assert (missing.value.repo_id, missing.value.revision, missing.value.status) == ("nobody/nothing-here", None, 401)

    _serve(hub_env, stub_repo, SMALL, "meta-llama/Gated", gated=True)
    with pytest.raises(GatedRepo) as gated:
        read_model("meta-llama/Gated")
    assert (gated.value.repo_id, gated.value.status) == ("meta-llama/Gated", 401)

    _serve(hub_env, stub_repo, SMALL)
    with pytest.raises(RevisionNotFound) as revision:
        read_model(SMALL, revision="no-such-branch")
    assert (revision.value.repo_id, revision.value.revision, revision.value.status) == (SMALL, "no-such-branch", 404)

    where = str(tmp_path / "missing")
    with pytest.raises(LocalPathError) as local:
        read_model(where)
    assert (local.value.path, local.value.repo_id, local.value.status) == (where, None, None)
