"""Weights per precision and the inference plan as tables, and the one-line fit verdict."""

from __future__ import annotations

from hfmem.memory.kv.estimate import DOES_NOT_START
from hfmem.memory.planner import InferencePlan
from hfmem.memory.precision import CHECKPOINT, PRECISIONS, WeightsByPrecision
from hfmem.render.tables import Table
from hfmem.units import fmt_bytes


def weights_tables(weights: WeightsByPrecision) -> list[Table]:
    rows = []
    for key, value in weights.bytes.items():
        label = weights.checkpoint_label if key == CHECKPOINT else PRECISIONS[key]
        q = weights.quantized_params.get(key)
        share = f"{100 * q / weights.total_params:.1f}%" if q is not None and weights.total_params else "-"
        bpw = f"{8 * value / weights.total_params:.3f}" if weights.total_params else "-"
        rows.append([key, label, fmt_bytes(value), f"{value:,}", bpw, share])
    return [("Weights by precision", ["precision", "layout", "GiB", "bytes", "bits/param", "params quantized"], rows)]


def fit_line(plan: InferencePlan) -> str:
    """One line: fits or not, where, needs how much of what, and the margin or the longest context that fits."""
    where = f"{plan.gpu.name}" + (f" x{plan.gpus}" if plan.gpus > 1 else "") if plan.gpu else plan.device
    if _vllm(plan):
        state = plan.runner_state_bytes or 0
        terms = (f"weights {fmt_bytes(plan.weights_bytes)} + KV {fmt_bytes(plan.kv_bytes)} + torch peak "
                 f"{fmt_bytes(plan.activation_bytes)} + non-torch {fmt_bytes(plan.overhead_bytes - state)}"
                 + (f" + V2 sampler state {fmt_bytes(state)}" if state else "")
                 + (f" + CUDA graphs {fmt_bytes(plan.cudagraph_bytes)}" if plan.cudagraph_bytes else ""))
    else:
        terms = (f"weights {fmt_bytes(plan.weights_bytes)} + KV {fmt_bytes(plan.kv_bytes)} + activations "
                 f"{fmt_bytes(plan.activation_bytes)} + overhead {fmt_bytes(plan.overhead_bytes)}")
    ctx = f"{plan.context:,} tokens x {plan.batch}"
    unit = " of RAM" if plan.device == "cpu" else " per GPU"
    if plan.fits:
        return (f"fits: {plan.precision} on {where} at {ctx}: needs {fmt_bytes(plan.total_bytes)} of "
                f"{fmt_bytes(plan.budget_bytes)}{unit} (margin {fmt_bytes(plan.margin_bytes)}; {terms})")
    refusal = refused_start(plan)
    if refusal:
        return (f"does not start: {plan.precision} on {where} at {ctx}: {refusal} (the memory would do: needs "
                f"{fmt_bytes(plan.total_bytes)} of {fmt_bytes(plan.budget_bytes)}{unit}; {terms})")
    if plan.max_context:
        longest = f"; longest context that fits: {plan.max_context:,}"
    elif (plan.budget_bytes or 0) < plan.weights_bytes + plan.overhead_bytes:
        longest = "; the weights alone do not fit"
    else:
        longest = ""
    return (f"does not fit: {plan.precision} on {where} at {ctx}: needs {fmt_bytes(plan.total_bytes)} > "
            f"{fmt_bytes(plan.budget_bytes)}{unit} by {fmt_bytes(-(plan.margin_bytes or 0))} ({terms}){longest}")


def refused_start(plan: InferencePlan) -> str | None:
    """Why the engine refuses to start a plan whose memory fits (the note the planner left), or None."""
    if plan.fits or (plan.margin_bytes or 0) < 0:
        return None
    return next((n for n in plan.notes if DOES_NOT_START in n), None)


def _vllm(plan: InferencePlan) -> bool:
    return plan.engine == "vllm" and plan.device == "cuda"


def _row(name: str, n: int | None, note: str = "") -> list[object]:
    return [name, fmt_bytes(n), f"{n:,}" if n is not None else "-", note]


