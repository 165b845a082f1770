"""Model cards: golden Markdown, --update round trips, compare."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from hfmem.render.markers import END, START, update_block
from hfmem.cli import main
from hfmem.errors import UsageError

GOLDEN = Path(__file__).parent / "golden"


def _stable(text: str) -> str:
    """Cards carry the date and version: pin everything else."""
    text = re.sub(r"on \d{4}-\d{2}-\d{2}", "on DATE", text)
    return re.sub(r"hfmem \d+\.\d+\.\d+\S*", "hfmem VERSION", text)


@pytest.mark.parametrize("repo, name", [("Qwen/Qwen2-7B-Instruct", "qwen2-7b-instruct.md"), ("mistralai/Mixtral-8x7B-v0.1", "mixtral-8x7b.md")])
def test_golden_card(stub_repo, repo, name):
    result = CliRunner().invoke(main, ["card", str(stub_repo(repo))])
    assert result.exit_code == 0, result.output
    text = _stable(result.output).replace(str(stub_repo(repo)), repo)
    golden = GOLDEN / name
    if not golden.exists():  # written once for review by eye; the test fails until it is committed
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(text)
        pytest.fail(f"wrote {golden}: review it and commit it")
    assert text == golden.read_text()


def test_card_numbers_match_json(stub_repo):
    path = str(stub_repo("Qwen/Qwen2-7B-Instruct"))
    card = json.loads(CliRunner().invoke(main, ["card", path, "--format", "json", "--ctx", "32k", "--precisions", "bf16"]).output)
    analysis = json.loads(CliRunner().invoke(main, [path, "--ctx", "32k", "--format", "json"]).output)
    cell = card["inference"][0]
    assert cell["kv_bytes"] == analysis["kv_cache"]["total_bytes"] == 1_879_048_192
    assert cell["weights_bytes"] == analysis["inference"]["weights_bytes"]
    assert cell["total_bytes"] == analysis["inference"]["total_bytes"]


DOC = "# My model\n\nSome text.\n\n## Usage\n\nMore text.\n"


def test_update_adds_markers_then_is_idempotent():
    once = update_block(DOC, "TABLE v1")
    assert once.startswith(DOC) and once.count(START) == 1 and "TABLE v1" in once
    assert update_block(once, "TABLE v1") == once
    twice = update_block(once, "TABLE v2")
    assert "TABLE v2" in twice and "TABLE v1" not in twice
    assert twice.replace("TABLE v2", "TABLE v1") == once


def test_update_keeps_surrounding_content():
    doc = f"before\n{START}\nold\n{END}\nafter\n"
    assert update_block(doc, "new") == f"before\n{START}\nnew\n{END}\nafter\n"


@pytest.mark.parametrize("doc", [f"{START}\nx\n", f"{END}\n{START}\n", f"{START}\n{START}\n{END}\n"])
def test_update_refuses_broken_markers(doc):
    with pytest.raises(UsageError):
        update_block(doc, "t")


def test_cli_update_round_trip(stub_repo, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(DOC)
    args = ["card", str(stub_repo("Qwen/Qwen2-7B-Instruct")), "--ctx", "4k", "--precisions", "bf16", "--no-training", "--update", str(readme)]
    assert CliRunner().invoke(main, args).exit_code == 0
    first = readme.read_text()
    assert first.startswith(DOC) and START in first and "| bf16 | 4k |" in first
    assert CliRunner().invoke(main, args).exit_code == 0
    assert readme.read_text() == first


def test_compare_json(stub_repo):
    a, b = str(stub_repo("Qwen/Qwen2-7B-Instruct")), str(stub_repo("meta-llama/Llama-3.1-8B-Instruct"))
    result = CliRunner().invoke(main, ["compare", a, b, "--ctx", "32k", "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["models"]
    assert [r["parameters"] for r in rows] == [7_615_616_512, 8_030_261_248]
    assert [r["kv_bytes_per_token"] for r in rows] == [57_344, 131_072]
