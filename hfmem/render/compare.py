"""``compare``: models side by side as a table, Markdown, CSV or JSON."""

from __future__ import annotations

import json

from hfmem.memory.comparison import CompareError
from hfmem.memory.summary import ComparisonRow
from hfmem.render.tables import csv_text
from hfmem.units import fmt_bytes

_LABELS = {
    "parameters": "parameters", "active": "active / token", "kv_bytes_per_token": "KV bytes / token",
    "weights": "weights", "kv_bytes": "KV at context", "inference_total": "inference total",
    "training_full": "full FT (ckpt)", "training_lora": "LoRA r=16 (ckpt)", "training_qlora": "QLoRA r=16 (ckpt)",
}  # fmt: skip
_COUNTS = ("parameters", "active", "kv_bytes_per_token")


def _flat(d: dict) -> dict:
    """A row for CSV: each GPU verdict as its own columns."""
    out = {k: v for k, v in d.items() if k != "fits"}
    for f in d.get("fits") or []:
        out[f"fits_{f['gpu']}"] = f["fits"]
        out[f"margin_bytes_{f['gpu']}"] = f["margin_bytes"]
    return out


def _fit_cell(f: dict) -> str:
    head = ("yes" if f["fits"] else "no") + (f" x{f['gpus']}" if f.get("gpus", 1) > 1 else "")
    return f"{head} ({'+' if f['margin_bytes'] >= 0 else '-'}{fmt_bytes(abs(f['margin_bytes']))})"


def render_compare(context: int, rows: list[ComparisonRow | CompareError], fmt: str, engine: str, precision: str) -> str:
    models = [r for r in rows if isinstance(r, ComparisonRow)]
    errors = [r for r in rows if isinstance(r, CompareError)]
    dicts = [r.to_dict() for r in models]
    if fmt == "json":
        return json.dumps({"context": context, "models": [r.to_dict() for r in rows]}, indent=2) + "\n"
    if fmt == "csv":
        flat = [_flat(r.to_dict()) for r in rows]
        return csv_text(flat, list(dict.fromkeys(k for r in flat for k in r)))
    from tabulate import tabulate

    tablefmt = "github" if fmt == "markdown" else "simple"
    keys = [k for k in _LABELS if any(k in r for r in dicts)]
    body = []
    for k in keys:
        cells = []
        for r in dicts:
            v = r.get(k)
            cells.append("-" if v is None else f"{v:,}" if k in _COUNTS else fmt_bytes(v))
        body.append([_LABELS[k], *cells])
    gpus = list(dict.fromkeys(f["gpu"] for r in dicts for f in r.get("fits") or []))
    for gpu in gpus:
        body.append([f"fits {gpu} (margin)", *[next((_fit_cell(f) for f in r.get("fits") or [] if f["gpu"] == gpu), "-") for r in dicts]])
    headers = ["", *[r["repo"] + (f" [{r['precision']}]" if r.get("precision") else "") for r in dicts]]
    out = [f"context {context:,} tokens, {engine}, weights {precision}"]
    if dicts:
        out.append(tabulate(body, headers=headers, tablefmt=tablefmt, disable_numparse=True))
    if len(gpus) > 1:  # the precision x GPU matrix
        matrix = [[r["repo"], r.get("precision") or precision,
                   *[next((_fit_cell(f) for f in r.get("fits") or [] if f["gpu"] == g), "-") for g in gpus]] for r in dicts]
        out += ["", "fits (margin per GPU)",
                tabulate(matrix, headers=["model", "precision", *gpus], tablefmt=tablefmt, disable_numparse=True)]
    for e in errors:
        out.append(f"error: {e.repo}: {e.error.message.removeprefix(e.repo + ': ')} (exit {e.error.exit_code})")
    return "\n".join(out) + "\n"
