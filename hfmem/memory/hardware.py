"""What each catalog GPU can do besides hold bytes: compute capability, memory bandwidth, dense tensor FLOP/s, and
which weight precisions vLLM / llama.cpp run on it, so that no GPU is recommended for a precision it cannot run.

Figures are the vendors' datasheet or whitepaper numbers (docs/planner.md lists the document for each GPU): memory
bandwidth in GB/s (10**9 bytes/s) and dense tensor TFLOP/s without sparsity; GeForce cards at FP32 accumulate (the
rate PyTorch's bf16/fp16 matmuls use). ``None`` means the GPU has no such unit (a T4 has no bf16 or FP8 tensor cores).

The precision rules follow vLLM's checks: bf16 needs compute capability 8.0 (vllm/platforms/cuda.py:
``check_if_supports_dtype``; on older GPUs vLLM says to use ``--dtype half``, the same bytes), and each quantization
method's ``get_min_capability`` (vllm/model_executor/layers/quantization/: fp8.py 80, where 8.0-8.8 run FP8 weights
through the Marlin weight-only kernel and 8.9+ natively; awq.py 75; gptq.py 60; bitsandbytes.py 70; mxfp4.py 80,
Marlin below 9.0; gguf.py 60). ROCm MI300X runs them all (FP8 as e4m3fnuz). Apple GPUs run no vLLM; transformers'
quantization kernels are CUDA-only, so on Apple only 16/32-bit weights (transformers, MPS) and GGUF (llama.cpp
Metal) run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hfmem.memory.gpus import GPU
    from hfmem.report import Report


@dataclass(frozen=True)
class Hardware:
    compute_capability: str | None  # "8.9"; "gfx942" for AMD; None for Apple
    bandwidth_gbs: float | None  # memory bandwidth, 10**9 bytes/s
    bf16_tflops: float | None  # dense tensor bf16 (None: no bf16 unit)
    fp16_tflops: float | None  # dense tensor fp16
    fp8_tflops: float | None  # dense tensor fp8 (None: no fp8 unit)
    source: str

    @property
    def sm(self) -> int | None:
        """Compute capability as vLLM compares it (8.9 -> 89); None off CUDA."""
        cc = self.compute_capability
        if cc is None or not cc[0].isdigit():
            return None
        major, minor = cc.split(".")
        return int(major) * 10 + int(minor)

    def to_dict(self) -> dict[str, Any]:
        return {"compute_capability": self.compute_capability, "bandwidth_gbs": self.bandwidth_gbs,
                "bf16_tflops": self.bf16_tflops, "fp16_tflops": self.fp16_tflops, "fp8_tflops": self.fp8_tflops,
                "source": self.source}


_H = Hardware
HARDWARE: dict[str, Hardware] = {
    "rtx3060": _H("8.6", 360, 25.6, 25.6, None, "NVIDIA Ampere GA102 whitepaper per-SM rate x 28 SMs (derived)"),
    "t4": _H("7.5", 320, None, 65.0, None, "NVIDIA T4 datasheet"),
    "rtx4060ti": _H("8.9", 288, 44.1, 44.1, 88.3, "NVIDIA Ada whitepaper per-SM rate x 34 SMs (derived)"),
    "a10g": _H("8.6", 600, 125.0, 125.0, None, "NVIDIA A10 datasheet (the A10G is AWS's A10)"),
    "l4": _H("8.9", 300, 121.0, 121.0, 242.5, "NVIDIA L4 datasheet"),
    "rtx3090": _H("8.6", 936, 71.0, 71.0, None, "NVIDIA Ampere GA102 architecture whitepaper"),
    "rtx4090": _H("8.9", 1008, 165.2, 165.2, 330.3, "NVIDIA Ada architecture whitepaper"),
    "rtx5090": _H("12.0", 1792, 209.5, 209.5, 419.0, "NVIDIA RTX Blackwell architecture whitepaper"),
    "a100-40gb": _H("8.0", 1555, 312.0, 312.0, None, "NVIDIA A100 datasheet"),
    "l40s": _H("8.9", 864, 362.05, 362.05, 733.0, "NVIDIA L40S datasheet"),
    "rtx6000ada": _H("8.9", 960, 364.25, 364.25, 728.5, "NVIDIA RTX 6000 Ada datasheet"),
    "a100-80gb": _H("8.0", 2039, 312.0, 312.0, None, "NVIDIA A100 datasheet (SXM)"),
    "h100-80gb": _H("9.0", 3350, 989.5, 989.5, 1979.0, "NVIDIA H100 datasheet (SXM)"),
    # H100 NVL column of the datasheet: 3.9 TB/s, 1,671 bf16/fp16 and 3,341 fp8 TFLOPS with sparsity (half dense)
    "h100-nvl": _H("9.0", 3900, 835.5, 835.5, 1670.5, "NVIDIA H100 datasheet (NVL)"),
    "h200": _H("9.0", 4800, 989.5, 989.5, 1979.0, "NVIDIA H200 datasheet (SXM)"),
    "b200": _H("10.0", 8000, 2250.0, 2250.0, 4500.0, "NVIDIA DGX B200 datasheet (per GPU)"),
    "mi300x": _H("gfx942", 5300, 1307.4, 1307.4, 2614.9, "AMD Instinct MI300X datasheet"),
}

# Streaming multiprocessors (AMD: compute units) per GPU, torch.cuda.get_device_properties().multi_processor_count,
# which vLLM's num_compute_units returns (the Triton top-k/top-p kernel sizes its row buffer by it). NVIDIA's
# architecture whitepapers and datasheets: GA102 (RTX 3060 28, A10G 80, RTX 3090 82), GA100 A100 108, AD10x (RTX
# 4060 Ti 34, L4 58, RTX 4090 128, L40S and RTX 6000 Ada 142), GB202 RTX 5090 170, TU104 T4 40, GH100 (H100 SXM, H100
# NVL, H200: 132; the H100 PCIe's 114 is another SKU), B200 148; AMD MI300X 304 CUs.
SM_COUNT: dict[str, int] = {
    "rtx3060": 28, "t4": 40, "rtx4060ti": 34, "a10g": 80, "l4": 58, "rtx3090": 82, "rtx4090": 128, "rtx5090": 170,
    "a100-40gb": 108, "l40s": 142, "rtx6000ada": 142, "a100-80gb": 108, "h100-80gb": 132, "h100-nvl": 132,
    "h200": 132, "b200": 148, "mi300x": 304,
}

# The least compute capability (x10) vLLM runs each weight precision at; 0 = any CUDA GPU it supports (7.0+).
_MIN_SM = {"fp32": 0, "bf16": 0, "fp8": 80, "fp8-block": 80, "int8": 70, "nf4": 70, "nf4-nodq": 70, "int4": 75,
           "gptq": 60, "mxfp4": 80, "q8_0": 60, "q6_k": 60, "q5_k_m": 60, "q4_k_m": 60}
_GGUF = ("q8_0", "q6_k", "q5_k_m", "q4_k_m")


def hardware_of(gpu: GPU) -> Hardware | None:
    return HARDWARE.get(gpu.key)


def precision_key(report: Report, precision: str) -> str:
    """The weight precision a plan runs: the asked one, or for the checkpoint as stored, its quantization or dtype."""
    if not precision.startswith("checkpoint"):
        return precision
    q = report.parameters.quantization
    if q is not None:
        method = q.method.lower()
        formats = " ".join(q.formats).lower()
        if "mxfp4" in method or "mxfp4" in formats:
            return "mxfp4"
        if "fp8" in method or "fp8" in formats:
            return "fp8"
        if "awq" in method or "awq" in formats:
            return "int4"
        if "gptq" in method or "gptq" in formats:
            return "gptq"
        if "bitsandbytes" in method or "bnb" in formats:
            return "int8" if q.bits == 8 else "nf4"
        return "int4" if (q.bits or 16) <= 4 else "fp8" if q.bits == 8 else "bf16"
    dtypes = {d.upper() for d in report.parameters.by_dtype}
    return "fp32" if dtypes == {"F32"} else "bf16" if "BF16" in dtypes else "fp16" if "F16" in dtypes else "bf16"


def can_run(gpu: GPU, precision: str, engine: str = "vllm") -> tuple[bool, str]:
    """(whether ``engine`` runs weights of ``precision`` on ``gpu``, a note: why not, or how it runs)."""
    if gpu.kind == "custom":
        return True, ""  # a size typed by the user: nothing known about the chip
    if gpu.kind == "apple":
        if precision in ("fp32", "bf16", "fp16") or precision in _GGUF:
            return True, ""
        return False, f"{gpu.name} runs no {precision} kernels (CUDA-only quantization); GGUF via llama.cpp or 16-bit do"
    if gpu.kind == "rocm":
        return True, "FP8 as e4m3fnuz" if precision.startswith("fp8") else ""
    hw = hardware_of(gpu)
    sm = hw.sm if hw else None
    if sm is None:
        return True, ""
    if engine == "llamacpp" and precision in _GGUF:
        return True, ""
    need = _MIN_SM.get("bf16" if precision == "fp16" else precision, 0)
    cc = f"compute capability {sm // 10}.{sm % 10}"
    if sm < need:
        return False, f"{gpu.name} ({cc}) cannot run {precision} weights in vLLM (needs {need // 10}.{need % 10})"
    if runs_as_fp16(gpu, precision):
        return True, f"no bf16 on {gpu.name} ({cc}): runs as fp16 (vllm serve --dtype half)"
    if precision.startswith("fp8") and sm < 89:
        return True, f"no FP8 units on {gpu.name} ({cc}): FP8 weights run through vLLM's Marlin weight-only kernel"
    if precision == "mxfp4" and sm < 90:
        return True, f"MXFP4 runs through vLLM's Marlin kernel on {gpu.name} ({cc})"
    return True, ""


def runs_as_fp16(gpu: GPU, precision: str) -> bool:
    """bf16 weights on a CUDA GPU without bf16 (compute capability < 8.0): vLLM refuses bf16 there and serves them
    as fp16 (vllm serve --dtype half; vllm, platforms/cuda.py: check_if_supports_dtype)."""
    if gpu.kind in ("custom", "apple", "rocm") or precision != "bf16":
        return False
    hw = hardware_of(gpu)
    return hw is not None and hw.sm is not None and hw.sm < 80


def runnable_precisions(gpu: GPU) -> list[str]:
    return [p for p in _MIN_SM if can_run(gpu, p)[0]]
