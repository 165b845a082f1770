"""The planner's weight tensors as (first tensor, count) groups (``precision.weight_groups``) give what the tensors
one by one give: the same multiset of every fact the planner reads from a tensor (its fields, vLLM's parameter key,
``shard``'s answer and replicated label at 8 GPUs, the GGUF category), and the same planner numbers (weight terms,
replicated parts, weights at every precision, the speed and pipeline splits) as a planner whose groups are single
tensors, on every fixture inventory."""

from __future__ import annotations

from collections import Counter

import pytest
from stubs import fixture_repo_ids, model_files

from hfmem.api import analyze_files
from hfmem.memory import precision
from hfmem.memory.parallel import _layer_split
from hfmem.memory.planner import Planner, shard
from hfmem.memory.precision import _gguf_category, counted_for_weights, weight_groups, weight_tensors
from hfmem.memory.speed import _weight_split
from hfmem.memory.vllm_weights import vllm_parameter


def _facts(t, arch):
    """Everything the planner reads from one weight tensor, its name included only through what it derives."""
    label = t.name.split(".")[-2] if "." in t.name else t.name
    return (t.component, t.layer, t.kind, t.out, t.inn, t.count, t.stored_bytes, t.pattern, vllm_parameter(t.name),
            shard(t, 8 * 3 * 5 * 7 * t.stored_bytes, arch, 8), label, "a_proj" in t.name, _gguf_category(t),
            t.name.rsplit(".", 1)[-1])


def _one_by_one(counted, quantization=None, hidden_size=None):
    return [(t, 1) for t in weight_tensors(counted, quantization, hidden_size)]


def _planner_numbers(report, precision_key, tp, speculative=None):
    p = Planner(report, precision_key, tp=tp, speculative=speculative)
    return (p.weight_terms, p.weights_bytes, p.replicated, p.weights.bytes, p.weights.by_kind, p.weights.total_params,
            p.weights.quantized_params, p.gated, p.mxfp4_moe_layers, _weight_split(p),
            # (the pipeline split is for safetensors precisions: tensor_bytes needs the GGUF context it does not pass)
            None if precision_key.startswith("q") else _layer_split(p))


@pytest.mark.parametrize("repo_id", fixture_repo_ids())
def test_groups_expand_to_the_tensors(repo_id, monkeypatch):
    report = analyze_files(model_files(repo_id))
    arch, q = report.architecture, report.parameters.quantization
    for include_mtp in (False, True) if report.parameters.by_component.get("mtp") else (False,):
        counted = counted_for_weights(report, include_mtp=include_mtp)
        tensors = weight_tensors(counted, q, arch.hidden_size)
        groups = weight_groups(counted, q, arch.hidden_size)
        assert sum(n for _, n in groups) == len(tensors)
        expanded: Counter = Counter()
        for t, n in groups:
            expanded[_facts(t, arch)] += n
        assert expanded == Counter(_facts(t, arch) for t in tensors)
        # the first tensor of each group in checkpoint order
        firsts = [t for t, _ in groups]
        assert firsts == [t for t in tensors if t in set(firsts)]
    for precision_key, tp, spec in (("checkpoint", 8, None), ("q4_k_m", 8, None), ("mxfp4", 1, "mtp")):
        grouped = _planner_numbers(report, precision_key, tp, spec)
        with monkeypatch.context() as m:
            m.setattr(precision, "weight_groups", _one_by_one)
            assert _planner_numbers(report, precision_key, tp, spec) == grouped


def test_per_expert_tensors_are_grouped():
    """One group per (pattern, layer) for per-expert tensors: Kimi-K3's fixture has far fewer groups than tensors,
    and the planner does not make the tensor-by-tensor list."""
    report = analyze_files(model_files("moonshotai/Kimi-K3"))
    counted = counted_for_weights(report)
    groups = weight_groups(counted, report.parameters.quantization, report.architecture.hidden_size)
    n = sum(k for _, k in groups)
    assert n > 10 * len(groups)
    planner = Planner(report)
    assert planner._tensors is None
    assert len(planner.tensors) == n
