"""Training budgets as tables: methods side by side, settings, notes."""

from __future__ import annotations

from hfmem.memory.training import TrainingReport
from hfmem.render.tables import Table


def training_tables(training: TrainingReport) -> list[Table]:
    return training.tables()
