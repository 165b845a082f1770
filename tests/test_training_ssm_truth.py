"""State-space and linear-attention layers against measured truth: real transformers 5 models (shrunk real configs,
tests/training_measure.py: TINY_SSM), random weights, one bf16 forward + backward on CPU, where transformers runs
its torch fallbacks (mamba_selective_scan's loop, mamba2_chunk_scan, torch_chunk_gated_delta_rule). The peak of
live activation bytes, tracked storage by storage, is within 10 % of hfmem's ``--ssm-kernels torch`` estimate.
Sequence lengths: one chunk (64) and several chunks with padding (300) for the chunked scans."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.truth

pytest.importorskip("torch")
pytest.importorskip("transformers")

import training_measure as tm  # noqa: E402

import hfmem  # noqa: E402
from hfmem.memory.training import TrainingSettings, estimate_training  # noqa: E402

KEYS = ("activations_layers", "activations_layer_weights", "activations_recompute", "activations_other", "logits_loss",
        "backward_transient")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("ssm_models")
    cache: dict = {}

    def make(arch: str):
        if arch not in cache:
            model_type, cfg = tm.TINY_SSM[arch]
            tm.save(tm.build(model_type, cfg), root / arch)
            cache[arch] = (hfmem.analyze(str(root / arch)), lambda: tm.build(model_type, cfg))
        return cache[arch]

    return make


CASES = [("mamba", 64), ("mamba", 160), ("jamba", 64), ("jamba", 160)]
CASES += [(a, s) for a in ("mamba2", "falcon_h1", "nemotron_h", "qwen3_next", "qwen3_5") for s in (64, 300)]


@pytest.mark.parametrize("arch, seq", CASES)
def test_ssm_activation_peak_within_10_percent(saved, arch, seq):
    report, builder = saved(arch)
    est = estimate_training(report, "full", TrainingSettings(seq=seq, precision="bf16", grad_checkpointing=False, ssm_kernels="torch"))
    assert est.settings["ssm_kernels"] == "torch"
    assert any("on the torch path" in n for n in est.notes)
    predicted = sum(est.activation_terms["components"].get(k, 0) for k in KEYS)
    measured = tm.activation_peak(builder(), seq)["peak"]
    print(f"{arch:10s} seq={seq:4d} predicted={predicted:>11,d} measured={measured:>11,d} ratio={predicted / measured:.3f}")
    assert abs(predicted / measured - 1) <= 0.10, (predicted, measured, est.activation_terms)


@pytest.mark.parametrize("arch", ["mamba", "mamba2", "qwen3_5"])
def test_fused_path_saves_less_and_says_so(saved, arch):
    """The fused kernels save no per-token [I, N] scan tensors or [heads, chunk] matrices (they recompute them in
    backward): the scan term is far below the torch path's;
    the default on a CUDA GPU is the fused path, on an Apple GPU the torch one."""
    report, _ = saved(arch)
    torch_ = estimate_training(report, "full", TrainingSettings(seq=512, precision="bf16", ssm_kernels="torch"))
    fused = estimate_training(report, "full", TrainingSettings(seq=512, precision="bf16"))
    assert fused.settings["ssm_kernels"] == "fused" and any("on the fused path" in n for n in fused.notes)
    scan = "SSM scan (discretised A, B, per-step states)"
    assert fused.activation_terms["per_token_per_layer"].get(scan, 0) < torch_.activation_terms["per_token_per_layer"][scan] / 4
    apple = estimate_training(report, "full", TrainingSettings(seq=512, precision="bf16", gpu="m-24gb"))
    assert apple.settings["ssm_kernels"] == "torch"


MORE = [(a, m, c) for a in ("mamba", "jamba", "mamba2", "falcon_h1", "nemotron_h", "qwen3_next", "qwen3_5")
        for m, c in (("full", True), ("lora", False), ("lora", True))]


@pytest.mark.parametrize("arch, method, ckpt", MORE)
def test_ssm_checkpointed_and_lora_within_15_percent(saved, arch, method, ckpt):
    """Checkpointed full fine-tuning and LoRA (fp32 adapters under bf16 autocast, HF Trainer bf16=True: the chunked
    scans' einsums then save 16-bit operand copies) at 160 tokens, +-15 % as the attention models' LoRA and
    checkpointing cases (tests/test_training_truth.py)."""
    from peft import LoraConfig, get_peft_model

    report, builder = saved(arch)
    precision = "bf16" if method == "full" else "mixed-bf16"
    est = estimate_training(report, method, TrainingSettings(seq=160, precision=precision, grad_checkpointing=ckpt,
                                                             ssm_kernels="torch", lora_rank=8))
    predicted = sum(est.activation_terms["components"].get(k, 0) for k in KEYS)
    model = builder()
    if method == "lora":
        targets = "all-linear" if est.target_modules == ["all-linear"] else est.target_modules
        tm.quiet()
        model = get_peft_model(model, LoraConfig(r=8, target_modules=targets))
    measured = tm.activation_peak(model, 160, ckpt=ckpt, autocast=method == "lora", lora=method == "lora")["peak"]
    print(f"{arch:10s} {method} ckpt={ckpt!s:5s} predicted={predicted:>11,d} measured={measured:>11,d} ratio={predicted / measured:.3f}")
    assert abs(predicted / measured - 1) <= 0.15, (predicted, measured)
