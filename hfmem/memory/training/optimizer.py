"""Optimizer state bytes per trainable tensor: torch AdamW / SGD, bitsandbytes 8-bit and paged AdamW, HF Adafactor,
Lion."""

from __future__ import annotations

import math

from hfmem.errors import UsageError
from hfmem.units import cdiv

# bitsandbytes, optim/optimizer.py: Optimizer2State.init_state: uint8 states with one fp32 absmax per 256-element
# block; tensors under min_8bit_size elements keep fp32 states. Paged variants (Optimizer8bit.get_state_buffer) put
# the states of tensors with >= 1e5 elements in CUDA unified memory.
BNB_OPT_BLOCK = 256
BNB_MIN_8BIT = 4096
BNB_PAGED_MIN = 100_000


def optimizer_state_bytes(shape: tuple[int, ...], optimizer: str, state_bytes: int, embedding: bool = False) -> tuple[int, int]:
    """(resident bytes, pageable bytes) of the optimizer state of one trainable tensor. Step counters (python ints or
    0-dim host tensors for torch AdamW without fused/capturable) are not GPU memory and are not counted."""
    n = math.prod(shape) if shape else 1
    if optimizer == "adamw":
        return 2 * n * state_bytes, 0
    if optimizer in ("adamw-8bit", "paged-adamw-8bit"):
        paged = optimizer.startswith("paged")
        if n < BNB_MIN_8BIT or embedding:  # the HF Trainer registers every nn.Embedding weight for 32-bit states
            states, absmax = 2 * n * 4, 0
        else:
            states, absmax = 2 * n, 2 * 4 * cdiv(n, BNB_OPT_BLOCK)
        if paged and n >= BNB_PAGED_MIN:
            return absmax, states
        return states + absmax, 0
    if optimizer == "adafactor":  # + the fp32 0-dim RMS tensor kept on the device
        # transformers, optimization.py: Adafactor (beta1=None): factored fp32 row + column second moments for tensors
        # with >= 2 dims, a full fp32 second moment otherwise
        if len(shape) >= 2:
            rows = math.prod(shape[:-1])
            cols = math.prod(shape[:-2]) * shape[-1]
            return 4 * (rows + cols) + 4, 0
        return 4 * n + 4, 0
    if optimizer == "sgd":
        return 0, 0
    if optimizer in ("sgd-momentum", "lion"):
        return n * state_bytes, 0
    raise UsageError(f"unknown optimizer {optimizer!r}")
