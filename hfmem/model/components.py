"""Vision / audio towers and projectors of a composite checkpoint, from its structure rather than from module names.

The config says which encoders exist (its vision / audio sub-configs and their depth); the headers say where the
language model is (the module holding the vocab x hidden input embedding) and where every stack of blocks lives
(``<prefix>.<i>.<module>.<param>``). A stack outside the language model belongs to a tower whose root is the first
module path that leaves the language model's path; several encoders in one checkpoint (a SAM encoder beside a CLIP
one) are separate roots of the same modality. Inside a tower, a submodule (a module of its own, not a bare Linear)
beside the main block stack that maps into the language model's width and has no convolution is the projector
(Qwen-VL's merger, deepstack mergers); outside both, a module with such a weight is a projector too (Llava's /
Gemma's multi_modal_projector). The result is one component per prefix, computed once; tensors are classified by a
prefix match, not a regex per tensor (checkpoints hold up to 500k tensors).
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hfmem.hub.header import TensorEntry

_STACK_RE = re.compile(r"^(.*?)\.(\d+)\.[^.]+\.")  # <prefix>.<i>.<module>.<...>: a stack of blocks, not nn.Sequential
_MODALITY = (("audio", ("audio", "speech", "whisper")), ("vision", ("vision", "visual", "image", "vit", "siglip", "clip")))
_NOT_TOWERS = ("text_config", "quantization_config", "rope_scaling", "rope_parameters", "generation_config")


def tower_configs(config: dict[str, Any], depth: int = 0) -> list[tuple[str, int | None]]:
    """(modality, layer count) of every encoder sub-config (``vision_config``, ``audio_config``, nested ones such
    as Qwen-Omni's ``thinker_config.audio_config``); the modality is read from the sub-config's key and model_type."""
    out: list[tuple[str, int | None]] = []
    if depth > 3:
        return out
    for key, value in config.items():
        if not isinstance(value, dict) or key in _NOT_TOWERS:
            continue
        if key.endswith("_config"):
            label = f"{key} {value.get('model_type', '')}".lower()
            modality = next((m for m, words in _MODALITY if any(w in label for w in words)), None)
            if modality is not None:
                layers = value.get("depth") or value.get("num_hidden_layers") or value.get("encoder_layers") or value.get("num_layers")
                out.append((modality, int(layers) if isinstance(layers, int) else None))
                continue
        out.extend(tower_configs(value, depth + 1))
    return out


def structural_parts(config: dict[str, Any], entries: list[TensorEntry], hidden: int | None, vocab: int | None,
                     skip: Any = None) -> dict[str, str]:
    """{prefix ending in '.': "vision" | "audio" | "projector"} for a checkpoint whose config has encoder
    sub-configs; {} otherwise (and when the language model's embedding cannot be found). ``skip(prefix)`` says a
    root belongs to a part the name rules own (MTP layers, a speech generator)."""
    towers = tower_configs(config)
    if not towers or not hidden or not vocab:
        return {}
    lm_root = _language_model_root(entries, hidden, vocab)
    if not lm_root:
        return {}
    lm_parts = lm_root.split(".")
    stacks: dict[str, dict[str, int]] = defaultdict(dict)  # root -> stack prefix -> blocks
    children: dict[str, list[TensorEntry]] = defaultdict(list)  # root-level child module -> its tensors
    outside: dict[str, list[TensorEntry]] = defaultdict(list)  # non-LM roots without stacks -> tensors
    roots_of: dict[str, str] = {}
    lm_prefix = lm_root + "."
    for t in entries:
        name = t.name
        if name.startswith(lm_prefix):
            continue
        root = _root(name, lm_parts)
        if root is None:
            continue
        roots_of[name] = root
        m = _STACK_RE.match(name)
        if m:
            stack = m.group(1)
            if stack.startswith(root) or root.startswith(stack):
                blocks = stacks[root].get(stack, 0)
                stacks[root][stack] = max(blocks, int(m.group(2)) + 1)
        rest = name[len(root) + 1:] if name.startswith(root + ".") else ""
        child = root + "." + rest.split(".", 1)[0] if "." in rest else root
        children[child].append(t)
        outside[root].append(t)
    modalities = {m for m, _ in towers}
    out: dict[str, str] = {}
    for root, tensors in outside.items():
        if skip is not None and skip(root + "."):
            continue
        if root not in stacks:
            if _feeds_language_model(tensors, hidden):
                out[root + "."] = "projector"
            continue
        main = max(stacks[root].items(), key=lambda kv: kv[1])
        out[root + "."] = _modality(root, main[1], tensors, towers, modalities)
        main_child = main[0] if main[0] == root else root + "." + main[0][len(root) + 1:].split(".", 1)[0]
        for child, ts in children.items():
            # a projector is a module of its own (Qwen-VL's PatchMerger, the deepstack mergers); a bare Linear on
            # the tower root (Qwen-Omni audio's proj2) is the encoder's own output layer, part of its class
            nested = any(t.name.count(".") - child.count(".") >= 2 for t in ts)
            if child.startswith(root + ".") and child != main_child and nested and _feeds_language_model(ts, hidden):
                out[child + "."] = "projector"
    return out


def _language_model_root(entries: list[TensorEntry], hidden: int, vocab: int) -> str | None:
    """The module holding the input embedding: a [vocab (padded), hidden] weight that is not the output head."""
    for t in entries:
        shape = t.shape
        if len(shape) == 2 and shape[1] == hidden and vocab <= shape[0] < vocab + 4096 and t.name.endswith(".weight"):
            parent = t.name.rsplit(".", 2)[0]
            if "." in t.name.rsplit(".", 1)[0] and not t.name.rsplit(".", 2)[-2].startswith(("lm_head", "head", "output")):
                return parent
    return None


def _root(name: str, lm_parts: list[str]) -> str | None:
    """The first module path of ``name`` that leaves the language model's path (None for top-level parameters)."""
    parts = name.split(".")
    for i, p in enumerate(parts[:-1]):
        if i >= len(lm_parts) or p != lm_parts[i]:
            return ".".join(parts[: i + 1])
    return None


def _feeds_language_model(tensors: list[TensorEntry], hidden: int) -> bool:
    """A module that maps into the language model's width (a 2-D weight with ``hidden`` output rows, or an
    [in, hidden] projection matrix) and holds no convolution."""
    if any(len(t.shape) >= 3 for t in tensors):
        return False
    return any(len(t.shape) == 2 and hidden in (t.shape[0], t.shape[1]) for t in tensors)


def _modality(root: str, blocks: int, tensors: list[TensorEntry], towers: list[tuple[str, int | None]],
              modalities: set[str]) -> str:
    """One modality in the config: that one. Several: the encoder whose depth equals the root's main stack; then
    the patch embedding's shape (Conv2d/Conv3d: vision; Conv1d over mel bins: audio); then the root's name."""
    if len(modalities) == 1:
        return next(iter(modalities))
    by_depth = {m for m, n in towers if n == blocks}
    if len(by_depth) == 1:
        return next(iter(by_depth))
    dims = {len(t.shape) for t in tensors}
    if dims & {4, 5}:
        return "vision"
    if 3 in dims:
        return "audio"
    low = root.lower()
    return next((m for m, words in _MODALITY if any(w in low for w in words)), "vision")
