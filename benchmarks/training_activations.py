"""Measured vs predicted activation peak (forward + backward) for tiny real-architecture models on CPU.

    PYTHONPATH=src python benchmarks/training_activations.py [arch,...] [--seqs 64,256]

Each row builds a random-init transformers model from a shrunk real config, saves it with safetensors, runs hfmem on
the folder (header path), and measures one HF-Trainer-style step with the live-tensor tracker in
tests/training_measure.py. Prints predicted / measured; tests/test_training_truth.py asserts +-15 %.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

CASES = {
    # name: (method, precision, torch dtype, autocast, peft kwargs)
    "full-bf16": ("full", "bf16", "bfloat16", False, None),
    "full-fp32": ("full", "fp32", "float32", False, None),
    "lora-mixed": ("lora", "mixed-bf16", "bfloat16", True, dict(adapter_fp32=True)),
    "lora-bf16": ("lora", "bf16", "bfloat16", False, dict(adapter_fp32=False)),
}


def predicted_activation_bytes(est) -> int:
    keys = ("activations_layers", "activations_layer_weights", "activations_recompute", "activations_other", "logits_loss", "backward_transient", "autocast_weight_copies")
    return sum(est.activation_terms["components"].get(k, 0) for k in keys)


def measure_row(arch: str, case: str, seq: int, ckpt: bool, workdir: Path) -> tuple[int, int]:
    import torch
    import training_measure as tm
    import hfmem
    from hfmem.memory.training import TrainingSettings, estimate_training

    model_type, cfg = tm.TINY[arch]
    method, precision, dtype, autocast, peft = CASES[case]
    attn = "eager" if model_type == "gemma2" else "sdpa"
    folder = workdir / f"{arch}-{dtype}"
    if not folder.exists():
        tm.save(tm.build(model_type, cfg, dtype=getattr(torch, dtype), attn=attn), folder)
    report = hfmem.analyze(str(folder))
    settings = TrainingSettings(seq=seq, micro_batch=1, grad_checkpointing=ckpt, precision=precision, lora_rank=8,
                                attn=attn, optimizer="adamw")
    est = estimate_training(report, method, settings)
    model = tm.build(model_type, cfg, dtype=getattr(torch, dtype), attn=attn)
    if method == "lora":
        model = tm.wrap_lora(model, "all-linear", rank=8, adapter_fp32=peft["adapter_fp32"])
    measured = tm.activation_peak(model, seq, ckpt=ckpt, autocast=autocast, lora=method == "lora")["peak"]
    return predicted_activation_bytes(est), measured


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("archs", nargs="?", default="llama,qwen3,gpt2,mixtral")
    p.add_argument("--cases", default="full-bf16,lora-mixed")
    p.add_argument("--seqs", default="64,256")
    a = p.parse_args()
    import training_measure as tm

    tm.quiet()
    print(f"{'arch':12s} {'case':11s} {'seq':>5s} {'ckpt':>5s} {'predicted':>12s} {'measured':>12s} {'ratio':>7s}")
    with tempfile.TemporaryDirectory() as tmp:
        for arch in a.archs.split(","):
            for case in a.cases.split(","):
                for seq in (int(s) for s in a.seqs.split(",")):
                    for ckpt in (False, True):
                        pred, meas = measure_row(arch, case, seq, ckpt, Path(tmp))
                        print(f"{arch:12s} {case:11s} {seq:5d} {str(ckpt):>5s} {pred:12,d} {meas:12,d} {pred / meas:7.3f}")


if __name__ == "__main__":
    main()
