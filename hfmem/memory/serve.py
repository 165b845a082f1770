"""The command that runs a plan: ``vllm serve`` with the engine arguments the plan assumed, so what the user starts
is what hfmem sized (context, parallel layout, memory utilisation, KV dtype, batch). Flag names and meanings are
vLLM's own, from ``vllm/engine/arg_utils.py`` (``EngineArgs.add_cli_args``): ``--max-model-len``,
``--tensor-parallel-size``, ``--pipeline-parallel-size``, ``--gpu-memory-utilization``, ``--kv-cache-dtype``,
``--max-num-seqs``, ``--max-num-batched-tokens``, ``--quantization``, ``--dtype``, ``--enforce-eager``,
``--revision``."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hfmem.memory.kv.vllm_dtypes import VLLM_NAME

if TYPE_CHECKING:
    from hfmem.memory.planner import InferencePlan
    from hfmem.report import Report

# Weight precisions vLLM makes at load time from a 16-bit checkpoint, and the --quantization that does it:
# fp8 is vLLM's online dynamic FP8 (vllm/model_executor/layers/quantization/fp8.py, Fp8Config with
# is_checkpoint_fp8_serialized False); nf4 is in-flight bitsandbytes 4-bit (bitsandbytes.py, BitsAndBytesConfig).
ONLINE_QUANTIZATION = {"fp8": "fp8", "nf4": "bitsandbytes"}
# Formats only a pre-quantized checkpoint provides (vLLM reads them from its quantization_config; it cannot make them).
PREQUANTIZED = {"int4": "AWQ", "gptq": "GPTQ", "int8": "int8 (bitsandbytes 8-bit)", "nf4-nodq": "bitsandbytes NF4",
                "fp8-block": "block-scaled FP8", "mxfp4": "MXFP4"}


@dataclass
class ServeCommand:
    argv: list[str] | None  # None: no command runs this plan as asked (``why`` says what would)
    why: list[str] = field(default_factory=list)

    @property
    def line(self) -> str | None:
        return shlex.join(self.argv) if self.argv else None

    def to_dict(self) -> dict[str, Any]:
        return {"command": self.line, "argv": list(self.argv) if self.argv else None, "notes": list(self.why)}


def vllm_serve(report: Report, plan: InferencePlan, *, tp: int, pp: int = 1, concurrency: float | None = None,
               max_batched_tokens: int | None = None, cudagraph: bool = True,
               revision: str | None = None) -> ServeCommand:
    """``vllm serve`` for ``plan`` on ``tp`` x ``pp`` GPUs (``concurrency``: the planned concurrent sequences)."""
    from hfmem.memory.hardware import can_run, precision_key, runs_as_fp16

    why: list[str] = []
    asked = plan.precision
    stored = precision_key(report, "checkpoint")
    argv = ["vllm", "serve", report.repo]
    if revision:
        argv += ["--revision", revision]
    if not asked.startswith("checkpoint") and asked != stored:
        if asked in ONLINE_QUANTIZATION:
            argv += ["--quantization", ONLINE_QUANTIZATION[asked]]
        elif asked in ("bf16", "fp16", "fp32") and stored in ("bf16", "fp16", "fp32"):
            argv += ["--dtype", {"bf16": "bfloat16", "fp16": "half", "fp32": "float32"}[asked]]
        elif asked in PREQUANTIZED:
            return ServeCommand(None, [f"vLLM cannot quantize to {PREQUANTIZED[asked]} at load: serve a repo that "
                                       f"stores {PREQUANTIZED[asked]} weights (its quantization_config is read)"])
        else:
            return ServeCommand(None, [f"{asked} weights are llama.cpp's (GGUF), not a vLLM load option"])
    if plan.gpu is not None:
        ok, note = can_run(plan.gpu, precision_key(report, asked), "vllm")
        if not ok:
            return ServeCommand(None, [note])
        if runs_as_fp16(plan.gpu, precision_key(report, asked)) and "--dtype" not in argv:
            argv += ["--dtype", "half"]
            why.append(note)
    argv += ["--max-model-len", str(plan.context)]
    if tp > 1:
        argv += ["--tensor-parallel-size", str(tp)]
    if pp > 1:
        argv += ["--pipeline-parallel-size", str(pp)]
    if plan.gpu_util is not None:
        argv += ["--gpu-memory-utilization", f"{plan.gpu_util:g}"]
    if plan.kv_dtype and (plan.kv_dtype.startswith("fp8") or plan.kv_dtype in VLLM_NAME):
        argv += ["--kv-cache-dtype", VLLM_NAME.get(plan.kv_dtype, plan.kv_dtype)]  # vLLM's name (int8_per_token_head)
    elif plan.kv_dtype in ("q8_0", "q4_0"):
        return ServeCommand(None, [f"vLLM has no {plan.kv_dtype} KV cache (--kv-cache-dtype: auto, fp8, the "
                                   "per-token-head, nvfp4 or turboquant dtypes)"])
    if concurrency is not None and concurrency >= 1:
        # fewer sequences than the plan's profile assumed only shrink vLLM's sampler warm-up: the plan stays safe
        argv += ["--max-num-seqs", str(int(concurrency))]
    if max_batched_tokens:
        argv += ["--max-num-batched-tokens", str(max_batched_tokens)]
    if not cudagraph:
        argv += ["--enforce-eager"]
    return ServeCommand(argv, why)
