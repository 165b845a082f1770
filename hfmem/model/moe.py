"""Mixture-of-experts accounting: total vs active parameters per token, from the classified tensor inventory.

Per MoE layer, a token runs ``experts_per_token`` (top-k) of the layer's routed experts, all shared experts and the
router; every other parameter (attention, dense MLP layers, norms, embeddings, lm_head, towers) is used in full.
Experts of one layer have equal size, so the active routed share of a layer is exactly ``params * k / E`` with E the
experts stored for that layer (per-expert tensors ``experts.<i>.*``: distinct i; fused tensors ``experts.gate_up_proj``
etc.: their leading dimension). Which layers are MoE is read from the tensors and cross-checked against the config
(``first_k_dense_replace``, ``moe_layer_freq``, ``decoder_sparse_step`` + ``mlp_only_layers``; transformers
models/deepseek_v3, deepseek_v2 and qwen3_moe/modeling_*.py). MTP layers and speech-generator models are outside
``inference_loaded`` (respectively have their own config) and are left out here.

``active`` includes the input embedding (DeepSeek-V3: 37.55B, as its model card counts); ``active_excluding_embeddings``
leaves it out, the convention of OpenAI's gpt-oss model card (20b: 3.6B, 120b: 5.1B).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hfmem.model.architecture import Architecture, MoeFacts

_EXPERT_INDEX_RE = re.compile(r"\.experts\.(\d+)\.")


@dataclass
class MoeSummary:
    num_experts: int | None
    experts_per_token: int | None
    moe_layers: int
    dense_layers: int
    experts_stored: dict[int, int]  # experts found per MoE layer -> number of layers
    routed_expert_parameters: int
    active_routed_parameters: int
    shared_expert_parameters: int
    router_parameters: int
    active: int
    active_excluding_embeddings: int
    warnings: list[str] = field(default_factory=list)
    speech_generator: dict[str, Any] | None = None  # a talker's own MoE (Qwen-Omni), top-k from talker_config

    def to_dict(self) -> dict[str, Any]:
        return {
            "num_experts": self.num_experts,
            "experts_per_token": self.experts_per_token,
            "moe_layers": self.moe_layers,
            "dense_layers": self.dense_layers,
            "experts_stored_per_layer": {str(k): v for k, v in sorted(self.experts_stored.items())},
            "routed_expert_parameters": self.routed_expert_parameters,
            "active_routed_parameters": self.active_routed_parameters,
            "shared_expert_parameters": self.shared_expert_parameters,
            "router_parameters": self.router_parameters,
            "active": self.active,
            "active_excluding_embeddings": self.active_excluding_embeddings,
            "speech_generator": self.speech_generator,
        }


def expected_moe_layers(text_config: dict[str, Any], num_layers: int) -> set[int] | None:
    """Layer indices the config makes MoE, or None when it does not say (all layers then, by default)."""
    k = text_config.get("first_k_dense_replace")
    freq = text_config.get("moe_layer_freq")
    step = text_config.get("decoder_sparse_step")
    mlp_only = text_config.get("mlp_only_layers")
    if isinstance(freq, list) and len(freq) >= num_layers:  # MiMo style: one flag per layer
        return {i for i in range(num_layers) if freq[i]}
    if isinstance(k, int) or isinstance(freq, int):
        k = k if isinstance(k, int) else 0
        f = freq if isinstance(freq, int) and freq > 0 else 1
        return {i for i in range(num_layers) if i >= k and i % f == 0}
    if isinstance(step, int) or isinstance(mlp_only, list):
        s = step if isinstance(step, int) and step > 0 else 1
        skip = set(mlp_only or [])
        return {i for i in range(num_layers) if i not in skip and (i + 1) % s == 0}
    return None


def _experts_in_layer(found: set[int] | None, fused_dims: set[int] | None, fallback: Any) -> int | None:
    if found:
        return len(found)
    if fused_dims and len(fused_dims) == 1:
        return next(iter(fused_dims))
    return fallback if isinstance(fallback, int) else None


def _speech_generator_moe(config: dict[str, Any] | None) -> tuple[int | None, int | None]:
    """(experts, top-k) of a Qwen-Omni style talker, from config.json's talker_config (its own text_config)."""
    talker = (config or {}).get("talker_config")
    if not isinstance(talker, dict):
        return None, None
    talker_text = talker.get("text_config")
    text: dict[str, Any] = talker_text if isinstance(talker_text, dict) else talker
    k = text.get("num_experts_per_tok")
    e = text.get("num_experts") or text.get("num_local_experts")
    return (e if isinstance(e, int) else None), (k if isinstance(k, int) else None)


def _active_share(params_by_layer: dict[Any, int], indices: dict[Any, set[int]], fused: dict[Any, set[int]],
                  n_experts: Any, top_k: Any) -> tuple[Fraction, dict[int, int], int]:
    """Active routed parameters (exact fraction), experts stored per layer, layers whose split is uneven."""
    active = Fraction(0)
    stored: dict[int, int] = defaultdict(int)
    uneven = 0
    for layer, params in params_by_layer.items():
        e = _experts_in_layer(indices.get(layer), fused.get(layer), n_experts)
        if e:
            stored[e] += 1
        if not isinstance(top_k, int) or not e:
            active += params
            continue
        share = Fraction(params * min(top_k, e), e)
        uneven += share.denominator != 1
        active += share
    return active, dict(stored), uneven


