"""The answer first: with --gpu, the first lines say whether the model fits, by how much, the longest context, the
concurrency and the smallest setup that fits; the default output then shows the asked precision only (``-v`` shows
every table, as ``render.text.to_text``); ``--brief`` is one line."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hfmem.memory.planner import InferencePlan
from hfmem.render.plan import refused_start
from hfmem.render.tables import Table
from hfmem.report import Report
from hfmem.units import fmt_bytes, fmt_count

if TYPE_CHECKING:
    from hfmem.api import CheckResult
    from hfmem.memory.parallel import Setup


def _where(plan: InferencePlan) -> str:
    assert plan.gpu is not None
    if plan.device == "cpu":
        return f"{plan.gpu.name} of RAM"
    return f"{plan.gpus} x {plan.gpu.name}" + (f" (TP {plan.gpus})" if plan.gpus > 1 else "")


def verdict_lines(report: Report) -> list[str]:
    """The answer, a headline and indented key lines; [] without --gpu."""
    plan = report.inference
    if plan is None or plan.gpu is None or plan.budget_bytes is None:
        return []
    at = f"at {plan.context:,} tokens x {plan.batch}"
    how = f"{plan.engine}, {plan.precision}" + (f", KV {plan.kv_dtype}" if plan.kv_dtype else "")
    unit = "of RAM" if plan.device == "cpu" else "per GPU"
    need = f"needs {fmt_bytes(plan.total_bytes)} of {fmt_bytes(plan.budget_bytes)} {unit}"
    if plan.gpu_util:
        need += f" (gpu-util {plan.gpu_util})"
    hw = report.hardware or {}
    if hw.get("runs") is False:
        return [f"{report.repo}: CANNOT RUN on {_where(plan)} ({how})", f"  why  {hw.get('note')}"]
    staged = report.setup if report.gpus_auto and report.setup is not None and report.setup.pp > 1 else None
    if staged is not None:  # --gpus auto needed pipeline stages: the answer is that setup (the tables are one stage's TP)
        head = f"FITS on {staged.label()} {at} ({how})"
        margin = (f"{fmt_bytes(staged.margin_bytes)} to spare: needs at most {fmt_bytes(staged.need_bytes)} of "
                  f"{fmt_bytes(staged.budget_bytes)} per GPU (heaviest pipeline stage, an upper bound)")
        longest = f"{staged.max_context:,} at batch {plan.batch}" if staged.max_context else "none"
        staged_rows = [("margin", margin), ("longest context", longest)]
        if staged.concurrency is not None:
            staged_rows.append(("max concurrency", f"{staged.concurrency:.2f} sequences of {plan.context:,} tokens"))
        staged_rows.append(("smallest setup", _setup_line(report)))
        staged_rows += _serve_rows(report) + [("caveat", n) for n in caveats(report)]
        width = max(len(k) for k, _ in staged_rows)
        return [f"{report.repo}: {head}"] + [f"  {k.ljust(width)}  {v}" for k, v in staged_rows]
    refusal = refused_start(plan)
    if plan.fits:
        head = f"FITS on {_where(plan)} {at} ({how})"
        margin = f"{fmt_bytes(plan.margin_bytes)} to spare: {need}"
    elif refusal:  # the memory would do, the engine refuses to start
        head = f"DOES NOT START on {_where(plan)} {at} ({how})"
        margin = f"{fmt_bytes(plan.margin_bytes)} to spare: {need}; but {refusal}"
    else:
        head = f"DOES NOT FIT on {_where(plan)} {at} ({how})"
        margin = f"short by {fmt_bytes(-(plan.margin_bytes or 0))}: {need}"
    if plan.max_context:
        longest = f"{plan.max_context:,}" + (" (the model's limit)" if plan.max_context_capped else "") + f" at batch {plan.batch}"
    elif plan.budget_bytes < plan.weights_bytes + plan.overhead_bytes:
        longest = "none: the weights alone do not fit"
    else:
        longest = "none"
    rows: list[tuple[str, str]] = [("margin", margin), ("longest context", longest)]
    if hw.get("note"):
        rows.append(("runs", hw["note"]))
    if plan.concurrency is not None and plan.fits:
        conc = f"{plan.concurrency:.2f} sequences of {plan.context:,} tokens"
        if plan.kv_pool_tokens is not None:
            conc += f" (KV pool {plan.kv_pool_tokens:,} tokens)"
        rows.append(("max concurrency", conc))
    if report.setups is not None:
        rows.append(("smallest setup", _setup_line(report)))
    if report.speed:
        rows.append(("speed (at most)", speed_line(report.speed)))
    rows += _serve_rows(report) + [("caveat", n) for n in caveats(report)]
    width = max(len(k) for k, _ in rows)
    return [f"{report.repo}: {head}"] + [f"  {k.ljust(width)}  {v}" for k, v in rows]


def caveats(report: Report) -> list[str]:
    """The plan's notes that say real logs put the engine's pool well away from the one shown (vllm_versions
    POOL_CAVEATS): part of the answer, so the verdict shows them, not only -v."""
    from hfmem.memory.vllm_versions import POOL_CAVEATS

    plan = report.inference
    return [n for n in plan.notes if n in POOL_CAVEATS] if plan is not None else []


def _serve_rows(report: Report) -> list[tuple[str, str]]:
    """The command that runs the plan (or the smallest setup that fits), or why there is none."""
    serve = report.serve
    if serve is None:
        return []
    if serve.line is None:
        return [("run it", "no vllm serve command: " + "; ".join(serve.why))] if serve.why else []
    return [("run it", serve.line)]


def _setup_line(report: Report) -> str:
    s = report.setup
    if s is None:
        tried = report.setups or []
        most = max((t.gpus for t in tried), default=0)
        return f"none found up to {most} x {tried[-1].gpu.name}" if tried else "none found"
    line = f"{s.label()}, {fmt_bytes(s.margin_bytes)} to spare per GPU"
    if s.concurrency is not None:
        line += f", {s.concurrency:.2f} concurrent sequences"
    if s.pp > 1:
        line += " (pipeline: upper bound)"
    if report.inference is not None and s.gpus == report.inference.gpus and s.pp == 1:
        line += " (this one)"
    return line


def brief_line(report: Report) -> str:
    """``--brief``: one line, as ``hfmem check`` prints it (without the disk)."""
    from hfmem.render.plan import fit_line

    plan = report.inference
    if plan is None:
        return f"{report.repo}: {fmt_count(report.parameters.total)} parameters"
    if plan.gpu is None:
        fits = [r.gpu.key for r in plan.fits_on or [] if r.fits]
        return (f"{report.repo}: {plan.precision} at {plan.context:,} tokens x {plan.batch} needs "
                f"{fmt_bytes(plan.total_bytes)} per GPU; fits on {', '.join(fits) or 'none of the catalog'}")
    if (report.hardware or {}).get("runs") is False:
        return f"{report.repo}: cannot run: {report.hardware['note']}"  # type: ignore[index]
    line = f"{report.repo}: {fit_line(plan)}"
    if report.setups is not None and report.setup is not None and (not plan.fits or report.setup.gpus != plan.gpus):
        line += f"; smallest setup: {report.setup.label()}"
    return line


def summary_tables(report: Report) -> list[Table]:
    """The short default body under the verdict: the model in a few lines, the plan's terms, the asked precision's
    weights; the training tables when --train asked for them."""
    from hfmem.render.plan import inference_tables

    a, p, plan = report.architecture, report.parameters, report.inference
    params = fmt_count(p.total) + (f", {fmt_count(p.active)} active per token" if p.active != p.total else "")
    attention = f"{a.num_layers} layers, {a.num_attention_heads} heads, {a.num_kv_heads} KV heads ({a.attention_kind})"
    if a.moe:
        attention += f", {a.moe.num_experts} experts top-{a.moe.experts_per_token}"
    model: list[list[Any]] = [
        ["model", a.model_type + (f" ({', '.join(a.architectures)})" if a.architectures else "")],
        ["parameters", params],
        ["shape", attention],
        ["stored", f"{fmt_bytes(p.stored_bytes)} ({', '.join(p.by_dtype) or '-'})"],
        ["max context", f"{a.max_position_embeddings:,}" if a.max_position_embeddings else "-"],
    ]
    tables: list[Table] = [("Model", ["", ""], model)]
    if plan is not None:
        terms = inference_tables(plan)[0]
        rows = [r for r in terms[2] if not str(r[0]).startswith("- phase")]
        tables.append((terms[0], terms[1], rows))
    if report.training is not None:
        from hfmem.render.training import training_tables

        tables += training_tables(report.training)
    return tables


def verdict_text(report: Report, fmt: str, verbose: bool) -> str:
    """What ``hfmem MODEL --gpu G`` prints: the verdict, then the short summary (or, verbose, every table)."""
    from hfmem.render.text import _tables, all_notes, layout

    title = f"{report.repo}" + (f" @ {report.revision[:12]}" if report.revision else "") + f" ({report.source})"
    lines = verdict_lines(report)
    tables = _tables(report) if verbose else summary_tables(report)
    if not verbose and report.setups and len(report.setups) > 1:
        tables.append(_setups_table(report))
    elif verbose and report.setups:
        tables.append(_setups_table(report))
    if verbose and report.tp_sizes:
        tables.append(_tp_sizes_table(report))
    shown = caveats(report)  # in the verdict lines already
    notes = [n for n in all_notes(report) if n not in shown]
    body = layout(title, tables, fmt, notes if verbose else report.notes, report.warnings)
    head = "\n".join(lines)
    if fmt == "markdown":
        head = "\n".join(["**" + lines[0] + "**", "", *[f"- {line.strip()}" for line in lines[1:]]])
    plan_notes = len([n for n in notes if n not in report.notes])
    held = f", the plan's {plan_notes} note{'s' if plan_notes != 1 else ''}" if plan_notes else ""
    hint = "" if verbose else f"\n\n(-v: every precision, every term, the whole GPU catalog{held})"
    return f"{head}\n\n{body}{hint}"


def _tp_sizes_table(report: Report) -> Table:
    return _setups_as_table("Every tensor-parallel size vLLM accepts (one node)", report.tp_sizes or [])


def _setups_table(report: Report) -> Table:
    return _setups_as_table("Setups tried (fewest GPUs first)", report.setups or [])


def _setups_as_table(title: str, setups: list[Setup]) -> Table:
    rows = [[s.label(), "yes" if s.fits else "no", fmt_bytes(s.need_bytes), fmt_bytes(s.margin_bytes),
             f"{s.max_context:,}" if s.max_context else "-", f"{s.concurrency:.2f}" if s.concurrency is not None and s.fits else "-"]
            for s in setups]
    return (title, ["setup", "fits", "per GPU", "margin", "max context", "concurrency"], rows)


def check_lines(result: CheckResult) -> list[str]:
    """``hfmem check``: the GPU verdict on one line; with --disk the disk verdict on a second line."""
    report = result.report
    plan = report.inference
    assert plan is not None
    staged = report.setup if report.gpus_auto and report.setup is not None and report.setup.pp > 1 else None
    if staged is not None:
        gpu = (f"{report.repo}: fits: {plan.precision} on {staged.label()} at {plan.context:,} tokens x {plan.batch}: "
               f"needs at most {fmt_bytes(staged.need_bytes)} of {fmt_bytes(staged.budget_bytes)} per GPU "
               f"(margin {fmt_bytes(staged.margin_bytes)}; heaviest pipeline stage, an upper bound)")
    else:
        gpu = brief_line(report)
    lines = [gpu]
    if result.disk_fits is None:
        return lines
    if result.cache_path is None:
        lines.append(f"{report.repo}: disk: a local folder, nothing to download ({fmt_bytes(result.snapshot_bytes)} on disk)")
        return lines
    what = f"download {fmt_bytes(result.download_bytes)}"
    stored = (report.weights.checkpoint_label if report.weights is not None else "").removeprefix("as stored").strip(" ()")
    if not plan.precision.startswith("checkpoint"):
        what += f" (the stored {stored or 'checkpoint'} weights: --dtype {plan.precision} quantizes them at load)"
    if result.skipped_files:
        what += (f"; a full snapshot adds {fmt_bytes((result.snapshot_bytes or 0) - (result.download_bytes or 0))} in "
                 f"{len(result.skipped_files)} files of other formats, not needed ({', '.join(result.skipped_files[:3])}"
                 + (", ..." if len(result.skipped_files) > 3 else "") + ")")
    verdict = "fits" if result.disk_fits else "does not fit"
    lines.append(f"{report.repo}: disk: {verdict}: {what}; {fmt_bytes(result.free_bytes)} free at {result.cache_path}")
    return lines


def speed_line(speed: dict[str, Any]) -> str:
    """The roofline in one line, labelled as the upper bound it is."""
    prefill = speed["prefill_s"]
    when = f"{prefill:.2f} s" if prefill >= 0.1 else f"{prefill * 1000:.0f} ms"
    line = f"decode {speed['single_tokens_per_s']:,.0f} tok/s for one sequence"
    if speed["batch"] > 1:
        line += (f", {speed['decode_tokens_per_s']:,.0f} each and {speed['aggregate_tokens_per_s']:,.0f} in all for "
                 f"{speed['batch']} sequences")
    return (line + f"; prefill of {speed['context']:,} tokens {when} (roofline: {speed['bandwidth_gbs']:g} GB/s, "
            f"{speed['tflops']:g} TFLOP/s; an upper bound, docs/planner.md)")
