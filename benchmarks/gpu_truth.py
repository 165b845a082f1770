"""GPU truth for hfmem's inference and training estimates: one CUDA GPU, torch + transformers + peft, no downloads.

    python benchmarks/gpu_truth.py              # ~5 minutes on one H100/H200-class GPU
    python benchmarks/gpu_truth.py --dry-run    # the same pipeline on CPU with shrunk shapes (a test runs this)

Three small real configs from fixtures/configs (random weights, built on the GPU): a dense GQA model (Qwen3-0.6B),
an MoE (Qwen3-Coder-30B-A3B with its widths and 128 experts, 4 of its 48 layers) and a hybrid (Qwen3.5-0.8B's text
model: Gated DeltaNet + gated attention). Each is saved with safetensors and read back by hfmem through the header
path, then measured:

* prefill at three contexts (eval, no_grad, DynamicCache as generate's first step) against hfmem's
  ``--engine transformers`` plan;
* one training step (the second of two, the steady state: AdamW states exist) for full bf16, mixed precision
  (fp32 weights under bf16 autocast = HF Trainer ``bf16=True``, hfmem ``amp-bf16``) and LoRA (bf16 base, fp32
  adapters, autocast = hfmem ``mixed-bf16``), each without and with gradient checkpointing.

Peaks are ``torch.cuda.max_memory_allocated`` (what hfmem predicts, less its CUDA-context term) and
``memory_reserved`` (the caching allocator's segments); the CUDA context is measured once as the device memory in
use that the allocator does not hold. The SSM path hfmem is told is ``fused`` when flash-linear-attention is
importable, else ``torch`` (transformers' fallback). Prints one markdown table (paste it into docs/training.md).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MODELS = {
    # name: (fixture repo, text config key or None, overrides for the GPU run)
    "dense GQA (Qwen3-0.6B)": ("Qwen/Qwen3-0.6B", None, {}),
    "MoE (Qwen3-30B-A3B, 4 layers)": ("Qwen/Qwen3-Coder-30B-A3B-Instruct", None, {"num_hidden_layers": 4}),
    "hybrid (Qwen3.5-0.8B text)": ("Qwen/Qwen3.5-0.8B-Base", "text_config", {}),
}
# --dry-run: the same structure, shapes tiny enough for a CPU test
DRY = {"hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32, "num_attention_heads": 4,
       "num_key_value_heads": 2, "head_dim": 16, "num_experts": 4, "num_experts_per_tok": 2, "vocab_size": 512,
       "linear_num_key_heads": 2, "linear_num_value_heads": 2, "linear_key_head_dim": 16, "linear_value_head_dim": 16}
CONTEXTS, DRY_CONTEXTS = (1024, 4096, 16384), (16, 32, 64)
TRAIN_SEQ, DRY_TRAIN_SEQ = 2048, 32
MiB = 2**20


def load_config(repo: str, key: str | None, overrides: dict[str, Any], dry: bool) -> dict[str, Any]:
    raw = json.loads((ROOT / "fixtures" / "configs" / repo / "config.json").read_text())
    cfg = dict(raw[key]) if key else dict(raw)
    cfg.pop("architectures", None)
    cfg.pop("auto_map", None)
    cfg.update(overrides)
    if dry:
        cfg.update({k: v for k, v in DRY.items() if k in cfg or k in ("head_dim",)})
        hybrid = "linear_attention" in (cfg.get("layer_types") or [])
        cfg["num_hidden_layers"] = 4 if hybrid else 2
        if hybrid:
            cfg["layer_types"] = ["linear_attention"] * 3 + ["full_attention"]
    if cfg.get("layer_types"):
        cfg["layer_types"] = cfg["layer_types"][: cfg["num_hidden_layers"]]
    return cfg


class Device:
    """CUDA peaks, or on CPU (--dry-run) nothing measured: the pipeline runs, the numbers print as n/a."""

    def __init__(self, dry: bool):
        import torch

        self.torch = torch
        self.cuda = not dry and torch.cuda.is_available()
        if not dry and not self.cuda:
            sys.exit("gpu_truth.py: no CUDA device (use --dry-run to exercise the script on CPU)")
        self.name = torch.cuda.get_device_name() if self.cuda else "cpu (dry run)"
        self.device = "cuda" if self.cuda else "cpu"

    def context_bytes(self) -> int | None:
        if not self.cuda:
            return None
        t = self.torch
        t.zeros(1, device="cuda")
        a = t.randn(64, 64, device="cuda", dtype=t.bfloat16)
        (a @ a).sum().item()  # cuBLAS handle + workspace
        free, total = t.cuda.mem_get_info()
        return total - free - t.cuda.memory_reserved()

    def reset(self) -> None:
        if self.cuda:
            import gc

            gc.collect()
            self.torch.cuda.empty_cache()
            self.torch.cuda.reset_peak_memory_stats()

    def peaks(self) -> tuple[int | None, int | None]:
        if not self.cuda:
            return None, None
        return self.torch.cuda.max_memory_allocated(), self.torch.cuda.max_memory_reserved()


def build(model_type: str, cfg: dict[str, Any], dev: Device, dtype: Any) -> Any:
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(model_type, **cfg)
    with dev.torch.device(dev.device):
        return AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="sdpa")


def prefill(model: Any, ctx: int, dev: Device) -> tuple[int | None, int | None]:
    from transformers import DynamicCache

    torch = dev.torch
    model.eval()
    ids = torch.randint(0, model.config.vocab_size, (1, ctx), device=dev.device)
    dev.reset()
    with torch.no_grad():
        out = model(input_ids=ids, past_key_values=DynamicCache(config=model.config), use_cache=True)
    peaks = dev.peaks()
    del out
    return peaks


def train_step(model: Any, seq: int, dev: Device, ckpt: bool, autocast: bool, lora: bool) -> tuple[int | None, int | None]:
    """Two HF-Trainer-style steps (zero_grad(set_to_none)); the peak of the second."""
    torch = dev.torch
    model.train()
    model.config.use_cache = False
    if ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if lora:
            model.enable_input_require_grads()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-5, foreach=dev.cuda)
    ids = torch.randint(0, model.config.vocab_size, (1, seq), device=dev.device)
    peaks: tuple[int | None, int | None] = (None, None)
    for step in range(2):
        if step == 1:
            dev.reset()
        with torch.autocast(dev.device, dtype=torch.bfloat16, enabled=autocast):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        del loss
        opt.step()
        opt.zero_grad(set_to_none=True)
        peaks = dev.peaks()
    return peaks


TRAIN_CASES = [
    # label, hfmem method, hfmem precision, torch dtype, autocast, lora
    ("full bf16", "full", "bf16", "bfloat16", False, False),
    ("mixed (fp32 + autocast)", "full", "amp-bf16", "float32", True, False),
    ("LoRA r16 all-linear", "lora", "mixed-bf16", "bfloat16", True, True),
]


def run(dry: bool, only: str | None = None) -> list[dict[str, Any]]:
    import hfmem
    from hfmem.memory.training import TrainingSettings, estimate_training

    dev = Device(dry)
    ctx_bytes = dev.context_bytes()
    ssm = "fused" if importlib.util.find_spec("fla") and dev.cuda else "torch"
    contexts, seq = (DRY_CONTEXTS, DRY_TRAIN_SEQ) if dry else (CONTEXTS, TRAIN_SEQ)
    rows: list[dict[str, Any]] = []
    t0 = time.time()
    print(f"# device: {dev.name}; CUDA context (device memory in use outside the caching allocator): "
          f"{'n/a' if ctx_bytes is None else f'{ctx_bytes / MiB:.0f} MiB'}; hfmem assumes 768 MiB; SSM path: {ssm}")
    for name, (repo, key, overrides) in MODELS.items():
        if only and only not in name:
            continue
        cfg = load_config(repo, key, overrides, dry)
        model_type = str(cfg.pop("model_type"))
        with tempfile.TemporaryDirectory() as tmp:
            model = build(model_type, cfg, dev, dev.torch.bfloat16)
            model.save_pretrained(tmp, safe_serialization=True)
            for ctx in contexts:
                report = hfmem.analyze(tmp, ctx=ctx, engine="transformers")
                plan = report.inference
                predicted = plan.total_bytes - plan.overhead_bytes if plan else 0
                rows.append(_row(name, f"prefill {ctx}", predicted, prefill(model, ctx, dev)))
            del model
            base = hfmem.analyze(tmp)
            for label, method, precision, dtype, autocast, lora in TRAIN_CASES:
                for ckpt in (False, True):
                    est = estimate_training(base, method, TrainingSettings(
                        seq=seq, precision=precision, grad_checkpointing=ckpt, lora_rank=16, ssm_kernels=ssm))
                    predicted = est.total_bytes - est.components["framework_overhead"]
                    dev.reset()
                    model = build(model_type, cfg, dev, getattr(dev.torch, dtype))
                    if lora:
                        from peft import LoraConfig, get_peft_model

                        model = get_peft_model(model, LoraConfig(r=16, target_modules="all-linear"))
                    peaks = train_step(model, seq, dev, ckpt, autocast, lora)
                    del model
                    rows.append(_row(name, f"{label}, seq {seq}{', ckpt' if ckpt else ''}", predicted, peaks))
        print(f"# {name}: done at {time.time() - t0:.0f} s", flush=True)
    print_table(rows)
    return rows


def _row(model: str, case: str, predicted: int, peaks: tuple[int | None, int | None]) -> dict[str, Any]:
    allocated, reserved = peaks
    row = {"model": model, "case": case, "predicted": predicted, "allocated": allocated, "reserved": reserved}
    print(json.dumps(row), flush=True)
    return row


def print_table(rows: list[dict[str, Any]]) -> None:
    def mib(x: int | None) -> str:
        return "n/a" if x is None else f"{x / MiB:,.0f}" if x >= 10 * MiB else f"{x / MiB:.2f}"

    print("\n| model | case | hfmem (MiB) | max allocated (MiB) | ratio | max reserved (MiB) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        ratio = f"{r['predicted'] / r['allocated']:.3f}" if r["allocated"] else "n/a"
        print(f"| {r['model']} | {r['case']} | {mib(r['predicted'])} | {mib(r['allocated'])} | {ratio} | {mib(r['reserved'])} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dry-run", action="store_true", help="run on CPU with shrunk shapes (nothing measured)")
    p.add_argument("--only", default=None, help="only the model whose name contains this")
    args = p.parse_args()
    import warnings

    warnings.simplefilter("ignore")
    from transformers import logging

    logging.set_verbosity_error()
    run(args.dry_run, args.only)


if __name__ == "__main__":
    main()
