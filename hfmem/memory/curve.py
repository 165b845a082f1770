"""Memory against context: the inference plan's terms (weights, KV cache, activations, runtime overhead) at a range
of contexts for several precisions, and each GPU's budget, for ``hfmem plot`` and ``card --svg``. Every point is a
``Planner.plan`` of the same planner ``hfmem REPO --ctx C --dtype P`` runs, so the picture and the JSON agree."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hfmem.memory.gpus import GPU
    from hfmem.report import Report

# GPUs drawn when none are asked for: the common single-card sizes a reader compares against.
DEFAULT_PLOT_GPUS = ("rtx4090", "l40s", "h100-80gb")
MIN_PLOT_CONTEXT = 1024
MAX_PLOT_POINTS = 16


@dataclass
class CurvePoint:
    context: int
    weights_bytes: int
    kv_bytes: int
    activation_bytes: int
    overhead_bytes: int
    total_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {"context": self.context, "weights_bytes": self.weights_bytes, "kv_bytes": self.kv_bytes,
                "activation_bytes": self.activation_bytes, "overhead_bytes": self.overhead_bytes,
                "total_bytes": self.total_bytes}


@dataclass
class PrecisionCurve:
    precision: str  # as asked (``auto``, ``bf16``, ``int4`` ...)
    label: str  # as the plan names it (``checkpoint (BF16)``, ``int4``)
    points: list[CurvePoint] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"precision": self.precision, "label": self.label, "points": [p.to_dict() for p in self.points]}


@dataclass
class GPUBudget:
    key: str
    name: str
    memory_bytes: int
    budget_bytes: int  # what the engine may use of it (vLLM: gpu_memory_utilization x memory)

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "name": self.name, "memory_bytes": self.memory_bytes, "budget_bytes": self.budget_bytes}


@dataclass
class MemoryCurves:
    repo: str
    revision: str | None
    engine: str
    device: str
    batch: int
    gpus: int  # tensor-parallel size: every term is per GPU
    contexts: list[int]
    curves: list[PrecisionCurve]
    budgets: list[GPUBudget]

    def to_dict(self) -> dict[str, Any]:
        return {"repo": self.repo, "revision": self.revision, "engine": self.engine, "device": self.device,
                "batch": self.batch, "gpus": self.gpus, "contexts": list(self.contexts),
                "curves": [c.to_dict() for c in self.curves], "budgets": [b.to_dict() for b in self.budgets]}


def default_contexts(max_context: int | None) -> list[int]:
    """Powers of two from 1k (or the model's limit, if smaller) to the model's limit, which is always the last point;
    at most MAX_PLOT_POINTS, thinned evenly on the log scale."""
    limit = max_context or 131072
    start = min(MIN_PLOT_CONTEXT, limit)
    out = []
    c = start
    while c < limit:
        out.append(c)
        c *= 2
    out.append(limit)
    while len(out) > MAX_PLOT_POINTS:
        out = out[:-1:2] + [out[-1]]  # every other power of two, the limit kept
    return out


def build_curves(report: Report, precisions: list[str], contexts: list[int], gpus: list[GPU], *, engine: str = "vllm",
                 batch: int = 1, **planner_options: Any) -> MemoryCurves:
    from hfmem.memory.planner import Planner

    curves: list[PrecisionCurve] = []
    budgets: list[GPUBudget] = []
    tp = int(planner_options.get("tp", 1) or 1)
    device = str(planner_options.get("device", "cuda"))
    for precision in precisions:
        planner = Planner(report, precision, engine=engine, **planner_options)
        curve = PrecisionCurve(precision, "")
        for context in contexts:
            plan = planner.plan(context, batch, None, with_catalog=False)
            curve.label = plan.precision
            curve.points.append(CurvePoint(context, plan.weights_bytes, plan.kv_bytes, plan.activation_bytes,
                                           plan.overhead_bytes, plan.total_bytes))
        curves.append(curve)
        if not budgets:  # a budget depends on the GPU, the engine and the utilisation, not on the precision
            for gpu in gpus:
                plan = planner.plan(contexts[0], batch, gpu, with_catalog=False)
                budgets.append(GPUBudget(gpu.key, gpu.name, gpu.memory_bytes, int(plan.budget_bytes or gpu.memory_bytes)))
    return MemoryCurves(report.repo, report.revision, engine, device, batch, tp, list(contexts), curves, budgets)
