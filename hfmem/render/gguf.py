"""A GGUF report as text: the repo's GGUF files, the selected file's parameters by ggml type, llama.cpp's KV cache."""

from __future__ import annotations

from hfmem.gguf.model import GGUFReport
from hfmem.render.kv import gguf_kv_lines
from hfmem.units import fmt_bytes, fmt_count


def gguf_text(report: GGUFReport, fmt: str = "table") -> str:
    from tabulate import tabulate

    tablefmt = "github" if fmt == "markdown" else "simple"
    out = gguf_verdict_lines(report)
    out += ([""] if out else []) + [f"{report.repo} (GGUF, {report.source})"]
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


def gguf_verdict_lines(report: GGUFReport) -> list[str]:
    """With --gpu: llama.cpp's offload on that GPU first (fits whole, or how many layers and what stays in RAM),
    then the llama-server command; [] without --gpu."""
    plan = report.offload
    if plan is None:
        return []
    at = f"at {plan.context:,} tokens x {plan.batch}"
    how = f"llama.cpp, {report.selected.quant if report.selected else '?'}, KV {plan.cache_type}"
    gpu = f"{plan.gpu.name}"
    need = (f"GPU {fmt_bytes(plan.gpu_total_bytes)} of {fmt_bytes(plan.budget_bytes)} (weights "
            f"{fmt_bytes(plan.gpu_model_bytes)}, KV {fmt_bytes(plan.gpu_kv_bytes)}, compute {fmt_bytes(plan.gpu_compute_bytes)})")
    ram = f"{fmt_bytes(plan.ram_model_bytes + plan.ram_kv_bytes)} (weights {fmt_bytes(plan.ram_model_bytes)}, KV {fmt_bytes(plan.ram_kv_bytes)})"
    if plan.full_offload and plan.fits:
        head = f"FITS on {gpu} {at} ({how}): all {plan.n_layer} layers and the output on the GPU"
    elif plan.fits:
        head = (f"PARTIAL OFFLOAD on {gpu} {at} ({how}): -ngl {plan.ngl} puts {plan.layers_on_gpu} of {plan.n_layer} "
                f"layers{' and the output' if plan.output_on_gpu else ''} on the GPU")
    else:
        head = f"DOES NOT FIT on {gpu} {at} ({how}): not even the compute buffer; -ngl 0 runs on the CPU"
    spare = plan.budget_bytes - plan.gpu_total_bytes
    rows = [("margin", f"{fmt_bytes(spare)} to spare: {need}" if spare >= 0 else f"short by {fmt_bytes(-spare)}: {need}"),
            ("in RAM", ram),
            ("all on GPU", f"needs {fmt_bytes(plan.full_gpu_bytes)} (budget: {plan.gpu.name} less 1 GiB llama-server keeps free)")]
    if report.serve is not None and report.serve.line:
        rows.append(("run it", report.serve.line))
    width = max(len(k) for k, _ in rows)
    return [f"{report.repo}: {head}"] + [f"  {k.ljust(width)}  {v}" for k, v in rows]
