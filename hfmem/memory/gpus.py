"""GPU catalog and memory-size parsing.

Vendors quote memory in GB (10**9) or GiB (2**30) inconsistently; the catalog stores the usable device memory in
bytes as the driver reports it for the common SKU (e.g. an H100 80GB shows 79.6 GiB = 85,520,809,984 bytes via
``torch.cuda.mem_get_info``), and everything hfmem prints is GiB (2**30).

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


# Usable memory as reported by the driver (nvidia-smi "Total" in MiB / 1024), which is what frameworks budget.
CATALOG: tuple[GPU, ...] = (
    _g("rtx3060", "RTX 3060 12GB", 12.0),
    _g("t4", "Tesla T4 16GB", 15.0),
    _g("rtx4060ti", "RTX 4060 Ti 16GB", 16.0),
    _g("a10g", "A10G 24GB", 22.49),
    _g("l4", "L4 24GB", 22.49),
    _g("rtx3090", "RTX 3090 24GB", 23.58),
    _g("rtx4090", "RTX 4090 24GB", 23.99),
    _g("rtx5090", "RTX 5090 32GB", 31.84),
    _g("a100-40gb", "A100 40GB", 39.49),
    _g("l40s", "L40S 48GB", 44.99),
    _g("rtx6000ada", "RTX 6000 Ada 48GB", 47.99),
    _g("a100-80gb", "A100 80GB", 79.15),
    _g("h100-80gb", "H100 80GB", 79.65),
    # H100 NVL: the PCIe-card Hopper (compute capability 9.0, 94 GB HBM3) sold in pairs joined by NVLink bridges, no
    # NVSwitch. nvidia-smi shows 95,830 MiB (NVIDIA/gpu-admin-tools issue "H100 NVL support", its nvidia-smi output).
    _g("h100-nvl", "H100 NVL 94GB", 95830 / 1024),
    _g("h200", "H200 141GB", 139.8),
    _g("b200", "B200 180GB", 178.36),
    _g("mi300x", "MI300X 192GB", 191.98, "rocm"),
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
