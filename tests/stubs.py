"""Write header-only safetensors stubs (8-byte length + JSON header, no tensor data) from a tensor inventory.

Used by the fixture generator and by tests that materialise the compact inventories in fixtures/inventories/.
"""

from __future__ import annotations

import gzip
import json
import struct
from pathlib import Path
from typing import Any, Iterable

DTYPE_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "I64": 64, "U64": 64, "F64": 64,
}

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def header_bytes(tensors: Iterable[tuple[str, str, list[int]]], metadata: dict[str, str] | None = None) -> bytes:
    """Serialise tensors (name, dtype, shape) as a safetensors header, padded to 8 bytes like the writer does."""
    header: dict[str, Any] = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    offset = 0
    for name, dtype, shape in tensors:
        numel = 1
        for d in shape:
            numel *= d
        size = numel * DTYPE_BITS[dtype] // 8
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw


def write_stub_repo(inventory: dict[str, Any], config: dict[str, Any], dest: Path) -> Path:
    """Write config.json, shards and (when sharded) model.safetensors.index.json into dest."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.json").write_text(json.dumps(config, indent=2))
    shards: dict[str, list[tuple[str, str, list[int]]]] = {}
    for name, dtype, shape, file in inventory["tensors"]:
        shards.setdefault(file, []).append((name, dtype, shape))
    total = 0
    weight_map = {}
    for file, tensors in shards.items():
        (dest / file).write_bytes(header_bytes(tensors, {"format": "pt"}))
        for name, dtype, shape in tensors:
            numel = 1
            for d in shape:
                numel *= d
            total += numel * DTYPE_BITS[dtype] // 8
            weight_map[name] = file
    if len(shards) > 1 or "model.safetensors" not in shards:
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (dest / "model.safetensors.index.json").write_text(json.dumps(index, indent=1))
    return dest


def load_inventory(repo_id: str) -> dict[str, Any]:
    with gzip.open(FIXTURES / "inventories" / f"{repo_id}.json.gz", "rt") as fh:
        return json.load(fh)


def load_config(repo_id: str) -> dict[str, Any]:
    return json.loads((FIXTURES / "configs" / repo_id / "config.json").read_text())


def fixture_repo_ids() -> list[str]:
    root = FIXTURES / "inventories"
    return sorted(str(p.relative_to(root))[: -len(".json.gz")] for p in root.glob("*/*.json.gz"))


def model_files(repo_id: str, config: dict[str, Any] | None = None, tensors: list | None = None):
    """An in-memory ``ModelFiles`` for a fixture inventory (no stub files written): for large inventories and for
    variants with an edited config or tensor list. Shapes and byte sizes are validated like a real header."""
    from hfmem.hub.files import ModelFiles
    from hfmem.hub.header import validate_header

    tensors = load_inventory(repo_id)["tensors"] if tensors is None else tensors
    shards: dict[str, dict[str, Any]] = {}
    offsets: dict[str, int] = {}
    for name, dtype, shape, file in tensors:
        numel = 1
        for d in shape:
            numel *= d
        size = numel * DTYPE_BITS[dtype] // 8
        start = offsets.get(file, 0)
        shards.setdefault(file, {})[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [start, start + size]}
        offsets[file] = start + size
    headers = [validate_header(obj, file) for file, obj in shards.items()]
    return ModelFiles(repo_id, None, "local", load_config(repo_id) if config is None else config, headers)


def gguf_bytes(arch: str = "llama", n_tensors: int = 1) -> bytes:
    """A minimal valid GGUF v3 file: general.architecture, a few llama keys, `n_tensors` F32 tensors of 32 x 4."""

    def s(text: str) -> bytes:
        raw = text.encode()
        return struct.pack("<Q", len(raw)) + raw

    kv = [("general.architecture", 8, s(arch))]
    for key, value in (("block_count", 1), ("embedding_length", 32), ("attention.head_count", 4), ("context_length", 256)):
        kv.append((f"{arch}.{key}", 4, struct.pack("<I", value)))
    out = b"GGUF" + struct.pack("<IQQ", 3, n_tensors, len(kv))
    for key, vtype, value in kv:
        out += s(key) + struct.pack("<I", vtype) + value
    for i in range(n_tensors):
        out += s(f"blk.{i}.w") + struct.pack("<I", 2) + struct.pack("<QQ", 32, 4) + struct.pack("<IQ", 0, i * 512)
    return out
