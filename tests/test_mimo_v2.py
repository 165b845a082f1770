"""MiMo-V2.5 (model_type mimo_v2, a remote-code config transformers does not know): its hybrid_layer_pattern marks
sliding-window layers with 1, and those layers have their own K/V heads and head sizes (swa_*), values are
v_head_dim wide, and vLLM builds only its first MTP layer, a sliding-window one (vllm, model_executor/models/
mimo_v2.py and mimo_v2_mtp.py). The truth here is the checkpoint's own tensors: every layer's fused qkv_proj rows
and o_proj width, and the MTP layers' stored bytes; and its source's count of 9 full-attention layers."""

from __future__ import annotations

import json

from stubs import FIXTURES, model_files

from hfmem.api import analyze_files, attach_sections
from hfmem.memory.kv.layers import describe_layers
from hfmem.model.architecture import build_architecture

REPO = "XiaomiMiMo/MiMo-V2.5"


def _config() -> dict:
    return json.loads((FIXTURES / "configs" / REPO / "config.json").read_text())


def test_layer_types_and_kv_dims_are_the_checkpoints():
    """Each layer's cache (K/V heads x (key + value head size)) is what its qkv_proj holds beyond the queries, and
    its values are what o_proj reads (heads x value head size); 9 full-attention layers, as the source says. Before,
    every layer was taken as a 4-head sliding layer with 192-wide values (the config's sliding_window alone)."""
    cfg = _config()
    report = analyze_files(model_files(REPO))
    shapes = {t.entry.name: t.entry.shape for t in report.tensors}
    layers = describe_layers(build_architecture(cfg)[0], engine="vllm")
    assert sum(l.attn == "full" for l in layers) == 9 and sum(l.attn == "sliding" for l in layers) == 39
    assert json.loads((FIXTURES / "configs" / REPO / "SOURCE.json").read_text())["arch_notes"].startswith(
        "hybrid SWA(128)/full attention (9 full layers)")
    for layer in layers:
        sliding = layer.attn == "sliding"
        q_heads = cfg["swa_num_attention_heads" if sliding else "num_attention_heads"]
        q_dim = cfg["swa_head_dim" if sliding else "head_dim"]
        rows = shapes[f"model.layers.{layer.index}.self_attn.qkv_proj.weight"][0]
        assert rows == q_heads * q_dim + layer.kv_heads * (layer.dk + layer.dv), layer.index
        assert shapes[f"model.layers.{layer.index}.self_attn.o_proj.weight"][1] == q_heads * layer.dv
        assert layer.window == (128 if sliding else None)


def test_mtp_is_vllms_one_sliding_layer():
    """The checkpoint stores 3 MTP layers; vLLM builds the first (mimo_v2_mtp.py: one layer, sliding-window
    attention): --speculative mtp adds exactly its stored bytes and one sliding layer's cache, whose K/V width is
    what the MTP layer's qkv_proj holds beyond its queries."""
    cfg = _config()
    report = analyze_files(model_files(REPO))
    mtp = [t for t in report.tensors if t.component == "mtp"]
    assert sorted({t.layer for t in mtp}) == [0, 1, 2]
    first = sum(t.entry.nbytes for t in mtp if t.layer == 0)
    plain = attach_sections(report, ctx="128k")
    plain_weights, plain_kv = plain.inference.weight_terms["parameters"], plain.kv_cache[0]
    spec = attach_sections(report, ctx="128k", speculative="mtp")
    assert spec.inference.weight_terms["parameters"] - plain_weights == first
    entry = spec.kv_cache[0].by_layer_type["mtp"]
    assert entry["layers"] == 1 and "mtp" not in plain_kv.by_layer_type
    rows = next(t.entry.shape[0] for t in mtp if t.entry.name == "model.mtp.layers.0.self_attn.qkv_proj.weight")
    kv_width = rows - cfg["swa_num_attention_heads"] * cfg["swa_head_dim"]
    assert entry["bytes_per_token"] == kv_width * 2  # bf16 K and V of the sliding layout
    assert not any("names no MTP layer count" in n for n in spec.inference.notes)  # vLLM sets its n_predict
