"""``compare``: models side by side with every planner option, one row per model x precision (x GPU); a repo that
cannot be read is an error row, as in ``batch``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hfmem.errors import HfmemError

if TYPE_CHECKING:
    from hfmem.memory.summary import ComparisonRow
    from hfmem.report import Report


@dataclass
class GpuFit:
    """One GPU's verdict for a compared model at one precision."""

    gpu: str
    fits: bool
    margin_bytes: int
    max_context: int | None
    concurrency: float | None
    gpus: int

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "gpus": self.gpus, "fits": self.fits, "margin_bytes": self.margin_bytes,
                "max_context": self.max_context, "concurrency": self.concurrency}


@dataclass
class CompareError:
    """A repo that could not be read: its row says why and with which exit code (as ``batch`` does)."""

    repo: str
    error: HfmemError

    def to_dict(self) -> dict[str, Any]:
        return {"repo": self.repo, "error_type": type(self.error).__name__, "exit_code": self.error.exit_code,
                "error": self.error.message}


@dataclass
class ModelRows:
    """A compared model at each asked precision: its row and, per asked GPU, the verdict."""

    rows: list[ComparisonRow]
    fits: list[list[GpuFit]] = field(default_factory=list)  # per row, one per GPU


def split(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def model_rows(report: Report, context: int, precisions: list[str], gpus: list[str], options: dict[str, Any]) -> ModelRows:
    """One row per precision (every planner option applied, as ``hfmem MODEL`` plans), the GPUs' verdicts."""
    from hfmem.api import attach_sections
    from hfmem.memory.summary import ComparisonRow, training_rows

    training = {t.method.split()[0].lower(): t.total_bytes_checkpointing for t in training_rows(report)}
    out = ModelRows([])
    for precision in precisions:
        fits: list[GpuFit] = []
        row = None
        asked: list[str | None] = list(gpus) or [None]
        for gpu in asked:
            attach_sections(report, ctx=[context], precision=precision, gpu=gpu, **options)
            plan, kv = report.inference, report.kv_cache
            assert plan is not None and kv
            if row is None:
                row = ComparisonRow(report.repo, report.parameters.total, report.parameters.active, kv[0].bytes_per_token,
                                    plan.weights_bytes, plan.kv_bytes, plan.total_bytes, dict(training))
                if len(precisions) > 1 or precision not in ("auto", "checkpoint"):
                    row.precision = plan.precision
            if gpu is not None and plan.gpu is not None:
                fits.append(GpuFit(plan.gpu.key, bool(plan.fits), plan.margin_bytes or 0, plan.max_context,
                                   plan.concurrency, plan.gpus))
        assert row is not None
        row.fits = [f.to_dict() for f in fits] or None
        out.rows.append(row)
        out.fits.append(fits)
    return out
