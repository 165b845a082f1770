"""Training memory against measured truth: real transformers 5 / peft models on CPU (tiny shrunk configs, random
weights), saved with safetensors and read back through hfmem's header path.

* model states after one optimizer step EQUAL hfmem's weights / master / gradients / optimizer-state components;
* LoRA trainable parameters EQUAL peft's get_nb_trainable_parameters();
* the activation peak of forward + backward (live-tensor tracker, tests/training_measure.py) is within +-15 %.
"""

from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.truth

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

import training_measure as tm  # noqa: E402

import hfmem  # noqa: E402
from hfmem.errors import UsageError  # noqa: E402
from hfmem.memory.training import PEFT_MOE_CONVERSION, TrainingSettings, estimate_training  # noqa: E402

ACTIVATION_KEYS = ("activations_layers", "activations_layer_weights", "activations_recompute", "activations_other",
                   "logits_loss", "backward_transient", "autocast_weight_copies")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Factory: (arch, dtype, extra config) -> (hfmem Report, model builder), each model saved once."""
    root = tmp_path_factory.mktemp("training_models")
    cache: dict = {}

    def make(arch: str, dtype=torch.bfloat16, **extra):
        key = (arch, dtype, tuple(sorted(extra.items())))
        if key not in cache:
            model_type, cfg = tm.TINY[arch]
            cfg = cfg | extra
            attn = "eager" if model_type == "gemma2" else "sdpa"
            folder = root / f"{arch}-{str(dtype).split('.')[-1]}-{len(cache)}"
            tm.save(tm.build(model_type, cfg, dtype=dtype, attn=attn), folder)
            report = hfmem.analyze(str(folder))
            cache[key] = (report, lambda: tm.build(model_type, cfg, dtype=dtype, attn=attn))
        return cache[key]

    return make


# ---------------------------------------------------------------------------------------------------- the tracker


def test_tracker_on_a_toy_linear():
    """Validated first on nn.Linear: outputs count when created, tensors saved for backward stay alive, unsaved ones
    are freed, parameters and inputs created outside are never counted."""
    lin = torch.nn.Linear(256, 512)
    x = torch.randn(8, 256)
    with tm.LiveTensorBytes(exclude=list(lin.parameters()) + [x]) as tr:
        y = lin(x)
        assert tr.current() == 8 * 512 * 4
        z = y.square()  # square saves its input y
        del y
        assert tr.current() == 2 * 8 * 512 * 4  # y kept alive by autograd
        w = z.sum()
        del z  # sum saves nothing: z is freed
        assert tr.current() == 8 * 512 * 4 + 4
        w.backward()
        del w
    grads = tr.uids_of([lin.weight.grad, lin.bias.grad])
    assert tr.current(grads) == 0  # after backward only the parameter gradients remain
    assert tr.peak(grads) >= 2 * 8 * 512 * 4


# ---------------------------------------------------------------------------------------------------- model states


def _state_bytes(opt) -> int:
    return sum(v.nbytes for st in opt.state.values() for k, v in st.items() if torch.is_tensor(v) and k != "step")


def _one_step(model, opt_factory, autocast=False, master=False):
    """One forward/backward/step. master=True: bf16 model, fp32 master copies updated by the optimizer."""
    model.train()
    ids = torch.randint(0, 1000, (1, 16))
    params = [p for p in model.parameters() if p.requires_grad]
    masters = [p.detach().float().requires_grad_(True) for p in params] if master else None
    opt = opt_factory(masters if master else params)
    ctx = torch.autocast("cpu", dtype=torch.bfloat16) if autocast else torch.autocast("cpu", enabled=False)
    with ctx:
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    if master:
        for m, p in zip(masters, params):
            m.grad = p.grad.float()
        opt.step()
        for m, p in zip(masters, params):
            m.grad = None  # the fp32 gradient copy is transient; the 16-bit gradients stay
            p.data.copy_(m.detach())
    else:
        opt.step()
    return params, masters, opt


def _adafactor(params):
    from transformers.optimization import Adafactor

    return Adafactor(params, lr=1e-3, scale_parameter=False, relative_step=False, warmup_init=False)


OPTIMIZERS = {
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-4, foreach=False),
    "adafactor": _adafactor,
    "sgd-momentum": lambda ps: torch.optim.SGD(ps, lr=1e-3, momentum=0.9),
    "sgd": lambda ps: torch.optim.SGD(ps, lr=1e-3),
}


@pytest.mark.parametrize(
    "arch, precision, optimizer",
    [
        ("llama", "bf16", "adamw"),  # torch AdamW: states in the parameter dtype -> 8 B/param
        ("llama", "fp32", "adamw"),  # 16 B/param
        ("llama", "mixed-bf16", "adamw"),  # bf16 weights + grads, fp32 master + fp32 states -> 16 B/param
        ("mixtral", "mixed-bf16", "adamw"),
        ("gpt2", "fp32", "adafactor"),  # tied embeddings counted once; factored fp32 moments
        ("qwen3", "bf16", "adafactor"),  # Adafactor keeps fp32 moments even for bf16 params
        ("qwen2", "bf16", "sgd-momentum"),
        ("deepseek_v3", "fp32", "sgd"),
    ],
)
def test_full_model_states_equal_measured(saved, arch, precision, optimizer):
    dtype = torch.float32 if precision == "fp32" else torch.bfloat16
    report, builder = saved(arch, dtype)
    est = estimate_training(report, "full", TrainingSettings(precision=precision, optimizer=optimizer))
    params, masters, opt = _one_step(builder(), OPTIMIZERS[optimizer], master=precision.startswith("mixed"))
    c = est.components
    assert c["weights"] == sum(p.nbytes for p in params)
    assert est.gradient_bytes == sum(p.grad.nbytes for p in params)
    assert c.get("master_weights", 0) == (sum(m.nbytes for m in masters) if masters else 0)
    assert c["optimizer_states"] == _state_bytes(opt)
    assert est.trainable_parameters == sum(p.numel() for p in params)


def test_amp_is_18_bytes_per_param(saved):
    """HF AMP on an fp32 model: 4 + 4 + 8 B/param of states plus the bf16 copy of every matmul weight that autocast
    saves for backward (measured as the live bf16 weight-shaped tensors after forward)."""
    report, builder = saved("llama", torch.float32)
    # long enough that the backward (where the autocast copies live), not the optimizer step, is the peak
    est = estimate_training(report, "full", TrainingSettings(precision="amp-bf16", seq=1024))
    model = builder()
    params, _, opt = _one_step(model, OPTIMIZERS["adamw"], autocast=True)
    psi = sum(p.numel() for p in params)
    c = dict(est.components, gradients=est.gradient_bytes)
    assert (c["weights"], c["gradients"], c["optimizer_states"]) == (4 * psi, 4 * psi, 8 * psi)
    # measure the autocast copies: bf16 tensors shaped like a Linear weight, alive after forward
    model.zero_grad(set_to_none=True)
    shapes = {tuple(m.weight.shape) for m in model.modules() if isinstance(m, torch.nn.Linear)}
    ids = torch.randint(0, 1000, (1, 16))
    with tm.LiveTensorBytes(exclude=list(model.parameters()) + [ids]) as tr, torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
        live = {uid for uid, n in tr.events if n > 0} - {uid for uid, n in tr.events if n < 0}
        copies = sum(dict((u, n) for u, n in tr.events if n > 0)[u] for u in live if tr.kind[u][1] == torch.bfloat16 and tr.kind[u][0] in shapes)
    del loss
    assert c["autocast_weight_copies"] == copies == 2 * sum(math.prod(s) * n for s, n in _count_shapes(model).items())
    assert c["weights"] + c["gradients"] + c["optimizer_states"] + c["autocast_weight_copies"] == 18 * psi - 2 * _non_linear(model)


def _count_shapes(model):
    out: dict = {}
    for m in model.modules():
        if isinstance(m, torch.nn.Linear):
            out[tuple(m.weight.shape)] = out.get(tuple(m.weight.shape), 0) + 1
    return out


def _non_linear(model) -> int:
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    return sum(p.numel() for p in model.parameters()) - linear


@pytest.mark.parametrize(
    "arch, precision, dora, adapter_fp32",
    [("llama", "mixed-bf16", False, True), ("qwen2", "bf16", False, False), ("llama", "mixed-bf16", True, True), ("mixtral", "mixed-bf16", False, True)],
)
def test_lora_states_equal_measured(saved, arch, precision, dora, adapter_fp32):
    report, builder = saved(arch)
    est = estimate_training(report, "lora", TrainingSettings(precision=precision, lora_rank=8, dora=dora,
                                                             lora_targets="all-linear" if not dora or arch != "mixtral" else "q_proj,v_proj"))
    model = tm.wrap_lora(builder(), "all-linear", rank=8, dora=dora, adapter_fp32=adapter_fp32)
    trainable, _, opt = _one_step(model, OPTIMIZERS["adamw"], autocast=precision.startswith("mixed"))
    frozen = [p for p in model.parameters() if not p.requires_grad]
    c = est.components
    assert c["base_weights"] == sum(p.nbytes for p in frozen)
    assert c["adapter_weights"] == sum(p.nbytes for p in trainable)
    assert c["adapter_gradients"] == sum(p.grad.nbytes for p in trainable)
    assert c["adapter_optimizer_states"] == _state_bytes(opt)


# ---------------------------------------------------------------------------------------------------- LoRA counts

QV = {"gpt2": "c_attn", "deepseek_v3": "q_b_proj,kv_b_proj"}
LORA_ARCHS = ["llama", "qwen2", "mixtral", "deepseek_v3", "gpt2", "qwen3_moe", "qwen3", "gemma2"]


@pytest.mark.parametrize("arch", LORA_ARCHS)
@pytest.mark.parametrize("targets", ["all-linear", "qv"])
def test_lora_trainable_parameters_equal_peft(saved, arch, targets):
    spec = QV.get(arch, "q_proj,v_proj") if targets == "qv" else "all-linear"
    report, builder = saved(arch)
    est = estimate_training(report, "lora", TrainingSettings(lora_rank=8, lora_targets=spec))
    model = tm.wrap_lora(builder(), spec if spec == "all-linear" else spec.split(","), rank=8)
    assert est.trainable_parameters == model.get_nb_trainable_parameters()[0]


@pytest.mark.parametrize("arch, spec", [("llama", "all-linear"), ("gpt2", "all-linear"), ("mixtral", "q_proj,v_proj"), ("qwen3_moe", "q_proj,k_proj,v_proj,o_proj")])
def test_dora_trainable_parameters_equal_peft(saved, arch, spec):
    report, builder = saved(arch)
    est = estimate_training(report, "lora", TrainingSettings(lora_rank=4, lora_targets=spec, dora=True))
    model = tm.wrap_lora(builder(), spec if spec == "all-linear" else spec.split(","), rank=4, dora=True)
    assert est.trainable_parameters == model.get_nb_trainable_parameters()[0]


@pytest.mark.parametrize("arch, spec", [("qwen3_moe", "gate_proj,up_proj,down_proj"), ("mixtral", "w1,w2,w3,gate"), ("deepseek_v3", "gate_proj,up_proj,down_proj,o_proj")])
def test_lora_on_fused_experts_equals_peft(saved, arch, spec):
    """Per-expert names are remapped by PEFT to the fused 3-D expert tensors (gate_up gets rank 2r)."""
    report, builder = saved(arch)
    est = estimate_training(report, "lora", TrainingSettings(lora_rank=4, lora_targets=spec))
    model = tm.wrap_lora(builder(), spec.split(","), rank=4)
    assert est.trainable_parameters == model.get_nb_trainable_parameters()[0]


def test_lora_qwen2_moe_is_not_converted(tmp_path):
    """qwen2_moe itself has no PEFT conversion entry: its fused experts and router are not targeted by all-linear,
    its shared-expert Linear layers are."""
    cfg = dict(hidden_size=64, intermediate_size=96, moe_intermediate_size=48, shared_expert_intermediate_size=80,
               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=500, num_experts=4,
               num_experts_per_tok=2)
    tm.save(tm.build("qwen2_moe", cfg), tmp_path / "m")
    est = estimate_training(hfmem.analyze(str(tmp_path / "m")), "lora", TrainingSettings(lora_rank=8))
    model = tm.wrap_lora(tm.build("qwen2_moe", cfg), "all-linear", rank=8)
    assert est.trainable_parameters == model.get_nb_trainable_parameters()[0]


@pytest.mark.parametrize("arch, spec, dora", [("mixtral", "w1", False), ("mixtral", "all-linear", True), ("qwen3_moe", "gate_proj,down_proj", False)])
def test_lora_errors_match_peft(saved, arch, spec, dora):
    report, builder = saved(arch)
    with pytest.raises(ValueError):
        tm.wrap_lora(builder(), spec if spec == "all-linear" else spec.split(","), rank=4, dora=dora)
    with pytest.raises(UsageError):
        estimate_training(report, "lora", TrainingSettings(lora_rank=4, lora_targets=spec, dora=dora))


def test_moe_conversion_table_matches_installed_peft():
    from peft.utils import transformers_weight_conversion as twc

    installed = {t for t, base in twc._MODEL_TO_CONVERSION_PATTERN.items() if base in twc._MOE_TARGET_MODULE_MAPPING}
    assert installed == set(PEFT_MOE_CONVERSION)
    assert all(twc._MODEL_TO_CONVERSION_PATTERN[t] == b for t, b in PEFT_MOE_CONVERSION.items())


# ---------------------------------------------------------------------------------------------------- activations

ACT_CASES = [(arch, "full", seq, ckpt, 1000) for arch in ("llama", "qwen3", "gpt2", "mixtral") for seq in (64, 160) for ckpt in (False, True)]
ACT_CASES += [("llama", "lora", seq, ckpt, 1000) for seq in (64, 160) for ckpt in (False, True)]
ACT_CASES += [("mixtral", "lora", 64, ckpt, 1000) for ckpt in (False, True)]
# A 128-token vocabulary moves the checkpointed peak from the loss to the recomputed layer's backward.
ACT_CASES += [(arch, method, 160, True, 128) for arch, method in (("llama", "full"), ("qwen3", "full"), ("gpt2", "full"), ("llama", "lora"))]


@pytest.mark.parametrize("arch, method, seq, ckpt, vocab", ACT_CASES)
def test_activation_peak_within_15_percent(saved, arch, method, seq, ckpt, vocab):
    """Full fine-tuning in pure bf16, LoRA in mixed bf16 (fp32 adapters + autocast, as HF Trainer bf16=True)."""
    report, builder = saved(arch, **({} if vocab == 1000 else {"vocab_size": vocab}))
    precision = "bf16" if method == "full" else "mixed-bf16"
    est = estimate_training(report, method, TrainingSettings(seq=seq, grad_checkpointing=ckpt, precision=precision, lora_rank=8))
    predicted = sum(est.activation_terms["components"].get(k, 0) for k in ACTIVATION_KEYS)
    model = builder()
    if method == "lora":
        model = tm.wrap_lora(model, "all-linear", rank=8)
    measured = tm.activation_peak(model, seq, ckpt=ckpt, autocast=method == "lora", lora=method == "lora")["peak"]
    print(f"{arch:8s} {method:5s} seq={seq:4d} ckpt={ckpt!s:5s} vocab={vocab:5d} predicted={predicted:>11,d} measured={measured:>11,d} ratio={predicted / measured:.3f}")
    assert abs(predicted / measured - 1) <= 0.15, (predicted, measured)


def test_lora_without_checkpointing_saves_more_than_full(saved):
    """The trap: LoRA on all linear layers keeps each adapter's own input copy (measured, not assumed)."""
    report, builder = saved("llama")
    full = tm.activation_peak(builder(), 64)["after_forward"]
    lora = tm.activation_peak(tm.wrap_lora(builder(), "all-linear", rank=8), 64, autocast=True, lora=True)["after_forward"]
    assert lora > full
    est_full = estimate_training(report, "full", TrainingSettings(seq=64, precision="bf16"))
    est_lora = estimate_training(report, "lora", TrainingSettings(seq=64, precision="mixed-bf16", lora_rank=8))
    assert est_lora.activation_terms["components"]["activations_layers"] > est_full.activation_terms["components"]["activations_layers"]
