"""compare takes every planner option (the same answers as `hfmem MODEL` with those options), a repo that cannot be
read is an error row with exit 3 as in batch, and several GPUs give a precision x GPU matrix. Through the installed
entry point on the local Hub."""

from __future__ import annotations

import json

import pytest

import hfmem
from entry import cli  # noqa: F401  (fixture)
from hub_server import RepoSpec

QWEN = "Qwen/Qwen2-7B-Instruct"
MISTRAL = "mistralai/Mistral-7B-v0.1"


@pytest.fixture
def repos(hub_env, stub_repo):
    for repo in (QWEN, MISTRAL):
        hub_env.add_repo(repo, RepoSpec(root=stub_repo(repo)))
    return hub_env


def test_missing_repo_is_an_error_row_and_exit_3(repos, cli):  # noqa: F811
    out = cli(["compare", QWEN, "org/missing", MISTRAL, "--ctx", "8k", "--format", "json"])
    assert out.returncode == 3, out.stderr
    models = json.loads(out.stdout)["models"]
    assert [m["repo"] for m in models] == [QWEN, "org/missing", MISTRAL]
    assert models[1]["exit_code"] == 11 and models[1]["error_type"] == "RepoNotFound" and "parameters" not in models[1]
    assert models[0]["parameters"] == 7_615_616_512
    table = cli(["compare", QWEN, "org/missing", "--ctx", "8k"])
    assert table.returncode == 3 and "error: org/missing" in table.stdout and "(exit 11)" in table.stdout
    csv = cli(["compare", QWEN, "org/missing", "--ctx", "8k", "--format", "csv"])
    assert csv.returncode == 3 and "RepoNotFound" in csv.stdout


def test_planner_options_give_the_answers_of_analyze(repos, cli):  # noqa: F811
    opts = ["--ctx", "16k", "--kv-dtype", "fp8", "--batch", "3", "--gpu", "h100", "--gpus", "2", "--gpu-util", "0.8"]
    out = cli(["compare", QWEN, MISTRAL, *opts, "--format", "json"])
    assert out.returncode == 0, out.stderr
    for row in json.loads(out.stdout)["models"]:
        plan = json.loads(cli([row["repo"], *opts, "--format", "json"]).stdout)["inference"]
        assert row["inference_total"] == plan["total_bytes"] and row["kv_bytes"] == plan["kv_bytes"]
        assert row["fits"] == [{"gpu": "h100-80gb", "gpus": 2, "fits": plan["fits"], "margin_bytes": plan["margin_bytes"],
                                "max_context": plan["max_context"], "concurrency": plan["concurrency"]}]
    bad = cli(["compare", QWEN, MISTRAL, "--gpus", "3", "--gpu", "h100"])  # 28 heads: a usage error, not a row
    assert bad.returncode == 2 and "valid sizes" in bad.stderr


def test_precision_by_gpu_matrix(repos, cli):  # noqa: F811
    out = cli(["compare", QWEN, MISTRAL, "--ctx", "32k", "--dtype", "bf16,int4", "--gpu", "4090,3060", "--format", "markdown"])
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    at = lines.index("fits (margin per GPU)")
    assert lines[at + 1].replace(" ", "") == "|model|precision|rtx4090|rtx3060|"
    cells = {tuple(c.strip() for c in line.strip("|").split("|")[:2]): [c.strip() for c in line.strip("|").split("|")[2:]]
             for line in lines[at + 3:at + 7]}
    assert set(cells) == {(QWEN, "bf16"), (QWEN, "int4"), (MISTRAL, "bf16"), (MISTRAL, "int4")}
    for (repo, precision), row in cells.items():
        for gpu, cell in zip(("4090", "3060"), row):
            plan = json.loads(cli([repo, "--ctx", "32k", "--dtype", precision, "--gpu", gpu, "--format", "json"]).stdout)["inference"]
            assert cell.startswith("yes" if plan["fits"] else "no"), (repo, precision, gpu, cell)


def test_api_names_a_mistyped_option(stub_repo):
    with pytest.raises(TypeError, match="kv_dtpye.*valid: .*kv_dtype"):
        hfmem.compare([str(stub_repo(QWEN))], kv_dtpye="fp8")
    context, rows = hfmem.compare([str(stub_repo(QWEN))], ctx="4k", dtype="int4", kv_dtype="fp8")
    assert context == 4096 and rows[0].precision == "int4"
