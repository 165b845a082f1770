"""Weight memory vLLM allocates beyond the checkpoint's bytes, where its kernels need a padded layout.

MXFP4 MoE experts (gpt-oss style, ``quant_method: mxfp4``): ``Mxfp4MoEMethod.create_weights``
(vllm/model_executor/layers/quantization/mxfp4.py) allocates ``w13`` ``[E, 2 * I_pad, H_pad / 2]`` and ``w2``
``[E, H_pad, I_pad / 2]`` uint8 with one uint8 scale per 32 values and bf16 biases ``[E, 2 * I_pad]``, ``[E, H_pad]``,
where ``I`` is the intermediate size per tensor-parallel rank. The padding depends on the MoE backend it picks
(``get_mxfp4_backend``):

- Marlin (CUDA below compute capability 9.0 and from 11.0; on 9.x/10.x too when ``triton_kernels`` is missing, torch
  is older than 2.8 or ``VLLM_MXFP4_USE_MARLIN`` is set): the kernel needs ``n % 256 == 0`` and ``k % 128 == 0``, so
  ``I_pad = round_up(I, 128)`` and ``H_pad = round_up(H, 256)``.
- Triton (the default on 9.x/10.x without FlashInfer's opt-in environment variables): ``I_pad = round_up(I, 64)``,
  ``H`` unpadded; ``process_weights_after_loading`` then replaces both biases by fp32 copies (2 more bytes each) and
  re-lays the values and scales out for triton_kernels (``_swizzle_mxfp4``; that layout's own padding is not
  counted: a note says so).
- FlashInfer (SM90 with ``VLLM_USE_FLASHINFER_MOE_MXFP4_BF16``, SM100 with FlashInfer installed) pads both to 128
  or 256: an installation choice the plan cannot see, named in the note."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hfmem.units import round_up

if TYPE_CHECKING:
    from collections.abc import Sequence

    from hfmem.memory.gpus import GPU
    from hfmem.memory.precision import WeightTensor
    from hfmem.model.architecture import Architecture

MXFP4_BLOCK = 32
PAD_TERM = "MXFP4 experts padded for vLLM's Marlin MoE kernel"
TRITON_TERM = "MXFP4 experts in vLLM's Triton MoE layout (fp32 biases, intermediate padded to 64)"


def mxfp4_backend(gpu: GPU) -> str | None:
    """'marlin' | 'triton-or-flashinfer' | None (not a CUDA GPU hfmem knows the compute capability of)."""
    from hfmem.memory.hardware import hardware_of

    hw = hardware_of(gpu) if gpu.kind == "cuda" else None
    sm = hw.sm if hw else None
    if sm is None:
        return None
    # get_mxfp4_backend: Triton kernels for 9.0 <= capability < 11.0 (FlashInfer only where opted in or installed);
    # everything else on CUDA falls to Marlin
    return "triton-or-flashinfer" if 90 <= sm < 110 else "marlin"


def _expert_bytes(experts: int, inter: int, hidden: int, bias_bytes: int = 2) -> int:
    """w13 + w2 (4-bit values and their per-32 scales) and the two biases of one MoE layer's experts."""
    values = experts * 3 * inter * hidden  # 2*I x H + H x I
    return values // 2 + values // MXFP4_BLOCK + experts * (2 * inter + hidden) * bias_bytes


def _per_rank(arch: Architecture, moe_layers: int, tp: int) -> tuple[int, int, int] | None:
    if not arch.moe or not moe_layers or not arch.hidden_size:
        return None
    inter = arch.moe.moe_intermediate_size or arch.intermediate_size
    if not inter or inter % tp:
        return None
    return arch.moe.num_experts, inter // tp, arch.hidden_size


def marlin_padding_bytes(arch: Architecture, moe_layers: int, tp: int) -> int:
    """Bytes per GPU that Marlin's padded MXFP4 expert layout adds over the checkpoint's (0 where nothing pads)."""
    shape = _per_rank(arch, moe_layers, tp)
    if shape is None:
        return 0
    experts, per_rank, hidden = shape
    padded = _expert_bytes(experts, round_up(per_rank, 128), round_up(hidden, 256))
    return moe_layers * (padded - _expert_bytes(experts, per_rank, hidden))


def triton_layout_bytes(arch: Architecture, moe_layers: int, tp: int) -> int:
    """Bytes per GPU the Triton backend adds: the intermediate size per rank padded to 64 and fp32 biases."""
    shape = _per_rank(arch, moe_layers, tp)
    if shape is None:
        return 0
    experts, per_rank, hidden = shape
    padded = _expert_bytes(experts, round_up(per_rank, 64), hidden, bias_bytes=4)
    return moe_layers * (padded - _expert_bytes(experts, per_rank, hidden))


