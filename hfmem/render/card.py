"""Model-card memory tables (GitHub Markdown) and side-by-side comparisons, built from the same sections as
``hfmem.analyze`` so every number in a card is one the JSON also carries."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

from hfmem import __version__
from hfmem.memory.gpus import CATALOG, GPU
from hfmem.units import fmt_bytes, fmt_count

DEFAULT_CARD_CONTEXTS = "4k,32k,128k"
DEFAULT_CARD_PRECISIONS = ("bf16", "fp8", "int4")
CARD_TRAIN_SEQ = 2048
CARD_LORA_RANK = 16


def _ctx_label(n: int) -> str:
    if n % (1 << 20) == 0:
        return f"{n >> 20}M"
    if n % 1024 == 0:
        return f"{n >> 10}k"
    return f"{n:,}"


def _gib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**30:.1f} GiB"


def _datacenter_and_consumer(gpus: tuple[GPU, ...] = CATALOG) -> list[GPU]:
    """'Common GPUs' for the smallest-that-fits column: discrete CUDA/ROCm cards, smallest first."""
    return sorted((g for g in gpus if g.kind in ("cuda", "rocm")), key=lambda g: g.memory_bytes)


@dataclass
class InferenceCell:
    precision: str
    context: int
    weights_bytes: int
    kv_bytes: int
    total_bytes: int
    smallest_gpu: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"precision": self.precision, "context": self.context, "weights_bytes": self.weights_bytes,
                "kv_bytes": self.kv_bytes, "total_bytes": self.total_bytes, "smallest_gpu": self.smallest_gpu}


@dataclass
class ModelCard:
    report: Any
    engine: str
    batch: int
    contexts: list[int]
    precisions: list[str]
    inference: list[InferenceCell] = field(default_factory=list)
    training: list[dict[str, Any]] = field(default_factory=list)
    date: str = field(default_factory=lambda: _dt.date.today().isoformat())

    def to_dict(self) -> dict[str, Any]:
        return {
            "repo": self.report.repo, "revision": self.report.revision, "hfmem_version": __version__, "date": self.date,
            "engine": self.engine, "batch": self.batch, "inference": [c.to_dict() for c in self.inference],
            "training": self.training,
        }  # fmt: skip

    def markdown(self) -> str:
        r = self.report
        a, p = r.architecture, r.parameters
        rev = f" @ `{r.revision[:12]}`" if r.revision else ""
        attn = f"{a.num_attention_heads} heads / {a.num_kv_heads} KV heads ({a.attention_kind.upper()})" if a.num_attention_heads else "attention-free"
        layer_types = ", ".join(f"{n} {t.replace('_attention', '').replace('_', ' ')}" for t, n in a.layer_types.items())
        lines = [
            "### Memory requirements",
            "",
            f"**{r.repo}**{rev}: {p.total:,} parameters ({fmt_count(p.total).split('(')[-1].rstrip(')')})"
            + (f", {p.active:,} active per token" if p.active != p.total else "")
            + f". {a.model_type}, {a.num_layers} layers ({layer_types}), hidden {a.hidden_size}, {attn}, head_dim {a.head_dim}, "
            f"vocab {a.vocab_size:,}" + (f", max context {a.max_position_embeddings:,}" if a.max_position_embeddings else "") + ".",
            "",
            f"#### Inference ({self.engine}, batch {self.batch})",
            "",
            "| precision | context | weights | KV cache | total | smallest GPU that fits |",
            "|---|---:|---:|---:|---:|---|",
        ]
        limit = a.max_position_embeddings
        beyond = False
        for c in self.inference:
            mark = ""
            if limit and c.context > limit:
                mark, beyond = " †", True
            lines.append(
                f"| {c.precision} | {_ctx_label(c.context)}{mark} | {_gib(c.weights_bytes)} | {_gib(c.kv_bytes)} | "
                f"{_gib(c.total_bytes)} | {c.smallest_gpu or 'none single-GPU'} |"
            )
        if beyond:
            lines += ["", f"† beyond the model's max_position_embeddings ({limit:,}); needs RoPE scaling or is not supported."]
        if self.training:
            lines += [
                "",
                f"#### Fine-tuning (sequence {CARD_TRAIN_SEQ}, micro-batch 1, one GPU)",
                "",
                "| method | trainable parameters | gradient checkpointing on | off |",
                "|---|---:|---:|---:|",
            ]
            for row in self.training:
                lines.append(f"| {row['method']} | {row['trainable_parameters']:,} | {_gib(row['total_bytes_checkpointing'])} | {_gib(row['total_bytes_no_checkpointing'])} |")
        lines += [
            "",
            f"<sub>Computed by hfmem {__version__} on {self.date} from config.json and the safetensors headers. "
            f"Total = weights + KV cache + activations of one {self.engine} forward pass + runtime overhead; "
            "GiB = 2^30 bytes; GPU memory as the driver reports it."
            + (" Training: AdamW, mixed bf16 for full fine-tuning; LoRA/QLoRA adapters on all linear layers." if self.training else "")
            + "</sub>",
        ]
        return "\n".join(lines) + "\n"


def build_card(report: Any, contexts: list[int], precisions: list[str], engine: str = "vllm", batch: int = 1, training: bool = True) -> ModelCard:
    from hfmem.memory.planner import Planner

    card = ModelCard(report, engine, batch, contexts, precisions)
    common = _datacenter_and_consumer()
    for precision in precisions:
        planner = Planner(report, precision, engine=engine)
        for context in contexts:
            plan = planner.plan(context, batch, None)
            fitting = {row.gpu.key for row in plan.fits_on or [] if row.fits}
            smallest = next((g.name for g in common if g.key in fitting), None)
            card.inference.append(InferenceCell(precision, context, plan.weights_bytes, plan.kv_bytes, plan.total_bytes, smallest))
    if training:
        card.training = _training_rows(report)
    return card


def _training_rows(report: Any) -> list[dict[str, Any]]:
    try:
        from hfmem.memory.training import TrainingSettings, estimate_training
    except ImportError:
        return []
    rows = []
    for method, label in (("full", "full (mixed bf16, AdamW)"), ("lora", f"LoRA r={CARD_LORA_RANK}"), ("qlora", f"QLoRA r={CARD_LORA_RANK} (NF4)")):
        totals = {}
        trainable = None
        for ckpt in (True, False):
            settings = TrainingSettings(seq=CARD_TRAIN_SEQ, micro_batch=1, grad_checkpointing=ckpt, lora_rank=CARD_LORA_RANK)
            est = estimate_training(report, method, settings)
            totals[ckpt] = est.total_bytes
            trainable = est.trainable_parameters
        rows.append({"method": label, "trainable_parameters": trainable, "total_bytes_checkpointing": totals[True], "total_bytes_no_checkpointing": totals[False]})
    return rows


# ---------------------------------------------------------------------------------------------------------------
# compare


COMPARE_FIELDS = ("parameters", "active", "kv_bytes_per_token", "weights", "kv_bytes", "inference_total", "training_full", "training_lora", "training_qlora")


def compare_rows(reports: list[Any], context: int, precision: str = "auto", engine: str = "vllm") -> list[dict[str, Any]]:
    from hfmem.memory.kv import estimate_kv, stored_float_dtype
    from hfmem.memory.planner import Planner

    rows = []
    for r in reports:
        plan = Planner(r, precision, engine=engine).plan(context, 1, None, with_catalog=False)
        kv = estimate_kv(r.architecture, context, engine=engine, weights_dtype=stored_float_dtype(r.parameters.by_dtype))
        row = {
            "repo": r.repo, "parameters": r.parameters.total, "active": r.parameters.active,
            "kv_bytes_per_token": kv.bytes_per_token, "weights": plan.weights_bytes, "kv_bytes": plan.kv_bytes,
            "inference_total": plan.total_bytes,
        }  # fmt: skip
        for t in _training_rows(r):
            key = "training_" + t["method"].split()[0].lower()
            row[key] = t["total_bytes_checkpointing"]
        rows.append(row)
    return rows


def compare_table(rows: list[dict[str, Any]], fmt: str = "table") -> str:
    from tabulate import tabulate

    labels = {
        "parameters": "parameters", "active": "active / token", "kv_bytes_per_token": "KV bytes / token",
        "weights": "weights", "kv_bytes": "KV at context", "inference_total": "inference total",
        "training_full": "full FT (ckpt)", "training_lora": "LoRA r=16 (ckpt)", "training_qlora": "QLoRA r=16 (ckpt)",
    }  # fmt: skip
    keys = [k for k in labels if any(k in r for r in rows)]
    body = []
    for k in keys:
        cells = []
        for r in rows:
            v = r.get(k)
            if v is None:
                cells.append("-")
            elif k in ("parameters", "active", "kv_bytes_per_token"):
                cells.append(f"{v:,}")
            else:
                cells.append(fmt_bytes(v))
        body.append([labels[k], *cells])
    return tabulate(body, headers=["", *[r["repo"] for r in rows]], tablefmt="github" if fmt == "markdown" else "simple", disable_numparse=True)
