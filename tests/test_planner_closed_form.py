"""The planner's longest context in closed form (one division per block of growth, confirmed at the boundary)
equals the binary search it replaces, on every fixture model, both engines and the whole GPU catalog."""

from __future__ import annotations

import pytest
from stubs import fixture_repo_ids, model_files

from hfmem.api import analyze_files
from hfmem.memory import planner as planner_mod
from hfmem.memory.gpus import CATALOG, GiB
from hfmem.memory.planner import Planner, _budget, _largest_fitting


def _searched(p: Planner, budget: int, batch: int) -> tuple[int | None, bool]:
    """max_context as it was: the model limit, nothing, or a binary search over need()."""
    cap = p.context_limit()
    if p.need(cap, batch) <= budget:
        return cap, True
    if p.need(1, batch) > budget:
        return None, False
    return _largest_fitting(lambda ctx: p.need(ctx, batch) <= budget, 1, cap), False


@pytest.mark.parametrize("repo", fixture_repo_ids())
def test_closed_form_equals_search(repo, monkeypatch):
    try:
        report = analyze_files(model_files(repo))
    except Exception as exc:  # fixtures the analysis refuses have no plan to compare
        pytest.skip(f"{type(exc).__name__}")
    for engine in ("vllm", "transformers"):
        for precision in ("checkpoint",):
            try:
                p = Planner(report, precision, engine=engine)
            except Exception:
                continue
            budgets = {_budget(g, "cuda", engine, 0.9) for g in CATALOG if g.kind != "apple"}
            budgets |= {p.weights_bytes + k * GiB // 7 for k in range(1, 5)}  # just above the weights: short contexts
            for budget in sorted(budgets):
                for batch in (1, 3):
                    assert p.max_context(budget, batch) == _searched(p, budget, batch), (engine, precision, budget, batch)
    calls: list[int] = []
    monkeypatch.setattr(planner_mod, "_largest_fitting", lambda *a: calls.append(1) or _largest_fitting(*a))
    p = Planner(report, "checkpoint", engine="vllm")
    for budget in (p.weights_bytes + GiB, p.weights_bytes + 3 * GiB):
        p.max_context(budget, 1)
    if set(report.architecture.layer_type_list) == {"full_attention"} and report.architecture.attention_kind != "mla":
        assert not calls, "uniform full attention is linear in whole blocks: no search"
