"""`hfmem batch` and hfmem.analyze_many: input order, per-repo failures, exit code 3, no progress bar off a TTY."""

from __future__ import annotations

import json

from click.testing import CliRunner

import hfmem
from hfmem.batch import parse_repo_list
from hfmem.cli import main
from hub_server import RepoSpec


def test_repo_list_parsing():
    assert parse_repo_list("# models\nQwen/Qwen2-7B\n\n  org/b  # trailing comment\n#x/y\n") == ["Qwen/Qwen2-7B", "org/b"]


def test_batch_keeps_order_reports_failures_and_exits_3(stub_repo, tmp_path, hub_env):
    hub_env.add_repo("Qwen/Qwen2-0.5B-Instruct", RepoSpec(root=stub_repo("Qwen/Qwen2-0.5B-Instruct")))
    good = str(stub_repo("Qwen/Qwen2-7B-Instruct"))
    listing = tmp_path / "repos.txt"
    listing.write_text(f"# a batch\n{good}\nnobody/missing-model\n{tmp_path / 'no-such-dir'}\nQwen/Qwen2-0.5B-Instruct\n")
    result = CliRunner().invoke(main, ["batch", str(listing), "--jobs", "3", "--ctx", "4k"])
    assert result.exit_code == 3, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [l["repo"] for l in lines] == [good, "nobody/missing-model", str(tmp_path / "no-such-dir"), "Qwen/Qwen2-0.5B-Instruct"]
    assert [l["ok"] for l in lines] == [True, False, False, True]
    assert lines[0]["parameters"]["total"] == 7_615_616_512 and lines[0]["kv_cache"]["total_bytes"] == 4096 * 57_344
    assert lines[3]["parameters"]["total"] == 494_032_768
    assert lines[1]["error_type"] == "RepoNotFound" and lines[1]["exit_code"] == 11
    assert lines[2]["error_type"] == "LocalPathError"
    assert "it/s" not in result.stderr and "repo/s" not in result.stderr  # no progress bar when not a TTY


def test_batch_all_ok_csv_from_stdin(stub_repo):
    refs = "\n".join(str(stub_repo(r)) for r in ("Qwen/Qwen2-7B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"))
    result = CliRunner().invoke(main, ["batch", "-", "--format", "csv", "--quiet"], input=refs)
    assert result.exit_code == 0, result.output
    rows = result.stdout.strip().splitlines()
    assert rows[0].startswith("repo,ok,") and len(rows) == 3
    assert ",7615616512," in rows[1] and ",8030261248," in rows[2]


def test_analyze_many_api(stub_repo, tmp_path):
    out = hfmem.analyze_many([str(stub_repo("Qwen/Qwen2-7B-Instruct")), str(tmp_path / "missing")], jobs=2)
    assert out[0].parameters.total == 7_615_616_512
    assert isinstance(out[1], hfmem.HfmemError) and out[1].exit_code == 16
