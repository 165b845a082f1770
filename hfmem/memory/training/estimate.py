"""Per-GPU training memory of one method, term by term: model states, activations, data-parallel and transient
buffers, the GPUs it fits on, and the ZeRO comparison note."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hfmem.errors import UsageError
from hfmem.memory.training.activations import activation_memory, layer_facts
from hfmem.memory.training.lora import Adapter, linear_modules, resolve_lora_targets, trainable_tensors
from hfmem.memory.training.optimizer import optimizer_state_bytes
from hfmem.memory.training.qlora import largest_quantized, qlora_base
from hfmem.memory.training.settings import METHODS, PRECISION_BYTES, PrecisionBytes, TrainingSettings
from hfmem.units import cdiv

if TYPE_CHECKING:
    from hfmem.api import Report
    from hfmem.model.inventory import CountedTensor


@dataclass
class TrainingEstimate:
    method: str
    total_bytes: int
    trainable_parameters: int
    components: dict[str, int]
    settings: dict[str, Any]
    pageable_bytes: int = 0
    host_bytes: int = 0
    rank: int | None = None
    target_modules: list[str] | None = None
    activation_terms: dict[str, Any] = field(default_factory=dict)
    fits_on: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    gradient_bytes: int = 0  # every gradient once allocated (components["gradients"]: those alive at the peak)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "total_bytes": self.total_bytes,
            "trainable_parameters": self.trainable_parameters,
            "components": dict(self.components),
            "settings": dict(self.settings),
            "pageable_bytes": self.pageable_bytes,
            "host_bytes": self.host_bytes,
            "activation_terms": self.activation_terms,
            "gradient_bytes": self.gradient_bytes,
            "fits_on": list(self.fits_on),
            "notes": list(self.notes),
        }
        if self.method in ("lora", "qlora"):
            out["rank"] = self.rank
            out["target_modules"] = list(self.target_modules or [])
        return out


@dataclass
class TrainingReport:
    estimates: dict[str, TrainingEstimate]
    gpu: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {m: e.to_dict() for m, e in self.estimates.items()}


@dataclass(frozen=True)
class _Sharding:
    """Over how many GPUs each kind of model state is partitioned (ZeRO stages 1/2/3, FSDP grad-op/full)."""

    states: int
    grads: int
    params: int

    @classmethod
    def of(cls, s: TrainingSettings) -> _Sharding:
        n = s.gpus
        return cls(
            states=n if (s.zero >= 1 or s.fsdp) else 1,
            grads=n if (s.zero >= 2 or s.fsdp) else 1,
            params=n if (s.zero == 3 or s.fsdp == "full") else 1,
        )


@dataclass
class _Budget:
    """The per-GPU components as they are added, in order, and what lives elsewhere (pageable, host RAM)."""

    components: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    pageable: int = 0
    host: int = 0

    def offload(self, settings: TrainingSettings, states: tuple[str, ...], params: str, extra_host: int = 0) -> None:
        """ZeRO-Offload / FSDP CPU offload: optimizer states (and, with optimizer+params, the parameters) to host."""
        if settings.offload == "none":
            return
        self.host += sum(self.components.pop(k, 0) for k in states) + self.pageable + extra_host
        self.pageable = 0
        if settings.offload == "optimizer+params":
            self.host += self.components.pop(params)


def estimate_training(report: Report, method: str, settings: TrainingSettings | None = None) -> TrainingEstimate:
    """Per-GPU training memory of one method ("full", "lora" or "qlora") with every term visible."""
    settings = (settings or TrainingSettings()).validate()
    if method not in METHODS:
        raise UsageError(f"unknown training method {method!r} (full, lora, qlora or all)")
    prec = PRECISION_BYTES[settings.precision]
    ckpt = settings.grad_checkpointing if settings.grad_checkpointing is not None else (method == "qlora")
    shard = _Sharding.of(settings)
    budget = _Budget()
    adapters: list[Adapter] = []
    targets: list[str] | None = None
    if method == "full":
        trainable = _full_model_states(budget, report, settings, prec, shard)
    else:
        adapters, targets, lora_notes = resolve_lora_targets(report, settings.lora_targets, settings.lora_rank, settings.dora)
        budget.notes.extend(lora_notes)
        trainable = sum(a.params for a in adapters) + (sum(a.out_features for a in adapters) if settings.dora else 0)
        _adapter_model_states(budget, report, method, settings, shard, adapters, trainable)
    act = activation_memory(report, method, settings, prec, ckpt, adapters)
    budget.notes.extend(act.notes)
    budget.components.update(act.components)
    if prec.amp and method == "full":
        budget.components["autocast_weight_copies"] = _autocast_weight_copies(report, ckpt)
    _data_parallel_buffers(budget, report, method, settings, prec)
    _transient_buffers(budget, report, method, settings, adapters)
    gradient_bytes = budget.components.get("gradients", budget.components.get("adapter_gradients", 0))
    # the backward-phase terms, whichever phase is the peak (components show the winning one)
    act.terms["components"] = {k: v for k, v in budget.components.items() if k in _ACTIVATION_COMPONENTS}
    _phase_peak(budget, report, method, settings, prec, act.terms.get("peak_at", ""))
    budget.components["framework_overhead"] = settings.overhead_bytes
    total = sum(budget.components.values())
    est = TrainingEstimate(
        method=method,
        total_bytes=total,
        trainable_parameters=trainable,
        components=budget.components,
        settings=_settings_record(settings, method, ckpt, act.loss, act.terms.get("encoder_tokens"), act.terms.get("ssm_kernels"),
                                  method == "qlora" and any(c.component == "moe_experts" for c in report.tensors)),
        pageable_bytes=budget.pageable,
        host_bytes=budget.host,
        rank=settings.lora_rank if method != "full" else None,
        target_modules=targets,
        activation_terms=act.terms,
        notes=budget.notes,
        gradient_bytes=gradient_bytes,
    )
    est.fits_on = _fits(total, settings.gpu)
    if settings.zero or settings.fsdp:
        psi = sum(c.logical for c in trainable_tensors(report))
        est.notes.append(_zero_note(report, method, settings, prec, psi))
    return est


_ACTIVATION_COMPONENTS = ("activations_layers", "activations_layer_weights", "activations_other", "logits_loss",
                          "backward_transient", "activations_recompute", "autocast_weight_copies")


def _phase_peak(budget: _Budget, report: Report, method: str, settings: TrainingSettings, prec: PrecisionBytes, peak_at: str) -> None:
    """Full fine-tuning on one GPU with plain PyTorch (no ZeRO/FSDP/DDP, whose gradient buffers exist from the
    start): gradients are created during backward (HF Trainer zeroes them with set_to_none, so a step starts without
    any) and the activations are gone before the optimizer step, so the peak is the larger of
    * the activation peak plus the gradients alive then: none at the loss backward, the output layer's, the final
      norm's and one decoder layer's at a layer backward (torch autograd accumulates .grad as each weight's backward
      runs), and
    * the optimizer step: every gradient plus the step's temporaries (torch/optim/adam.py: _multi_tensor_adam, the
      foreach path torch takes on CUDA: torch._foreach_sqrt(exp_avg_sqs) is one moment-sized list alive at once).
    Mixed precision with fp32 master copies (DeepSpeed / Apex style) keeps its gradient buffers allocated: unchanged."""
    comps = budget.components
    if method != "full" or prec.master or settings.gpus > 1 or settings.zero or settings.fsdp or settings.offload != "none":
        return
    grads = comps.get("gradients", 0)
    acts = sum(comps.get(k, 0) for k in _ACTIVATION_COMPONENTS)
    if peak_at == "loss backward":
        alive = 0
    else:
        per_layer: dict[int | None, int] = defaultdict(int)
        for c in trainable_tensors(report):
            if c.component not in ("embeddings",):
                per_layer[c.layer] += c.logical
        alive = (per_layer.pop(None, 0) + max(per_layer.values(), default=0)) * prec.grad
    step_tmp = comps.get("optimizer_states", 0) // 2 if settings.optimizer == "adamw" else 0
    if acts + alive >= grads + step_tmp:
        comps["gradients"] = alive
        budget.notes.append(
            f"peak at the {peak_at or 'backward'}: {alive:,} B of the {grads:,} B of gradients exist then (created during "
            f"backward, after the peak); the optimizer step needs {grads + step_tmp - acts - alive:,} B less"
        )
    else:
        for k in _ACTIVATION_COMPONENTS:
            comps.pop(k, None)
        if step_tmp:
            comps["optimizer_step_transient"] = step_tmp
        budget.notes.append(
            f"peak at the optimizer step: every gradient plus the AdamW foreach temporaries; the {acts:,} B of activations "
            "are freed by then (the backward peak is lower)"
        )


def _full_model_states(budget: _Budget, report: Report, settings: TrainingSettings, prec: PrecisionBytes, shard: _Sharding) -> int:
    """Full fine-tuning: weights, fp32 master copy, gradients and optimizer states of every parameter (ZeRO paper,
    Rajbhandari et al. 2019, arXiv:1910.02054 sections 3.1 and 5). Returns the trainable parameters."""
    arch = report.architecture
    tensors = trainable_tensors(report)
    psi = sum(c.logical for c in tensors)
    if report.parameters.quantization is not None:
        budget.notes.append(f"full fine-tuning needs the dequantized model: {psi:,} logical parameters at {settings.precision}")
    embed_names = {c.entry.name for c in tensors if c.component == "embeddings" or (arch.tie_word_embeddings and c.component == "lm_head")}
    state_elem = 4 if prec.master else prec.state
    opt = pageable = 0
    for c in tensors:
        res, pg = optimizer_state_bytes(_shape(c), settings.optimizer, state_elem, c.entry.name in embed_names)
        opt += res
        pageable += pg
    comps = budget.components
    comps["weights"] = cdiv(psi * prec.weight, shard.params)
    if prec.master:
        comps["master_weights"] = cdiv(psi * prec.master, shard.states)
    comps["gradients"] = cdiv(psi * prec.grad, shard.grads)
    comps["optimizer_states"] = cdiv(opt, shard.states)
    budget.pageable = cdiv(pageable, shard.states)
    fp32_grads = cdiv(psi * 4, shard.grads) if prec.master else 0  # the fp32 gradient copy a CPU Adam updates from
    budget.offload(settings, ("optimizer_states", "master_weights"), "weights", fp32_grads)
    if prec.amp:
        budget.notes.append("amp: fp32 weights under autocast; the bf16 copy of each matmul weight is saved for backward (+2 B/param)")
    return psi


def _adapter_model_states(
    budget: _Budget, report: Report, method: str, settings: TrainingSettings, shard: _Sharding, adapters: list[Adapter], trainable: int
) -> None:
    """LoRA / QLoRA: the frozen base, then the adapters' weights, gradients and optimizer states."""
    ad_elem = 2 if settings.precision == "bf16" else 4
    if settings.precision == "bf16":
        budget.notes.append("bf16: adapters kept in bf16 (PEFT autocast_adapter_dtype=False); PEFT's default upcasts them to fp32")
    _frozen_base(budget, report, method, settings, shard)
    comps = budget.components
    comps["adapter_weights"] = cdiv(trainable * ad_elem, shard.params)
    comps["adapter_gradients"] = cdiv(trainable * ad_elem, shard.grads)
    opt = pageable = 0
    for a in adapters:
        for shape in a.shapes:
            res, pg = optimizer_state_bytes(shape, settings.optimizer, ad_elem)
            opt += res
            pageable += pg
        if settings.dora:
            res, pg = optimizer_state_bytes((a.out_features,), settings.optimizer, ad_elem)
            opt += res
    comps["adapter_optimizer_states"] = cdiv(opt, shard.states)
    budget.pageable = cdiv(pageable, shard.states)
    budget.offload(settings, ("adapter_optimizer_states",), "base_weights" if method == "lora" else "base_nf4")


