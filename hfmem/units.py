"""Human-readable numbers. Memory is always printed in binary units (GiB = 2**30 bytes) and labelled so."""

from __future__ import annotations


def fmt_bytes(n: int | float | None) -> str:
    if n is None:
        return "-"
    n = float(n)
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)} B"


def fmt_count(n: int | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if abs(n) >= size:
            return f"{n:,} ({n / size:.2f}{unit})"
    return f"{n:,}"


def cdiv(a: int, b: int) -> int:
    """Ceiling division of integers, exact at any size (no float round trip)."""
    return -(-a // b)


def round_up(n: int, multiple: int) -> int:
    """``n`` rounded up to a multiple of ``multiple`` (GGML_PAD in llama.cpp, round_up in vLLM)."""
    return cdiv(n, multiple) * multiple
