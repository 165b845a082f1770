"""Exact parameter totals from header-only stubs of real checkpoints, against independent counts."""

from __future__ import annotations

import pytest

import hfmem

# repo -> (expected logical total, where the number comes from). Independent of hfmem: the model reports the
# inventories were taken from, KerasHub's independent implementations, and the papers.
EXPECTED = {
    "Qwen/Qwen2-0.5B-Instruct": (494_032_768, "report of the real safetensors (tied, no lm_head stored)"),
    "Qwen/Qwen2-7B-Instruct": (7_615_616_512, "report of the real safetensors; same arch as Qwen2-7B"),
    "Qwen/Qwen2.5-0.5B": (494_032_768, "KerasHub qwen2.5_0.5b_en"),
    "Qwen/Qwen2.5-7B-Instruct": (7_615_616_512, "report of the real safetensors"),
    "Qwen/Qwen2.5-72B-Instruct": (72_706_203_648, "KerasHub qwen2.5_instruct_72b_en"),
    "Qwen/Qwen3-0.6B": (596_049_920, "KerasHub qwen3_0.6b_en (stored lm_head is a tied copy)"),
    "Qwen/Qwen3-8B": (8_190_735_360, "KerasHub qwen3_8b_en"),
    "Qwen/Qwen3-Coder-30B-A3B-Instruct": (30_532_122_624, "KerasHub qwen3_moe_30b_a3b_en (same architecture)"),
    "meta-llama/Llama-3.1-8B-Instruct": (8_030_261_248, "KerasHub llama3.1_8b; index total_size 16,060,522,496 / 2"),
    # The checkpoint also stores 32 rotary inv_freq buffers of 64 floats: 6,738,417,664 stored elements.
    "meta-llama/Llama-2-7b-hf": (6_738_415_616, "KerasHub llama2_7b_en"),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": (7_615_616_512, "Qwen2-7B architecture"),
    "deepseek-ai/DeepSeek-V2-Lite-Chat": (15_706_484_224, "report of the real safetensors"),
    # 671,026,419,200 main model + 13,463,426,304 MTP layer (from the config).
    "deepseek-ai/DeepSeek-V3": (684_489_845_504, "DeepSeek-V3 paper 671B + MTP module"),
    "unsloth/gpt-oss-20b-BF16": (20_914_757_184, "KerasHub gpt_oss_20b_en"),
    "Qwen/Qwen3-Next-80B-A3B-Instruct": (81_324_862_720, "report of the real safetensors (incl. mtp.*)"),
    # Derived inventories (transformers meta-device models from the real configs), against independent counts.
    "openai-community/gpt2": (124_439_808, "KerasHub gpt2_base_en"),
    "google-bert/bert-base-uncased": (109_482_240, "KerasHub bert_base_en_uncased (with pooler)"),
    "google-t5/t5-small": (60_506_624, "KerasHub t5_small_multi"),
    "mistralai/Mixtral-8x7B-v0.1": (46_702_792_704, "KerasHub mixtral_8_7b_en"),
    "mistralai/Mistral-7B-v0.1": (7_241_732_096, "KerasHub mistral_7b_en"),
    "google/gemma-2-9b-it": (9_241_705_984, "KerasHub gemma2_9b_en"),
    "microsoft/Phi-3-mini-4k-instruct": (3_821_079_552, "KerasHub phi3_mini_4k_instruct_en"),
    # KerasHub's gemma3_instruct_27b is 27,432,062,576 with a 262,144 vocab; HF's has 262,208 rows (+64 x 5376).
    "google/gemma-3-27b-it": (27_432_062_576 + 64 * 5376, "KerasHub gemma3_instruct_27b + 64 extra vocab rows"),
}

# Quantized checkpoints: the logical count equals the unquantized sibling's.
QUANTIZED = {
    "Qwen/Qwen3-8B-FP8": (8_190_735_360, 8_191_159_296),
    "TheBloke/Llama-2-7B-AWQ": (6_738_415_616, 1_128_828_928),
    "openai/gpt-oss-20b": (20_914_757_184, 11_956_805_184),
}


@pytest.mark.parametrize("repo", sorted(EXPECTED))
def test_total_parameters_exact(stub_repo, repo):
    expected, source = EXPECTED[repo]
    report = hfmem.analyze(str(stub_repo(repo)))
    assert report.parameters.total == expected, source
    assert report.parameters.active == report.parameters.total or report.architecture.moe
    assert sum(report.parameters.by_component.values()) == report.parameters.total


@pytest.mark.parametrize("repo", sorted(QUANTIZED))
def test_quantized_logical_count_matches_unquantized_sibling(stub_repo, repo):
    logical, stored = QUANTIZED[repo]
    report = hfmem.analyze(str(stub_repo(repo)))
    assert report.parameters.stored_elements == stored
    assert report.parameters.total == logical
    assert report.parameters.quantization is not None
    assert report.parameters.quantization.overhead_bytes > 0


def test_stored_bytes_equal_index_total_size(stub_repo):
    # Llama-3.1-8B's real index says total_size 16,060,522,496 (facts.json).
    report = hfmem.analyze(str(stub_repo("meta-llama/Llama-3.1-8B-Instruct")))
    assert report.parameters.stored_bytes == 16_060_522_496
    assert report.parameters.by_dtype == {"BF16": 8_030_261_248}


def test_tied_copy_counted_once_and_noted(stub_repo):
    report = hfmem.analyze(str(stub_repo("Qwen/Qwen3-0.6B")))
    assert report.parameters.stored_elements == 751_632_384
    assert report.parameters.tied_duplicate_elements == 151_936 * 1024
    assert "lm_head" not in report.parameters.by_component
    assert any("tie_word_embeddings" in n for n in report.notes)


def test_mtp_layers_are_their_own_component(stub_repo):
    report = hfmem.analyze(str(stub_repo("deepseek-ai/DeepSeek-V3")))
    assert report.parameters.by_component["mtp"] == 13_463_426_304
    assert any("multi-token-prediction" in n for n in report.notes)


def test_real_minilm_header(fixtures_dir):
    """The one fully real safetensors header we have: all-MiniLM-L6-v2 (22,713,216 F32 params + a 512 I64 buffer)."""
    report = hfmem.analyze(str(fixtures_dir / "models" / "sentence-transformers" / "all-MiniLM-L6-v2"))
    p = report.parameters
    assert p.total == 22_713_216
    assert p.by_dtype == {"F32": 22_713_216}
    assert p.buffers == 512
    assert p.stored_bytes + 8 + _header_len(fixtures_dir) == 90_868_376  # the real file size


def _header_len(fixtures_dir):
    import struct

    path = fixtures_dir / "models" / "sentence-transformers" / "all-MiniLM-L6-v2" / "model.safetensors"
    return struct.unpack("<Q", path.read_bytes()[:8])[0]
