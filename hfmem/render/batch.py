"""``batch`` results as JSON Lines, JSON, CSV or a table: one row per repo in input order, failures included."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from hfmem.errors import HfmemError
from hfmem.render.tables import csv_text
from hfmem.report import Report

SUMMARY_FIELDS = ["repo", "ok", "revision", "model_type", "parameters", "active", "stored_bytes", "kv_bytes_per_token",
                  "inference_total_bytes", "fits", "error_type", "error"]


def _summary(ref: str, result: Any) -> dict[str, Any]:
    if isinstance(result, HfmemError):
        return {"repo": ref, "ok": False, "error_type": type(result).__name__, "exit_code": result.exit_code, "error": result.message}
    d = result.to_dict(catalog=False) if isinstance(result, Report) else result.to_dict()  # the summary has no catalog
    inference = d.get("inference") or {}
    kv = d.get("kv_cache")
    kv = kv[-1] if isinstance(kv, list) else kv
    model_type = d["architecture"].get("model_type") or d["architecture"].get("architecture")  # GGUF: general.architecture
    return {
        "repo": ref, "ok": True, "revision": d.get("revision"), "model_type": model_type,
        "parameters": d["parameters"].get("total"), "active": d["parameters"].get("active"),
        "stored_bytes": d["parameters"].get("stored_bytes", d["parameters"].get("weight_bytes")),
        "kv_bytes_per_token": kv["bytes_per_token"] if kv else None,
        "inference_total_bytes": inference.get("total_bytes"), "fits": inference.get("fits"),
    }  # fmt: skip


def render_batch(refs: Sequence[str], results: Sequence[Any], fmt: str) -> str:
    if fmt == "jsonl":
        lines = []
        for ref, r in zip(refs, results):
            row = r.to_dict() | {"ok": True} if not isinstance(r, HfmemError) else _summary(ref, r)
            lines.append(json.dumps(row, separators=(",", ":")))
        return "\n".join(lines) + ("\n" if lines else "")
    rows = [_summary(ref, r) for ref, r in zip(refs, results)]
    if fmt == "json":
        return json.dumps(rows, indent=2) + "\n"
    fields = SUMMARY_FIELDS
    if fmt == "csv":
        return csv_text(rows, fields)
    from tabulate import tabulate

    table = [[r.get(f) if r.get(f) is not None else "" for f in fields] for r in rows]
    return tabulate(table, headers=fields, tablefmt="github" if fmt == "markdown" else "simple", disable_numparse=True) + "\n"
