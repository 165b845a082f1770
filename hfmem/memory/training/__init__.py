"""Training memory per GPU: full fine-tuning, LoRA and QLoRA, every term visible, from the headers' tensor shapes
and the normalised config (no model is built). The formulas and their sources are in docs/training.md."""

from hfmem.memory.training.estimate import TrainingEstimate, TrainingReport, estimate_all, estimate_training
from hfmem.memory.training.lora import PEFT_MOE_CONVERSION, linear_modules, resolve_lora_targets
from hfmem.memory.training.optimizer import optimizer_state_bytes
from hfmem.memory.training.qlora import nf4_bytes
from hfmem.memory.training.settings import ATTENTION, FSDP, METHODS, OFFLOAD, OPTIMIZERS, PRECISIONS, TrainingSettings

__all__ = [
    "TrainingSettings", "TrainingEstimate", "TrainingReport", "estimate_training", "estimate_all",
    "METHODS", "OPTIMIZERS", "PRECISIONS", "ATTENTION", "OFFLOAD", "FSDP",
    "PEFT_MOE_CONVERSION", "resolve_lora_targets", "linear_modules", "nf4_bytes", "optimizer_state_bytes",
]
