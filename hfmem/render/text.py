"""A Report as a terminal table or GitHub Markdown (the JSON is ``report.to_dict()``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from hfmem.render.tables import Table
from hfmem.report import Report
from hfmem.units import fmt_bytes, fmt_count

if TYPE_CHECKING:
    from hfmem.gguf.model import GGUFReport


def to_json(report: Report | GGUFReport) -> str:
    return json.dumps(report.to_dict(), indent=2)


def _tables(report: Report) -> list[Table]:
    a = report.architecture
    p = report.parameters
    layer_types = " + ".join(f"{n} {t}" for t, n in a.layer_types.items()) or "-"
    arch_rows: list[list[Any]] = [
        ["model_type", a.model_type + (f" ({', '.join(a.architectures)})" if a.architectures else "")],
        ["layers", a.num_layers],
        ["layer types", layer_types],
        ["hidden size", a.hidden_size],
        ["attention heads", a.num_attention_heads],
        ["KV heads", f"{a.num_kv_heads} ({a.attention_kind})"],
        ["head_dim", a.head_dim],
        ["vocab", a.vocab_size],
        ["max context", a.max_position_embeddings if a.max_position_embeddings else "-"],
        ["tied embeddings", "yes" if a.tie_word_embeddings else "no"],
        ["dtype (config)", a.torch_dtype or "-"],
    ]
    if a.sliding_window:
        arch_rows.insert(3, ["sliding window", a.sliding_window])
    if a.mla:
        arch_rows.append(["MLA", f"kv_lora_rank {a.mla.kv_lora_rank}, qk_rope_head_dim {a.mla.qk_rope_head_dim}"])
    if a.moe:
        arch_rows.append(["MoE", f"{a.moe.num_experts} experts, top-{a.moe.experts_per_token}"])
    param_rows: list[list[Any]] = [["total", fmt_count(p.total)]]
    if p.inference_loaded is not None and p.inference_loaded != p.total:
        param_rows.append(["loaded for inference (no MTP)", fmt_count(p.inference_loaded)])
    if p.active != p.total:
        param_rows.append(["active per token", fmt_count(p.active)])
    if p.moe:
        m = p.moe
        param_rows.append(["MoE", f"top-{m.experts_per_token} of {m.num_experts} experts, {m.moe_layers} MoE + "
                                  f"{m.dense_layers} dense layers; active excl. embeddings {fmt_count(m.active_excluding_embeddings)}"])
    if len(p.by_part) > 1:
        param_rows.append(["parts", ", ".join(f"{k} {fmt_count(v)}" for k, v in p.by_part.items())])
    for dtype, n in p.by_dtype.items():
        param_rows.append([f"stored as {dtype}", f"{n:,}"])
    param_rows.append(["stored bytes", f"{p.stored_bytes:,} ({fmt_bytes(p.stored_bytes)})"])
    if p.quantization:
        q = p.quantization
        bits = f" {q.bits}-bit" if q.bits else ""
        group = f", group {q.group_size}" if q.group_size else ""
        formats = ", ".join(f"{k} {fmt_count(v)}" for k, v in q.formats.items())
        param_rows.append(["quantization", f"{q.method}{bits}{group}, overhead {fmt_bytes(q.overhead_bytes)}"
                                           + (f" ({formats})" if formats else "")])
    comp_rows = [
        [name, f"{n:,}", f"{100 * n / p.total:.2f}%" if p.total else "-", fmt_bytes(p.bytes_by_component.get(name))]
        for name, n in p.by_component.items()
    ]
    tables: list[Table] = [
        ("Architecture", ["", ""], arch_rows),
        ("Parameters", ["", ""], param_rows),
        ("By component", ["component", "parameters", "share", "stored"], comp_rows),
    ]
    return tables + _section_tables(report)


def _section_tables(report: Report) -> list[Table]:
    from hfmem.render.kv import kv_tables
    from hfmem.render.plan import inference_tables, weights_tables

    tables: list[Table] = []
    if report.kv_cache:
        tables += kv_tables(report.kv_cache)
    if report.weights is not None:
        tables += weights_tables(report.weights)
    if report.inference is not None:
        tables += inference_tables(report.inference)
    if report.training is not None:
        from hfmem.render.training import training_tables  # with its estimators: only for --train

        tables += training_tables(report.training)
    return tables


def layout(title: str, tables: list[Table], fmt: str = "table", notes: list[str] | None = None,
           warnings: list[str] | None = None) -> str:
    """Titled tables as plain text (``simple`` tables) or GitHub Markdown, then notes and warnings."""
    from tabulate import tabulate

    tablefmt = "github" if fmt == "markdown" else "simple"
    out = [f"# {title}" if fmt == "markdown" else title]
    for heading, headers, rows in tables:
        out.append("")
        out.append(f"## {heading}" if fmt == "markdown" else heading)
        if headers == ["", ""]:
            out.append(tabulate(rows, tablefmt="github" if fmt == "markdown" else "plain", headers=["", ""] if fmt == "markdown" else ()))
        else:
            out.append(tabulate(rows, headers=headers, tablefmt=tablefmt, disable_numparse=True))
    if notes or warnings:
        out.append("")
    for note in notes or []:
        out.append(("- note: " if fmt == "markdown" else "note: ") + note)
    for warning in warnings or []:
        out.append(("- warning: " if fmt == "markdown" else "warning: ") + warning)
    return "\n".join(out)


def all_notes(report: Report) -> list[str]:
    """The report's notes, then the inference plan's (each once): what the plan assumes and where the engine's own
    figure can differ, which the JSON gives as ``inference.notes``."""
    notes = list(report.notes)
    if report.inference is not None:
        notes += [n for n in report.inference.notes if n not in notes]
    return notes


def to_text(report: Report, fmt: str = "table") -> str:
    title = f"{report.repo}" + (f" @ {report.revision[:12]}" if report.revision else "") + f" ({report.source})"
    return layout(title, _tables(report), fmt, all_notes(report), report.warnings)


def render(report: Report | GGUFReport, fmt: str = "table", verbose: bool = False) -> str:
    """What ``hfmem MODEL --format FMT`` prints for a safetensors or a GGUF report. With --gpu the answer comes
    first and the body is short unless ``verbose`` (render.verdict)."""
    if fmt == "json":
        return to_json(report)
    if not isinstance(report, Report):  # a GGUFReport (its module is imported only for GGUF models)
        from hfmem.render.gguf import gguf_text

        return gguf_text(report, fmt)
    if report.inference is not None and report.inference.gpu is not None:
        from hfmem.render.verdict import verdict_text

        return verdict_text(report, fmt, verbose)
    return to_text(report, fmt)