def inference_tables(plan: InferencePlan) -> list[Table]:
    tp = f", TP={plan.gpus}" if plan.gpus > 1 else ""
    per = " per GPU" if plan.gpus > 1 else ""
    rows = [_row(f"weights ({plan.precision}){per}", plan.weights_bytes, ", ".join(f"{k} {fmt_bytes(v)}" for k, v in plan.weight_terms.items()))]
    rows.append(_row(f"KV cache ({plan.kv_dtype}){per}", plan.kv_bytes, f"{plan.context:,} tokens x {plan.batch} seq, {plan.kv_bytes_per_token:,} B/token"))
    peak = max(plan.activation_terms, key=lambda k: plan.activation_terms[k]) if plan.activation_terms else "-"
    vllm = _vllm(plan)
    if vllm:
        rows.append(_row(f"torch peak memory increase{per}", plan.activation_bytes,
                         f"vLLM {plan.vllm_named} profile" + (f" (runner {plan.model_runner})" if plan.model_runner else "")
                         + f": forward of {plan.activation_tokens:,} tokens, {plan.sampler} sampler of "
                         f"{min(plan.max_num_seqs or 0, plan.activation_tokens):,} seqs; peak in {peak}, "
                         "cuBLAS workspaces included"))
    else:
        rows.append(_row(f"activations{per}", plan.activation_bytes, f"one forward of {plan.activation_tokens:,} tokens, peak in {peak}"))
    for k, v in plan.activation_terms.items():
        rows.append(_row(f"- phase: {k}", v, "peak" if k == peak else ""))
    if vllm:
        state = plan.runner_state_bytes or 0
        rows.append(_row(f"non-torch forward increase memory{per}", plan.overhead_bytes - state,
                         f"outside torch's allocator (NCCL, all-reduce buffers, kernels loaded), vLLM {plan.vllm_named} at TP {plan.gpus}"
                         + (f" over {plan.interconnect} (--interconnect, --overhead)" if plan.interconnect else " (--overhead)")))
        if state:
            rows.append(_row(f"model runner state{per}", state,
                             f"Model Runner V2's sampler penalty buffers ({plan.max_num_seqs:,} seqs x vocab int32), "
                             "in vLLM's 'consumed memory'"))
        if plan.cudagraph_bytes:
            rows.append(_row(f"CUDA graph memory{per}", plan.cudagraph_bytes,
                             f"deducted by vLLM; {plan.cudagraph_detail}" if plan.cudagraph_detail
                             else "deducted by vLLM (--cudagraph-memory)"))
        else:
            graphs = ("--enforce-eager: none" if not plan.cudagraph
                      else "deducted by vLLM, none captured" if plan.cudagraph_bytes is not None
                      else f"captured after the KV budget in vLLM {plan.vllm_named}, not deducted")
            rows.append(["CUDA graph memory", "-", "-", graphs])
    else:
        overhead = "CUDA/library workspaces (--overhead)" if plan.device != "cpu" else "process + libraries (--overhead)"
        rows.append(_row(f"runtime overhead{per}", plan.overhead_bytes, overhead))
    rows.append(_row(f"total{per}", plan.total_bytes, ""))
    tables: list[Table] = [(f"Inference ({plan.engine}, {plan.device}{tp})", ["term", "GiB", "bytes", "detail"], rows)]
    if plan.gpu is not None:
        longest = (f"{plan.max_context:,}" + (" (model limit)" if plan.max_context_capped else "")) if plan.max_context else "none"
        fit: list[list[object]] = [
            ["GPU", f"{plan.gpu.name} ({fmt_bytes(plan.gpu.memory_bytes)})" + (f" x{plan.gpus}" if plan.gpus > 1 else "")],
            ["budget per GPU", f"{fmt_bytes(plan.budget_bytes)}" + (f" (gpu-util {plan.gpu_util})" if plan.gpu_util else "")],
            ["fits", ("yes" if plan.fits else "NO") + f" (margin {fmt_bytes(plan.margin_bytes)})"],
            ["longest context at batch " + str(plan.batch), longest],
        ]
        conc = f"{plan.concurrency:.2f}x" if plan.concurrency is not None else "-"
        if vllm:
            fit.append(["Available KV cache memory", fmt_bytes(plan.kv_available_bytes)])
            if plan.kv_pool_tokens is not None:
                blocks = f" ({plan.kv_blocks:,} blocks)" if plan.kv_blocks is not None else ""
                fit.append(["GPU KV cache size", f"{plan.kv_pool_tokens:,} tokens{blocks}"])
            fit.append([f"Maximum concurrency for {plan.context:,} tokens per request", conc])
            if plan.extensible_kv_max_bytes is not None:
                # vLLM >= 0.34's default sizing after warmup, bounded from above (the plan's notes say how)
                tokens = f" ({plan.extensible_kv_max_tokens:,} tokens)" if plan.extensible_kv_max_tokens is not None else ""
                fit.append(["Extended KV cache, vLLM >= 0.34 default", f"at most {fmt_bytes(plan.extensible_kv_max_bytes)}{tokens}"])
        else:
            fit.append([f"max concurrency at {plan.context:,} tokens", conc])
        if plan.replicated:
            fit.append(["replicated per GPU", ", ".join(plan.replicated)])
        tables.append(("Fit", ["", ""], fit))
    if plan.fits_on is not None:
        yes = [r.gpu.key for r in plan.fits_on if r.fits]
        no = [r.gpu.key for r in plan.fits_on if not r.fits]
        tables.append(("Fits on", ["", ""], [["fits", ", ".join(yes) or "none of the catalog"], ["does not fit", ", ".join(no) or "-"]]))
        catalog = [[r.gpu.key, fmt_bytes(r.gpu.memory_bytes), "yes" if r.fits else "no", fmt_bytes(r.margin_bytes),
                    f"{r.max_context:,}" if r.max_context else "-", f"{r.max_concurrency:,}" if r.max_concurrency is not None else "-"]
                   for r in plan.fits_on]
        tables.append((f"Catalog ({plan.precision}, {plan.context:,} tokens x {plan.batch}{tp})",
                       ["gpu", "memory", "fits", "margin", "max context", "max concurrency"], catalog))
    return tables
