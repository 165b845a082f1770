"""Training memory per GPU: full fine-tuning, LoRA and QLoRA, every term visible, from the headers' tensor shapes
and the normalised config (no model is built). The formulas and their sources are in docs/training.md."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# Resolved lazily: the CLI imports the option choices (settings) at start-up; the estimators load only for --train.
_EXPORTS = {
    "TrainingEstimate": "estimate", "TrainingReport": "estimate", "estimate_all": "estimate",
    "estimate_training": "estimate", "PEFT_MOE_CONVERSION": "lora", "linear_modules": "lora",
    "resolve_lora_targets": "lora", "optimizer_state_bytes": "optimizer", "nf4_bytes": "qlora",
    "ATTENTION": "settings", "FSDP": "settings", "METHODS": "settings", "OFFLOAD": "settings",
    "OPTIMIZERS": "settings", "PRECISIONS": "settings", "TrainingSettings": "settings", "SSM_KERNELS": "settings", "QLORA_EXPERTS": "settings",
}  # fmt: skip

__all__ = [
    "TrainingSettings", "TrainingEstimate", "TrainingReport", "estimate_training", "estimate_all",
    "METHODS", "OPTIMIZERS", "PRECISIONS", "ATTENTION", "OFFLOAD", "FSDP", "SSM_KERNELS", "QLORA_EXPERTS",
    "PEFT_MOE_CONVERSION", "resolve_lora_targets", "linear_modules", "nf4_bytes", "optimizer_state_bytes",
]  # fmt: skip

if TYPE_CHECKING:
    from hfmem.memory.training.estimate import TrainingEstimate, TrainingReport, estimate_all, estimate_training
    from hfmem.memory.training.lora import PEFT_MOE_CONVERSION, linear_modules, resolve_lora_targets
    from hfmem.memory.training.optimizer import optimizer_state_bytes
    from hfmem.memory.training.qlora import nf4_bytes
    from hfmem.memory.training.settings import (
        ATTENTION,
        FSDP,
        METHODS,
        OFFLOAD,
        OPTIMIZERS,
        PRECISIONS,
        QLORA_EXPERTS,
        SSM_KERNELS,
        TrainingSettings,
    )


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'hfmem.memory.training' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"hfmem.memory.training.{module}"), name)
