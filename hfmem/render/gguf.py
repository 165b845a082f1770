"""A GGUF report as text: the repo's GGUF files, the selected file's parameters by ggml type, llama.cpp's KV cache."""

from __future__ import annotations

from hfmem.gguf.model import GGUFReport
from hfmem.render.kv import gguf_kv_lines
from hfmem.units import fmt_bytes, fmt_count


def gguf_text(report: GGUFReport, fmt: str = "table") -> str:
    from tabulate import tabulate

    tablefmt = "github" if fmt == "markdown" else "simple"
    out = [f"{report.repo} (GGUF, {report.source})"]
    rows = [[f.name, f.quant, fmt_bytes(f.size_bytes), len(f.shards), "vision projector" if f.is_projector else ""] for f in report.files]
    out += ["", "GGUF files", tabulate(rows, headers=["file", "quant", "size", "shards", ""], tablefmt=tablefmt)]
    if report.header is not None:
        p = report.parameters()
        out += ["", f"Selected: {report.selected.name if report.selected else report.header.file}"]
        out += [tabulate([[k, v] for k, v in report.architecture.items() if v is not None], tablefmt="plain")]
        out += ["", f"parameters {fmt_count(p['total'])}; weights {p['weight_bytes']:,} bytes ({fmt_bytes(p['weight_bytes'])}), "
                    f"{p['bits_per_weight']} bits/weight"]
        type_rows = [[t, f"{n:,}"] for t, n in p["by_ggml_type"].items()]
        out += [tabulate(type_rows, headers=["ggml type", "parameters"], tablefmt=tablefmt)]
    for kv in report.kv_cache:
        out += gguf_kv_lines(kv, tablefmt)
    for w in report.warnings:
        out.append(f"warning: {w}")
    return "\n".join(out)