def _frozen_base(budget: _Budget, report: Report, method: str, settings: TrainingSettings, shard: _Sharding) -> None:
    """The frozen base model: its load dtype or stored quantized bytes (LoRA), NF4 + unquantized modules (QLoRA)."""
    if method == "lora":
        quant = report.parameters.quantization
        if quant is not None:
            base = sum(c.entry.nbytes for c in report.tensors if c.role in ("param", "quantized", "quant_overhead") and c.component != "mtp")
            budget.notes.append(f"frozen base kept in its stored {quant.method} format")
        else:
            psi = sum(c.logical for c in trainable_tensors(report))
            base = psi * (4 if settings.precision in ("fp32", "amp-bf16") else 2)
        budget.components["base_weights"] = cdiv(base, shard.params)
        return
    nf4, unq, qnotes = qlora_base(report, settings)
    budget.notes.extend(qnotes)
    budget.components["base_nf4"] = cdiv(nf4, shard.params)
    budget.components["base_unquantized"] = cdiv(unq, shard.params)


def _autocast_weight_copies(report: Report, ckpt: bool) -> int:
    """AMP on an fp32 model: the bf16 copy of every matmul weight autocast saves for backward (with checkpointing,
    only the recomputed layer's and the output layer's)."""
    arch = report.architecture
    tensors = trainable_tensors(report)
    linears = linear_modules(report)
    lin = sum(m.params for m in linears) + sum(c.logical for c in tensors if c.component == "lm_head")
    if arch.tie_word_embeddings and not any(c.component == "lm_head" for c in tensors):
        lin += arch.vocab_size * arch.hidden_size
    if ckpt:
        per_layer = max((sum(m.params for m in linears if m.layer == i) for i in range(arch.num_layers)), default=0)
        lin = lin - sum(m.params for m in linears) + per_layer
    return 2 * lin


