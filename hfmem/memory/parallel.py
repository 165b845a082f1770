"""How many GPUs: the tensor-parallel sizes vLLM accepts for a model, and the smallest setup that fits.

vLLM refuses a tensor-parallel size that does not divide the model's attention heads
(vllm/config/model.py: ``ModelConfig.verify_with_parallel_config``). Its linear layers then split with
``divide()`` (vllm/distributed/utils.py), which asserts exact division: ``QKVParallelLinear.__init__``
(vllm/model_executor/layers/linear.py) divides the KV heads by TP when TP < KV heads, and otherwise replicates
them, TP / KV heads copies each (so TP must then be a multiple of the KV heads); ``MergedColumnParallelLinear``
divides the MLP (and the MoE experts', in ``FusedMoE``) intermediate size by TP. Pipeline parallel splits the
decoder layers into contiguous stages (vllm/distributed/utils.py: ``get_pp_indices``, uneven splits allowed), one
stage per node here once TP fills ``gpus_per_node`` GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hfmem.errors import UsageError
from hfmem.units import cdiv

if TYPE_CHECKING:
    from hfmem.memory.gpus import GPU
    from hfmem.memory.planner import InferencePlan, Planner
    from hfmem.model.architecture import Architecture

DEFAULT_GPUS_PER_NODE = 8  # an HGX/DGX node
MAX_NODES = 64  # --gpus auto gives up beyond this many nodes of pipeline stages


def tp_problem(arch: Architecture, tp: int) -> str | None:
    """Why vLLM refuses tensor-parallel size ``tp`` for this model, or None when it accepts it."""
    if tp <= 1:
        return None
    heads, kv = arch.num_attention_heads, arch.num_kv_heads
    if heads and heads % tp:
        return f"{heads} attention heads are not divisible by {tp}"
    if kv and arch.attention_kind != "mla" and heads:
        if tp < kv and kv % tp:
            return f"{kv} KV heads are not divisible by {tp}"
        if tp >= kv and tp % kv:
            return f"{tp} GPUs cannot hold whole replicas of {kv} KV heads"
    sizes = [("intermediate size", arch.intermediate_size)]
    if arch.moe:
        sizes.append(("MoE intermediate size", arch.moe.moe_intermediate_size))
    for what, n in sizes:
        if n and n % tp:
            return f"the {what} {n} is not divisible by {tp}"
    return None


def valid_tp_sizes(arch: Architecture, limit: int) -> list[int]:
    """Tensor-parallel sizes in 1..limit that vLLM accepts for this model."""
    return [n for n in range(1, limit + 1) if tp_problem(arch, n) is None]


def check_tp(arch: Architecture, tp: int) -> None:
    """A usage error (exit 2) naming the valid sizes when vLLM would refuse ``--gpus tp``."""
    problem = tp_problem(arch, tp)
    if problem is not None:
        valid = valid_tp_sizes(arch, max(tp, DEFAULT_GPUS_PER_NODE))
        raise UsageError(f"--gpus {tp}: vLLM refuses tensor parallel size {tp} for this model ({problem}); "
                         f"valid sizes: {', '.join(map(str, valid))}, or --gpus auto")


@dataclass
class Setup:
    """One parallel layout: ``tp`` GPUs per pipeline stage, ``pp`` stages (one per node when pp > 1)."""

    gpu: GPU
    tp: int
    pp: int
    fits: bool
    need_bytes: int  # per GPU (the heaviest pipeline stage)
    budget_bytes: int
    max_context: int | None = None
    concurrency: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    @property
    def margin_bytes(self) -> int:
        return self.budget_bytes - self.need_bytes

    def label(self) -> str:
        if self.pp > 1:
            return f"{self.gpus} x {self.gpu.name} (TP {self.tp} x PP {self.pp}: {self.pp} nodes of {self.tp})"
        return f"{self.tp} x {self.gpu.name}" + (f" (TP {self.tp})" if self.tp > 1 else "")

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu.key, "gpus": self.gpus, "tensor_parallel": self.tp, "pipeline_parallel": self.pp,
                "fits": self.fits, "need_bytes": self.need_bytes, "budget_bytes": self.budget_bytes,
                "margin_bytes": self.margin_bytes, "max_context": self.max_context, "concurrency": self.concurrency,
                "notes": list(self.notes)}


def from_plan(plan: InferencePlan) -> Setup:
    assert plan.gpu is not None and plan.budget_bytes is not None
    return Setup(plan.gpu, plan.gpus, 1, bool(plan.fits), plan.total_bytes, plan.budget_bytes, plan.max_context,
                 plan.concurrency)


def _layer_split(planner: Planner) -> tuple[int, int]:
    """(bytes per GPU of the decoder layers, of everything else) at the planner's precision and TP, from the same
    per-tensor bytes and TP rules (``tensor_bytes``, ``shard``) as the planner's weights."""
    from hfmem.memory.planner import shard
    from hfmem.memory.precision import tensor_bytes

    moe = bool(planner.arch.moe)
    layers = other = 0
    for t, mult in planner.groups:  # (first tensor, how many: precision.weight_groups)
        per = shard(t, tensor_bytes(t, planner.precision, moe=moe), planner.arch, planner.tp)[0] * mult
        if t.layer is None:
            other += per
        else:
            layers += per
    other += planner.weights_bytes - (layers + other)  # the rotary cache and anything the planner adds per GPU
    return layers, other


