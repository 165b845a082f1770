"""--ctx values: token counts with k/M suffixes (binary: k = 1024), 'max', comma-separated lists."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from hfmem.errors import MalformedConfig, UsageError

if TYPE_CHECKING:  # a type only: the CLI checks --ctx before the model code is imported
    from hfmem.model.architecture import Architecture

_CTX_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*$")


# The names build_architecture reads the context limit from, in its order.
_MAX_POSITION_NAMES = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length")


def _malformed_max(arch: Architecture | None) -> None:
    """A MalformedConfig when the config has a context limit that is no positive integer (build_architecture
    ignores such a value): the config is at fault, not the --ctx asked for."""
    text = getattr(arch, "text_config", None) or {}
    for name in _MAX_POSITION_NAMES:
        value = text.get(name)
        if value is not None:
            raise MalformedConfig(
                f"config.json: {name} = {repr(value)[:40]} is not a positive integer (needed for --ctx max)",
                path="config.json",
            )


def parse_context(text: str | int, arch: Architecture | None = None) -> list[int]:
    """'32768', '32k', '32K', '128k', '1M' (k = 1024, M = 1024**2), 'max' (max_position_embeddings), comma-separated."""
    if isinstance(text, int) and not isinstance(text, bool):
        parts: list[str] = [str(text)]
    else:
        parts = [p for p in str(text).split(",")]
    out: list[int] = []
    for part in parts:
        p = part.strip()
        if not p:
            raise UsageError(f"--ctx: empty value in {text!r}")
        if p.lower() == "max":
            max_pos = getattr(arch, "max_position_embeddings", None) if arch is not None else None
            if not max_pos:
                _malformed_max(arch)
                raise UsageError("--ctx max: the model's config has no max_position_embeddings; give a number")
            out.append(int(max_pos))
            continue
        m = _CTX_RE.match(p)
        if not m:
            raise UsageError(f"--ctx: {p!r} is not a token count (examples: 4096, 32k, 1M, max)")
        number, unit = m.groups()
        scale = {"": 1, "k": 1024, "m": 1024**2}[unit.lower()]
        if "." in number:
            whole, frac = number.split(".")
            numerator = int(whole + frac) * scale
            denominator = 10 ** len(frac)
            if numerator % denominator:
                raise UsageError(f"--ctx: {p!r} is not a whole number of tokens")
            value = numerator // denominator
        else:
            value = int(number) * scale
        if value <= 0:
            raise UsageError(f"--ctx: {p!r} must be at least 1 token")
        out.append(value)
    return out