# ------------------------------------------------------------------------------------------------------------
# The CUDA caching allocator's blocks
#
# "Model loading took X GiB" is ``DeviceMemoryProfiler.consumed_memory`` around ``model_loader.load_model``
# (vllm/v1/worker/gpu_model_runner.py load_model): ``torch.cuda.max_memory_allocated`` after a peak reset
# (vllm/platforms/cuda.py get_current_memory_usage), i.e. the sizes of the caching allocator's live blocks, not the
# tensors' bytes. Every vLLM parameter is its own allocation, and c10/cuda/CUDACachingAllocator.cpp rounds each:
# ``round_size`` to 512 bytes; a request of 10 MiB or more (kMinLargeAlloc) without a cached block gets a new
# segment rounded to 2 MiB (``get_allocation_size``), and ``should_split`` splits the tail off only when more than
# 1 MiB (kSmallSize) remains -- so a tensor ending 1 MiB or less below a 2 MiB boundary holds the whole segment.
# vLLM leaves expandable segments off (PYTORCH_CUDA_ALLOC_CONF is the user's), where every tail would be split.
ALLOC_TERM = "CUDA allocator block rounding"
_MIN_BLOCK = 512
_SMALL_SIZE = 1 << 20
_MIN_LARGE_ALLOC = 10 << 20
_ROUND_LARGE = 2 << 20

# checkpoint names -> the one parameter vLLM fuses them into (QKVParallelLinear, MergedColumnParallelLinear and
# FusedMoE's w13/w2: the models' ``stacked_params_mapping`` / ``expert_params_mapping`` in load_weights)
_FUSED = ((".q_proj.", ".qkv_proj."), (".k_proj.", ".qkv_proj."), (".v_proj.", ".qkv_proj."),
          (".gate_proj.", ".gate_up_proj."), (".up_proj.", ".gate_up_proj."))
_EXPERT_FUSED = ((".gate_proj.", ".w13."), (".up_proj.", ".w13."), (".w1.", ".w13."), (".w3.", ".w13."),
                 (".down_proj.", ".w2."))


def cuda_block_bytes(nbytes: int) -> int:
    """Bytes the caching allocator counts as allocated for one fresh ``nbytes`` tensor (see above)."""
    size = max(_MIN_BLOCK, round_up(nbytes, _MIN_BLOCK))
    if size < _MIN_LARGE_ALLOC:
        return size  # packed into 2 MiB / 20 MiB segments and split off
    segment = round_up(size, _ROUND_LARGE)
    return segment if segment - size <= _SMALL_SIZE else size


def vllm_parameter(name: str) -> str:
    """The vLLM parameter a checkpoint tensor loads into (fused projections and stacked experts share one)."""
    key = f".{name}"
    if ".experts." in key:
        head, _, tail = key.partition(".experts.")
        index, dot, rest = tail.partition(".")
        if index.isdigit() and dot:  # per-expert checkpoint tensors: one stacked FusedMoE parameter per layer
            tail = "." + rest
            for old, new in _EXPERT_FUSED:
                tail = tail.replace(old, new)
            return head + ".experts" + tail
        return key
    for old, new in _FUSED:
        key = key.replace(old, new)
    return key


def parameter_keys(tensors: Sequence[WeightTensor]) -> list[str]:
    """vllm_parameter of every tensor's name, worked out once per (name pattern, layer) where that decides it: when
    the pattern's only numeric parts are the layer number and a ``.experts.N.`` index, its names differ in nothing
    vllm_parameter keeps but the layer (the expert index is dropped); other names go one by one. Kimi-K3's 497,220
    names took 0.37 s one by one."""
    keys: list[str] = []
    decided: dict[tuple[str, bool], bool] = {}
    by_pattern: dict[tuple[str, int | None], str] = {}
    for t in tensors:
        pattern = t.pattern
        if pattern is not None:
            layered = t.layer is not None
            ok = decided.get((pattern, layered))
            if ok is None:
                ok = decided[(pattern, layered)] = pattern.count(".#") == layered + (".experts.#." in pattern)
            if ok:
                memo_key = (pattern, t.layer)
                key = by_pattern.get(memo_key)
                if key is None:
                    key = by_pattern[memo_key] = vllm_parameter(t.name)
                keys.append(key)
                continue
        keys.append(vllm_parameter(t.name))
    return keys


def allocator_rounding_bytes(parameters: dict[str, int]) -> int:
    """Bytes the allocator's blocks hold beyond the parameters' own (per GPU: vLLM parameter -> bytes on one rank)."""
    return sum(cuda_block_bytes(b) - b for b in parameters.values() if b)
