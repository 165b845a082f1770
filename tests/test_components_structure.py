"""Vision / audio towers and projectors found from structure (hfmem/model/components.py): the config's encoder
sub-configs and the tensors' module paths, not a list of module names. Checked against published encoder sizes and
against checkpoints whose towers are renamed to names no list knows (what one new model does)."""

from __future__ import annotations

import pytest
from stubs import load_config, load_inventory, model_files

from hfmem.api import analyze_files
from hfmem.model.components import structural_parts, tower_configs

MULTIMODAL = ["Qwen/Qwen2.5-VL-7B-Instruct", "Qwen/Qwen3-VL-30B-A3B-Instruct", "google/gemma-3-27b-it",
              "Qwen/Qwen3-Omni-30B-A3B-Instruct", "MiniMaxAI/MiniMax-M3-MXFP8", "moonshotai/Kimi-K2.5",
              "google/gemma-4-31B-it", "Qwen/Qwen3.5-0.8B-Base"]


def _parts(repo, rename=(), extra=()):
    tensors = load_inventory(repo)["tensors"]
    for old, new in rename:
        tensors = [[n.replace(old, new, 1) if n.startswith(old) else n, *rest] for n, *rest in tensors]
    return analyze_files(model_files(repo, tensors=tensors + list(extra))).parameters.by_part


def test_published_encoder_sizes():
    """Qwen2.5-VL technical report (arXiv:2502.13923, Table 1): the ViT with its merger is 675M parameters for every
    size; Gemma 3 technical report (Table 1): the SigLIP vision encoder is 417M."""
    qwen = _parts("Qwen/Qwen2.5-VL-7B-Instruct")
    assert abs((qwen["vision_tower"] + qwen["projector"]) / 675e6 - 1) < 0.005
    assert abs(_parts("google/gemma-3-27b-it")["vision_tower"] / 417e6 - 1) < 0.001


@pytest.mark.parametrize("repo", MULTIMODAL)
def test_every_multimodal_fixture_has_its_towers(repo):
    cfg = load_config(repo)
    parts = _parts(repo)
    kinds = {m for m, _ in tower_configs(cfg)}
    assert {"vision_tower": "vision", "audio_tower": "audio"}.keys() & parts.keys() == {f"{k}_tower" for k in kinds}
    assert parts["projector"] > 0 and parts["language_model"] > parts["vision_tower"]


def test_renamed_vision_tower_and_a_second_encoder_count_as_vision():
    """Qwen2.5-VL with its tower under a name no list knows, plus a SAM-style second encoder stored beside it
    (DeepSeek-OCR keeps sam_model next to vision_model): both are vision, the merger is still the projector."""
    repo = "Qwen/Qwen2.5-VL-7B-Instruct"
    base = _parts(repo)
    sam = [[f"model.sam_model.blocks.{i}.attn.qkv.weight", "BF16", [2304, 768], "model-00001-of-00004.safetensors"]
           for i in range(12)]
    renamed = _parts(repo, rename=[("model.visual.", "model.pixel_encoder.")], extra=sam)
    assert renamed["vision_tower"] == base["vision_tower"] + 12 * 2304 * 768
    assert renamed["projector"] == base["projector"]
    assert renamed["language_model"] == base["language_model"]


def test_renamed_audio_tower_found_by_its_depth():
    """Qwen3-Omni: two encoders in the config (vision depth 27, audio 32 layers); the audio tower renamed is matched
    to the audio sub-config by its number of blocks."""
    repo = "Qwen/Qwen3-Omni-30B-A3B-Instruct"
    base = _parts(repo)
    renamed = _parts(repo, rename=[("thinker.audio_tower.", "thinker.sound_encoder.")])
    assert renamed == base and base["audio_tower"] > 6e8


def test_text_only_models_have_no_structural_parts():
    files = model_files("Qwen/Qwen3-8B")
    entries = [t for h in files.headers for t in h.tensors]
    assert structural_parts(files.config, entries, 4096, 151936) == {}