def _data_parallel_buffers(budget: _Budget, report: Report, method: str, settings: TrainingSettings, prec: PrecisionBytes) -> None:
    """DDP's gradient buckets; the gathered layer of ZeRO-3 and the unsharded units of FSDP full shard."""
    comps = budget.components
    zero = settings.zero
    if settings.gpus > 1 and zero == 0 and not settings.fsdp:
        comps["ddp_gradient_buckets"] = comps.get("gradients", comps.get("adapter_gradients", 0))
        budget.notes.append("DDP with gradient_as_bucket_view=False (default) keeps a flat copy of all gradients in its buckets")
    if zero == 3 or settings.fsdp == "full":
        if settings.fsdp == "full":
            unit = max((f.linear_params for f in layer_facts(report)), default=0)
            if method == "full":  # current + prefetched unit in the compute dtype, and one unit's unsharded gradient
                comps["fsdp_unit_buffers"] = 2 * unit * prec.weight + unit * prec.grad
            else:
                comps["fsdp_unit_buffers"] = 2 * unit * 2
            budget.notes.append("FSDP full shard: the current and the prefetched decoder layer are unsharded (plus one layer's gradient when the base trains)")
        else:
            largest = _largest_module_params(report)
            comps["zero3_gathered_params"] = 4 * largest if method == "full" else 2 * largest
            budget.notes.append("ZeRO-3: DeepSpeed's estimator adds the largest layer's gathered 16-bit params + grads (4 B x largest layer)")


