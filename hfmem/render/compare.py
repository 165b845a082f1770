"""``compare``: models side by side as a table, Markdown, CSV or JSON."""

from __future__ import annotations

import json

from hfmem.memory.summary import ComparisonRow
from hfmem.render.tables import csv_text
from hfmem.units import fmt_bytes

_LABELS = {
    "parameters": "parameters", "active": "active / token", "kv_bytes_per_token": "KV bytes / token",
    "weights": "weights", "kv_bytes": "KV at context", "inference_total": "inference total",
    "training_full": "full FT (ckpt)", "training_lora": "LoRA r=16 (ckpt)", "training_qlora": "QLoRA r=16 (ckpt)",
}  # fmt: skip
_COUNTS = ("parameters", "active", "kv_bytes_per_token")


def render_compare(context: int, rows: list[ComparisonRow], fmt: str, engine: str, precision: str) -> str:
    dicts = [r.to_dict() for r in rows]
    if fmt == "json":
        return json.dumps({"context": context, "models": dicts}, indent=2) + "\n"
    if fmt == "csv":
        return csv_text(dicts, list(dict.fromkeys(k for r in dicts for k in r)))
    from tabulate import tabulate

    keys = [k for k in _LABELS if any(k in r for r in dicts)]
    body = []
    for k in keys:
        cells = []
        for r in dicts:
            v = r.get(k)
            cells.append("-" if v is None else f"{v:,}" if k in _COUNTS else fmt_bytes(v))
        body.append([_LABELS[k], *cells])
    table = tabulate(body, headers=["", *[r["repo"] for r in dicts]], tablefmt="github" if fmt == "markdown" else "simple",
                     disable_numparse=True)
    return f"context {context:,} tokens, {engine}, weights {precision}\n{table}\n"
