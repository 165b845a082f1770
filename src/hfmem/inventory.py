"""Tensor inventory: exact parameter counts per dtype and per component, from safetensors headers alone.

Rules (see MEMORY-FORMULAS §1.2-1.4): a parameter is counted once (a stored copy of a tied lm_head is noted, not
counted); non-parameter buffers (position_ids, inv_freq, causal-mask biases) are not parameters; packed quantized
storage is converted to logical elements by ``quant.tensor_role`` and its scales/zeros are overhead bytes.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

from .header import FileHeader, TensorEntry
from .quant import QuantScheme, detect_scheme, tensor_role

# Non-parameter buffers that checkpoints sometimes carry.
_BUFFER_RE = re.compile(
    r"(^|\.)(position_ids|inv_freq|num_batches_tracked|masked_bias|_float_tensor)$|(^|\.)attn\.bias$"
)
_LAYER_RE = re.compile(r"(?:^|\.)(?:layers|layer|h|blocks|block)\.(\d+)\.")

COMPONENTS = (
    "embeddings",
    "attention",
    "mlp",
    "moe_experts",
    "moe_shared_experts",
    "moe_router",
    "ssm",
    "norms",
    "lm_head",
    "vision",
    "audio",
    "projector",
    "mtp",
    "other",
)


@dataclass
class Parameters:
    total: int
    active: int
    stored_bytes: int
    stored_elements: int
    by_dtype: dict[str, int]
    by_component: dict[str, int]
    bytes_by_component: dict[str, int]
    tensors: int
    buffers: int = 0
    tied_duplicate_elements: int = 0
    quantization: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "active": self.active,
            "stored_bytes": self.stored_bytes,
            "stored_elements": self.stored_elements,
            "tensors": self.tensors,
            "by_dtype": dict(self.by_dtype),
            "by_component": dict(self.by_component),
            "bytes_by_component": dict(self.bytes_by_component),
            "buffer_elements": self.buffers,
            "tied_duplicate_elements": self.tied_duplicate_elements,
            "quantization": self.quantization,
        }


@dataclass(frozen=True, slots=True)
class CountedTensor:
    entry: TensorEntry
    component: str
    logical: int  # logical parameters (0 for overhead and buffers)
    role: str  # "param" | "quant_overhead" | "buffer" | "tied_duplicate"
    layer: int | None


# Dot-separated all-digit segments (layer and expert numbers). No name rule looks at them except the layer-number
# test, so names equal up to these numbers classify alike: classify_component memoises on the name with them
# replaced, and keeps for each pattern which of its numbers (if any) is the layer number.
_INDEX_SEGMENT_RE = re.compile(r"\.(\d+)(?=\.|$)")
_MEMO_LIMIT = 1 << 16
_memo: dict[str, tuple[str, bool, int | None]] = {}


def classify_component(name: str, num_layers: int | None = None) -> str:
    """Which part of the model a tensor belongs to, from its name alone (linear in the name length).

    Memoised by the name with its layer/expert numbers replaced, so a 100k-tensor MoE checkpoint runs the rules
    once per distinct name pattern (a few hundred), not once per tensor: one regex split per tensor.
    """
    parts = _INDEX_SEGMENT_RE.split(name)  # [text, number, text, number, ..., text]; the dots are dropped
    key = ".#".join(parts[0::2])
    cached = _memo.get(key)
    if cached is None:
        cached = _classify_pattern(name, key, parts)
        if len(_memo) >= _MEMO_LIMIT:
            _memo.clear()
        _memo[key] = cached
    component, tower, layer_at = cached
    if num_layers is not None and layer_at is not None and component != "mtp" and not tower:
        if int(parts[2 * layer_at + 1]) >= num_layers:
            return "mtp"  # DeepSeek-V3 style next-token-prediction layers stored after the last decoder layer
    return component


def _classify_pattern(name: str, key: str, parts: list[str]) -> tuple[str, bool, int | None]:
    """(component by the name rules, is a vision/audio tower, which number is the layer number) of a pattern."""
    n = key.lower()
    layer_at = None
    m = _LAYER_RE.search(name.lower())
    if m:  # the layer number is a whole dot-separated segment: find which one
        start, offset = m.start(1), 0
        for i, part in enumerate(parts):
            if i % 2:
                if offset + 1 == start:
                    layer_at = i // 2
                    break
                offset += 1  # the dot before the number
            offset += len(part)
    return _classify_rules(n), _is_tower(n), layer_at


def _classify_rules(n: str) -> str:
    """The name rules, on a lower-cased name whose index segments are "#" (the layer-number test excluded)."""
    if n.startswith("mtp.") or ".mtp." in n or n.startswith("model.mtp"):
        return "mtp"
    if any(k in n for k in ("multi_modal_projector", "mm_projector", "vision_projector", "visual.merger", "embed_vision", "mm_input_projection", "audio_projector", "embed_audio")):
        return "projector"
    if _is_tower(n):
        return "audio" if any(k in n for k in ("audio", "whisper", "speech")) else "vision"
    if "shared_expert" in n:
        return "moe_shared_experts"
    if ".experts." in n or n.endswith(".experts") or ".experts_" in n or "experts.gate_up" in n or "experts.down" in n:
        return "moe_experts"
    if re.search(r"(\.router\.|\.router$|mlp\.gate\.|block_sparse_moe\.gate\.|feed_forward\.gate\.|e_score_correction|\.moe_gate|mlp\.gate$)", n):
        return "moe_router"
    if re.search(r"(^|\.)(lm_head|embed_out|output)\.(weight|bias)$", n) or n.startswith("cls.predictions") or n.startswith("lm_head"):
        return "lm_head"
    if any(k in n for k in ("embed_tokens", "wte.", "wpe.", "word_embeddings", "position_embeddings", "token_type_embeddings", "tok_embeddings", "embed_positions", "relative_attention_bias")) or n in ("shared.weight", "embeddings.weight"):
        return "embeddings"
    if re.search(r"(norm|ln_\d|ln_f|layernorm|layer_norm)", n) and not n.endswith(("proj.weight", "dense.weight")):
        return "norms"
    if any(k in n for k in ("mixer.", "mamba", ".ssm", "linear_attn.", "conv1d", "a_log", "dt_bias", "dt_proj", "x_proj")):
        return "ssm" if "linear_attn." not in n else "attention"
    if any(k in n for k in ("self_attn", "self_attention.", "encoder_attn.", ".attn.", ".attention.", "selfattention", "encdecattention", "cross_attn", "out_proj", "q_proj", "k_proj", "v_proj", "o_proj", "query_key_value", "c_attn")):
        return "attention"
    if any(k in n for k in ("mlp", "feed_forward", "ffn", "densereludense", ".intermediate.", ".output.dense", "fc1", "fc2", "gate_proj", "up_proj", "down_proj", "c_fc", "dense_h_to_4h", "dense_4h_to_h")):
        return "mlp"
    if n.startswith("embeddings.") or ".embeddings." in n:
        return "embeddings"
    return "other"


def _is_tower(n: str) -> bool:
    return any(
        k in n
        for k in ("visual.", "vision_tower", "vision_model", "vision_encoder", "audio_tower", "audio_model", "audio_encoder", "image_encoder", "vit.", "siglip")
    ) or n.startswith(("vision.", "audio.", "thinker.visual", "thinker.audio"))


def layer_index(name: str) -> int | None:
    m = _LAYER_RE.search(name)
    return int(m.group(1)) if m else None


def count_tensors(
    headers: Iterable[FileHeader],
    config: dict[str, Any],
    num_layers: int | None = None,
    tie_word_embeddings: bool = False,
) -> tuple[list[CountedTensor], QuantScheme | None, list[str]]:
    entries = [t for h in headers for t in h.tensors]
    scheme = detect_scheme(config, entries)
    notes: list[str] = []
    names = {t.name for t in entries}
    counted: list[CountedTensor] = []
    embed = _find_input_embedding(entries)
    for t in entries:
        component = classify_component(t.name, num_layers)
        layer = layer_index(t.name)
        if _BUFFER_RE.search(t.name) and not t.name.endswith("e_score_correction_bias"):
            counted.append(CountedTensor(t, component, 0, "buffer", layer))
            continue
        if (
            component == "lm_head"
            and tie_word_embeddings
            and embed is not None
            and t.shape == embed.shape
            and t.name.endswith("weight")
        ):
            counted.append(CountedTensor(t, component, 0, "tied_duplicate", layer))
            notes.append(
                f"{t.name} is stored although tie_word_embeddings is true; counted once (shares {embed.name})"
            )
            continue
        role, logical = tensor_role(t, scheme, names)
        counted.append(CountedTensor(t, component, logical, role, layer))
    return counted, scheme, notes


def _find_input_embedding(entries: list[TensorEntry]) -> TensorEntry | None:
    for t in entries:
        n = t.name
        if n.endswith(("embed_tokens.weight", "wte.weight", "word_embeddings.weight", "tok_embeddings.weight")) or n == "shared.weight":
            if not _is_tower(n.lower()):
                return t
    return None


def summarize(counted: list[CountedTensor], scheme: QuantScheme | None, notes: list[str]) -> Parameters:
    by_dtype: Counter[str] = Counter()
    by_component: Counter[str] = Counter()
    bytes_by_component: Counter[str] = Counter()
    total = stored_bytes = stored_elements = buffers = tied = 0
    overhead = quantized_params = 0
    for c in counted:
        stored_bytes += c.entry.nbytes
        stored_elements += c.entry.numel
        if c.role == "buffer":
            buffers += c.entry.numel
            continue
        if c.role == "tied_duplicate":
            tied += c.entry.numel
            continue
        bytes_by_component[c.component] += c.entry.nbytes
        if c.role == "quant_overhead":
            overhead += c.entry.nbytes
            continue
        by_dtype[c.entry.dtype] += c.entry.numel
        by_component[c.component] += c.logical
        total += c.logical
        if c.role == "quantized":
            quantized_params += c.logical
    quantization = None
    if scheme is not None:
        quantization = scheme.to_dict() | {
            "overhead_bytes": overhead,
            "quantized_parameters": quantized_params,
            "unquantized_parameters": total - quantized_params,
        }
    ordered = {k: by_component[k] for k in COMPONENTS if by_component.get(k)}
    return Parameters(
        total=total,
        active=total,
        stored_bytes=stored_bytes,
        stored_elements=stored_elements,
        by_dtype=dict(sorted(by_dtype.items())),
        by_component=ordered,
        bytes_by_component={k: bytes_by_component[k] for k in COMPONENTS if bytes_by_component.get(k)},
        tensors=len(counted),
        buffers=buffers,
        tied_duplicate_elements=tied,
        quantization=quantization,
        notes=list(notes),
    )
