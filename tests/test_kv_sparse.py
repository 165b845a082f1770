"""Sparse-attention KV caches (DeepSeek Sparse Attention: deepseek_v32, glm_moe_dsa; MiniMax-M3 block-sparse
layers) under `--engine vllm`, against vLLM's rules worked by hand; cache-shaping config values checked against
the weights; warnings about layers said once per cause.

vLLM rules followed (transformers' side is measured in tests/test_kv_truth.py):
- vllm/model_executor/models/deepseek_v2.py: Indexer.__init__ builds DeepseekV32IndexerCache, uint8, head_dim =
  index_head_dim + index_head_dim // 128 * 4 (fp8 values + one fp32 scale per 128), an MLAAttentionSpec with one
  head; vllm/v1/core/kv_cache_utils.py: it cannot merge with the latent's spec (different cache_dtype_str), so
  the group is a UniformTypeKVCacheSpecs whose per-layer page is the sum of both.
- vllm/v1/kv_cache_interface.py: MLAAttentionSpec.real_page_size_bytes: fp8 KV on DSA models is the packed
  fp8_ds_mla layout, 656 B per token (512 fp8 latent + 4 fp32 scales + 64 bf16 rope), not 576.
- vLLM's platform code forces block size 64 for the FlashMLA-sparse backend ("Forcing kv cache block size to 64");
  a MiniMax-M3-style index-key cache (one sparse_index_dim vector per token per sparse layer, not split by TP)
  uses blocks of 128.
"""

from __future__ import annotations

import functools
import json

import pytest

from stubs import FIXTURES, fixture_repo_ids, model_files

from hfmem.api import analyze_files
from hfmem.hub.header import TensorEntry
from hfmem.memory.kv import cdiv, estimate_kv
from hfmem.model.architecture import build_architecture

GLM = "zai-org/GLM-5.2"
M3 = "MiniMaxAI/MiniMax-M3-MXFP8"


def config(repo: str) -> dict:
    return json.loads((FIXTURES / "configs" / repo / "config.json").read_text())


@functools.lru_cache(maxsize=1)
def glm_5_2():
    """GLM-5.2 from its config and its (truncated: layers 0-3) tensor inventory: the weights fix qk_rope_head_dim."""
    return analyze_files(model_files(GLM)).architecture


def deepseek_v32_config() -> dict:
    """No DeepSeek-V3.2 config is in fixtures: DeepSeek-V3's with the fields DeepSeek-V3.2-Exp adds (model_type
    deepseek_v32, index_head_dim 128, index_n_heads 64, index_topk 2048; the defaults of transformers'
    DeepseekV32Config)."""
    cfg = config("deepseek-ai/DeepSeek-V3")
    return {**cfg, "model_type": "deepseek_v32", "architectures": ["DeepseekV32ForCausalLM"], "index_head_dim": 128,
            "index_n_heads": 64, "index_topk": 2048}


# --- GLM-5.2 ----------------------------------------------------------------------------------------------------


def test_glm_5_2_weights_fix_qk_rope_head_dim_once():
    report = analyze_files(model_files(GLM))
    arch = report.architecture
    assert (arch.mla.kv_lora_rank, arch.mla.qk_rope_head_dim) == (512, 64)  # kv_a_proj_with_mqa: [576, 6144]
    lines = [w for w in report.warnings if "qk_rope_head_dim" in w]
    assert lines == ["config.json qk_rope_head_dim 192 disagrees with the weights: kv_a_proj_with_mqa has 576 rows = "
                     "kv_lora_rank 512 + 64; using qk_rope_head_dim 64"]
    assert not any("qk_rope_head_dim 192" in n for n in report.notes)
    assert arch.index_head_dim == 128  # indexer.wk: [128, 6144], as the config says: no warning
    assert not any("index_head_dim" in w for w in report.warnings)


def test_glm_5_2_vllm_bf16_hand_worked():
    """78 layers of MLA latent (512 + 64) x 2 B = 1,152 B; 21 indexer layers (indexer_types 'full': layers 0-2 and
    every 4th from 6) add 128 + 4 = 132 B. Blocks of 64: page per block 78 x 64 x 1,152 + 21 x 64 x 132."""
    arch = glm_5_2()
    est = estimate_kv(arch, 131_072)
    assert est.block_size == 64
    assert est.bytes_per_token == 78 * 1152 + 21 * 132 == 92_628
    block = 78 * 64 * 1152 + 21 * 64 * 132
    assert est.bytes_per_block == block == 5_928_192
    assert est.total_bytes == cdiv(131_072, 64) * block == 12_140_937_216
    assert est.by_layer_type["sparse_mla"]["layers"] == 21 and est.by_layer_type["mla"]["layers"] == 57
    assert est.by_layer_type["sparse_mla"]["bytes_per_token"] == 21 * (1152 + 132)
    odd = estimate_kv(arch, 1000)  # whole blocks of 64: 16 blocks hold 1,024 tokens
    assert odd.total_bytes == 16 * block and odd.blocks_per_request == 16
    assert any("forces block_size 64" in a for a in est.assumptions)
    assert "indexer key (128 fp8 + 1 x 4 B scales = 132 B)" in est.formulas["sparse_mla"]
    assert not est.warnings


