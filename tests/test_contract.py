"""The CLI's output contract, pinned: JSON (the stable contract scripts rely on) and the text tables, on fixtures
that cover dense, MoE, MLA + MTP, sliding-window, hybrid, MXFP4, encoder-decoder and GGUF models, with KV,
planner and training sections. A refactor must leave every byte as it is; a deliberate change regenerates the
files with ``HFMEM_UPDATE_CONTRACT=1 pytest tests/test_contract.py`` and the diff is reviewed."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from hfmem.cli import main

GOLDEN = Path(__file__).parent / "golden" / "contract"

CASES = {
    "qwen2-7b-gpu": ("Qwen/Qwen2-7B-Instruct", ["--ctx", "32k", "--gpu", "4090"]),
    "qwen2-7b-gpu-verbose": ("Qwen/Qwen2-7B-Instruct", ["--ctx", "32k", "--gpu", "3060", "-v"]),
    "qwen2-7b-train": ("Qwen/Qwen2-7B-Instruct", ["--ctx", "4k,32k", "--train", "all", "--gpu", "24GB", "--dtype", "int4"]),
    "mixtral-transformers": ("mistralai/Mixtral-8x7B-v0.1", ["--ctx", "8k", "--engine", "transformers", "--batch", "2"]),
    "deepseek-v2-lite-tp": ("deepseek-ai/DeepSeek-V2-Lite-Chat", ["--ctx", "32k", "--gpu", "h100", "--gpus", "2"]),
    "gemma3-sliding": ("google/gemma-3-27b-it", ["--ctx", "128k", "--kv-dtype", "fp8"]),
    "qwen3-next-hybrid": ("Qwen/Qwen3-Next-80B-A3B-Instruct", ["--ctx", "64k", "--gpu", "h200"]),
    "gpt-oss-mxfp4": ("openai/gpt-oss-20b", ["--ctx", "max", "--dtype", "int4", "--train", "qlora"]),
    "t5-encdec": ("google-t5/t5-small", ["--ctx", "512", "--encoder-len", "256"]),
    "llama2-cpu": ("meta-llama/Llama-2-7b-hf", ["--device", "cpu", "--gpu", "32GB", "--ctx", "4k"]),
    "qwen3-awq": ("Qwen/Qwen3-32B-AWQ", []),
}


def _stable(text: str, path: str, repo: str) -> str:
    text = text.replace(path, repo)
    text = re.sub(r"on \d{4}-\d{2}-\d{2}", "on DATE", text)
    text = re.sub(r'"date": "\d{4}-\d{2}-\d{2}"', '"date": "DATE"', text)
    return re.sub(r"hfmem \d+\.\d+\.\d+\S*", "hfmem VERSION", text)


def _check(name: str, text: str) -> None:
    golden = GOLDEN / name
    if os.environ.get("HFMEM_UPDATE_CONTRACT") or not golden.exists():
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
        if not os.environ.get("HFMEM_UPDATE_CONTRACT"):
            pytest.fail(f"wrote {golden}: review it and commit it")
    assert text == golden.read_text(), f"{name} changed"


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("fmt", ["json", "table"])
def test_analyze_output_pinned(stub_repo, name, fmt):
    repo, args = CASES[name]
    path = str(stub_repo(repo))
    result = CliRunner().invoke(main, [path, *args, "--format", fmt])
    assert result.exit_code == 0, result.output
    _check(f"{name}.{'json' if fmt == 'json' else 'txt'}", _stable(result.output, path, repo))


def test_card_and_compare_json_pinned(stub_repo):
    qwen, mixtral = str(stub_repo("Qwen/Qwen2-7B-Instruct")), str(stub_repo("mistralai/Mixtral-8x7B-v0.1"))
    card = CliRunner().invoke(main, ["card", qwen, "--format", "json"])
    assert card.exit_code == 0, card.output
    _check("card-qwen2-7b.json", _stable(card.output, qwen, "Qwen/Qwen2-7B-Instruct"))
    for fmt in ("json", "csv", "table"):
        cmp = CliRunner().invoke(main, ["compare", qwen, mixtral, "--ctx", "16k", "--format", fmt])
        assert cmp.exit_code == 0, cmp.output
        text = _stable(_stable(cmp.output, qwen, "Qwen/Qwen2-7B-Instruct"), mixtral, "mistralai/Mixtral-8x7B-v0.1")
        if fmt == "table":  # column widths follow the length of the temporary folder's path: compare the cells
            text = re.sub(r" {2,}", "  ", re.sub(r"-{2,}", "--", text))
        _check(f"compare.{fmt}", text)


def test_batch_jsonl_pinned(stub_repo, tmp_path):
    qwen = str(stub_repo("Qwen/Qwen2-7B-Instruct"))
    listing = tmp_path / "repos.txt"
    listing.write_text(f"# two local folders\n{qwen}\n{tmp_path / 'missing'}\n")
    for fmt in ("jsonl", "csv"):
        result = CliRunner().invoke(main, ["batch", str(listing), "--ctx", "8k", "--format", fmt])
        assert result.exit_code == 3, result.output
        text = _stable(_stable(result.output, qwen, "Qwen/Qwen2-7B-Instruct"), str(tmp_path), "TMP")
        _check(f"batch.{fmt}", text)


def test_gguf_output_pinned(tmp_path):
    gguf = pytest.importorskip("gguf")
    from test_gguf import write_gguf

    path = write_gguf(tmp_path / "m-Q4_K_M.gguf", gguf.GGMLQuantizationType.Q4_K)
    for fmt in ("json", "table"):
        result = CliRunner().invoke(main, [str(path), "--ctx", "4k,max", "--kv-dtype", "q8_0", "--format", fmt])
        assert result.exit_code == 0, result.output
        _check(f"gguf-q4_k_m.{'json' if fmt == 'json' else 'txt'}", _stable(result.output, str(path), "m-Q4_K_M.gguf"))