def _transient_buffers(budget: _Budget, report: Report, method: str, settings: TrainingSettings, adapters: list[Adapter]) -> None:
    """QLoRA's dequantized weight during the 4-bit matmul; DoRA's weight-norm computation."""
    if method == "qlora":
        budget.components["dequant_buffer"] = 2 * largest_quantized(report, settings)
    if settings.dora:
        widest = max((a.in_features * (a.in_features + 3 * a.out_features) for a in adapters if a.kind == "linear"), default=0)
        budget.components["dora_buffer"] = widest * (2 if settings.precision == "bf16" else 4)


def _settings_record(settings: TrainingSettings, method: str, ckpt: bool, loss: str, encoder_tokens: int | None,
                     ssm_path: str | None = None, qlora_experts: bool = False) -> dict[str, Any]:
    """The settings as resolved for this method (the JSON ``settings``); ``encoder_seq`` only for encoder-decoder
    models, as resolved (per sequence); ``ssm_kernels`` only for models with SSM / linear-attention layers, as
    resolved (auto -> fused / torch); ``qlora_experts`` only for QLoRA of MoE models."""
    st = settings.to_dict()
    st.pop("encoder_seq")
    st.pop("ssm_kernels")
    if ssm_path is not None:
        st["ssm_kernels"] = ssm_path
    if not qlora_experts:
        st.pop("qlora_experts")
    if encoder_tokens is not None:
        st["encoder_seq"] = encoder_tokens // settings.micro_batch
    st = st | {
        "method": method,
        "grad_checkpointing": ckpt,
        "loss": loss,
        "tokens_per_micro_batch": settings.seq * settings.micro_batch,
    }
    if method != "full":
        st["adapter_dtype"] = "bf16" if settings.precision == "bf16" else "fp32"
    return st