def test_glm_5_2_vllm_fp8_is_fp8_ds_mla():
    """fp8 KV: 656 B per token per layer (512 fp8 + 4 x 4 B + 64 x 2 B), indexer unchanged at 132 B."""
    est = estimate_kv(glm_5_2(), 131_072, kv_dtype="fp8")
    assert est.bytes_per_token == 78 * 656 + 21 * 132 == 53_940
    assert est.total_bytes == 2048 * 64 * 53_940 == 7_070_023_680
    assert "fp8_ds_mla (512 fp8 + 4 x 4 B scales + 64 x 2 B rope = 656 B)" in est.formulas["mla"]


def test_glm_5_2_transformers_and_tp():
    """transformers: latent 576 x 2 B on every layer + bf16 indexer keys 128 x 2 B on the 21 'full' layers
    (measured on the shrunk model in tests/test_kv_truth.py). Neither the latent nor the indexer key splits by TP."""
    arch = glm_5_2()
    hf = estimate_kv(arch, 131_072, engine="transformers")
    assert hf.bytes_per_token == 78 * 1152 + 21 * 256 == 95_232
    assert hf.total_bytes == 131_072 * 95_232
    assert estimate_kv(arch, 4096, tp=8).bytes_per_token == estimate_kv(arch, 4096).bytes_per_token


def test_glm_5_2_config_only_still_models_the_indexer():
    """Without weights the config's qk_rope_head_dim (192) is all there is; the indexer pattern still applies."""
    arch, _ = build_architecture(config(GLM))
    est = estimate_kv(arch, 4096)
    assert est.bytes_per_token == 78 * (512 + 192) * 2 + 21 * 132
    assert not est.warnings


# --- DeepSeek-V3.2 -------------------------------------------------------------------------------------------------


def test_deepseek_v32_indexer_on_every_layer():
    arch, _ = build_architecture(deepseek_v32_config())
    est = estimate_kv(arch, 131_072)
    assert est.block_size == 64 and est.by_layer_type["sparse_mla"]["layers"] == 61
    assert est.bytes_per_token == 61 * (1152 + 132) == 78_324
    assert est.total_bytes == 2048 * 64 * 78_324
    assert estimate_kv(arch, 131_072, kv_dtype="fp8").bytes_per_token == 61 * (656 + 132)
    assert estimate_kv(arch, 131_072, engine="transformers").bytes_per_token == 61 * (1152 + 256)


def test_plain_mla_is_unchanged():
    """DeepSeek-V3 (no indexer): the release's default block (16 up to 0.33, 64 from 0.34) and the 576-wide latent,
    fp8 576 B (not fp8_ds_mla)."""
    arch, _ = build_architecture(config("deepseek-ai/DeepSeek-V3"))
    est = estimate_kv(arch, 131_072, kv_dtype="fp8")
    assert est.block_size == 64 and est.bytes_per_token == 61 * 576
    assert estimate_kv(arch, 131_072, kv_dtype="fp8", vllm_release=(0, 33)).block_size == 16


# --- MiniMax-M3 ----------------------------------------------------------------------------------------------------


def test_minimax_m3_vllm_index_keys_block_128():
    """3 full + 57 sparse layers (sparse_attention_freq); 4 KV heads x 128 x 2 (K, V) x 2 B = 2,048 B per layer,
    plus one 128-wide bf16 index key (256 B) on sparse layers; blocks of 128."""
    report = analyze_files(model_files(M3))
    arch = report.architecture
    assert arch.index_head_dim == 128  # index_k_proj: [128, 6144] on layer 3, as sparse_index_dim says
    est = estimate_kv(arch, 131_072)
    assert est.block_size == 128
    assert est.bytes_per_token == 3 * 2048 + 57 * (2048 + 256) == 137_472
    assert est.bytes_per_block == 128 * 137_472
    assert est.total_bytes == 1024 * 128 * 137_472
    assert est.by_layer_type["sparse_attention"]["layers"] == 57
    tp4 = estimate_kv(arch, 131_072, tp=4)  # KV heads split 4 -> 1 per GPU; the index key is not split
    assert tp4.bytes_per_token == 3 * 512 + 57 * (512 + 256)
    assert estimate_kv(arch, 131_072, engine="transformers").bytes_per_token == 137_472


# --- weights are the truth for cache shapes ------------------------------------------------------------------------


def _entry(name: str, shape: tuple[int, ...]) -> TensorEntry:
    return TensorEntry(name, "BF16", shape, 0, 2 * shape[0] * shape[-1], "model.safetensors")


def test_index_head_dim_from_the_indexer_weights():
    cfg = {**deepseek_v32_config(), "num_hidden_layers": 2, "first_k_dense_replace": 2}
    cfg.pop("quantization_config")
    entries = [_entry("model.layers.0.self_attn.kv_a_proj_with_mqa.weight", (576, 7168)),
               _entry("model.layers.0.self_attn.indexer.wk.weight", (64, 7168))]
    arch, lines = build_architecture(cfg, entries)
    assert arch.index_head_dim == 64
    assert [x for x in lines if "index_head_dim" in x] == [
        "config.json index_head_dim 128 disagrees with the weights: the indexer's key projection indexer.wk.weight "
        "has 64 rows; using index_head_dim 64"]
    assert estimate_kv(arch, 64).bytes_per_token == 2 * (1152 + 64 + 0)  # 64 fp8 + 64 // 128 scales = 64 B


