"""What a read of one model yields (``ModelFiles``), and the parsing both the local and the Hub reads share:
bounded JSON loading and the safetensors index (which shards, which tensors, what to do without one)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hfmem.errors import HfmemError, LocalPathError, MalformedConfig, MalformedHeader, NoSafetensors
from hfmem.hub.header import FileHeader

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
BIN_INDEX_FILE = "pytorch_model.bin.index.json"
MAX_CONFIG_BYTES = 20_000_000
_MAX_JSON_DEPTH = 64
_SHA_RE = re.compile(r"^[0-9a-f]{40}$")


@dataclass
class ModelFiles:
    """What hfmem read about one model: its config, its safetensors headers, and where they came from."""

    repo: str
    revision: str | None
    source: str  # "hub" | "local" | "cache"
    config: dict[str, Any]
    headers: list[FileHeader]
    index_metadata: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)


def is_sha(revision: str | None) -> bool:
    """Whether `revision` is a full commit id (40 lowercase hex digits), which names immutable content."""
    return revision is not None and _SHA_RE.match(revision) is not None


def load_json_text(
    text: str | bytes,
    file: str,
    error: type[HfmemError] = MalformedConfig,
    max_bytes: int = MAX_CONFIG_BYTES,
    max_depth: int | None = _MAX_JSON_DEPTH,
) -> dict[str, Any]:
    """Decode a JSON object from a repo file, with clear errors for the hostile cases.

    ``max_depth=None`` skips the nesting walk for large machine-written answers (json.loads still bounds recursion).
    """
    if len(text) > max_bytes:  # bytes >= characters, so one check covers both input kinds
        raise error(f"{file}: larger than {max_bytes} bytes", path=file)
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise error(f"{file}: not valid UTF-8", path=file) from None
    try:
        obj = json.loads(text)
    except RecursionError:
        raise error(f"{file}: JSON nested too deeply", path=file) from None
    except ValueError as exc:
        raise error(f"{file}: not valid JSON ({str(exc)[:80]})", path=file) from None
    if not isinstance(obj, dict):
        raise error(f"{file}: expected a JSON object, got {type(obj).__name__}", path=file)
    if max_depth is not None and _depth(obj) > max_depth:
        raise error(f"{file}: JSON nested deeper than {max_depth} levels", path=file)
    return obj


def read_bounded(path: Path, limit: int = MAX_CONFIG_BYTES, named: str | None = None) -> bytes:
    """A JSON file's bytes, reading at most limit + 1 (so load_json_text reports it too large, without the memory)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(limit + 1)
    except OSError as exc:
        raise LocalPathError(
            f"{named or path.name}: cannot read {path.name!r} ({exc.strerror or type(exc).__name__})", path=str(path)
        ) from None


def _depth(obj: Any) -> int:
    # Iterative, so a hostile file cannot exhaust the Python stack.
    deepest, stack = 0, [(obj, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        if level > _MAX_JSON_DEPTH:
            return level
        if isinstance(node, dict):
            stack.extend((v, level + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, level + 1) for v in node)
    return deepest


def index_shards(index: dict[str, Any], file: str) -> list[str]:
    """The shard files an index's weight_map names, each checked to stay inside the model folder."""
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise MalformedHeader(f"{file}: weight_map must map tensor names to file names", path=file)
    shards = sorted(set(weight_map.values()))
    for shard in shards:
        if shard.startswith("/") or ".." in Path(shard).parts:
            raise MalformedHeader(f"{file}: shard path {shard!r} leaves the model folder", path=file)
    return shards


def restrict_to_index(headers: list[FileHeader], index: dict[str, Any] | None) -> list[FileHeader]:
    """Keep only tensors the index names (what transformers loads); headers may hold extras."""
    if not index or not isinstance(index.get("weight_map"), dict):
        return headers
    wanted = index["weight_map"]
    out = []
    for h in headers:
        kept = tuple(t for t in h.tensors if wanted.get(t.name) == h.file)
        out.append(FileHeader(h.file, kept, h.metadata, h.warnings) if len(kept) != len(h.tensors) else h)
    return out


def approximate_from_bin_index(index_text: bytes | str | None, file: str) -> int | None:
    """total_size from a pytorch_model.bin index, if it has a usable one."""
    if index_text is None:
        return None
    try:
        total = load_json_text(index_text, file).get("metadata", {}).get("total_size")
    except HfmemError:
        return None
    return total if isinstance(total, int) and total > 0 else None


def fallback_safetensors(names: list[str], warnings: list[str]) -> list[str]:
    """No index and no model.safetensors: take root *.safetensors except known duplicates."""
    skip = ("consolidated", "adapter_model", "adapter")
    picked = sorted(n for n in names if n.endswith(".safetensors") and "/" not in n and not n.startswith(skip))
    if picked:
        warnings.append(
            f"no {INDEX_FILE} or {SINGLE_FILE}; counted root safetensors files: {', '.join(picked[:5])}"
            + (" ..." if len(picked) > 5 else "")
        )
    return picked


def no_safetensors(repo: str, approx: int | None) -> NoSafetensors:
    """The error for a model without safetensors weights, with the .bin index's total size when known."""
    msg = f"{repo}: no safetensors weights ({INDEX_FILE} or {SINGLE_FILE}) found"
    if approx:
        msg += f"; {BIN_INDEX_FILE} says total_size {approx} bytes (approximate: .bin weights, not analysed)"
    return NoSafetensors(msg)
