"""GPU catalog and memory-size parsing.

Vendors quote memory in GB (10**9) or GiB (2**30) inconsistently; the catalog stores the device memory the CUDA
runtime reports for the common SKU (``torch.cuda.mem_get_info()[1]``, the total vLLM and PyTorch budget and print in
their logs and out-of-memory messages), which on most cards is below nvidia-smi's "Total" (an H100 80GB: 79.19 GiB
against nvidia-smi's 81,559 MiB = 79.65 GiB), and everything hfmem prints is GiB (2**30).

A size typed by the user (``--gpu 24GB``) is binary: GPU memory is built from DRAM chips of 2**30-byte multiples and
sold as "24 GB" for 24 GiB (the "24GB" RTX 4090 reports 23.99 GiB), so ``24GB`` = ``24GiB`` = 24 * 2**30 bytes and a
user describing their card gets the verdict of the catalog's card of that size. Decimal amounts are written in bytes:
``24e9B`` or ``24000000000B``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hfmem.errors import UsageError

GiB = 2**30
GB = 10**9
DEVICES = ("cuda", "cpu")  # --device: GPU memory, or host RAM (transformers on the CPU)


@dataclass(frozen=True)
class GPU:
    key: str
    name: str
    memory_bytes: int
    kind: str = "cuda"  # cuda | rocm | apple (unified memory shared with the OS) | custom

    def to_dict(self) -> dict:
        return {"key": self.key, "name": self.name, "memory_bytes": self.memory_bytes, "kind": self.kind}


def _g(key: str, name: str, gib: float, kind: str = "cuda") -> GPU:
    return GPU(key, name, int(gib * GiB), kind)


# The CUDA runtime's total per card (torch.cuda.mem_get_info()[1]), as real logs print it beside a named GPU: vLLM's
# start-up lines ("total_gpu_memory=", "Free memory on device (free/total GiB)") and PyTorch's out-of-memory message
# ("GPU 0 has a total capacity of X GiB"; "X GiB total capacity" before PyTorch 2.1). It moves by a few hundredths of
# a GiB between drivers, and on some cards more: a T4 printed 14.75-14.76 with 2021-2023 drivers and 14.56-14.57
# since. Where no such figure was found, nvidia-smi's "Total" (MiB / 1024) stands, and the comment says so.
CATALOG: tuple[GPU, ...] = (
    _g("rtx3060", "RTX 3060 12GB", 11.76),  # OOM messages of named RTX 3060 12GB runs: 11.75-11.76 (nvidia-smi 12,288 MiB)
    _g("t4", "Tesla T4 16GB", 14.56),  # recent OOM messages on named T4s (GCP among them): 14.56-14.57
    # nvidia-smi 16,380 MiB; no Linux torch figure found (Windows drivers report the full 16.00)
    _g("rtx4060ti", "RTX 4060 Ti 16GB", 16.0),
    # AWS's A10: nvidia-smi 23,028 MiB, as on the A10, whose vLLM 0.7.2 log prints 22.06 GiB (an L4, 23,034 MiB, prints
    # 22.03 in vLLM 0.29 logs); a 2022 OOM message on a g5 instance printed 22.20
    _g("a10g", "A10G 24GB", 22.06),
    _g("l4", "L4 24GB", 22.03),  # vLLM 0.29 log "Free memory on device (.../22.03 GiB)"; OOM messages 22.03
    _g("rtx3090", "RTX 3090 24GB", 23.58),  # vLLM 0.6 log total_gpu_memory=23.58GiB; OOM messages print 23.69-23.70
    # 23.99 = nvidia-smi's 24,564 MiB: what WSL2 prints (a vLLM 0.27.1 log) and what a 2026 native Linux run (RunPod,
    # vLLM 0.27.1) implies (its pool, weights and peak add up to more than 23.74 GiB x 0.9); 2023-2024 OOM messages on
    # native Linux printed 23.64-23.68
    _g("rtx4090", "RTX 4090 24GB", 23.99),
    _g("rtx5090", "RTX 5090 32GB", 31.36),  # OOM messages of named RTX 5090 runs: 31.36-31.37 (nvidia-smi 32,607 MiB)
    _g("a100-40gb", "A100 40GB", 39.49),  # A100-SXM4-40GB: deviceQuery 39.39, OOM messages 39.50-39.56
    _g("l40s", "L40S 48GB", 44.42),  # vLLM logs 44.32-44.42 and OOM messages 44.42 (nvidia-smi 46,068 MiB, ECC on)
    _g("rtx6000ada", "RTX 6000 Ada 48GB", 47.99),  # nvidia-smi 49,140 MiB (ECC off); no torch figure found
    # vLLM 0.31 log "Free memory on device (78.84/79.25 GiB)" on a named A100 80GB; OOM messages 79.14-79.35, two of
    # them 79.25 (nvidia-smi 81,920 MiB)
    _g("a100-80gb", "A100 80GB", 79.25),
    # H100 80GB (SXM and PCIe): vLLM logs print 79.18-79.22 GiB and OOM messages 79.19-79.21 (nvidia-smi 81,559 MiB)
    _g("h100-80gb", "H100 80GB", 79.19),
    # H100 NVL: the PCIe-card Hopper (compute capability 9.0, 94 GB HBM3) sold in pairs joined by NVLink bridges, no
    # NVSwitch. An OOM message on a named H100 NVL 94GB prints 93.00 GiB (nvidia-smi shows 95,830 MiB: NVIDIA/
    # gpu-admin-tools issue "H100 NVL support"; hosts report 93.10 GiB through the DRM driver).
    _g("h100-nvl", "H100 NVL 94GB", 93.0),
    _g("h200", "H200 141GB", 139.8),  # vLLM logs and OOM messages: 139.80-139.81 (nvidia-smi 143,771 MiB)
    _g("b200", "B200 180GB", 178.36),  # OOM messages and device queries: 178.35-178.36
    _g("mi300x", "MI300X 192GB", 191.98, "rocm"),  # HIP OOM messages on a named MI300X: 191.98
    # Apple unified memory: the whole pool is shared with the OS; Metal's default working-set limit is ~75%.
    _g("m-16gb", "Apple M-series 16GB", 16.0, "apple"),
    _g("m-24gb", "Apple M-series 24GB", 24.0, "apple"),
    _g("m-36gb", "Apple M-series 36GB", 36.0, "apple"),
    _g("m-64gb", "Apple M-series 64GB", 64.0, "apple"),
    _g("m-128gb", "Apple M-series 128GB", 128.0, "apple"),
    _g("m-192gb", "Apple M-series 192GB", 192.0, "apple"),
)

_ALIASES = {
    "3060": "rtx3060", "3090": "rtx3090", "4090": "rtx4090", "5090": "rtx5090", "a100": "a100-80gb",
    "a100-40": "a100-40gb", "a100-80": "a100-80gb", "h100": "h100-80gb", "h100-80": "h100-80gb",
    "h100nvl": "h100-nvl", "h100-nvl-94gb": "h100-nvl",
}

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?(?:e\d+)?)\s*(gib|gb|g|tib|tb|t|mib|mb|m|b)?\s*$", re.IGNORECASE)
# Binary throughout (see the module docstring); "B" is plain bytes, the way to write a decimal amount (24e9B).
_UNITS = {"gib": GiB, "gb": GiB, "g": GiB, "tib": 2**40, "tb": 2**40, "t": 2**40, "mib": 2**20, "mb": 2**20, "m": 2**20, "b": 1}


def parse_size(text: str, allow_zero: bool = False) -> int:
    """'24GB' = '24GiB' = '24' -> 24 * 2**30 bytes (binary, as GPU memory is sold); '24e9B' -> 24e9 bytes.
    ``allow_zero`` for amounts that may be nothing (a runtime overhead), never for a device's memory."""
    m = _SIZE_RE.match(text)
    if not m:
        raise UsageError(f"invalid memory size {text!r} (use e.g. 24GB or 80GiB)")
    unit = (m.group(2) or "gb").lower()
    value = m.group(1).lower()
    if unit == "b" and "." not in value:  # exact: 85520809984B or 24e9B, no float rounding
        mant, _, exp = value.partition("e")
        size = int(mant) * 10 ** int(exp or 0)
    else:
        size = int(float(value) * _UNITS[unit])
    if size < 0 or (size == 0 and not allow_zero):
        raise UsageError(f"invalid memory size {text!r}")
    return size


def _norm(text: str) -> str:
    return re.sub(r"[\s_]+", "-", text.strip().lower()).replace("nvidia-", "").replace("geforce-", "").replace("rtx-", "rtx")


def resolve_gpu(text: str) -> GPU:
    """A catalog name (case/space-insensitive, common aliases) or a size such as 24GB / 80GiB."""
    key = _norm(text)
    key = _ALIASES.get(key, key)
    for gpu in CATALOG:
        if key in (gpu.key, _norm(gpu.name)):
            return gpu
    if _SIZE_RE.match(text):
        size = parse_size(text)
        return GPU(f"{size}B", text.strip(), size, "custom")  # printed with its GiB, like catalog cards
    known = ", ".join(g.key for g in CATALOG)
    raise UsageError(f"unknown GPU {text!r}; use a size like 24GB or one of: {known}")