def pipeline_setup(planner: Planner, gpu: GPU, budget: int, pp: int, context: int, batch: int) -> Setup:
    """The heaviest stage of ``pp`` pipeline stages at the planner's TP, as an upper bound: every non-layer tensor
    (embeddings, lm_head, final norm) counted on it, ceil(layers / pp) decoder layers and that share of the KV cache,
    and the activation workspace, overhead, model-runner state and CUDA-graph memory of a whole GPU, with vLLM's
    defaults for ``gpu`` resolved as ``plan`` resolves them (``Planner.for_gpu``), so that one stage reads as the plan."""
    planner = planner.for_gpu(gpu)
    layers_bytes, other = _layer_split(planner)
    n_layers = max(1, planner.arch.num_layers)
    per_stage = cdiv(n_layers, pp)

    per_gpu = planner.overhead + planner.runner_state + planner.cudagraph_memory  # each stage captures its own graphs

    def need(ctx: int, b: int) -> int:
        kv = planner.kv(ctx, b).total_bytes
        return (other + cdiv(layers_bytes * per_stage, n_layers) + cdiv(kv * per_stage, n_layers)
                + planner.activation(ctx, b)[0] + per_gpu)

    total = need(context, batch)
    fixed = other + cdiv(layers_bytes * per_stage, n_layers) + planner.activation(context, 1)[0] + per_gpu
    one_seq = cdiv(planner.kv(context, 1).total_bytes * per_stage, n_layers)
    conc = (budget - fixed) / one_seq if one_seq and budget > fixed else 0.0
    longest: int | None = None
    cap = planner.context_limit()
    if need(1, batch) <= budget:
        lo, hi = 1, cap + 1
        if need(cap, batch) <= budget:
            lo = cap
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if need(mid, batch) <= budget else (lo, mid)
        longest = lo
    return Setup(gpu, planner.tp, pp, total <= budget, total, budget, longest, round(conc, 4),
                 notes=[f"pipeline stages of {per_stage} of {n_layers} layers; per GPU is an upper bound for the heaviest "
                        "stage (embeddings and lm_head both counted on it)"])


def smallest_setup(make_planner: Any, gpu: GPU, context: int, batch: int,
                   gpus_per_node: int = DEFAULT_GPUS_PER_NODE) -> tuple[Setup | None, list[Setup]]:
    """The fewest GPUs of type ``gpu`` that fit: tensor parallel over the valid sizes up to ``gpus_per_node``, then
    pipeline stages over nodes at the largest valid TP. ``make_planner(tp)`` builds the planner (same options, that
    TP). Returns (the smallest fitting setup or None, every setup tried in order)."""
    first = make_planner(1)
    tried: list[Setup] = []
    sizes = valid_tp_sizes(first.arch, gpus_per_node)
    planner = first
    for tp in sizes:
        planner = first if tp == 1 else make_planner(tp)
        setup = from_plan(planner.plan(context, batch, gpu, with_catalog=False))
        tried.append(setup)
        if setup.fits:
            return setup, tried
    budget = tried[-1].budget_bytes
    if planner.config_refusal(context):  # the engine refuses the configuration, whatever the pool
        return None, tried
    if planner.precision in ("q8_0", "q6_k", "q5_k_m", "q4_k_m"):
        return None, tried  # GGUF weights run in llama.cpp, which has no pipeline stages across nodes
    for pp in range(2, min(MAX_NODES, max(2, planner.arch.num_layers)) + 1):
        setup = pipeline_setup(planner, gpu, budget, pp, context, batch)
        tried.append(setup)
        if setup.fits:
            return setup, tried
    return None, tried


def every_tp_size(make_planner: Any, gpu: GPU, context: int, batch: int,
                  gpus_per_node: int = DEFAULT_GPUS_PER_NODE) -> list[Setup]:
    """One setup per tensor-parallel size vLLM accepts for the model on one node (``-v``'s table): the plan that
    ``--gpus N`` makes at each size."""
    first = make_planner(1)
    return [from_plan((first if tp == 1 else make_planner(tp)).plan(context, batch, gpu, with_catalog=False))
            for tp in valid_tp_sizes(first.arch, gpus_per_node)]
