"""Header-only GGUF files (metadata and tensor infos, no tensor data: hfmem never reads the data), laid out as
ggml's docs/gguf.md says, for model files whose tensor list is known from llama.cpp's logs.

``llama_q4_k_m`` rebuilds the tensor list of a Llama-architecture Q4_K_M file from llama.cpp's quantization rule
(src/llama-quant.cpp llama_tensor_get_type: Q4_K_M gives attn_v and ffn_down Q6_K on the layers use_more_bits
selects, the output Q6_K, everything else 2-D Q4_K, norms F32); the tests tie it to a log by its type counts."""

from __future__ import annotations

import struct
from pathlib import Path

from hfmem.gguf.ggml import GGML_TYPES

_TYPE_ID = {name: tid for tid, (name, _, _) in GGML_TYPES.items()}


def _str(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def _kv(key: str, value: object) -> bytes:
    if isinstance(value, str):
        return _str(key) + struct.pack("<I", 8) + _str(value)
    if isinstance(value, float):
        return _str(key) + struct.pack("<If", 6, value)
    assert isinstance(value, int)
    return _str(key) + struct.pack("<II", 4, value)


def write_header_gguf(path: Path, metadata: dict[str, object], tensors: list[tuple[str, str, tuple[int, ...]]]) -> Path:
    """``tensors``: (name, ggml type name, shape in torch order, outermost first)."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata)))
    for k, v in metadata.items():
        out += _kv(k, v)
    offset = 0
    for name, typ, shape in tensors:
        dims = tuple(reversed(shape))
        out += _str(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", _TYPE_ID[typ], offset)
        _, block, size = GGML_TYPES[_TYPE_ID[typ]]
        n = 1
        for d in shape:
            n *= d
        offset += -(-(n // block * size) // 32) * 32
    path.write_bytes(bytes(out))
    return path


def _more_bits(i: int, n: int) -> bool:
    # llama-quant.cpp use_more_bits(i_layer, n_layers)
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def llama_q4_k_m(path: Path, *, name: str, vocab: int, n_layer: int = 32, embd: int = 4096, heads: int = 32,
                 kv_heads: int = 8, ff: int = 14336, ctx: int = 131072, arch: str = "llama", tied: bool = False) -> Path:
    """A Llama-layout Q4_K_M file; ``arch="qwen2"`` adds the F32 q/k/v biases Qwen2 has; ``tied``: no output.weight,
    token_embd in Q6_K (llama_tensor_get_type gives the tied embedding the output's type)."""
    head = embd // heads
    kv = kv_heads * head
    tensors: list[tuple[str, str, tuple[int, ...]]] = [
        ("token_embd.weight", "Q6_K" if tied else "Q4_K", (vocab, embd)), ("output_norm.weight", "F32", (embd,))]
    if not tied:
        tensors.append(("output.weight", "Q6_K", (vocab, embd)))
    for i in range(n_layer):
        more = "Q6_K" if _more_bits(i, n_layer) else "Q4_K"
        tensors += [
            (f"blk.{i}.attn_norm.weight", "F32", (embd,)), (f"blk.{i}.ffn_norm.weight", "F32", (embd,)),
            (f"blk.{i}.attn_q.weight", "Q4_K", (embd, embd)), (f"blk.{i}.attn_k.weight", "Q4_K", (kv, embd)),
            (f"blk.{i}.attn_v.weight", more, (kv, embd)), (f"blk.{i}.attn_output.weight", "Q4_K", (embd, embd)),
            (f"blk.{i}.ffn_gate.weight", "Q4_K", (ff, embd)), (f"blk.{i}.ffn_up.weight", "Q4_K", (ff, embd)),
            (f"blk.{i}.ffn_down.weight", more, (embd, ff))]
        if arch == "qwen2":
            tensors += [(f"blk.{i}.attn_q.bias", "F32", (embd,)), (f"blk.{i}.attn_k.bias", "F32", (kv,)),
                        (f"blk.{i}.attn_v.bias", "F32", (kv,))]
    md: dict[str, object] = {
        "general.architecture": arch, "general.name": name, "general.file_type": 15,
        f"{arch}.block_count": n_layer, f"{arch}.context_length": ctx, f"{arch}.embedding_length": embd,
        f"{arch}.feed_forward_length": ff, f"{arch}.attention.head_count": heads,
        f"{arch}.attention.head_count_kv": kv_heads, f"{arch}.rope.dimension_count": head, f"{arch}.vocab_size": vocab}
    return write_header_gguf(path, md, tensors)
