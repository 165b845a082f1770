"""What the user can choose for a training estimate: the option tuples (the CLI's choices come from here), the
validated settings and the bytes per element each precision mode implies."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from hfmem.errors import UsageError

METHODS = ("full", "lora", "qlora")
OPTIMIZERS = ("adamw", "adamw-8bit", "paged-adamw-8bit", "adafactor", "sgd", "sgd-momentum", "lion")
PRECISIONS = ("mixed-bf16", "mixed-fp16", "bf16", "fp32", "amp-bf16")
ATTENTION = ("sdpa", "eager", "flash")
OFFLOAD = ("none", "optimizer", "optimizer+params")
FSDP = ("full", "grad-op")
SSM_KERNELS = ("auto", "fused", "torch")
QLORA_EXPERTS = ("bf16", "nf4")

MiB = 2**20
# CUDA context (~0.5-0.8 GiB; 723 MiB measured after the first CUDA tensor) plus the cuBLAS / cuBLASLt workspaces
# (32 MiB per handle on sm90: PyTorch, aten/src/ATen/cuda/CublasHandlePool.cpp: getChosenWorkspaceSize). Not seen by
# torch.cuda.memory_allocated().
FRAMEWORK_OVERHEAD = 768 * MiB


@dataclass(frozen=True)
class TrainingSettings:
    """Everything the user can set (CLI options of `hfmem REPO --train ...`)."""

    seq: int = 2048
    micro_batch: int = 1
    encoder_seq: int | None = None  # encoder-decoder models: encoder tokens per sequence (None: seq)
    grad_checkpointing: bool | None = None  # None: off for full/lora, on for qlora (prepare_model_for_kbit_training)
    optimizer: str = "adamw"
    precision: str = "mixed-bf16"
    lora_rank: int = 16
    lora_targets: str = "all-linear"  # or "q_proj,v_proj,..."
    dora: bool = False
    gpus: int = 1
    zero: int = 0
    fsdp: str | None = None  # "full" | "grad-op"
    offload: str = "none"
    attn: str = "sdpa"
    chunked_loss: bool = False
    qlora_upcast: bool = True  # prepare_model_for_kbit_training casts non-4-bit params to fp32
    gpu: str | None = None  # a catalog name or size; default: the whole catalog
    overhead_bytes: int = FRAMEWORK_OVERHEAD
    qlora_experts: str = "bf16"  # fused MoE experts under QLoRA: left unquantized (transformers 5 + bnb) or NF4
    ssm_kernels: str = "auto"  # SSM / linear-attention layers: fused kernels or transformers' torch fallback

    def ssm_path(self) -> tuple[str, str]:
        """(the SSM code path, why): ``auto`` is the fused kernels (mamba-ssm, causal-conv1d, flash-linear-attention)
        on a CUDA/ROCm GPU and transformers' torch fallback on Apple GPUs, which those kernels do not support."""
        if self.ssm_kernels != "auto":
            return self.ssm_kernels, f"--ssm-kernels {self.ssm_kernels}"
        if self.gpu:
            from hfmem.memory.gpus import resolve_gpu

            if resolve_gpu(self.gpu).kind == "apple":
                return "torch", "auto: Apple GPU, no mamba-ssm / flash-linear-attention kernels (transformers' torch fallback)"
        return "fused", "auto: GPU with the mamba-ssm / causal-conv1d / flash-linear-attention kernels installed"

    def validate(self) -> TrainingSettings:
        def bad(msg: str) -> None:
            raise UsageError(msg)

        if self.seq < 1 or self.micro_batch < 1:
            bad("--seq and --micro-batch must be positive")
        if self.encoder_seq is not None and self.encoder_seq < 1:
            bad("--encoder-len must be positive")
        if self.optimizer not in OPTIMIZERS:
            bad(f"unknown optimizer {self.optimizer!r} (one of {', '.join(OPTIMIZERS)})")
        if self.precision not in PRECISIONS:
            bad(f"unknown precision {self.precision!r} (one of {', '.join(PRECISIONS)})")
        if self.attn not in ATTENTION:
            bad(f"unknown attention implementation {self.attn!r} (one of {', '.join(ATTENTION)})")
        if self.offload not in OFFLOAD:
            bad(f"unknown offload {self.offload!r} (one of {', '.join(OFFLOAD)})")
        if self.fsdp is not None and self.fsdp not in FSDP:
            bad(f"unknown FSDP strategy {self.fsdp!r} (full or grad-op)")
        if self.zero not in (0, 1, 2, 3):
            bad("--zero must be 0, 1, 2 or 3")
        if self.fsdp is not None and self.zero:
            bad("--fsdp and --zero are alternatives; give one")
        if self.gpus < 1:
            bad("--gpus must be at least 1")
        if self.lora_rank < 1:
            bad("--lora-rank must be positive")
        if self.qlora_experts not in QLORA_EXPERTS:
            bad(f"unknown --qlora-experts {self.qlora_experts!r} (bf16 or nf4)")
        if self.ssm_kernels not in SSM_KERNELS:
            bad(f"unknown SSM kernel path {self.ssm_kernels!r} (one of {', '.join(SSM_KERNELS)})")
        if self.offload == "optimizer+params" and not (self.zero == 3 or self.fsdp == "full"):
            bad("--offload optimizer+params needs --zero 3 or --fsdp full (parameters are only offloadable when sharded)")
        if self.offload == "optimizer" and self.zero == 0 and self.fsdp is None:
            bad("--offload optimizer needs --zero 1/2/3 or --fsdp (ZeRO-Offload / FSDP CPU offload)")
        return self

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class PrecisionBytes:
    """Bytes per element of each model-state tensor under one ``--precision`` mode."""

    weight: int  # bytes per trainable weight as held for compute
    grad: int
    master: int  # fp32 master copy (0 when none)
    state: int  # bytes per element of Adam-style states
    act: int  # activation element bytes
    amp: bool  # fp32 params under autocast: a bf16 copy of every matmul weight is saved for backward


PRECISION_BYTES = {
    "mixed-bf16": PrecisionBytes(2, 2, 4, 4, 2, False),
    "mixed-fp16": PrecisionBytes(2, 2, 4, 4, 2, False),
    "bf16": PrecisionBytes(2, 2, 0, 2, 2, False),
    "fp32": PrecisionBytes(4, 4, 0, 4, 4, False),
    "amp-bf16": PrecisionBytes(4, 4, 0, 4, 2, True),
}
