"""The compiled config table (hfmem.model.fast_config) against transformers' AutoConfig.for_model, side by side: on
every config in fixtures/ (and variations that exercise the computations config classes perform) every field hfmem
reads is equal, and the Architecture built from either is identical. Configs the table cannot vouch for must fall
back (None), never differ."""

from __future__ import annotations

import copy
import json
import logging
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from hfmem.model import architecture, fast_config, normalise
from hfmem.model.config_table import TABLE

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted(
    [*(ROOT / "fixtures" / "configs").glob("*/*/config.json"), *(ROOT / "fixtures" / "normalise").glob("*/*/config.json"),
     *(ROOT / "fixtures" / "models").glob("*/*/config.json")]
)  # fmt: skip


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _transformers(config: dict[str, Any]) -> tuple[Any, Any] | None:
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            full, text, how, _ = normalise._normalise_config(copy.deepcopy(config))
    finally:
        logging.disable(logging.NOTSET)
    return (full, text) if how == "transformers" else None


def _variations(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Inputs that make config classes compute values: absent KV heads / head_dim / layer_types, a sliding window
    switched on, legacy rope_scaling + rope_theta + torch_dtype, a rejected value."""
    out = [config]
    for key in ("num_key_value_heads", "head_dim", "layer_types", "rope_parameters", "dtype", "mlp_only_layers"):
        if key in config:
            out.append({k: v for k, v in config.items() if k != key})
    out.append({**{k: v for k, v in config.items() if k != "layer_types"}, "use_sliding_window": True,
                "sliding_window": 4096, "max_window_layers": 2})
    legacy = {k: v for k, v in config.items() if k not in ("rope_parameters", "dtype")}
    legacy.update(rope_theta=500000.0, torch_dtype="float16", rope_scaling={
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192})
    out.append(legacy)
    out.append({**config, "num_hidden_layers": 3.0})  # a float where the class declares int: transformers rejects it
    out.append({**config, "hidden_act": "gelu"})
    out.append({**config, "_attn_implementation": "eager"})  # a property in 5.24 (falls back), skipped by 5.25
    for key, sub in config.items():  # a composite (text + vision): its sub-configs varied the same way
        if key.endswith("_config") and isinstance(sub, dict) and isinstance(sub.get("model_type"), str):
            out += [{**config, key: variant} for variant in _variations(sub)[1:]]
    return out  # fmt: skip


def _cases() -> list[Any]:
    return [pytest.param(p, id=str(p.parent.relative_to(ROOT / "fixtures"))) for p in CONFIGS]


def test_fixtures_are_there():
    assert len(CONFIGS) > 100  # fixtures/configs, fixtures/normalise (from ../shared/models) and fixtures/models


@pytest.mark.parametrize("path", _cases())
def test_fast_normaliser_equals_transformers(path):
    config = _load(path)
    for variant in _variations(config):
        fast = fast_config.fast_normalise(copy.deepcopy(variant))
        if fast is None:
            continue  # the table does not vouch for it: transformers is imported, nothing can differ
        slow = _transformers(variant)
        assert slow is not None, f"the table accepts a config transformers rejects: {sorted(variant)}"
        a, b = fast_config.used_view(*fast), fast_config.used_view(*slow)
        assert a == b


@pytest.mark.parametrize("path", _cases())
def test_architecture_identical(path, monkeypatch):
    """Whole Architecture (the JSON contract's part and the text config the KV/planner/training code read) and
    notes, fast path vs transformers."""
    config = _load(path)
    if fast_config.fast_normalise(config) is None:
        return  # outside the table (or declares custom code): transformers is imported, as the fallback tests check
    fast_arch, fast_notes = architecture.build_architecture(copy.deepcopy(config))
    monkeypatch.setattr(fast_config, "fast_normalise", lambda c: None)
    monkeypatch.setenv("HFMEM_DISABLE_CACHE", "1")
    slow_arch, slow_notes = architecture.build_architecture(copy.deepcopy(config))
    assert fast_arch.to_dict() == slow_arch.to_dict()
    assert fast_arch.layer_type_list == slow_arch.layer_type_list
    drop = fast_config.NOT_READ
    assert {k: v for k, v in fast_arch.text_config.items() if k not in drop} == fast_config._plain(
        {k: v for k, v in slow_arch.text_config.items() if k not in drop})
    assert fast_notes == [n for n in slow_notes if not n.startswith("config normalised by importing transformers")]


def test_covered_types_on_fixtures():
    """The fixtures' common families take the fast path (coverage cannot shrink unnoticed)."""
    types = {_load(p).get("model_type") for p in CONFIGS}
    covered = {t for t in types if fast_config.covered(t)}
    assert {"llama", "qwen2", "qwen3", "qwen3_moe", "mistral", "mixtral", "gpt_oss", "deepseek_v3", "gemma2",
            "bert", "gpt2", "qwen3_next", "glm4_moe_lite", "minimax_m2",
            # composite text + vision configs and the newest families
            "qwen3_5", "qwen3_5_moe", "qwen3_vl_moe", "glm_moe_dsa", "gemma3", "qwen2_5_vl", "phi3", "kimi_linear",
            "gemma4", "deepseek_v4", "falcon", "mamba", "t5", "whisper"} <= covered  # fmt: skip
    assert TABLE["transformers"]
    for path in CONFIGS:  # and the fixtures of the types added with their computations really take the fast path
        config = _load(path)
        if config.get("model_type") in ("qwen3_next", "glm4_moe_lite", "qwen3_5", "qwen3_5_moe", "qwen3_vl_moe",
                                        "glm_moe_dsa", "minimax_m2", "gemma3", "qwen2_5_vl", "phi3", "kimi_linear",
                                        "gemma4", "deepseek_v4", "falcon", "mamba", "t5", "whisper"):
            assert fast_config.fast_normalise(copy.deepcopy(config)) is not None, path


# Inputs for the computations of the classes added after the first table, where fixtures/ holds no config (qwen2_moe)
# or too few to reach every branch: sliding windows on/off and below/above max_window_layers, the linear-attention
# interval, the dense-first MLP layout; values transformers rejects must fall back.
_COMPUTED = [
    {"model_type": "qwen2_moe"},
    {"model_type": "qwen2_moe", "num_hidden_layers": 6, "use_sliding_window": True, "sliding_window": 128, "max_window_layers": 3},
    {"model_type": "qwen2_moe", "num_hidden_layers": 6, "use_sliding_window": False, "sliding_window": 128, "max_window_layers": 3},
    {"model_type": "qwen2_moe", "num_hidden_layers": 5, "use_sliding_window": True, "max_window_layers": None},
    {"model_type": "qwen2_moe", "num_hidden_layers": 4, "mlp_only_layers": [1], "num_key_value_heads": 2},
    {"model_type": "qwen3_next"},
    {"model_type": "qwen3_next", "num_hidden_layers": 6, "full_attention_interval": 2},
    {"model_type": "qwen3_next", "num_hidden_layers": 6, "full_attention_interval": 0},
    {"model_type": "qwen3_next", "num_hidden_layers": 4, "partial_rotary_factor": 0.5},
    {"model_type": "glm4_moe_lite"},
    {"model_type": "glm4_moe_lite", "num_hidden_layers": 5, "qk_nope_head_dim": 64, "qk_rope_head_dim": 32},
    {"model_type": "glm4_moe_lite", "num_hidden_layers": 3, "mlp_layer_types": ["dense", "dense", "sparse"]},
    # GLM-5's indexer schedule: an F/S pattern, a frequency and offset, a list; dense layers first; num_experts
    {"model_type": "glm_moe_dsa"},
    {"model_type": "glm_moe_dsa", "num_hidden_layers": 6, "index_topk_pattern": "FFSSFS", "first_k_dense_replace": 2},
    {"model_type": "glm_moe_dsa", "num_hidden_layers": 8, "index_topk_freq": 3, "index_skip_topk_offset": 1},
    {"model_type": "glm_moe_dsa", "num_hidden_layers": 4, "index_topk_pattern": ["full", "shared", "full", "full"],
     "num_experts": 16, "first_k_dense_replace": 9},
    {"model_type": "glm_moe_dsa", "num_hidden_layers": 3, "index_topk_pattern": "FXS"},  # KeyError: falls back
    # Llama 4: NoPE interval, chunked attention on RoPE layers, interleaved MoE layers
    {"model_type": "llama4"},
    {"model_type": "llama4", "text_config": {"num_hidden_layers": 8, "no_rope_layer_interval": 3,
                                             "interleave_moe_layer_step": 2, "attention_chunk_size": 1024}},
    {"model_type": "llama4", "text_config": {"num_hidden_layers": 4, "no_rope_layer_interval": 0}},
    {"model_type": "llama4", "text_config": {"num_hidden_layers": 4, "attention_chunk_size": None,
                                             "no_rope_layers": [1, 0, 1, 1], "num_key_value_heads": None}},
    # Qwen-VL composites: an old checkpoint's vision model_type, a head_dim of 0, sub-configs as null
    {"model_type": "qwen3_vl_moe", "vision_config": {"model_type": "qwen3_vl_moe", "depth": 2},
     "text_config": {"head_dim": 0, "num_hidden_layers": 2}},
    {"model_type": "qwen3_5", "vision_config": {"model_type": "qwen3_5"}, "text_config": None},
    {"model_type": "qwen3_5_moe", "text_config": {"num_hidden_layers": 6, "full_attention_interval": 3}},
    {"model_type": "qwen3_5", "text_config": [1, 2]},  # TypeError in transformers: falls back
    {"model_type": "mistral3", "text_config": {"model_type": "mistral", "num_hidden_layers": 3}},
    {"model_type": "mistral3", "text_config": {"model_type": "nemotron_h"}},  # a type outside the table: falls back
    # Gemma 3: RoPE per attention kind (rope_scaling on full layers, rope_local_base_freq on sliding ones), the
    # sliding pattern, a bidirectional window (halved plus one, serialised as it was)
    {"model_type": "gemma3"},
    {"model_type": "gemma3", "text_config": {"num_hidden_layers": 7, "sliding_window_pattern": 3, "rope_theta": 5e5,
                                             "rope_local_base_freq": 2e4, "rope_scaling": {"rope_type": "linear", "factor": 8.0}}},
    {"model_type": "gemma3_text", "use_bidirectional_attention": True, "sliding_window": 512, "num_hidden_layers": 4},
    {"model_type": "gemma3_text", "num_hidden_layers": 4, "sliding_window_pattern": 1,
     "rope_parameters": {"full_attention": {"rope_type": "yarn", "factor": 4.0}}},
    {"model_type": "gemma3_text", "num_hidden_layers": 4, "sliding_window_pattern": 0},
    # Qwen2.5-VL: a flat config's text keys moved into text_config (with torch_dtype), the legacy "mrope" rope type
    # read as default, tie_word_embeddings forwarded from a text_config
    {"model_type": "qwen2_5_vl", "hidden_size": 1024, "num_attention_heads": 8, "num_hidden_layers": 4,
     "torch_dtype": "bfloat16", "rope_theta": 1e6, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
     "vision_config": {"model_type": "qwen2_5_vl", "depth": 2}},
    {"model_type": "qwen2_5_vl", "text_config": {"tie_word_embeddings": True, "num_hidden_layers": 2,
                                                 "use_sliding_window": True, "sliding_window": 64, "max_window_layers": 1}},
    {"model_type": "qwen2_5_vl", "num_hidden_layers": 2, "rope_scaling": {"rope_type": "yarn", "factor": 2.0}},
    # Phi-3: the legacy "su" type read as longrope with its factor lists checked against the rotary dimension, its
    # own default theta, partial_rotary_factor read from the config
    {"model_type": "phi3", "hidden_size": 256, "num_attention_heads": 4, "num_hidden_layers": 2,
     "original_max_position_embeddings": 4096, "max_position_embeddings": 131072,
     "rope_scaling": {"type": "su", "short_factor": [1.0] * 32, "long_factor": [2.0] * 32}},
    {"model_type": "phi3", "hidden_size": 256, "num_attention_heads": 4, "num_hidden_layers": 2,
     "partial_rotary_factor": 0.5, "rope_scaling": {"type": "longrope", "short_factor": [1.0] * 16,
                                                     "long_factor": [1.0] * 16, "original_max_position_embeddings": 4096}},
    {"model_type": "phi3", "hidden_size": 256, "num_attention_heads": 4, "num_hidden_layers": 2,
     "original_max_position_embeddings": 4096,
     "rope_scaling": {"type": "su", "short_factor": [1.0] * 7, "long_factor": [2.0] * 32}},  # wrong length: rejected
    # Kimi-Linear: linear-attention sizes and 1-indexed layer lists from linear_attn_config, the default every-fourth
    # layout, dense MLP layers, a list that leaves a layer untyped (rejected)
    {"model_type": "kimi_linear", "num_hidden_layers": 6, "linear_attn_config": {
        "head_dim": 64, "num_heads": 8, "short_conv_kernel_size": 3, "full_attn_layers": [3, 6], "kda_layers": [1, 2, 4, 5]}},
    {"model_type": "kimi_linear", "num_hidden_layers": 9, "first_k_dense_replace": 3},
    {"model_type": "kimi_linear", "num_hidden_layers": 4, "linear_attn_config": {"full_attn_layers": [4], "kda_layers": [1, 2]}},
    # families with no fixture checkpoint: their defaults and the branches of their computations
    {"model_type": "smollm3", "num_hidden_layers": 8, "no_rope_layer_interval": 4},
    {"model_type": "smollm3", "num_hidden_layers": 8, "use_sliding_window": True, "sliding_window": 512,
     "num_key_value_heads": None},
    {"model_type": "olmo3", "num_hidden_layers": 8, "rope_theta": 5e5,
     "rope_scaling": {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 8192}},
    {"model_type": "seed_oss", "head_dim": None, "hidden_size": 1024, "num_attention_heads": 8},
    {"model_type": "ernie4_5", "num_key_value_heads": None},
    {"model_type": "hunyuan_v1_dense", "num_key_value_heads": None},
    {"model_type": "exaone4", "num_hidden_layers": 8, "sliding_window": 1024, "sliding_window_pattern": 4},
    {"model_type": "exaone4", "sliding_window": None},  # pattern 0: transformers raises, so this falls back
    {"model_type": "lfm2", "num_hidden_layers": 6, "full_attn_idxs": [2, 5], "tie_embedding": False, "block_ff_dim": 2048},
    {"model_type": "lfm2", "tie_embedding": "yes"},  # the strict dataclass rejects the assignment: falls back
    {"model_type": "apertus"},
    {"model_type": "apertus", "rope_parameters": {"rope_type": "default", "rope_theta": 1e6}},
    {"model_type": "glm4"},
    {"model_type": "glm4", "eos_token_id": 2, "partial_rotary_factor": 1.0},
    # DeepSeek-V4: the legacy keys its checkpoints ship (per-layer compress ratios one longer than the layers, hash
    # layers, qk_rope_head_dim, a per-kind rate, expert_dtype into the quantization config, flat yarn rope_scaling),
    # RoPE already nested under its labels, the default schedules; values transformers rejects fall back
    {"model_type": "deepseek_v4"},
    {"model_type": "deepseek_v4", "num_hidden_layers": 5, "compress_ratios": [0, 4, 128, 4, 0, 0], "num_hash_layers": 2,
     "qk_rope_head_dim": 32, "compress_rate_csa": 8, "rope_theta": 10000, "expert_dtype": "fp4",
     "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]},
     "rope_scaling": {"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536, "beta_fast": 32,
                      "beta_slow": 1}},
    {"model_type": "deepseek_v4", "num_hidden_layers": 4, "partial_rotary_factor": 0.25, "rope_parameters": {
        "main": {"rope_type": "default", "rope_theta": 1e4}, "factor": 2.0,
        "compress": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}}},
    {"model_type": "deepseek_v4", "num_hidden_layers": 1, "compress_rate_hca": 64, "mlp_layer_types": ["moe"]},
    {"model_type": "deepseek_v4", "num_hidden_layers": 3, "compress_ratios": [0, 8, 4]},  # no such ratio: KeyError
    {"model_type": "deepseek_v4", "num_hidden_layers": 2, "layer_types": ["full_attention", "sliding_attention"]},
    {"model_type": "deepseek_v4", "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 0}},
    {"model_type": "deepseek_v4", "num_hidden_layers": 4, "num_hash_layers": 2.5},  # list * float: TypeError
    # Gemma 4: per-layer overrides of the full-attention layers (global head_dim, global KV heads when K = V; none
    # left when they equal the global values), the last layer forced to full attention, bidirectional "all" window,
    # RoPE kept as given (no defaults filled in), KV-sharing layouts, the optional audio and vision towers
    {"model_type": "gemma4"},
    {"model_type": "gemma4_text", "num_hidden_layers": 8, "use_bidirectional_attention": "all", "sliding_window": 1024,
     "global_head_dim": 256, "head_dim": 256},
    {"model_type": "gemma4_text", "num_hidden_layers": 7, "num_global_key_value_heads": 2, "attention_k_eq_v": True,
     "num_kv_shared_layers": 3, "layer_types": ["sliding_attention", "full_attention"] * 3 + ["sliding_attention"]},
    {"model_type": "gemma4_text", "num_hidden_layers": 4, "num_global_key_value_heads": 2, "attention_k_eq_v": False,
     "num_kv_shared_layers": 4},
    {"model_type": "gemma4", "vision_config": {}, "audio_config": {"subsampling_conv_channels": [64, 16]},
     "text_config": {"num_hidden_layers": 12, "num_kv_shared_layers": 6, "rope_parameters": {
         "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
         "full_attention": {"rope_type": "proportional", "rope_theta": 1e6, "partial_rotary_factor": 0.25}}}},
    {"model_type": "gemma4_text", "num_hidden_layers": 2, "per_layer_config": {"1": {"head_dim": 128}}},  # its own
    {"model_type": "gemma4_text", "num_hidden_layers": 6, "global_head_dim": 512.5},  # a float head_dim: rejected
    {"model_type": "gemma4_text", "num_hidden_layers": 2,
     "layer_types": ["sliding_attention", "full_attention", "full_attention"]},  # a layer index past the last
    {"model_type": "gemma4_text", "num_hidden_layers": 2, "attention_chunk_size": 128},  # and a sliding window
    {"model_type": "gemma4_text", "num_hidden_layers": 6, "rope_parameters": {
        "sliding_attention": {"rope_type": "default"}, "full_attention": {"rope_type": "proportional"}}},  # no theta
    {"model_type": "gemma4", "audio_config": {"initializer_range": 1.5}},  # outside its interval [0, 1]
    # transformers' interval validator on a field (Llama's initializer_range): bounds included, outside rejected
    {"model_type": "llama", "initializer_range": 1.0},
    {"model_type": "llama", "initializer_range": 2.0},
    # RoPE values whose comparisons in the yarn / llama3 validators raise (they only warn otherwise)
    {"model_type": "llama", "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 0}},
    {"model_type": "llama", "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                             "high_freq_factor": "4", "original_max_position_embeddings": 8192}},
]  # fmt: skip


@pytest.mark.parametrize("config", _COMPUTED, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items())[:80])
def test_added_types_equal_transformers(config):
    fast = fast_config.fast_normalise(copy.deepcopy(config))
    slow = _transformers(config)
    if fast is None:
        return  # falls back: transformers decides, nothing can differ
    assert slow is not None, "the table accepts a config transformers rejects"
    assert fast_config.used_view(*fast) == fast_config.used_view(*slow)


def test_added_types_take_the_fast_path():
    """The accepted inputs above are really compared (a table that fell back on everything would pass the test
    above), and the inputs transformers rejects really fall back."""
    accepted = [c for c in _COMPUTED if fast_config.fast_normalise(copy.deepcopy(c)) is not None]
    assert {c["model_type"] for c in accepted} == {"qwen2_moe", "qwen3_next", "glm4_moe_lite", "glm_moe_dsa", "llama4",
                                                    "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "mistral3", "gemma3",
                                                    "gemma3_text", "qwen2_5_vl", "phi3", "kimi_linear", "smollm3",
                                                    "olmo3", "seed_oss", "ernie4_5", "hunyuan_v1_dense", "exaone4",
                                                    "lfm2", "apertus", "glm4", "deepseek_v4", "gemma4",
                                                    "gemma4_text", "llama"}
    # max_window_layers None, interval 0, an unknown indexer letter, NoPE interval 0, a list as text_config, a
    # sub-config type outside the table, a sliding pattern of 0, Phi-3 factors of the wrong length, an untyped
    # Kimi-Linear layer, EXAONE 4 without a window, a string tie_embedding; DeepSeek-V4's unknown compress ratio,
    # layer kind, zero original context and fractional hash layers; Gemma 4's own per_layer_config, float head_dim,
    # layer past the last, chunked sliding layers, RoPE without theta, audio initializer_range; Llama's, and its
    # yarn context of 0 and string frequency factor
    rejected = [_COMPUTED[i] for i in (3, 7, 16, 19, 24, 26, 31, 37, 40, 48, 50, *range(59, 63), *range(68, 74), 75,
                                       76, 77)]
    for config in rejected:
        assert fast_config.fast_normalise(copy.deepcopy(config)) is None, config
    # and transformers rejects them too, but for Gemma 4's own per_layer_config (accepted; only the table cannot say)
    assert [c for c in rejected[11:] if _transformers(c) is not None] == [_COMPUTED[68]]


@pytest.mark.parametrize("config", [_COMPUTED[i] for i in (65, 66, 67)] + [
    {"model_type": "gemma4_text", "num_hidden_layers": 6, "num_kv_shared_layers": 1}], ids=range(4))
def test_gemma4_kv_sharing_modes_property(config):
    """Gemma4TextConfig.kv_sharing_modes (a property the table replays as an attribute): equal to transformers', or
    absent where transformers raises (a shared layer kind, full attention here, with no earlier layer to store it)."""
    fast = fast_config.fast_normalise(copy.deepcopy(config))
    slow = _transformers(config)
    assert fast is not None and slow is not None
    try:
        expected = slow[1].kv_sharing_modes
    except ValueError:
        expected = None
    assert fast[1].kv_sharing_modes == expected
    if config.get("num_kv_shared_layers") == 1:
        assert expected is None  # the raising branch is exercised
    else:
        assert "reuse" in expected


_PROPERTY_NAMES = {"falcon": ("head_dim", "rotary", "num_key_value_heads"), "mamba": ("layer_types",),
                   "granitemoehybrid": ("time_step_limit", "layers_block_type"),
                   "falcon_h1": ("layers_block_type", "layer_types", "time_step_limit", "mamba_d_head"),
                   "mamba2": ("layer_types", "time_step_rank")}
# the decoder text config's attributes after the legacy split: renamed ones, their attribute_map aliases, and the
# deleted keys (which read as the class's default, or are absent)
_TEXT_NAMES = {"t5": ("num_hidden_layers", "num_attention_heads", "num_decoder_layers", "start_token_id",
                      "decoder_start_token_id", "dense_act_fn", "is_gated_act", "scale_decoder_outputs",
                      "tie_word_embeddings", "layers", "attention_heads", "vocab_size", "decoder_x"),
               "whisper": ("num_hidden_layers", "num_attention_heads", "num_key_value_heads", "encoder_layers",
                           "encoder_attention_heads", "decoder_layers", "decoder_attention_heads", "ffn_dim",
                           "decoder_ffn_dim", "start_token_id", "decoder_start_token_id", "layerdrop", "hidden",
                           "vocab_size", "hidden_size")}


def _random_config(rng: Any, model_type: str) -> dict[str, Any]:
    """A config of a type with computations (Gemma 4 text, DeepSeek-V4, Falcon, Mamba, Granite 4 hybrid, Hunyuan-V1-MoE,
    Falcon-H1, Mamba-2, T5, Whisper)
    with each key of its rules present or not, at values that take every branch (or are rejected: wrong lengths,
    types and kinds)."""
    n = rng.choice([0, 1, 2, 5, 6, 7])
    choices: dict[str, list[Any]] = {
        "gemma4_text": {
            "layer_types": [None, [rng.choice(["sliding_attention", "full_attention"]) for _ in range(n)],
                            ["full_attention"] * (n + 1), []],
            "global_head_dim": [512, 256, 512.0], "head_dim": [256, 512], "num_global_key_value_heads": [1, 4, None],
            "num_key_value_heads": [1, 4], "attention_k_eq_v": [True, False], "attention_chunk_size": [128],
            "use_bidirectional_attention": [None, "all", "vision"], "sliding_window": [512, 7, None],
            "num_kv_shared_layers": [0, 1, 2, n], "rope_theta": [1e4],
            "rope_parameters": [None, {"rope_type": "default", "rope_theta": 1e4},
                                {"sliding_attention": None, "full_attention": {"rope_type": "linear", "factor": 2.0}},
                                {"full_attention": {"rope_type": "yarn", "factor": 4.0}}]},
        "deepseek_v4": {
            "compress_ratios": [[rng.choice([0, 4, 128]) for _ in range(n + 1)], [0, 8], [4.0] * n],
            "layer_types": [None, [rng.choice(["sliding_attention", "compressed_sparse_attention"]) for _ in range(n)],
                            ["full_attention"] * n],
            "num_hash_layers": [0, 3, 10], "mlp_layer_types": [["moe"] * n, ["dense"] * n], "qk_rope_head_dim": [64, 0],
            "partial_rotary_factor": [None, 0.5], "head_dim": [512, 0], "compress_rate_csa": [8],
            "compress_rates": [{"compressed_sparse_attention": 2}], "rope_theta": [10000, "x"],
            "expert_dtype": ["fp4"], "quantization_config": [{"quant_method": "fp8"}],
            "rope_scaling": [{"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536}, {"rope_type": "x"}],
            "rope_parameters": [{"main": {"rope_type": "default"}, "compress": {"rope_type": "linear", "factor": 2.0}},
                                {"rope_type": "yarn", "factor": 2.0}]},
        # the types added with read-only properties (Falcon's head_dim and rotary, Mamba's layer_types: a config.json
        # naming one is rejected), Granite 4 hybrid's Mamba head size, infinite time-step bound and layer kinds, and
        # Hunyuan-V1-MoE (whose own RoPE check nothing calls: its dicts are validated as any class's)
        "falcon": {
            "n_embed": [256, 4544, 64.0], "hidden_size": [512, 4544], "num_attention_heads": [8, 71, 0],
            "num_kv_heads": [None, 1, 8], "new_decoder_architecture": [True, False, None],
            "multi_query": [True, False, None], "alibi": [True, False, None], "ffn_hidden_size": [None, 1024],
            "head_dim": [64], "rotary": [True], "rope_theta": [1e4, 5e5],
            "rope_scaling": [{"rope_type": "linear", "factor": 2.0}, {"rope_type": "yarn"}]},
        "mamba": {
            "expand": [2, 3, 1.5], "hidden_size": [768, 2560, 100], "time_step_rank": ["auto", 160, "x", 2.0],
            "intermediate_size": [5120], "layer_types": [["linear_attention"] * n], "num_key_value_heads": [4],
            "mlp_layer_types": [["dense"] * n, ["moe"] * n, ["dense"] * (n + 1)], "state_size": [16, 128]},
        "granitemoehybrid": {
            "mamba_d_head": ["auto", 64, 32, "x"], "mamba_n_heads": [128, 64, 0, 3], "mamba_expand": [2, None],
            "hidden_size": [4096, 1536], "time_step_limit": [[0.0, 100.0], None, [0, 1]],
            "layer_types": [None, [rng.choice(["mamba", "attention"]) for _ in range(n)], ["mamba"] * (n + 1)],
            "layers_block_type": [["attention"] * n], "num_key_value_heads": [None, 4],
            "position_embedding_type": ["nope", "rope"], "rope_theta": [1e4, 1e7],
            "num_local_experts": [0, 72], "num_experts_per_tok": [10]},
        # Falcon-H1: Granite 4 hybrid's computations with mamba_d_ssm, a layers_block_type property its layer_types
        # names (attribute_map); Mamba-2: time_step_rank "auto", heads * head_dim against hidden_size * expand
        "falcon_h1": {
            "mamba_d_ssm": [None, 1024, 1536], "mamba_d_head": ["auto", 64, 8], "mamba_n_heads": [128, 64, 0, 24],
            "mamba_expand": [2, None], "hidden_size": [4096, 1536, 1024], "time_step_limit": [[0.0, 100.0], None],
            "mlp_multipliers": [None, [0.5, 2.0]], "ssm_multipliers": [None, [1.0] * 5], "num_key_value_heads": [None, 2],
            "layer_types": [["hybrid"] * n], "layers_block_type": [["hybrid"] * n], "rope_theta": [1e4, 1e11]},
        "mamba2": {
            "hidden_size": [4096, 2560, 768], "expand": [2, 1], "num_heads": [128, 80, 24], "head_dim": [64, 32],
            "time_step_rank": ["auto", 256, "x"], "time_step_limit": [[0.0, 100.0], [0.0]], "n_groups": [1, 8],
            "layer_types": [["linear_attention"] * n], "mlp_layer_types": [["dense"] * n, ["moe"] * n]},
        # legacy encoder-decoders: the decoder text config is a copy with decoder_* keys renamed (onto a field the
        # strict dataclass checks, onto an attribute_map alias, onto another renamed key: falls back)
        "t5": {
            "feed_forward_proj": ["relu", "gated-gelu", "gated-silu", "foo-bar", "a-b-c"], "num_decoder_layers": [None, 3],
            "tie_word_embeddings": [True, False], "decoder_start_token_id": [0, None], "num_layers": [6, 24],
            "decoder_layers": [5], "decoder_attention_heads": [4], "decoder_vocab_size": [100, "x"],
            "decoder_decoder_x": [1], "is_encoder_decoder": [True, False], "d_kv": [64, 128]},
        "whisper": {
            "decoder_layers": [2, 32], "encoder_layers": [4, 32], "decoder_attention_heads": [20, 6],
            "decoder_ffn_dim": [5120], "ffn_dim": [7], "decoder_start_token_id": [50258, 1.5],
            "decoder_vocab_size": [7, "x"], "decoder_hidden": [3], "is_encoder_decoder": [True, False],
            "d_model": [1280, 384], "num_hidden_layers": [12]},
        "hunyuan_v1_moe": {
            "num_key_value_heads": [None, 8], "num_experts": [16, 64], "moe_topk": [1, [8, 8], 8.0],
            "num_local_experts": [32], "num_experts_per_tok": [2], "head_dim": [128, None],
            "rope_scaling": [{"type": "dynamic", "alpha": 1000.0, "factor": 1.0}, {"type": "dynamic", "alpha": 1000.0}],
            "rope_theta": [1e4, 1e6], "rope_parameters": [{"rope_type": "dynamic", "factor": 2.0}]},
    }[model_type]
    config = {"model_type": model_type, "num_hidden_layers": n}
    config.update({key: rng.choice(values) for key, values in choices.items() if rng.random() < 0.4})
    return config


@pytest.mark.parametrize("model_type", ["gemma4_text", "deepseek_v4", "falcon", "mamba", "granitemoehybrid",
                                        "hunyuan_v1_moe", "falcon_h1", "mamba2", "t5", "whisper"])
def test_random_inputs_equal_transformers_whole_to_dict(model_type):
    """Seeded random configs through each rule's branches: every one the table accepts gives transformers' whole
    to_dict() (not only the keys hfmem reads) and, for Gemma 4, its kv_sharing_modes; some are accepted, and the
    table falls back only where transformers rejects."""
    import random

    rng = random.Random(4)
    accepted = 0
    for _ in range(60):
        config = _random_config(rng, model_type)
        fast = fast_config.fast_normalise(copy.deepcopy(config))
        slow = _transformers(config)
        if fast is None:
            assert slow is None, config  # a fallback only where transformers rejects it
            continue
        accepted += 1
        assert slow is not None, config
        keep = lambda d: {k: fast_config._plain(v) for k, v in d.items() if k != "transformers_version"}  # noqa: E731
        # as hfmem reads both (normalise.as_dict: to_dict(), and a layer_types property such as Mamba's made explicit)
        assert keep(normalise.as_dict(fast[0])) == keep(normalise.as_dict(slow[0])), config
        for name in _PROPERTY_NAMES.get(model_type, ()):  # the replayed read-only properties, read as attributes
            assert getattr(fast[0], name, None) == getattr(slow[0], name, None), (name, config)
        assert keep(normalise.as_dict(fast[1])) == keep(normalise.as_dict(slow[1])), config  # the decoder text config
        assert (fast[1] is fast[0]) == (slow[1] is slow[0]), config
        for name in _TEXT_NAMES.get(model_type, ()):
            assert getattr(fast[1], name, None) == getattr(slow[1], name, None), (name, config)
        if model_type == "gemma4_text":
            try:
                modes = slow[0].kv_sharing_modes
            except ValueError:
                modes = None
            assert fast[0].kv_sharing_modes == modes, config
    assert accepted >= 10


def test_outside_the_table_falls_back_with_a_note():
    config = _load(ROOT / "fixtures" / "configs" / "nvidia" / "Nemotron-H-56B-Base-8K" / "config.json")
    assert fast_config.fast_normalise(config) is None
    _, _, how, notes = normalise.normalise_config(config)
    assert how == "transformers"
    assert any("'nemotron_h' is not in hfmem's compiled table" in n for n in notes)
    qwen = _load(ROOT / "fixtures" / "configs" / "Qwen" / "Qwen2-7B-Instruct" / "config.json")
    assert normalise.normalise_config(qwen)[3] == []


def test_installed_release_is_verified():
    """CI and the second venv run this file under each release the table claims: the installed one must be among
    them, and the table, once selected, must say that release (known_types is checked against transformers below)."""
    from importlib.metadata import version

    installed = version("transformers")
    assert installed in TABLE["releases"], (installed, list(TABLE["releases"]))
    assert fast_config.table_applies() and fast_config.installed_transformers() == installed
    assert TABLE["transformers"] == installed
    assert fast_config.fast_normalise({"model_type": "llama"})[0].to_dict()["transformers_version"] == installed


def test_every_release_overlay_selects():
    """Each verified release's overlay applies on the body; a release not verified is refused (the import fallback)."""
    namespace: dict[str, Any] = {}  # the module as written (the imported TABLE has had the installed release applied)
    exec((ROOT / "hfmem" / "model" / "config_table.py").read_text(), namespace)
    body = namespace["TABLE"]
    for release in body["releases"]:
        one = copy.deepcopy(body)
        assert fast_config.select_release(one, release) and one["transformers"] == release
        assert set(one) == set(body) and one["types"]  # the same knowledge, for that release
    assert "5.24.0" in body["releases"] and "5.25.0" in body["releases"]
    older = copy.deepcopy(body)
    fast_config.select_release(older, "5.24.0")
    assert "_attn_implementation" not in older["ignored_keys"] and "_attn_implementation" in body["ignored_keys"]
    assert "minicpm5_moe" not in older["known_types"] and "minicpm5_moe" in body["known_types"]  # new in 5.25
    assert not fast_config.select_release(copy.deepcopy(body), "5.23.0")


def test_other_transformers_version_falls_back(monkeypatch):
    monkeypatch.setattr(fast_config, "_version_ok", False)
    config = _load(ROOT / "fixtures" / "configs" / "Qwen" / "Qwen2-7B-Instruct" / "config.json")
    assert fast_config.fast_normalise(config) is None
    assert "another version is installed" in fast_config.fallback_note("qwen2")


def test_not_read_keys_are_not_read():
    """NOT_READ (keys the side-by-side comparison skips) must stay unread by the code that reads text_config."""
    # model/components.py names config keys only to skip them when it looks for encoder sub-configs (_NOT_TOWERS)
    sources = [p for p in (ROOT / "hfmem").rglob("*.py") if p.name not in ("fast_config.py", "normalise.py", "components.py")]
    for key in fast_config.NOT_READ:
        hits = [p.name for p in sources if f'"{key}"' in p.read_text()]
        assert not hits, (key, hits)


def _fresh_python(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -c CODE`` (one argument) or ``python ARGS...`` in a fresh process at the repository root, caches off:
    what a run imports shows there, not in this test process."""
    env = {**__import__("os").environ, "HFMEM_DISABLE_CACHE": "1", "PYTHONPATH": str(ROOT)}
    argv = ["-c", args[0]] if len(args) == 1 else list(args)
    return subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_run_imports_no_transformers_numpy_torch():
    """`hfmem REPO` on a model type in the table imports none of the heavy modules (checked by module, not time)."""
    code = (
        "import sys, io, contextlib\nfrom hfmem.cli import main\n"
        "try:\n"  # main, not python -m hfmem, whose exit skips the print below (hfmem.cli.run)
        "    with contextlib.redirect_stdout(io.StringIO()): main(['fixtures/models/Qwen/Qwen2-7B-Instruct', '--format', 'json'])\n"
        "except SystemExit as e: assert not e.code, e.code\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'transformers', 'torch', 'safetensors'}))"
    )
    out = _fresh_python(code)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
    # and -X importtime agrees (every imported module is listed on stderr)
    timed = _fresh_python("-X", "importtime", "-m", "hfmem", "fixtures/models/Qwen/Qwen2-7B-Instruct")
    assert timed.returncode == 0, timed.stderr[-2000:]
    imported = {line.split("|")[-1].strip().split(".")[0] for line in timed.stderr.splitlines() if "import time:" in line}
    assert "hfmem" in imported
    assert not imported & {"numpy", "transformers", "torch"}
    # Training estimators and their tables load only for --train (the CLI needs just the option choices).
    modules = {line.split("|")[-1].strip() for line in timed.stderr.splitlines() if "import time:" in line}
    assert not modules & {"hfmem.memory.training.estimate", "hfmem.memory.training.activations", "hfmem.render.training"}
    # A local folder needs no Hub client: huggingface_hub, hfmem's Hub reader and its thread pools stay unimported.
    assert not imported & {"huggingface_hub", "httpx", "httpx2"}
    assert not modules & {"hfmem.hub.remote", "concurrent.futures"}


@pytest.mark.parametrize("repo", ["moonshotai/Kimi-K3", "custom-code"])
def test_type_unknown_to_transformers_read_raw_as_transformers_would(repo, monkeypatch):
    """A model_type transformers does not know: the compiled list of its types answers as AutoConfig.for_model's
    "Unrecognized model" does (raw config.json, the same notes), without importing transformers to be told."""
    if repo == "custom-code":
        config = _load(ROOT / "fixtures" / "configs" / "Qwen" / "Qwen2-7B-Instruct" / "config.json")
        config.update(model_type="my_custom_lm", auto_map={"AutoConfig": "configuration_my.MyConfig"})
    else:
        config = _load(ROOT / "fixtures" / "configs" / repo / "config.json")
    monkeypatch.setenv("HFMEM_DISABLE_CACHE", "1")
    assert config["model_type"] not in fast_config.TABLE["known_types"]
    fast = normalise.normalise_config(copy.deepcopy(config))
    monkeypatch.setattr(normalise, "_unknown_to_transformers", lambda model_type: False)
    imported = normalise._normalise_config(copy.deepcopy(config))  # imports transformers and asks it
    assert fast[2] == imported[2] == "raw config.json"
    assert fast[3] == imported[3]
    assert fast[0] == imported[0] and normalise.as_dict(fast[1]) == normalise.as_dict(imported[1])
    if repo == "moonshotai/Kimi-K3":  # its kimi_linear text_config is read with kimi_linear's compiled rules
        assert list(fast[1].layer_types).count("linear_attention") == 69
        assert any("read with transformers' kimi_linear rules" in n for n in fast[3])


def test_known_types_are_transformers_own():
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    assert sorted(CONFIG_MAPPING_NAMES) == fast_config.TABLE["known_types"]


def test_type_unknown_to_transformers_imports_no_transformers():
    code = (
        "import json, sys; from hfmem.model.normalise import normalise_config;"
        "c = json.load(open('fixtures/configs/moonshotai/Kimi-K3/config.json'));"
        "print(normalise_config(c)[2], 'transformers' in sys.modules)"
    )
    out = _fresh_python(code)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["raw", "config.json", "False"]


@pytest.mark.parametrize("repo", ["Qwen/Qwen3-VL-30B-A3B-Instruct", "Qwen/Qwen3.5-0.8B-Base", "zai-org/GLM-5.2",
                                  "google/gemma-4-31B-it", "deepseek-ai/DeepSeek-V4-Flash"])
def test_composite_and_newest_configs_import_no_transformers(repo):
    """A composite (text + vision) config, GLM-5's, Gemma 4's (per-layer overrides) and DeepSeek-V4's are normalised
    from the table, in a fresh process that then holds no transformers, torch or numpy module."""
    path = ROOT / "fixtures" / "configs" / repo / "config.json"
    code = (
        "import sys, json\nfrom hfmem.model.normalise import normalise_config\n"
        f"full, text, how, notes = normalise_config(json.load(open({str(path)!r})))\n"
        "assert how == 'transformers' and not any('importing transformers' in n for n in notes), notes\n"
        "assert text.num_hidden_layers and text.model_type != full.model_type or full is text\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'transformers', 'torch'}))"
    )
    out = _fresh_python(code)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_release_comparison():
    """hfmem.model.release.at_least reads the release strings pip installs (the KV counter and the Mamba-2 scan output
    switch on it); the installed release is the one the table selected."""
    from importlib.metadata import version

    from hfmem.model import release

    assert release.installed() == version("transformers")
    cases = {"5.24.0": False, "5.25.0": True, "5.25.1": True, "5.26.0.dev0": True, "5.25rc1": True, "5.9.0": False,
             "6.0.0": True, "4.57.3": False}
    assert {r: release.at_least(5, 25, r) for r in cases} == cases
