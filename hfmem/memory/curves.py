"""Memory against context, per weight precision: the numbers ``hfmem plot`` draws (and prints as JSON), each point a
plan of the inference planner (weights + KV + activations + overhead per GPU), and each GPU's budget."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hfmem.memory.gpus import GPU
    from hfmem.report import Report

MAX_POINTS = 16


@dataclass(frozen=True)
class Point:
    context: int
    weights_bytes: int
    kv_bytes: int
    activation_bytes: int
    overhead_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_bytes + self.activation_bytes + self.overhead_bytes

    def to_dict(self) -> dict[str, int]:
        return {"context": self.context, "weights_bytes": self.weights_bytes, "kv_bytes": self.kv_bytes,
                "activation_bytes": self.activation_bytes, "overhead_bytes": self.overhead_bytes,
                "total_bytes": self.total_bytes}


@dataclass
class Curves:
    repo: str
    engine: str
    batch: int
    gpus: int
    series: dict[str, list[Point]] = field(default_factory=dict)  # precision label -> points, context ascending
    budgets: list[tuple[str, int]] = field(default_factory=list)  # (GPU name, budget bytes per GPU)

    def to_dict(self) -> dict[str, Any]:
        return {"repo": self.repo, "engine": self.engine, "batch": self.batch, "gpus": self.gpus,
                "series": {k: [p.to_dict() for p in v] for k, v in self.series.items()},
                "budgets": [{"gpu": name, "budget_bytes": b} for name, b in self.budgets]}


def contexts_for(limit: int) -> list[int]:
    """Powers of two from 1k to the model's limit, and the limit itself (at most MAX_POINTS points)."""
    points: list[int] = []
    c = 1024
    while c < limit and len(points) < MAX_POINTS - 1:
        points.append(c)
        c *= 2
    return points + [limit]


def memory_curves(report: Report, precisions: list[str], gpus: list[GPU], *, batch: int = 1, engine: str = "vllm",
                  tp: int = 1, contexts: list[int] | None = None, **planner_options: Any) -> Curves:
    """One series per precision (the planner's terms at each context) and each GPU's budget per GPU."""
    from hfmem.memory.planner import Planner

    limit = report.architecture.max_position_embeddings or 131072
    points = contexts or contexts_for(limit)
    curves = Curves(report.repo, engine, batch, tp)
    first = None
    for precision in precisions:
        planner = Planner(report, precision, engine=engine, tp=tp, **planner_options)
        series = []
        for c in points:
            plan = planner.plan(c, batch, None, with_catalog=False)
            series.append(Point(c, plan.weights_bytes, plan.kv_bytes, plan.activation_bytes, plan.overhead_bytes))
        label = planner.plan(points[0], batch, None, with_catalog=False).precision
        curves.series[label] = series
        first = first or planner
    for gpu in gpus:
        assert first is not None
        plan = first.plan(points[0], batch, gpu)
        curves.budgets.append((gpu.name, int(plan.budget_bytes or 0)))
    return curves
