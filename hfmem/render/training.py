"""Training budgets as tables: methods side by side, settings, notes."""

from __future__ import annotations

from typing import Any

from hfmem.memory.training import TrainingEstimate, TrainingReport
from hfmem.render.tables import Table
from hfmem.units import fmt_bytes, fmt_count

# Component key -> row label, in the order the rows are shown; keys not listed follow in the estimates' order.
_LABELS = {
    "weights": "weights",
    "master_weights": "fp32 master weights",
    "gradients": "gradients",
    "optimizer_states": "optimizer states",
    "base_weights": "frozen base weights",
    "base_nf4": "NF4 base (quantized Linear layers)",
    "base_unquantized": "base modules kept unquantized",
    "adapter_weights": "LoRA adapter weights",
    "adapter_gradients": "LoRA adapter gradients",
    "adapter_optimizer_states": "LoRA optimizer states",
    "activations_layers": "activations: decoder layers",
    "activations_layer_weights": "activations: weight copies saved per layer",
    "activations_recompute": "activations: one layer recomputed (checkpointing)",
    "activations_other": "activations: embeddings/RoPE/final norm",
    "logits_loss": "logits + cross-entropy",
    "backward_transient": "backward transient",
    "autocast_weight_copies": "autocast bf16 weight copies",
    "ddp_gradient_buckets": "DDP gradient buckets",
    "zero3_gathered_params": "ZeRO-3 gathered layer (params + grads)",
    "fsdp_unit_buffers": "FSDP unsharded unit (params + grads)",
    "dequant_buffer": "4-bit dequantization buffer",
    "dora_buffer": "DoRA weight-norm buffer",
    "framework_overhead": "CUDA context + workspaces",
}


def training_tables(training: TrainingReport) -> list[Table]:
    """The components table (one column per method), the settings table and the notes table (when there are notes)."""
    methods = list(training.estimates)
    ests = [training.estimates[m] for m in methods]
    keys = [k for k in _LABELS if any(k in e.components for e in ests)]
    for e in ests:
        keys.extend(k for k in e.components if k not in keys)
    rows: list[list[Any]] = []
    for k in keys:
        rows.append([_LABELS.get(k, k)] + [_cell(e, k) for e in ests])
    rows.append(["TOTAL per GPU"] + [f"{fmt_bytes(e.total_bytes)}" for e in ests])
    if any(e.pageable_bytes for e in ests):
        rows.append(["pageable optimizer states (not in total)"] + [fmt_bytes(e.pageable_bytes) for e in ests])
    if any(e.host_bytes for e in ests):
        rows.append(["host RAM for offloaded states"] + [fmt_bytes(e.host_bytes) for e in ests])
    rows.append(["trainable parameters"] + [fmt_count(e.trainable_parameters) for e in ests])
    rows.append(["fits on"] + [_fits_label(e.fits_on, training.gpu) for e in ests])
    s = ests[0].settings
    head = (
        f"Training memory per GPU (seq {s['seq']} x micro-batch {s['micro_batch']}, {s['precision']}, {s['optimizer']}, "
        f"{s['gpus']} GPU{'s' if s['gpus'] > 1 else ''}{_parallel_label(s)}, attention {s['attn']})"
    )
    tables: list[Table] = [(head, ["component"] + methods, rows)]
    detail = []
    for m, e in zip(methods, ests):
        st = e.settings
        line = [m, "on" if st["grad_checkpointing"] else "off", st["loss"]]
        if m != "full":
            line.append(f"r={e.rank} on {', '.join(e.target_modules or [])}")
        else:
            line.append("-")
        detail.append(line)
    tables.append(("Training settings", ["method", "grad checkpointing", "loss", "adapters"], detail))
    notes: dict[str, list[str]] = {}
    for m, e in zip(methods, ests):
        for n in e.notes:
            notes.setdefault(n, []).append(m)
    if notes:
        tables.append(("Training notes", ["methods", "note"], [[", ".join(ms), n] for n, ms in notes.items()]))
    return tables


def _cell(e: TrainingEstimate, k: str) -> str:
    if k not in e.components:
        return "-"
    v = e.components[k]
    n = e.activation_terms.get("layers") or 0
    if k == "activations_layers" and n:
        return f"{fmt_bytes(v)} ({n} x {fmt_bytes(v / n)})"
    return fmt_bytes(v)


def _fits_label(keys: list[str], gpu: str | None) -> str:
    if gpu:
        return "yes" if keys else "no"
    if not keys:
        return "none of the catalog"
    from hfmem.memory.gpus import CATALOG

    cuda = [g.key for g in CATALOG if g.key in keys and g.kind != "apple"]
    shown = cuda[:3] if cuda else keys[:3]
    more = len(keys) - len(shown)
    return ", ".join(shown) + (f" (+{more} more)" if more > 0 else "")


def _parallel_label(s: dict[str, Any]) -> str:
    parts = []
    if s.get("fsdp"):
        parts.append(f"FSDP {s['fsdp']}")
    elif s.get("zero"):
        parts.append(f"ZeRO-{s['zero']}")
    if s.get("offload") and s["offload"] != "none":
        parts.append(f"offload {s['offload']}")
    return (", " + ", ".join(parts)) if parts else ""
