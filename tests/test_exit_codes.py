"""Exit codes and messages at the edges (docs/reliability.md's table), through the installed entry point: timeouts
that are no numbers of seconds, an unusable HF_HOME, batch files that are not plain UTF-8, invalid context limits
under --ctx max, and huggingface_hub's retry logs under `check`."""

from __future__ import annotations

import json
import shutil

import pytest

from entry import cli  # noqa: F401  (fixture)
from hub_server import RepoSpec

SMALL = "Qwen/Qwen2-0.5B-Instruct"


def _one_line(out, code: int, *needles: str) -> str:
    assert out.returncode == code, (out.returncode, out.stderr)
    assert out.stdout == "" and "Traceback" not in out.stderr and "internal error" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hfmem: error: "), out.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.mark.parametrize("value", ["inf", "nan", "1e308", "-inf", "0.01", "1e6"])
def test_timeout_that_is_no_number_of_seconds_is_a_usage_error(hub_env, cli, value):
    out = cli([SMALL, "--timeout", value])
    assert out.returncode == 2 and out.stdout == "" and "Traceback" not in out.stderr, out.stderr
    assert "--timeout" in out.stderr and "internal error" not in out.stderr
    assert hub_env.requests == []


@pytest.mark.parametrize("value", ["-1", "abc", "1.5", "", "1e308"])
def test_bad_hf_hub_download_timeout_is_a_usage_error(hub_env, cli, value):
    out = cli([SMALL], env={"HF_HUB_DOWNLOAD_TIMEOUT": value})
    assert out.returncode == 2 and out.stdout == "" and "Traceback" not in out.stderr, out.stderr
    assert "HF_HUB_DOWNLOAD_TIMEOUT" in out.stderr and "internal error" not in out.stderr
    assert hub_env.requests == []


def test_good_hf_hub_download_timeout_and_zero_still_work(hub_env, stub_repo, cli):
    hub_env.add_repo(SMALL, RepoSpec(root=stub_repo(SMALL)))
    for value in ("5", "0"):  # huggingface_hub reads 0 as its default
        assert cli([SMALL, "--format", "json"], env={"HF_HUB_DOWNLOAD_TIMEOUT": value}).returncode == 0


def test_hf_home_under_a_regular_file_is_a_local_path_error(hub_env, stub_repo, tmp_path, cli):
    hub_env.add_repo(SMALL, RepoSpec(root=stub_repo(SMALL)))
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    env = {"HF_HOME": str(blocker / "hf"), "HF_HUB_CACHE": str(blocker / "hf" / "hub"), "HFMEM_CACHE": ""}
    line = _one_line(cli([SMALL, "--timeout", "5"], env=env), 16, str(blocker))
    assert "network" not in line and "HF_HOME" in line


def test_batch_file_that_is_not_utf8_is_a_usage_error(tmp_path, cli):
    listing = tmp_path / "repos.txt"
    listing.write_bytes(b"org/model\norg/\xff\xfename\n")
    _one_line(cli(["batch", str(listing)]), 2, str(listing), "not UTF-8", "offset 14")


def test_batch_file_with_a_bom_reads_its_first_repo(stub_repo, tmp_path, cli):
    folder = tmp_path / "model"
    shutil.copytree(stub_repo(SMALL), folder)
    listing = tmp_path / "repos.txt"
    listing.write_bytes(b"\xef\xbb\xbf" + f"{folder}\r\n# a comment\r\n".encode())
    out = cli(["batch", str(listing)])
    assert out.returncode == 0, (out.stdout, out.stderr)
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(rows) == 1 and rows[0]["ok"] and rows[0]["repo"] == str(folder)


@pytest.mark.parametrize("value", ["abc", -5, 0, 1.5, True, [4096]])
def test_ctx_max_with_an_invalid_limit_is_a_malformed_config(stub_repo, tmp_path, cli, value):
    folder = tmp_path / "model"
    shutil.copytree(stub_repo(SMALL), folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "max_position_embeddings": value}))
    _one_line(cli([str(folder), "--ctx", "max"]), 18, "config.json", "max_position_embeddings", "--ctx max")


def test_ctx_max_without_a_limit_is_still_a_usage_error(stub_repo, tmp_path, cli):
    folder = tmp_path / "model"
    shutil.copytree(stub_repo(SMALL), folder)
    config = json.loads((folder / "config.json").read_text())
    config["max_position_embeddings"] = None  # absent, transformers would fill in Qwen2's default
    (folder / "config.json").write_text(json.dumps(config))
    _one_line(cli([str(folder), "--ctx", "max"]), 2, "--ctx max", "give a number")


def test_gguf_ctx_max_with_a_string_context_length_is_a_malformed_header(tmp_path, cli):
    import struct

    from stubs import gguf_bytes

    data = gguf_bytes()
    # llama.context_length as a string (value type 8) instead of a u32.
    key = b"llama.context_length"
    at = data.index(key) + len(key)
    text = b"lots"
    data = data[:at] + struct.pack("<I", 8) + struct.pack("<Q", len(text)) + text + data[at + 8 :]
    (tmp_path / "m-F32.gguf").write_bytes(data)
    _one_line(cli([str(tmp_path), "--ctx", "max"]), 17, "context_length", "--ctx max")


def test_check_keeps_the_clients_retry_logs_off_stderr(hub_env, stub_repo, cli):
    hub_env.add_repo(SMALL, RepoSpec(root=stub_repo(SMALL)))
    hub_env.rate_limit_once = {"/tree/"}  # the file listing that sizes the download: one 429, Retry-After 1
    out = cli(["check", SMALL, "--gpu", "80GB", "--timeout", "5", "--disk"])
    assert out.returncode == 0, (out.stdout, out.stderr)
    assert out.stderr == "", out.stderr
    assert len(out.stdout.strip().splitlines()) == 2 and "fits" in out.stdout and ": disk: fits" in out.stdout
    assert [r.status for r in hub_env.requests if "/tree/" in r.path] == [429, 200]
