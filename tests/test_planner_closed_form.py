"""The planner in closed form (one division per block of growth, confirmed at the boundary) equals the searches it
replaces: the longest context, and transformers' largest batch (concurrency), on every fixture model and both
engines. Each model gets a quarter of the GPU catalog (a different quarter per model, so the run covers every GPU)
plus budgets just above the weights (short contexts, small batches)."""

from __future__ import annotations

import zlib

import pytest
from stubs import fixture_repo_ids, model_files

from hfmem.api import analyze_files
from hfmem.memory import planner as planner_mod
from hfmem.memory.gpus import CATALOG, GiB
from hfmem.memory.planner import MAX_BATCH, Planner, _budget, _largest_fitting

GPUS = [g for g in CATALOG if g.kind != "apple"]


def _searched(p: Planner, budget: int, batch: int) -> tuple[int | None, bool]:
    """max_context as it was: the model limit, nothing, or a binary search over need()."""
    cap = p.context_limit()
    if p.need(cap, batch) <= budget:
        return cap, True
    if p.need(1, batch) > budget:
        return None, False
    return _largest_fitting(lambda ctx: p.need(ctx, batch) <= budget, 1, cap), False


def _searched_batch(p: Planner, budget: int, context: int) -> int:
    """transformers' concurrency as it was: doubling, then a binary search over need()."""
    fits = lambda b: p.need(context, b) <= budget  # noqa: E731
    lo, hi = 0, 1
    while fits(hi) and hi < MAX_BATCH:
        lo, hi = hi, hi * 2
    return _largest_fitting(fits, lo, hi)


def _budgets(repo: str, p: Planner, engine: str) -> list[int]:
    quarter = GPUS[zlib.crc32(repo.encode()) % 4::4]
    budgets = {_budget(g, "cuda", engine, 0.9) for g in quarter}
    budgets |= {p.weights_bytes + p.overhead + k * GiB // 7 for k in range(1, 5)}  # just above the weights
    return sorted(budgets)


@pytest.mark.parametrize("repo", fixture_repo_ids())
def test_closed_form_equals_search(repo, monkeypatch):
    try:
        report = analyze_files(model_files(repo))
    except Exception as exc:  # fixtures the analysis refuses have no plan to compare
        pytest.skip(f"{type(exc).__name__}")
    for engine in ("vllm", "transformers"):
        try:
            p = Planner(report, "checkpoint", engine=engine)
        except Exception:
            continue
        limit = p.context_limit()
        for budget in _budgets(repo, p, engine):
            for batch in (1, 3):
                assert p.max_context(budget, batch) == _searched(p, budget, batch), (engine, budget, batch)
            if engine == "transformers":
                for context in sorted({1, 17, min(4096, limit), limit}):
                    want = _searched_batch(p, budget, context)
                    assert p.max_batch(budget, context) == want, (budget, context)
                    conc, _, _, available = p.concurrency(budget, context)
                    if available > 0 and p.kv(context, 1).total_bytes > 0:  # else it answers before any search
                        assert conc == float(want), (budget, context)
    calls: list[int] = []
    monkeypatch.setattr(planner_mod, "_largest_fitting", lambda *a: calls.append(1) or _largest_fitting(*a))
    p = Planner(report, "checkpoint", engine="vllm")
    for budget in (p.weights_bytes + GiB, p.weights_bytes + 3 * GiB):
        p.max_context(budget, 1)
    # a vision tower whose profiled dummy grows with max_model_len (Qwen2.5-VL's video) bends the line: searched
    fixed_encoder = p.encoder_at(1) == p.encoder_at(p.context_limit())
    if (set(report.architecture.layer_type_list) == {"full_attention"} and report.architecture.attention_kind != "mla"
            and fixed_encoder):
        assert not calls, "uniform full attention is linear in whole blocks: no search"
    calls.clear()
    p = Planner(report, "checkpoint", engine="transformers")
    budget = p.need(2048, 5) + (p.need(2048, 6) - p.need(2048, 5)) // 2  # between batch 5 and 6 at 2,048 tokens
    assert p.max_batch(budget, 2048) == 5
    if not p.arch.moe:
        assert not calls, "a dense model grows linearly per sequence: no search"