def _shape(c: CountedTensor) -> tuple[int, ...]:
    shape = tuple(int(x) for x in c.entry.shape)
    if c.role == "quantized" and math.prod(shape or (1,)) != c.logical:
        return (c.logical,)
    return shape


def _largest_module_params(report: Report) -> int:
    return max((c.logical for c in trainable_tensors(report) if len(c.entry.shape) >= 2), default=0)


def _fits(total: int, gpu: str | None) -> list[str]:
    from hfmem.memory.gpus import CATALOG, resolve_gpu

    gpus = [resolve_gpu(gpu)] if gpu else list(CATALOG)
    out = []
    for g in gpus:
        usable = g.memory_bytes
        if g.kind == "apple":
            usable = g.memory_bytes * 3 // 4  # Metal's default working-set limit is ~75% of unified memory
        if total <= usable:
            out.append(g.key)
    return out


def _zero_note(report: Report, method: str, s: TrainingSettings, prec: PrecisionBytes, psi: int) -> str:
    n = s.gpus
    if method != "full":
        return f"{'FSDP ' + s.fsdp if s.fsdp else 'ZeRO-' + str(s.zero)} over {n} GPUs: adapter states and (stage 3 / full shard) the frozen base are partitioned"
    if s.fsdp:
        return f"FSDP {s.fsdp} over {n} GPUs (full shard ~ ZeRO-3, grad-op ~ ZeRO-2)"
    k = 12 if prec.master else 2 * prec.state
    paper = {1: 2 * psi + 2 * psi + k * psi / n, 2: 2 * psi + (2 + k) * psi / n, 3: (2 + 2 + k) * psi / n}[s.zero]
    ds = {1: None, 2: 2 * psi + 18 * psi / n, 3: 18 * psi / n + 4 * _largest_module_params(report)}[s.zero]
    text = f"ZeRO-{s.zero} over {n} GPUs: model states {paper / 1e9:.2f} GB per GPU by the ZeRO paper (16-bit params/grads + K={k} optimizer bytes)"
    if ds is not None and prec.master:
        text += f"; DeepSpeed's estimator (fp32 gradient partition included) gives {ds / 1e9:.2f} GB"
    return text


def estimate_all(report: Report, settings: TrainingSettings | None = None, methods: tuple[str, ...] = METHODS) -> TrainingReport:
    """`--train all`: full, LoRA and QLoRA side by side in one table."""
    settings = (settings or TrainingSettings()).validate()
    return TrainingReport({m: estimate_training(report, m, settings) for m in methods}, settings.gpu)
