"""Composite models: ``parameters.by_part`` splits language model, vision tower, audio tower, projector and speech
generator. Truth: the same sub-models built by transformers from the config on the meta device (no weights), and
the text-only sibling checkpoints for the language model. Architecture facts (KV, training) come from text_config.
"""

from __future__ import annotations

from functools import lru_cache

import pytest

from hfmem.api import analyze_files
from stubs import load_config, model_files

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


@lru_cache(maxsize=None)
def report(repo: str):
    return analyze_files(model_files(repo))


def _config(repo):
    c = load_config(repo)
    return transformers.AutoConfig.for_model(c["model_type"], **{k: v for k, v in c.items() if k != "model_type"})


def _n(module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_gemma3_split_matches_transformers_submodules():
    from transformers.models.gemma3 import modeling_gemma3

    cfg = _config("google/gemma-3-27b-it")
    with torch.device("meta"):
        tower, projector = transformers.AutoModel.from_config(cfg.vision_config), modeling_gemma3.Gemma3MultiModalProjector(cfg)
    r = report("google/gemma-3-27b-it")
    parts = r.parameters.by_part
    assert parts["vision_tower"] == _n(tower) == 416_866_032
    assert parts["projector"] == _n(projector)
    assert parts["language_model"] == r.parameters.total - _n(tower) - _n(projector)
    # KV cache and training use the language model's config, weights count everything
    text = load_config("google/gemma-3-27b-it")["text_config"]
    assert (r.architecture.num_layers, r.architecture.hidden_size) == (text["num_hidden_layers"], text["hidden_size"])


def test_qwen25_vl_split_and_language_model_equals_text_sibling():
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl

    cfg = _config("Qwen/Qwen2.5-VL-7B-Instruct")
    with torch.device("meta"):
        visual = modeling_qwen2_5_vl.Qwen2_5_VisionTransformerPretrainedModel._from_config(cfg.vision_config)
    parts = report("Qwen/Qwen2.5-VL-7B-Instruct").parameters.by_part
    assert parts["vision_tower"] + parts["projector"] == _n(visual)
    assert parts["projector"] == _n(visual.merger)
    assert parts["language_model"] == report("Qwen/Qwen2.5-7B-Instruct").parameters.total


def test_qwen3_vl_moe_real_header_split():
    from transformers.models.qwen3_vl_moe import modeling_qwen3_vl_moe

    cfg = _config("Qwen/Qwen3-VL-30B-A3B-Instruct")
    with torch.device("meta"):
        visual = modeling_qwen3_vl_moe.Qwen3VLMoeVisionModel._from_config(cfg.vision_config)
    parts = report("Qwen/Qwen3-VL-30B-A3B-Instruct").parameters.by_part
    assert parts["vision_tower"] == _n(visual) - _n(visual.merger) - _n(visual.deepstack_merger_list)
    assert parts["projector"] == _n(visual.merger) + _n(visual.deepstack_merger_list)
    # the language model is Qwen3-30B-A3B (KerasHub qwen3_moe_30b_a3b_en: 30,532,122,624)
    assert parts["language_model"] == report("Qwen/Qwen3-Coder-30B-A3B-Instruct").parameters.total == 30_532_122_624


def test_qwen3_omni_towers_and_speech_generator():
    from transformers.models.qwen3_omni_moe import modeling_qwen3_omni_moe as omni

    cfg = _config("Qwen/Qwen3-Omni-30B-A3B-Instruct")
    with torch.device("meta"):
        audio = omni.Qwen3OmniMoeAudioEncoder._from_config(cfg.thinker_config.audio_config)
        vision = omni.Qwen3OmniMoeVisionEncoder._from_config(cfg.thinker_config.vision_config)
        talker = omni.Qwen3OmniMoeTalkerForConditionalGeneration._from_config(cfg.talker_config)
        code2wav = omni.Qwen3OmniMoeCode2Wav._from_config(cfg.code2wav_config)
    parts = report("Qwen/Qwen3-Omni-30B-A3B-Instruct").parameters.by_part
    assert parts["audio_tower"] == _n(audio)
    assert parts["vision_tower"] + parts["projector"] == _n(vision)
    assert parts["speech_generator"] == _n(talker) + _n(code2wav)
