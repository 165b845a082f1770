"""Summaries over several precisions, contexts or models: the numbers of a model card and of ``compare``, built
from the same planner and estimators as ``hfmem.analyze`` so every number they show is one the JSON carries."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hfmem import __version__
from hfmem.memory.gpus import CATALOG, GPU

if TYPE_CHECKING:
    from hfmem.report import Report

CARD_TRAIN_SEQ = 2048
CARD_LORA_RANK = 16
# (method, label) of the card's fine-tuning rows; compare keys them by the label's first word.
CARD_TRAINING = (("full", "full (mixed bf16, AdamW)"), ("lora", f"LoRA r={CARD_LORA_RANK}"), ("qlora", f"QLoRA r={CARD_LORA_RANK} (NF4)"))


def common_gpus(gpus: tuple[GPU, ...] = CATALOG) -> list[GPU]:
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
class TrainingRow:
    method: str  # the card's label, e.g. "LoRA r=16"
    trainable_parameters: int
    total_bytes_checkpointing: int
    total_bytes_no_checkpointing: int

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "trainable_parameters": self.trainable_parameters,
                "total_bytes_checkpointing": self.total_bytes_checkpointing,
                "total_bytes_no_checkpointing": self.total_bytes_no_checkpointing}


@dataclass
class ModelCard:
    report: Report
    engine: str
    batch: int
    contexts: list[int]
    precisions: list[str]
    inference: list[InferenceCell] = field(default_factory=list)
    training: list[TrainingRow] = field(default_factory=list)
    date: str = field(default_factory=lambda: _dt.date.today().isoformat())
    version: str = __version__

    def to_dict(self) -> dict[str, Any]:
        return {
            "repo": self.report.repo, "revision": self.report.revision, "hfmem_version": self.version, "date": self.date,
            "engine": self.engine, "batch": self.batch, "inference": [c.to_dict() for c in self.inference],
            "training": [t.to_dict() for t in self.training],
        }  # fmt: skip


def build_card(report: Report, contexts: list[int], precisions: list[str], engine: str = "vllm", batch: int = 1,
               training: bool = True) -> ModelCard:
    from hfmem.memory.hardware import can_run, precision_key
    from hfmem.memory.planner import Planner

    card = ModelCard(report, engine, batch, contexts, precisions)
    common = common_gpus()
    for precision in precisions:
        planner = Planner(report, precision, engine=engine)
        for context in contexts:
            plan = planner.plan(context, batch, None)
            # a GPU that cannot run the precision is never the recommendation (hfmem.memory.hardware)
            key = precision_key(report, plan.precision)
            fitting = {row.gpu.key for row in plan.fits_on or [] if row.fits and can_run(row.gpu, key, engine)[0]}
            smallest = next((g.name for g in common if g.key in fitting), None)
            card.inference.append(InferenceCell(precision, context, plan.weights_bytes, plan.kv_bytes, plan.total_bytes, smallest))
    if training:
        card.training = training_rows(report)
    return card


def training_rows(report: Report) -> list[TrainingRow]:
    """Full, LoRA and QLoRA at the card's settings, gradient checkpointing on and off."""
    from hfmem.memory.training import TrainingSettings, estimate_training

    rows = []
    for method, label in CARD_TRAINING:
        totals = {}
        trainable = 0
        for ckpt in (True, False):
            settings = TrainingSettings(seq=CARD_TRAIN_SEQ, micro_batch=1, grad_checkpointing=ckpt, lora_rank=CARD_LORA_RANK)
            est = estimate_training(report, method, settings)
            totals[ckpt] = est.total_bytes
            trainable = est.trainable_parameters
        rows.append(TrainingRow(label, trainable, totals[True], totals[False]))
    return rows


@dataclass
class ComparisonRow:
    repo: str
    parameters: int
    active: int
    kv_bytes_per_token: int
    weights: int
    kv_bytes: int
    inference_total: int
    training: dict[str, int] = field(default_factory=dict)  # "full" | "lora" | "qlora" -> bytes with checkpointing
    precision: str | None = None  # set when compare was asked for a precision other than as stored, or several
    fits: list[dict[str, Any]] | None = None  # compare --gpu: one verdict per GPU (hfmem.memory.comparison.GpuFit)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "repo": self.repo, "parameters": self.parameters, "active": self.active,
            "kv_bytes_per_token": self.kv_bytes_per_token, "weights": self.weights, "kv_bytes": self.kv_bytes,
            "inference_total": self.inference_total,
        }  # fmt: skip
        for method, value in self.training.items():
            out[f"training_{method}"] = value
        if self.precision is not None:
            out["precision"] = self.precision
        if self.fits is not None:
            out["fits"] = self.fits
        return out


def compare_rows(reports: list[Report], context: int, precision: str = "auto", engine: str = "vllm") -> list[ComparisonRow]:
    from hfmem.memory.kv import estimate_kv, stored_float_dtype
    from hfmem.memory.planner import Planner

    rows = []
    for r in reports:
        plan = Planner(r, precision, engine=engine).plan(context, 1, None, with_catalog=False)
        kv = estimate_kv(r.architecture, context, engine=engine, weights_dtype=stored_float_dtype(r.parameters.by_dtype))
        training = {t.method.split()[0].lower(): t.total_bytes_checkpointing for t in training_rows(r)}
        rows.append(ComparisonRow(r.repo, r.parameters.total, r.parameters.active, kv.bytes_per_token, plan.weights_bytes,
                                  plan.kv_bytes, plan.total_bytes, training))
    return rows