def test_kv_heads_from_k_proj():
    config_ = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
               "num_key_value_heads": 4, "vocab_size": 10, "intermediate_size": 128, "torch_dtype": "bfloat16"}
    arch, lines = build_architecture(config_, [_entry("model.layers.0.self_attn.k_proj.weight", (32, 64))])
    assert arch.num_kv_heads == 2
    assert lines == ["k_proj is [32, 64] but config gives 4 KV heads x head_dim 16 = 64; using 2 KV heads"]
    assert estimate_kv(arch, 16).bytes_per_token == 2 * 16 * 2 * 2


# --- warnings once -------------------------------------------------------------------------------------------------


def test_unmodelled_layer_type_warned_once_with_its_count():
    cfg = {"model_type": "not-a-real-type", "hidden_size": 64, "num_hidden_layers": 5, "num_attention_heads": 4,
           "vocab_size": 100, "layer_types": ["weird"] * 3 + ["full_attention", "odd"]}
    arch, _ = build_architecture(cfg)
    est = estimate_kv(arch, 16)
    assert est.warnings == ["3 layers of type 'weird': not modelled; counted as full attention",
                            "1 layer of type 'odd': not modelled; counted as full attention"]


def _line_lists(repo: str) -> list[list[str]]:
    """The analysis' warnings + notes, and each engine's KV warnings + assumptions (each list said once)."""
    report = analyze_files(model_files(repo))
    out = [list(report.warnings) + list(report.notes)]
    enc = 64 if report.architecture.is_encoder_decoder else None
    for engine in ("vllm", "transformers"):
        est = estimate_kv(report.architecture, 4096, engine=engine, encoder_len=enc)
        out.append(est.warnings + est.assumptions)
    return out


@pytest.mark.parametrize("repo", [r for r in fixture_repo_ids() if not r.startswith("hfmem-stubs/")])
def test_no_fixture_model_says_the_same_thing_twice(repo):
    for lines in _line_lists(repo):
        assert len(lines) == len(set(lines)), [x for x in lines if lines.count(x) > 1]
        if repo in (GLM, M3):
            assert not any("counted as" in x for x in lines), lines


def test_minimax_m3_raw_text_config_reads_sparse_attention_freq():
    """The shipped text_config alone has an empty model_type (read raw, no layer_types): the sparse layers come from
    sparse_attention_config.sparse_attention_freq, as MiniMaxM3VLTextConfig.__post_init__ derives them."""
    text = config(M3)["text_config"]
    arch, notes = build_architecture(text)
    assert arch.normalised_by == "raw config.json"
    est = estimate_kv(arch, 4096, kv_dtype="bf16")
    assert est.by_layer_type["sparse_attention"]["layers"] == 57 and est.block_size == 128
    assert est.bytes_per_token == 3 * 2048 + 57 * (2048 + 256)


def test_glm_5_2_config_only_flags_its_inconsistent_rope_width():
    _, lines = build_architecture(config(GLM))
    assert ("config.json qk_head_dim 256 != qk_nope_head_dim 192 + qk_rope_head_dim 192: the MLA rope width (cached "
            "per token) is uncertain without the weights; using qk_rope_head_dim 192") in lines


def test_glm_5_2_cli_says_each_warning_once(stub_repo):
    from click.testing import CliRunner

    from hfmem.cli import main

    for engine in ("vllm", "transformers"):
        result = CliRunner().invoke(main, [str(stub_repo(GLM)), "--ctx", "32k", "--engine", engine])
        assert result.exit_code == 0, result.output
        lines = [x for x in result.output.splitlines() if x.startswith("warning:")]
        assert len(lines) == len(set(lines)) and not any("counted as" in x for x in result.output.splitlines())
        assert sum("using qk_rope_head_dim 64" in x for x in lines) == 1


def _config_only_repos() -> list[str]:
    root = FIXTURES / "configs"
    return sorted(str(p.parent.relative_to(root)) for p in root.glob("*/*/config.json")
                  if not p.parent.parent.name.startswith("hfmem-stubs"))


@pytest.mark.parametrize("repo", _config_only_repos())
def test_no_fixture_config_says_the_same_thing_twice(repo):
    """Every fixture config, without weights: the architecture's lines and each engine's KV lines, each once."""
    arch, lines = build_architecture(config(repo))
    assert len(lines) == len(set(lines)), lines
    enc = 64 if arch.is_encoder_decoder else None
    for engine in ("vllm", "transformers"):
        est = estimate_kv(arch, 4096, engine=engine, encoder_len=enc, tp=8)
        said = est.warnings + est.assumptions
        assert len(said) == len(set(said)), [x for x in said if said.count(x) > 1]
