"""The GPU catalog (every GPU x fit, longest context, concurrency) is computed only when something reads it: the
text output without --gpu and the JSON; never for --gpu, ``check``, ``compare`` or a batch summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import hfmem
from hfmem.cli import main
from hfmem.memory.planner import Planner
from hfmem.render.batch import render_batch

MODEL = str(Path(__file__).resolve().parent.parent / "fixtures" / "models" / "Qwen" / "Qwen2-7B-Instruct")


@pytest.fixture
def rows(monkeypatch):
    """Counts catalog rows computed."""
    calls: list[str] = []
    real = Planner._fit_row
    monkeypatch.setattr(Planner, "_fit_row", lambda self, gpu, *a: calls.append(gpu.key) or real(self, gpu, *a))
    return calls


def test_api_computes_the_catalog_on_first_read(rows):
    report = hfmem.analyze(MODEL, ctx="8k")
    assert report.inference is not None and not report.inference.catalog_computed and rows == []
    first = report.inference.fits_on
    assert first and [r.gpu.key for r in first] == rows  # one row per GPU, computed once
    assert report.inference.fits_on is first and len(rows) == len(first)
    assert report.inference.catalog_computed


def test_gpu_check_compare_and_batch_summaries_compute_no_catalog(rows):
    runner = CliRunner()
    for args in (["analyze", MODEL, "--gpu", "4090", "--ctx", "32k"],
                 ["analyze", MODEL, "--gpu", "4090", "--format", "json"],
                 ["check", MODEL, "--gpu", "4090"],
                 ["compare", MODEL, MODEL]):
        result = runner.invoke(main, args, catch_exceptions=False)
        assert result.exit_code in (0, 1), (args, result.output)
        assert rows == [], args
    report = hfmem.analyze(MODEL)
    for fmt in ("csv", "json", "table"):
        render_batch([MODEL], [report], fmt)
    assert rows == []
    render_batch([MODEL], [report], "jsonl")  # the full report, catalog included
    assert rows


def test_text_and_json_without_gpu_show_the_catalog(rows):
    runner = CliRunner()
    text = runner.invoke(main, ["analyze", MODEL], catch_exceptions=False).output
    assert "Catalog (" in text and rows
    rows.clear()
    data = json.loads(runner.invoke(main, ["analyze", MODEL, "--format", "json"], catch_exceptions=False).output)
    assert [r["gpu"] for r in data["inference"]["fits_on"]] == rows
