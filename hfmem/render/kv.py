"""KV cache estimates as tables: one block per context, or one row per context for several; llama.cpp's as text."""

from __future__ import annotations

from typing import Any

from hfmem.memory.kv import KVCacheEstimate
from hfmem.memory.kv.llamacpp import GGUFKV
from hfmem.render.tables import Table
from hfmem.units import fmt_bytes


def kv_tables(estimates: list[KVCacheEstimate]) -> list[Table]:
    """One context: the per-layer-type table and a summary; several: one row per context, the per-layer-type
    breakdown of each, and their assumptions and warnings once each."""
    if len(estimates) == 1:
        return _single_tables(estimates[0])
    first = estimates[0]
    rows = [[f"{e.context:,}", e.batch, f"{e.bytes_per_token:,}", f"{e.constant_bytes:,}", f"{e.total_bytes:,}",
             fmt_bytes(e.total_bytes)] for e in estimates]
    per = " per GPU" if first.tp > 1 else ""
    heading = f"KV cache ({first.engine}, {first.dtype}{per}) by context [{first.total_is}]"
    headers = ["context", "batch", "bytes/token", "constant/seq", "total bytes", "GiB"]
    breakdown = []
    for e in estimates:
        for r in _rows(e):
            breakdown.append([f"{e.context:,}", *r])
    seen: dict[tuple[str, str], None] = {}
    for e in estimates:
        for a in e.assumptions:
            seen.setdefault(("assumption", a))
        for w in e.warnings:
            seen.setdefault(("warning", w))
    notes: list[list[Any]] = [list(k) for k in seen]
    out: list[Table] = [(heading, headers, rows),
                        ("KV cache by layer type", ["context", "layer type", "layers", "tokens held", "bytes/token",
                                                    "bytes at context", "GiB", "state/seq"], breakdown)]
    if notes:
        out.append(("KV cache notes", ["", ""], notes))
    return out


def _title(e: KVCacheEstimate) -> str:
    per = " per GPU" if e.tp > 1 else ""
    return (f"KV cache ({e.engine}, {e.dtype}, {e.context:,} tokens x {e.batch} "
            f"sequence{'s' if e.batch != 1 else ''}{per})")


def _rows(est: KVCacheEstimate) -> list[list[Any]]:
    rows = []
    for name, e in est.by_layer_type.items():
        rows.append([
            name, e["layers"] if not e.get("padding_layers") else f"{e['layers']} (+{e['padding_layers']} padding)",
            f"{e['tokens']:,}" if e.get("tokens") else "-",
            f"{e['bytes_per_token']:,}" if e.get("bytes_per_token") else "-",
            f"{e['bytes']:,}", fmt_bytes(e["bytes"]),
            f"{e['state_bytes']:,}" if e.get("state_bytes") else "-",
        ])
    return rows


def _single_tables(est: KVCacheEstimate) -> list[Table]:
    headers = ["layer type", "layers", "tokens held", "bytes/token", "bytes at context", "GiB", "state/seq"]
    rows = _rows(est)
    states = sum(e.get("state_bytes", 0) for e in est.by_layer_type.values())
    rows.append(["total", "", "", f"{est.bytes_per_token:,}", f"{est.total_bytes:,}", fmt_bytes(est.total_bytes),
                 f"{states:,}" if states else "-"])
    summary: list[list[Any]] = [[f"{label} (per sequence)", text] for label, text in est.formulas.items()]
    summary += [
        ["bytes per token (growing layers, per sequence)", f"{est.bytes_per_token:,}"],
        ["constant per sequence (windows, states, cross)", f"{est.constant_bytes:,} ({fmt_bytes(est.constant_bytes)})"],
        ["total", f"{est.total_bytes:,} ({fmt_bytes(est.total_bytes)})  [{est.total_is}]"],
    ]
    if est.page_reserved_total_bytes is not None and est.page_reserved_total_bytes != est.total_bytes:
        summary.append(["with full-length pages for sliding layers (hybrid KV manager off)",
                        f"{est.page_reserved_total_bytes:,} ({fmt_bytes(est.page_reserved_total_bytes)})"])
    if est.storage_bytes and est.storage_bytes.get("after_prefill") != est.total_bytes:
        summary.append(["storage pinned after one prefill (sliding views)",
                        f"{est.storage_bytes['after_prefill']:,} ({fmt_bytes(est.storage_bytes['after_prefill'])})"])
    for a in est.assumptions:
        summary.append(["assumption", a])
    for w in est.warnings:
        summary.append(["warning", w])
    return [(_title(est), headers, rows), ("KV cache summary", ["", ""], summary)]


def gguf_kv_lines(kv: GGUFKV, tablefmt: str) -> list[str]:
    """llama.cpp's KV cache at one context, as lines of GGUFReport.to_text (``tablefmt``: tabulate's format)."""
    from tabulate import tabulate

    what = "KV cache + recurrent state" if kv.recurrent_bytes else "KV cache"
    streams = f"{kv.streams} stream{'s' if kv.streams > 1 else ''}" + (" (unified)" if kv.kv_unified and kv.batch > 1 else "")
    return [
        "",
        f"{what} (llama.cpp, {kv.dtype}, {kv.defaults} defaults) at {kv.context:,} tokens x {kv.batch}: "
        f"{fmt_bytes(kv.total_bytes)} ({kv.total_bytes:,} bytes; {kv.cells:,} cells x {streams})",
        tabulate([[t, v["layers"], f"{v['tokens']:,}", f"{v['bytes']:,}"] for t, v in kv.by_layer_type.items()],
                 headers=["layers", "count", "cells", "bytes"], tablefmt=tablefmt),
        *[f"note: {n}" for n in kv.notes[1:]],  # the first note (the defaults) is in the title
    ]
