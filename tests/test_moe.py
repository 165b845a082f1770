"""MoE: total vs active parameters per token, MTP layers, and the config/tensor cross-checks of moe.py.

Truths: closed forms from config.json (routed experts x top-k + shared + router + everything dense), the
DeepSeek-V3's published numbers (37.55B active, 671,026,419,200 without MTP), and the published
active counts (Mistral: Mixtral 12.9B; Qwen: 3.3B; OpenAI's gpt-oss model card: 3.6B / 5.1B, embeddings excluded).
"""

from __future__ import annotations

import copy
from functools import lru_cache

import pytest

from hfmem.api import analyze_files
from hfmem.model.moe import expected_moe_layers
from stubs import load_config, model_files


@lru_cache(maxsize=None)
def report(repo: str):
    return analyze_files(model_files(repo))


def test_mixtral_active_closed_form():
    c = load_config("mistralai/Mixtral-8x7B-v0.1")
    p = report("mistralai/Mixtral-8x7B-v0.1").parameters
    expert = 3 * c["hidden_size"] * c["intermediate_size"]
    idle = c["num_hidden_layers"] * (c["num_local_experts"] - c["num_experts_per_tok"]) * expert
    assert p.total == 46_702_792_704
    assert p.active == p.total - idle == 12_879_925_248  # Mistral: "12.9B active parameters"
    assert p.moe.to_dict()["experts_stored_per_layer"] == {"8": 32} and p.moe.moe_layers == 32


@pytest.mark.parametrize("repo", ["Qwen/Qwen3-Coder-30B-A3B-Instruct", "Qwen/Qwen3-30B-A3B-Thinking-2507-FP8"])
def test_qwen3_moe_active_closed_form(repo):
    c = load_config(repo)
    p = report(repo).parameters
    expert = 3 * c["hidden_size"] * c["moe_intermediate_size"]
    experts = c.get("num_experts") or c["num_local_experts"]
    idle = c["num_hidden_layers"] * (experts - c["num_experts_per_tok"]) * expert
    assert p.active == p.total - idle == 3_353_032_704  # Qwen: "3.3B activated"; FP8 does not change it


def test_deepseek_v3_active_from_config():
    """By hand from the config: embeddings + lm_head + attention of 61 layers + 3 dense MLPs + 58 x (shared + 8 routed + router)."""
    c = load_config("deepseek-ai/DeepSeek-V3")
    h, v, heads = c["hidden_size"], c["vocab_size"], c["num_attention_heads"]
    ql, kl, nope, rope, vd = c["q_lora_rank"], c["kv_lora_rank"], c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    attn = h * ql + ql + ql * heads * (nope + rope) + h * (kl + rope) + kl + kl * heads * (nope + vd) + heads * vd * h
    layers, dense = c["num_hidden_layers"], c["first_k_dense_replace"]
    expert, router = 3 * h * c["moe_intermediate_size"], c["n_routed_experts"] * (h + 1)
    base = 2 * v * h + layers * (attn + 2 * h) + h + dense * 3 * h * c["intermediate_size"]
    moe_layers = layers - dense
    active = base + moe_layers * ((c["n_shared_experts"] + c["num_experts_per_tok"]) * expert + router)
    loaded = base + moe_layers * ((c["n_shared_experts"] + c["n_routed_experts"]) * expert + router)
    p = report("deepseek-ai/DeepSeek-V3").parameters
    assert p.active == active == 37_552_297_472
    assert p.inference_loaded == loaded == 671_026_419_200
    assert p.total == loaded + p.by_component["mtp"]  # the MTP layer is in total, not in what inference loads
    assert (p.moe.moe_layers, p.moe.dense_layers) == (58, 3)


@pytest.mark.parametrize("repo,card", [("openai/gpt-oss-20b", 3.6), ("openai/gpt-oss-120b", 5.1)])
def test_gpt_oss_active_matches_model_card(repo, card):
    p = report(repo).parameters
    assert round(p.moe.active_excluding_embeddings / 1e9, 1) == card
    c = load_config(repo)
    assert p.moe.to_dict()["experts_stored_per_layer"] == {str(c["num_local_experts"]): c["num_hidden_layers"]}  # fused [E, ...]


def test_gpt_oss_mxfp4_and_bf16_have_the_same_active_count():
    assert report("openai/gpt-oss-20b").parameters.active == report("unsloth/gpt-oss-20b-BF16").parameters.active


