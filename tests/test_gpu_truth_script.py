"""benchmarks/gpu_truth.py runs end to end: ``--dry-run`` builds the three models on CPU with shrunk shapes, saves
them, asks hfmem for every prediction (prefill at three contexts; full bf16, mixed and LoRA steps with and without
checkpointing) and runs every step, measuring nothing (no CUDA). The measured table comes from a GPU run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.truth

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

ROOT = Path(__file__).resolve().parent.parent


def test_gpu_truth_dry_run():
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_truth.py"), "--dry-run"], capture_output=True,
                       text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == 3 * (3 + 6)
    assert {row["model"] for row in rows} == {"dense GQA (Qwen3-0.6B)", "MoE (Qwen3-30B-A3B, 4 layers)", "hybrid (Qwen3.5-0.8B text)"}
    assert all(row["predicted"] > 0 and row["allocated"] is None for row in rows)
    assert sum("ckpt" in row["case"] for row in rows) == 9
    assert "| model | case | hfmem (MiB) | max allocated (MiB) | ratio | max reserved (MiB) |" in r.stdout