def summarize_moe(counted: list[Any], arch: Architecture, inference_loaded: int, config: dict[str, Any] | None = None) -> MoeSummary | None:
    """MoE summary from counted tensors (inventory.CountedTensor) and the Architecture; None for dense models."""
    routed_by_layer: dict[int | None, int] = defaultdict(int)
    indices_by_layer: dict[int | None, set[int]] = defaultdict(set)
    fused_dim_by_layer: dict[int | None, set[int]] = defaultdict(set)
    talker_by_layer: dict[int | None, int] = defaultdict(int)
    talker_indices: dict[int | None, set[int]] = defaultdict(set)
    index_texts: dict[int | None, set[str]] = defaultdict(set)
    shared = router = embeddings = 0
    for c in counted:
        if c.logical == 0:
            continue
        if c.component == "speech_generator" and ".experts." in c.entry.name:
            talker_by_layer[c.layer] += c.logical
            m = _EXPERT_INDEX_RE.search(c.entry.name)
            if m:
                talker_indices[c.layer].add(int(m.group(1)))
        elif c.component == "moe_experts":
            routed_by_layer[c.layer] += c.logical
            m = _EXPERT_INDEX_RE.search(c.entry.name)
            if m:
                index_texts[c.layer].add(m.group(1))  # (as text: each expert's tensors share it; int once below)
            elif c.entry.shape:
                fused_dim_by_layer[c.layer].add(c.entry.shape[0])
        elif c.component == "moe_shared_experts":
            shared += c.logical
        elif c.component == "moe_router":
            router += c.logical
        elif c.component == "embeddings":
            embeddings += c.logical
    for layer, texts in index_texts.items():
        indices_by_layer[layer] = set(map(int, texts))
    moe_cfg: MoeFacts | None = arch.moe
    if not routed_by_layer and not moe_cfg:
        return None
    warnings: list[str] = []
    n_experts = moe_cfg.num_experts if moe_cfg else None
    top_k = moe_cfg.experts_per_token if moe_cfg else None
    if not routed_by_layer:
        warnings.append(f"config declares {n_experts} experts but no routed-expert tensors were found")
    if routed_by_layer and not isinstance(top_k, int):
        warnings.append("routed-expert tensors found but the config gives no experts_per_token: active = all parameters")
    routed = sum(routed_by_layer.values())
    active_routed, experts_stored, uneven = _active_share(routed_by_layer, indices_by_layer, fused_dim_by_layer,
                                                           n_experts, top_k)
    if uneven:
        warnings.append(f"{uneven} MoE layers have expert parameters not divisible by their expert count")
    if isinstance(n_experts, int) and experts_stored and set(experts_stored) != {n_experts}:
        warnings.append(
            f"config says {n_experts} experts per MoE layer but the checkpoint stores "
            + ", ".join(f"{e} in {n} layers" for e, n in sorted(experts_stored.items()))
        )
    talker_total = sum(talker_by_layer.values())
    talker_active = Fraction(talker_total)
    talker_k = None
    if talker_total:
        talker_e, talker_k = _speech_generator_moe(config)
        if talker_k is None:
            warnings.append("speech-generator experts found but no talker_config top-k: counted in full as active")
        else:
            talker_active, _, _ = _active_share(talker_by_layer, talker_indices, {}, talker_e, talker_k)
    moe_layer_set = {layer for layer in routed_by_layer if layer is not None}
    num_layers = getattr(arch, "num_layers", None) or 0
    expected = expected_moe_layers(getattr(arch, "text_config", {}) or {}, num_layers) if num_layers else None
    if expected is not None and moe_layer_set and expected != moe_layer_set:
        warnings.append(
            f"config makes {len(expected)} layers MoE but routed-expert tensors are stored for {len(moe_layer_set)} layers"
        )
    active_routed_int = round(active_routed)
    active = inference_loaded - routed + active_routed_int - talker_total + round(talker_active)
    return MoeSummary(
        num_experts=n_experts if isinstance(n_experts, int) else None,
        experts_per_token=top_k if isinstance(top_k, int) else None,
        moe_layers=len(moe_layer_set) or (1 if routed_by_layer else 0),
        dense_layers=max(0, num_layers - len(moe_layer_set)) if moe_layer_set else 0,
        experts_stored=dict(experts_stored),
        routed_expert_parameters=routed,
        active_routed_parameters=active_routed_int,
        shared_expert_parameters=shared,
        router_parameters=router,
        active=active,
        active_excluding_embeddings=active - embeddings,
        warnings=warnings,
        speech_generator={"routed_expert_parameters": talker_total, "active_routed_parameters": round(talker_active),
                          "experts_per_token": talker_k} if talker_total else None,
    )
