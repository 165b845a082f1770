"""LoRA trainable parameters equal peft's get_nb_trainable_parameters() on vision-language models and on the modules
beyond nn.Linear that PEFT wraps when they are named (peft tuners/lora/layer.py: dispatch_default: nn.Embedding,
nn.Conv1d/2d/3d): Qwen2.5-VL and Qwen3-VL (Conv3d patch embedding, Qwen3-VL's nn.Embedding position table, vision
Linears that all-linear includes), Gemma-3 (SigLIP Conv2d patch embedding and position table, tied output layer),
Whisper's input convolutions, Qwen3-Next's depthwise causal conv1d (PEFT needs rank % groups == 0). Where PEFT raises,
hfmem refuses too. Tiny shrunk real configs (fixtures/configs), random weights, built on CPU."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.truth

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

import training_measure as tm  # noqa: E402

import hfmem  # noqa: E402
from hfmem.errors import UsageError  # noqa: E402
from hfmem.memory.training import TrainingSettings, estimate_training  # noqa: E402

_TEXT = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             vocab_size=500, max_position_embeddings=512)
# Shrunk from fixtures/configs/Qwen/Qwen2.5-VL-7B-Instruct, Qwen/Qwen3-VL-30B-A3B-Instruct (dense text part),
# google/gemma-3-27b-it, openai/whisper-large-v3, Qwen/Qwen3-Next-80B-A3B-Instruct.
VLM = {
    "qwen2_5_vl": dict(
        text_config=dict(_TEXT, rope_scaling={"mrope_section": [2, 3, 3], "rope_type": "default", "type": "default"}),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, patch_size=14,
                           spatial_merge_size=2, temporal_patch_size=2, fullatt_block_indexes=[1], window_size=112)),
    "qwen3_vl": dict(
        text_config=dict(_TEXT, head_dim=16, rope_scaling={"mrope_section": [2, 3, 3], "rope_type": "default", "mrope_interleaved": True}),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, patch_size=16,
                           spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=64, deepstack_visual_indexes=[0, 1])),
    "gemma3": dict(
        text_config=dict(_TEXT, head_dim=16, sliding_window=64),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=56, patch_size=14),
        mm_tokens_per_image=4),
}
OTHER = {
    "whisper": lambda: tm.build_seq2seq("whisper", dict(
        d_model=64, encoder_ffn_dim=128, decoder_ffn_dim=128, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
        decoder_attention_heads=4, num_mel_bins=80, max_source_positions=32, max_target_positions=64, vocab_size=500,
        decoder_start_token_id=1, pad_token_id=0, eos_token_id=2, bos_token_id=2)),
    "qwen3_next": lambda: tm.build("qwen3_next", dict(
        _TEXT, moe_intermediate_size=32, shared_expert_intermediate_size=32, head_dim=16, num_experts=4, num_experts_per_tok=2,
        linear_num_value_heads=4, linear_num_key_heads=2, linear_key_head_dim=16, linear_value_head_dim=16,
        linear_conv_kernel_dim=4, layer_types=["linear_attention", "full_attention"])),
}


def _build_vlm(model_type: str):
    from transformers import AutoConfig, AutoModelForImageTextToText

    tm.quiet()
    torch.manual_seed(0)
    return AutoModelForImageTextToText.from_config(AutoConfig.for_model(model_type, **VLM[model_type]), dtype=torch.bfloat16)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("lora_multimodal")
    made: dict = {}

    def make(model_type: str):
        if model_type not in made:
            builder = (lambda: _build_vlm(model_type)) if model_type in VLM else OTHER[model_type]
            tm.save(builder(), root / model_type)
            made[model_type] = (hfmem.analyze(str(root / model_type)), builder)
        return made[model_type]

    return make


def _both(saved, model_type, spec, rank=8, dora=False):
    report, builder = saved(model_type)
    est = estimate_training(report, "lora", TrainingSettings(lora_rank=rank, lora_targets=spec, seq=32, dora=dora))
    model = tm.wrap_lora(builder(), spec if spec == "all-linear" else spec.split(","), rank=rank, dora=dora)
    return est, model


CASES = [
    ("qwen2_5_vl", "all-linear"),  # vision blocks and merger Linears included, Conv3d patch embedding not
    ("qwen2_5_vl", "proj"),  # vision attn.proj Linear + the Conv3d patch_embed.proj
    ("qwen2_5_vl", "qkv,proj"),
    ("qwen2_5_vl", "embed_tokens"),
    ("qwen3_vl", "all-linear"),  # the nn.Embedding pos_embed is not a Linear
    ("qwen3_vl", "proj"),
    ("qwen3_vl", "pos_embed"),
    ("gemma3", "all-linear"),
    ("gemma3", "patch_embedding"),  # SigLIP Conv2d
    ("gemma3", "position_embedding"),
    ("gemma3", "q_proj,lm_head"),  # tied output layer, not stored, wrapped when named
    ("whisper", "conv1,conv2"),
    ("whisper", "embed_positions"),
    ("qwen3_next", "all-linear"),
]


@pytest.mark.parametrize("model_type, spec", CASES)
def test_lora_trainable_equals_peft(saved, model_type, spec):
    est, model = _both(saved, model_type, spec)
    assert est.trainable_parameters == model.get_nb_trainable_parameters()[0]


@pytest.mark.parametrize("model_type, spec", [("gemma3", "patch_embedding,embed_tokens,q_proj"), ("whisper", "conv1,conv2")])
def test_dora_on_conv_and_embedding_equals_peft(saved, model_type, spec):
    est, model = _both(saved, model_type, spec, dora=True)
    assert est.trainable_parameters == model.get_nb_trainable_parameters()[0]


def test_depthwise_conv_follows_peft_rank_rule(saved):
    report, builder = saved("qwen3_next")
    with pytest.raises(ValueError, match="divisible by groups"):
        tm.wrap_lora(builder(), ["conv1d"], rank=8)
    with pytest.raises(UsageError, match="divisible by groups"):
        estimate_training(report, "lora", TrainingSettings(lora_rank=8, lora_targets="conv1d", seq=32))
    est, model = _both(saved, "qwen3_next", "conv1d", rank=256)  # 256 % 128 channels == 0: PEFT accepts it
    assert est.trainable_parameters == model.get_nb_trainable_parameters()[0]


def test_norm_target_refused_like_peft(saved):
    report, builder = saved("gemma3")
    with pytest.raises(ValueError, match="is not supported"):
        tm.wrap_lora(builder(), ["input_layernorm"], rank=8)
    with pytest.raises(UsageError, match="not supported"):
        estimate_training(report, "lora", TrainingSettings(lora_rank=8, lora_targets="input_layernorm", seq=32))


def test_tower_adapters_noted_and_not_in_text_activations(saved):
    report, _ = saved("qwen2_5_vl")
    est = estimate_training(report, "lora", TrainingSettings(lora_rank=8, seq=32))
    assert any("adapters on the" in n and "vision" in n for n in est.notes)
    text_only = estimate_training(report, "lora", TrainingSettings(lora_rank=8, seq=32, lora_targets="q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"))
    # the text Linears get the same adapters either way (the vision tower has qkv/proj and its own gate/up/down), so
    # the activation terms differ only by the vision MLP adapters, which text-only batches never run
    vision_mlp = {k: v for k, v in est.components.items() if k.startswith("activations")}
    assert vision_mlp == {k: v for k, v in text_only.components.items() if k.startswith("activations")}
