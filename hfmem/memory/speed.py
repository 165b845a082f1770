"""How fast, at most: a roofline from the GPU's memory bandwidth and tensor FLOP/s (hfmem.memory.hardware).

Decode: every step reads, per GPU, the weights the step touches and the KV cache of every sequence in the batch:
    step >= max(bytes read / bandwidth, FLOPs / peak FLOP/s)
    bytes read = dense weights + the MoE experts B sequences touch (E x (1 - (1 - k/E)^B) of E experts on average, k per
                 token) + KV bytes of B sequences at the context; the input embedding table is not read (B rows are)
    FLOPs      = 2 x active parameters x B + 4 x layers x heads x head_dim x context x B (QK^T and PV), over TP
Prefill of one sequence of C tokens: FLOPs = 2 x active parameters x C + 2 x layers x heads x head_dim x C^2 (causal),
over TP, at the peak FLOP/s, and never less than one read of the weights.
It is an upper bound on speed (a lower bound on time): kernels reach 60-90 % of the bandwidth, and launch, sampling,
scheduling and communication overheads come on top; docs/planner.md compares it with published measurements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hfmem.memory.planner import Planner
    from hfmem.report import Report

_W8A8 = ("fp8", "fp8-block")  # FP8 weights multiply at the FP8 tensor rate where the GPU has one (W8A8)


@dataclass
class Speed:
    """A roofline at one setup: decode per sequence and in aggregate at ``batch`` sequences, prefill of ``context``."""

    context: int
    batch: int
    tp: int
    bandwidth_gbs: float
    tflops: float
    read_bytes: int  # per GPU per decode step
    step_flops: float  # per GPU per decode step
    decode_tokens_per_s: float  # per sequence
    aggregate_tokens_per_s: float  # all ``batch`` sequences
    decode_bound: str  # "memory" | "compute"
    prefill_flops: float  # per GPU
    prefill_s: float
    single_tokens_per_s: float | None = None  # one sequence alone (set by plan_speed)

    def to_dict(self) -> dict[str, Any]:
        return {"upper_bound": True, "context": self.context, "batch": self.batch, "tensor_parallel": self.tp,
                "bandwidth_gbs": self.bandwidth_gbs, "tflops": self.tflops, "decode_read_bytes": self.read_bytes,
                "decode_step_flops": self.step_flops, "decode_tokens_per_s": round(self.decode_tokens_per_s, 2),
                "aggregate_tokens_per_s": round(self.aggregate_tokens_per_s, 2), "decode_bound": self.decode_bound,
                "single_tokens_per_s": round(self.single_tokens_per_s, 2) if self.single_tokens_per_s else None,
                "prefill_flops": self.prefill_flops, "prefill_s": round(self.prefill_s, 4)}


def _weight_split(planner: Planner) -> tuple[int, int, int]:
    """(per-GPU bytes of the routed experts, of the input embedding table, of everything else), as the planner
    counts the weights (``tensor_bytes`` per tensor, ``shard`` for TP)."""
    from hfmem.memory.planner import shard
    from hfmem.memory.precision import _GGUFContext, tensor_bytes

    arch = planner.arch
    gctx = None
    if planner.precision in ("q8_0", "q6_k", "q5_k_m", "q4_k_m"):
        gctx = _GGUFContext(planner.precision, arch.num_layers, arch.moe.num_experts if arch.moe else 0,
                            arch.tie_word_embeddings, arch.model_type == "llama" and arch.num_layers == 80)
    experts = embedding = other = 0
    for t, mult in planner.groups:  # (first tensor, how many: precision.weight_groups)
        per = shard(t, tensor_bytes(t, planner.precision, moe=bool(arch.moe), gguf=gctx), arch, planner.tp)[0] * mult
        if t.component == "moe_experts":
            experts += per
        elif t.kind == "embedding" and not arch.tie_word_embeddings:
            embedding += per  # a lookup reads B rows; tied, the table is read whole as the lm_head
        else:
            other += per
    return experts, embedding, other


def roofline(report: Report, planner: Planner, context: int, batch: int, bandwidth_gbs: float, tflops: float) -> Speed:
    """The roofline of ``planner``'s weights (precision, TP) at ``context`` x ``batch`` on a GPU of that bandwidth and
    peak dense tensor TFLOP/s."""
    arch = planner.arch
    tp = planner.tp
    experts, _embedding, other = _weight_split(planner)
    touched = 1.0
    if arch.moe and arch.moe.num_experts and arch.moe.experts_per_token:
        e, k = arch.moe.num_experts, arch.moe.experts_per_token
        # a config routing a token to more experts than it has touches them all (min: (1 - k/e) ** batch would
        # overflow for k > 2e at large batches)
        touched = 1 - (1 - min(k, e) / e) ** batch
    kv = planner.kv(context, batch).total_bytes
    read = int(other + experts * touched + kv)
    active = report.parameters.active or report.parameters.total
    heads, d = arch.num_attention_heads or 0, arch.head_dim or 0
    # attention FLOPs grow with the tokens each layer attends to: the window for sliding layers, none for linear/SSM
    attended = 0
    for kind, n in (arch.layer_types or {"full_attention": arch.num_layers}).items():
        if "attention" in kind and "linear" not in kind:
            attended += n * (min(context, arch.sliding_window) if "sliding" in kind and arch.sliding_window else context)
    step_flops = (2 * active * batch + 4 * heads * d * attended * batch) / tp
    mem_s = read / (bandwidth_gbs * 1e9)
    cmp_s = step_flops / (tflops * 1e12)
    step = max(mem_s, cmp_s)
    prefill_flops = (2 * active * context + 2 * heads * d * attended * context) / tp
    prefill = max(prefill_flops / (tflops * 1e12), (other + experts) / (bandwidth_gbs * 1e9))
    return Speed(context, batch, tp, bandwidth_gbs, tflops, read, step_flops, 1 / step, batch / step,
                 "memory" if mem_s >= cmp_s else "compute", prefill_flops, prefill)


def peak_tflops(hw: Any, precision: str) -> float | None:
    """The tensor rate the weights multiply at: FP8 weights at the FP8 rate where there is one (W8A8), everything
    else at bf16 (fp16 on GPUs without bf16), quantized 4/8-bit weights being dequantized to 16-bit (W4A16)."""
    if precision in _W8A8 and hw.fp8_tflops:
        return float(hw.fp8_tflops)
    rate = hw.bf16_tflops or hw.fp16_tflops
    return float(rate) if rate else None


def plan_speed(report: Report, planner: Planner, context: int, batch: int) -> Speed | None:
    """The roofline at the plan's GPU (catalog GPUs with known bandwidth only), or None."""
    from hfmem.memory.hardware import hardware_of, precision_key

    plan = report.inference
    if plan is None or plan.gpu is None or plan.device != "cuda":
        return None
    hw = hardware_of(plan.gpu)
    if hw is None or not hw.bandwidth_gbs:
        return None
    rate = peak_tflops(hw, precision_key(report, plan.precision))
    if rate is None:
        return None
    speed = roofline(report, planner, context, batch, float(hw.bandwidth_gbs), rate)
    speed.single_tokens_per_s = speed.decode_tokens_per_s if batch == 1 else \
        roofline(report, planner, context, 1, float(hw.bandwidth_gbs), rate).decode_tokens_per_s
    return speed
