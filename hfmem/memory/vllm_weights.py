"""Weight memory vLLM allocates beyond the checkpoint's bytes, where its kernels need a padded layout.

MXFP4 MoE experts (gpt-oss style, ``quant_method: mxfp4``): ``Mxfp4MoEMethod.create_weights``
(vllm/model_executor/layers/quantization/mxfp4.py) allocates ``w13`` ``[E, 2 * I_pad, H_pad / 2]`` and ``w2``
``[E, H_pad, I_pad / 2]`` uint8 with one uint8 scale per 32 values and bf16 biases ``[E, 2 * I_pad]``, ``[E, H_pad]``,
where ``I`` is the intermediate size per tensor-parallel rank. The padding depends on the MoE backend it picks
(``get_mxfp4_backend``): the Marlin kernel (CUDA GPUs outside the compute capability 9.0-10.x range, where the Triton
kernels are not used) needs ``n % 256 == 0`` and ``k % 128 == 0``, so ``I_pad = round_up(I, 128)`` and
``H_pad = round_up(H, 256)``; the Triton backend pads ``I`` to a multiple of 64 only; the FlashInfer backends (Hopper /
Blackwell with FlashInfer) pad both to 128 or 256. Only the Marlin case is modelled: the other backends depend on
which optional kernels are installed, which the plan does not know (a note says so)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hfmem.units import round_up

if TYPE_CHECKING:
    from hfmem.memory.gpus import GPU
    from hfmem.model.architecture import Architecture

MXFP4_BLOCK = 32
PAD_TERM = "MXFP4 experts padded for vLLM's Marlin MoE kernel"


def mxfp4_backend(gpu: GPU) -> str | None:
    """'marlin' | 'triton-or-flashinfer' | None (not a CUDA GPU hfmem knows the compute capability of)."""
    from hfmem.memory.hardware import hardware_of

    hw = hardware_of(gpu) if gpu.kind == "cuda" else None
    sm = hw.sm if hw else None
    if sm is None:
        return None
    # get_mxfp4_backend: Triton kernels are used for (9, 0) <= capability < (11, 0), FlashInfer on 9.0 / 10.x when
    # installed; everything else on CUDA falls to Marlin
    return "triton-or-flashinfer" if 90 <= sm < 110 else "marlin"


def _expert_bytes(experts: int, inter: int, hidden: int) -> int:
    """w13 + w2 (4-bit values and their per-32 scales) and the two bf16 biases of one MoE layer's experts."""
    values = experts * 3 * inter * hidden  # 2*I x H + H x I
    return values // 2 + values // MXFP4_BLOCK + experts * (2 * inter + hidden) * 2


def marlin_padding_bytes(arch: Architecture, moe_layers: int, tp: int) -> int:
    """Bytes per GPU that Marlin's padded MXFP4 expert layout adds over the checkpoint's (0 where nothing pads)."""
    if not arch.moe or not moe_layers or not arch.hidden_size:
        return 0
    inter = arch.moe.moe_intermediate_size or arch.intermediate_size
    if not inter or inter % tp:
        return 0
    per_rank = inter // tp
    hidden = arch.hidden_size
    padded = _expert_bytes(arch.moe.num_experts, round_up(per_rank, 128), round_up(hidden, 256))
    stored = _expert_bytes(arch.moe.num_experts, per_rank, hidden)
    return moe_layers * (padded - stored)
