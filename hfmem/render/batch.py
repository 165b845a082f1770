"""`hfmem batch`: the repo list, a progress bar, and one output row per repo in input order."""

from __future__ import annotations

import csv
import io
import json
import threading
from collections.abc import Sequence
from typing import Any

from hfmem.errors import HfmemError


def parse_repo_list(text: str) -> list[str]:
    """One repo id (or path) per line; blank lines and # comments ignored."""
    refs = []
    for line in text.splitlines():
        ref = line.split("#", 1)[0].strip()
        if ref:
            refs.append(ref)
    return refs


def run_batch(refs: Sequence[str], jobs: int, *, revision: str | None, token: str | bool | None, timeout: float | None,
              options: dict[str, Any], progress: bool) -> list[Any]:
    from hfmem.api import analyze
    from hfmem.batch import analyze_many

    bar = None
    lock = threading.Lock()
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(refs), unit="repo", leave=False)

    def one(ref: str, **source: Any) -> Any:
        try:
            return analyze(ref, **source, **options)
        finally:
            if bar is not None:
                with lock:
                    bar.update(1)

    try:
        return analyze_many(refs, jobs, revision=revision, token=token, timeout=timeout, fn=one)
    finally:
        if bar is not None:
            bar.close()


SUMMARY_FIELDS = ["repo", "ok", "revision", "model_type", "parameters", "active", "stored_bytes", "kv_bytes_per_token",
                  "inference_total_bytes", "fits", "error_type", "error"]


def _summary(ref: str, result: Any) -> dict[str, Any]:
    if isinstance(result, HfmemError):
        return {"repo": ref, "ok": False, "error_type": type(result).__name__, "exit_code": result.exit_code, "error": result.message}
    d = result.to_dict()
    inference = d.get("inference") or {}
    kv = d.get("kv_cache")
    kv = kv[-1] if isinstance(kv, list) else kv
    return {
        "repo": ref, "ok": True, "revision": d.get("revision"), "model_type": d["architecture"]["model_type"],
        "parameters": d["parameters"]["total"], "active": d["parameters"]["active"],
        "stored_bytes": d["parameters"]["stored_bytes"],
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
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
        return buf.getvalue()
    from tabulate import tabulate

    table = [[r.get(f) if r.get(f) is not None else "" for f in fields] for r in rows]
    return tabulate(table, headers=fields, tablefmt="github" if fmt == "markdown" else "simple", disable_numparse=True) + "\n"