def test_dense_model_has_no_moe_section():
    p = report("meta-llama/Llama-3.1-8B-Instruct").parameters
    assert p.moe is None and p.active == p.total == p.inference_loaded


@pytest.mark.parametrize("repo", ["Qwen/Qwen3-Next-80B-A3B-Instruct", "zai-org/GLM-4.7-Flash", "Qwen/Qwen3.5-0.8B-Base"])
def test_mtp_reported_separately(repo):
    r = report(repo)
    p = r.parameters
    assert p.by_component["mtp"] > 0 and p.by_part["mtp"] == p.by_component["mtp"]
    assert p.inference_loaded == p.total - p.by_component["mtp"]
    assert p.to_dict()["inference_loaded"] == p.inference_loaded
    assert any("multi-token-prediction" in n and "inference_loaded" in n for n in r.notes)
    assert p.active < p.inference_loaded or p.moe is None  # Qwen3.5-0.8B is dense: active = inference_loaded
    assert p.active <= p.inference_loaded


def test_dense_first_layers_cross_checked_against_config():
    # GLM-4.7-Flash: first_k_dense_replace 1 of 47 layers (its MTP layer 47 is not counted as a MoE layer)
    r = report("zai-org/GLM-4.7-Flash")
    c = load_config("zai-org/GLM-4.7-Flash")
    assert (r.parameters.moe.moe_layers, r.parameters.moe.dense_layers) == (c["num_hidden_layers"] - 1, 1)
    assert not [w for w in r.warnings if "MoE" in w]


def test_expected_moe_layers_rules():
    assert expected_moe_layers({"first_k_dense_replace": 3}, 6) == {3, 4, 5}
    assert expected_moe_layers({"first_k_dense_replace": 1, "moe_layer_freq": 2}, 6) == {2, 4}
    assert expected_moe_layers({"decoder_sparse_step": 2, "mlp_only_layers": [3]}, 6) == {1, 5}
    assert expected_moe_layers({"moe_layer_freq": [0, 1, 1]}, 3) == {1, 2}
    assert expected_moe_layers({}, 6) is None


def _edited(repo, edit):
    cfg = copy.deepcopy(load_config(repo))
    edit(cfg)
    return analyze_files(model_files(repo, cfg))


def test_config_tensor_disagreements_warn():
    r = _edited("Qwen/Qwen3-Coder-30B-A3B-Instruct", lambda c: c.update(num_experts=64))
    assert any("config says 64 experts" in w for w in r.warnings)
    r = _edited("Qwen/Qwen3-Coder-30B-A3B-Instruct", lambda c: c.update(mlp_only_layers=[0, 1]))
    assert any("config makes 46 layers MoE" in w for w in r.warnings)
    base = report("Qwen/Qwen3-Coder-30B-A3B-Instruct").parameters
    r = _edited("Qwen/Qwen3-Coder-30B-A3B-Instruct", lambda c: c.update(num_experts_per_tok=16))
    assert r.parameters.active - base.active == base.moe.active_routed_parameters  # top-16 runs twice the experts


def test_per_expert_tensors_kimi_linear():
    p = report("moonshotai/Kimi-Linear-48B-A3B-Instruct").parameters
    c = load_config("moonshotai/Kimi-Linear-48B-A3B-Instruct")
    assert p.moe.to_dict()["experts_stored_per_layer"] == {str(c["num_experts"]): p.moe.moe_layers}
    assert p.moe.active_routed_parameters * c["num_experts"] == p.moe.routed_expert_parameters * c["num_experts_per_token"]


def test_omni_talker_experts_use_the_talker_top_k():
    c = load_config("Qwen/Qwen3-Omni-30B-A3B-Instruct")["talker_config"]["text_config"]
    p = report("Qwen/Qwen3-Omni-30B-A3B-Instruct").parameters
    talker = p.moe.speech_generator
    assert talker["experts_per_token"] == c["num_experts_per_tok"]
    assert talker["active_routed_parameters"] * c["num_local_experts"] == talker["routed_expert_parameters"] * c["num_experts_per_tok"]
    thinker = load_config("Qwen/Qwen3-Omni-30B-A3B-Instruct")["thinker_config"]["text_config"]
    assert p.moe.experts_per_token == thinker["num_experts_per_tok"]
    idle = p.moe.routed_expert_parameters - p.moe.active_routed_parameters
    assert p.active == p.total - idle - (talker["routed_expert_parameters"] - talker["active_routed_parameters"])
