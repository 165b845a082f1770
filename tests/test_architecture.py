"""Architecture facts from real configs, normalised through transformers' config classes."""

from __future__ import annotations

import pytest

import hfmem
from hfmem.model.architecture import build_architecture
from hfmem.errors import MalformedConfig

# repo -> expected facts (from the model cards / papers / the configs' own documented values)
FACTS = {
    "Qwen/Qwen2-7B-Instruct": dict(num_layers=28, num_kv_heads=4, head_dim=128, attention_kind="gqa", layer_types={"full_attention": 28}, tie_word_embeddings=False),
    # use_sliding_window: false -> all full attention although sliding_window is set
    "Qwen/Qwen2.5-7B-Instruct": dict(layer_types={"full_attention": 28}, sliding_window=None),
    "google/gemma-2-9b-it": dict(head_dim=256, layer_types={"sliding_attention": 21, "full_attention": 21}, sliding_window=4096, tie_word_embeddings=True),
    "google/gemma-3-27b-it": dict(num_layers=62, head_dim=128, layer_types={"sliding_attention": 52, "full_attention": 10}, sliding_window=1024, vocab_size=262_208),
    "openai/gpt-oss-20b": dict(layer_types={"sliding_attention": 12, "full_attention": 12}, sliding_window=128, num_kv_heads=8, head_dim=64),
    "mistralai/Mistral-7B-v0.1": dict(layer_types={"sliding_attention": 32}, sliding_window=4096),
    "deepseek-ai/DeepSeek-V3": dict(attention_kind="mla", num_layers=61),
    "Qwen/Qwen3-Next-80B-A3B-Instruct": dict(layer_types={"linear_attention": 36, "full_attention": 12}, num_kv_heads=2, head_dim=256),
    "state-spaces/mamba-2.8b-hf": dict(layer_types={"mamba": 64}, attention_kind="none", num_kv_heads=0),
    "openai-community/gpt2": dict(num_layers=12, num_attention_heads=12, num_kv_heads=12, attention_kind="mha", max_position_embeddings=1024, tie_word_embeddings=True),
    "google-t5/t5-small": dict(is_encoder_decoder=True, num_decoder_layers=6, head_dim=64),
    "Qwen/Qwen3-0.6B": dict(head_dim=128, num_attention_heads=16, hidden_size=1024, tie_word_embeddings=True),
    # multi_query: true (and not new_decoder_architecture) means one KV head, whatever num_kv_heads says
    "tiiuae/falcon-7b-instruct": dict(num_attention_heads=71, num_kv_heads=1, attention_kind="mqa", head_dim=64),
    "openai/whisper-large-v3": dict(is_encoder_decoder=True, num_decoder_layers=32),
    # per-layer heterogeneous config: the sliding layers' values (global layers: 512 x 4 KV heads, see kvcache)
    "google/gemma-4-31B-it": dict(head_dim=256, num_kv_heads=16, sliding_window=1024),
}


@pytest.mark.parametrize("repo", sorted(FACTS))
def test_architecture_facts(stub_repo, repo):
    arch = hfmem.analyze(str(stub_repo(repo))).architecture
    for key, value in FACTS[repo].items():
        assert getattr(arch, key) == value, key


def test_mla_details(stub_repo):
    arch = hfmem.analyze(str(stub_repo("deepseek-ai/DeepSeek-V3"))).architecture
    assert arch.mla.kv_lora_rank == 512 and arch.mla.qk_rope_head_dim == 64
    assert arch.moe.num_experts == 256 and arch.moe.experts_per_token == 8


def test_multimodal_uses_text_config_not_vision(stub_repo):
    # Peers let vision_config overwrite text values (hidden 1280 / 32 layers); Qwen2.5-VL text is 3584 / 28.
    arch = hfmem.analyze(str(stub_repo("Qwen/Qwen2.5-VL-7B-Instruct"))).architecture
    assert (arch.hidden_size, arch.num_layers, arch.num_kv_heads) == (3584, 28, 4)


def test_unknown_model_type_reads_raw_config():
    config = {"model_type": "not-a-real-type", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100}
    arch, notes = build_architecture(config)
    assert arch.normalised_by == "raw config.json" and arch.head_dim == 16
    assert any("unknown to transformers" in n for n in notes)


def test_kv_heads_cross_checked_against_k_proj(stub_repo):
    from hfmem.hub.header import TensorEntry

    config = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 10, "intermediate_size": 128}
    k = TensorEntry("model.layers.0.self_attn.k_proj.weight", "BF16", (32, 64), 2048, 4096, "m")
    _, warnings = build_architecture(config, [k])
    assert any("k_proj is [32, 64]" in w for w in warnings)


@pytest.mark.parametrize(
    "bad, field",
    [
        ({"num_hidden_layers": 0}, "num_hidden_layers"),
        ({"num_hidden_layers": -3}, "num_hidden_layers"),
        ({"num_attention_heads": 3, "hidden_size": 64}, "divisible"),
        ({"vocab_size": 10**13}, "vocab_size"),
        ({"hidden_size": "big"}, "hidden_size"),
    ],
)
def test_absurd_config_values_are_clear_errors(bad, field):
    config = {"model_type": "not-a-real-type", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100} | bad
    with pytest.raises(MalformedConfig, match=field):
        build_architecture(config)


@pytest.mark.parametrize("value", ["abc", [1], 5.0, -1, 0, True])
def test_partial_rotary_factor_outside_vllms_range_is_refused(value):
    """vLLM's get_rope refuses a partial_rotary_factor outside (0, 1]; hfmem says so, wherever the factor sits (Gemma 4
    keeps one per layer type), instead of sizing a rotary cache from it."""
    from hfmem.model.validate import check_config

    config = {"model_type": "gemma4", "text_config": {"rope_parameters": {
        "sliding_attention": {"rope_type": "default"}, "full_attention": {"partial_rotary_factor": value}}}}
    with pytest.raises(MalformedConfig, match="full_attention.partial_rotary_factor must be a number in"):
        check_config(config)
    config["text_config"]["rope_parameters"]["full_attention"]["partial_rotary_factor"] = 0.25
    assert check_config(config) == []
