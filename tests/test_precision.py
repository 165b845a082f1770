"""Weights at each precision, per tensor: hand-checked byte counts, real quantized checkpoints, published GGUF sizes."""

from __future__ import annotations

import pytest

import hfmem
from hfmem.errors import UsageError
from hfmem.memory.precision import CHECKPOINT, PRECISIONS, for_report, ggml_row_bytes, resolve_precision


def _weights(stub_repo, repo):
    report = hfmem.analyze(str(stub_repo(repo)))
    return report, for_report(report)[1]


# Layout arithmetic written out independently of the implementation (see precision.py's docstring for sources).
def awq(out, inn):  # qweight I32 [in, out/8] + qzeros I32 [in/128, out/8] + scales F16 [in/128, out]
    return inn * out // 8 * 4 + inn // 128 * out // 8 * 4 + inn // 128 * out * 2


def gptq(out, inn):  # qweight I32 [in/8, out] + same zeros/scales + g_idx I32 [in]
    return inn // 8 * out * 4 + inn // 128 * out // 8 * 4 + inn // 128 * out * 2 + 4 * inn


def nf4(out, inn):  # packed codes + U8 absmax per 64 + F32 absmax per 256 blocks + F32 code tables [256] and [16]
    n = out * inn
    return n // 2 + n // 64 + 4 * -(-(n // 64) // 256) + 4 * 256 + 4 * 16


def fp8_block(out, inn):
    return out * inn + 4 * -(-out // 128) * -(-inn // 128)


def int8(out, inn):
    return out * inn + 4 * out


def mxfp4(out, inn):
    return out * (inn // 32) * 17


QWEN2_MATS = [(3584, 3584), (512, 3584), (512, 3584), (3584, 3584), (18944, 3584), (18944, 3584), (3584, 18944)]
QWEN2_L, QWEN2_H, QWEN2_V = 28, 3584, 152064
# unquantized: embeddings + lm_head, per layer 2 norms + q/k/v biases, final norm
QWEN2_UNQ = 2 * QWEN2_V * QWEN2_H + QWEN2_L * (2 * QWEN2_H + QWEN2_H + 512 + 512) + QWEN2_H


@pytest.mark.parametrize("key, layout", [("int4", awq), ("gptq", gptq), ("nf4", nf4), ("fp8-block", fp8_block),
                                         ("int8", int8), ("mxfp4", mxfp4)])
def test_qwen2_7b_by_hand(stub_repo, key, layout):
    _, wb = _weights(stub_repo, "Qwen/Qwen2-7B-Instruct")
    expected = QWEN2_L * sum(layout(o, i) for o, i in QWEN2_MATS) + 2 * QWEN2_UNQ
    assert wb.bytes[key] == expected
    assert wb.bytes["bf16"] == 2 * 7_615_616_512 == wb.bytes[CHECKPOINT]
    assert wb.bytes["fp32"] == 4 * 7_615_616_512
    assert wb.bytes["fp8"] == QWEN2_L * sum(o * i + 4 for o, i in QWEN2_MATS) + 2 * QWEN2_UNQ


def test_qwen2_7b_keeps_embeddings_lm_head_norms_and_biases_16bit(stub_repo):
    _, wb = _weights(stub_repo, "Qwen/Qwen2-7B-Instruct")
    for key in ("int4", "nf4", "fp8", "int8", "mxfp4"):
        kinds = wb.by_kind[key]
        assert kinds["embedding"] == kinds["lm_head"] == 2 * QWEN2_V * QWEN2_H
        assert kinds["vector"] == 2 * (QWEN2_L * (3 * QWEN2_H + 1024) + QWEN2_H)
    # a naive "params x 4 bits" would be 3.55 GiB; the 16-bit embeddings and head alone are 2.03 GiB
    assert wb.bytes["int4"] > 7_615_616_512 // 2 + 2 * QWEN2_V * QWEN2_H
    assert wb.quantized_params["int4"] == QWEN2_L * sum(o * i for o, i in QWEN2_MATS)


MIX_L, MIX_H, MIX_I, MIX_E, MIX_V = 32, 4096, 14336, 8, 32000
MIX_ATTN = [(4096, 4096), (1024, 4096), (1024, 4096), (4096, 4096)]  # q, k, v, o
# transformers v5 (and the fixture) store each expert's gate (w1) and up (w3) fused as one [2I, h] matrix, and
# down (w2) as [h, I]; the per-matrix constants of bitsandbytes follow that storage.
MIX_EXPERT = [(2 * MIX_I, MIX_H), (MIX_H, MIX_I)]
MIX_UNQ = 2 * MIX_V * MIX_H + MIX_L * (MIX_E * MIX_H + 2 * MIX_H) + MIX_H  # embed + head, router + norms, final norm


@pytest.mark.parametrize("key, layout", [("int4", awq), ("nf4", nf4), ("fp8-block", fp8_block), ("int8", int8)])
def test_mixtral_by_hand(stub_repo, key, layout):
    _, wb = _weights(stub_repo, "mistralai/Mixtral-8x7B-v0.1")
    per_layer = sum(layout(o, i) for o, i in MIX_ATTN) + MIX_E * sum(layout(o, i) for o, i in MIX_EXPERT)
    assert wb.bytes[key] == MIX_L * per_layer + 2 * MIX_UNQ
    assert wb.bytes["bf16"] == 2 * 46_702_792_704


def test_mixtral_mxfp4_only_experts(stub_repo):
    _, wb = _weights(stub_repo, "mistralai/Mixtral-8x7B-v0.1")
    attn = 2 * sum(o * i for o, i in MIX_ATTN)
    experts = MIX_E * sum(mxfp4(o, i) for o, i in MIX_EXPERT)
    assert wb.bytes["mxfp4"] == MIX_L * (attn + experts) + 2 * MIX_UNQ


def test_mixtral_q4_k_m_type_mix_by_hand(stub_repo):
    """llama.cpp Q4_K_M on an 8-expert model: attn_k/attn_v Q8_0, attn_output Q5_K, ffn_down Q6_K on
    use_more_bits layers (16 of 32), everything else Q4_K; output Q6_K; norms and router F32."""
    _, wb = _weights(stub_repo, "mistralai/Mixtral-8x7B-v0.1")
    q4k, q5k, q6k, q80 = (lambda n: n // 256 * 144), (lambda n: n // 256 * 176), (lambda n: n // 256 * 210), (lambda n: n // 32 * 34)
    more = [i for i in range(32) if i < 4 or i >= 28 or (i - 4) % 3 == 2]
    assert len(more) == 16
    per_layer_fixed = q4k(4096 * 4096) + 2 * q80(1024 * 4096) + q5k(4096 * 4096) + MIX_E * q4k(2 * MIX_I * MIX_H)
    down = sum(MIX_E * (q6k if i in more else q4k)(MIX_H * MIX_I) for i in range(32))
    f32 = 4 * (MIX_L * (MIX_E * MIX_H + 2 * MIX_H) + MIX_H)
    expected = MIX_L * per_layer_fixed + down + q4k(MIX_V * MIX_H) + q6k(MIX_V * MIX_H) + f32
    assert wb.bytes["q4_k_m"] == expected


def test_estimates_equal_real_quantized_checkpoints(stub_repo):
    """Re-quantizing a real quantized checkpoint's logical tensors reproduces its stored bytes exactly."""
    for repo, key in (("Qwen/Qwen3-32B-AWQ", "int4"), ("TheBloke/Llama-2-7B-AWQ", "int4"), ("openai/gpt-oss-20b", "mxfp4")):
        _, wb = _weights(stub_repo, repo)
        assert wb.bytes[key] == wb.bytes[CHECKPOINT], repo


def test_fp8_block_against_qwen3_8b_fp8(stub_repo):
    """Qwen3-8B (BF16) quantized to FP8 128x128 equals the published Qwen3-8B-FP8 checkpoint, except that the
    checkpoint stores its block scales in BF16 where our layout (DeepSeek-V3's, transformers FP8Linear) uses F32."""
    from stubs import load_inventory

    _, bf16 = _weights(stub_repo, "Qwen/Qwen3-8B")
    _, fp8 = _weights(stub_repo, "Qwen/Qwen3-8B-FP8")
    scales = [t for t in load_inventory("Qwen/Qwen3-8B-FP8")["tensors"] if t[0].endswith("weight_scale_inv")]
    assert scales and all(t[1] == "BF16" for t in scales)
    scale_elements = sum(t[2][0] * t[2][1] for t in scales)
    assert bf16.bytes["fp8-block"] == fp8.bytes[CHECKPOINT] + 2 * scale_elements
    assert fp8.bytes["bf16"] == bf16.bytes[CHECKPOINT]  # undoing the quantization gives the BF16 repo's bytes


# bartowski/Meta-Llama-3.1-8B-Instruct-GGUF file sizes as listed on the Hub (GB = 1e9, two decimals); the files
# also hold ~8 MB of metadata (the 128k-token vocabulary), hence the 0.015 GB tolerance.
@pytest.mark.parametrize("key, published_gb", [("q8_0", 8.54), ("q6_k", 6.60), ("q5_k_m", 5.73), ("q4_k_m", 4.92)])
def test_gguf_sizes_match_published_files(stub_repo, key, published_gb):
    _, wb = _weights(stub_repo, "meta-llama/Llama-3.1-8B-Instruct")
    assert abs(wb.bytes[key] / 1e9 - published_gb) <= 0.015, wb.bytes[key]


def test_ggml_fallback_for_rows_not_divisible_by_256():
    assert ggml_row_bytes("q4_k", 512) == ("q4_k", 288)
    assert ggml_row_bytes("q4_k", 2880) == ("q5_0", 90 * 22)  # gpt-oss hidden 2880 = 11.25 x 256
    assert ggml_row_bytes("q6_k", 2880) == ("q8_0", 90 * 34)
    assert ggml_row_bytes("q8_0", 100) == ("f16", 200)


def test_resolve_precision():
    assert resolve_precision("auto") == CHECKPOINT
    assert resolve_precision("FP16") == "bf16" and resolve_precision("awq") == "int4"
    assert resolve_precision("Q4_K_M") == "q4_k_m" and resolve_precision("bnb4") == "nf4"
    assert set(PRECISIONS) >= {"fp32", "bf16", "fp8", "fp8-block", "int8", "int4", "gptq", "nf4", "mxfp4", "q8_0", "q6_k", "q5_k_m", "q4_k_m"}
    with pytest.raises(UsageError, match="unknown precision"):
        resolve_precision("int3")


def test_nf4_bits_per_weight_on_large_matrix():
    # QLoRA paper: 4 + 8/64 + 32/(64*256) = 4.127 bits for double-quantized NF4
    bits = 8 * nf4(4096, 4096) / (4096 * 4096)
    assert abs(bits - 4.127) < 0.001


def test_bitsandbytes_checkpoint_flattened_weights(tmp_path):
    """A serialized bnb NF4 Linear stores its codes flattened ([n/2, 1] U8): the logical count comes back, the
    nf4 estimate equals the stored tensors minus the host-side quant_state JSON, and re-quantizing to AWQ uses
    rows of hidden_size."""
    from stubs import write_stub_repo

    h, out = 256, 512
    n = h * out
    blocks = n // 64
    prefix = "model.layers.0.self_attn.q_proj.weight"
    tensors = [
        ["model.embed_tokens.weight", "BF16", [1000, h], "model.safetensors"],
        [prefix, "U8", [n // 2, 1], "model.safetensors"],
        [prefix + ".absmax", "U8", [blocks], "model.safetensors"],
        [prefix + ".nested_absmax", "F32", [-(-blocks // 256)], "model.safetensors"],
        [prefix + ".nested_quant_map", "F32", [256], "model.safetensors"],
        [prefix + ".quant_map", "F32", [16], "model.safetensors"],
        [prefix + ".quant_state.bitsandbytes__nf4", "U8", [321], "model.safetensors"],
        ["model.norm.weight", "BF16", [h], "model.safetensors"],
    ]
    config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": h, "intermediate_size": 512,
              "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000,
              "tie_word_embeddings": True, "torch_dtype": "bfloat16",
              "quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
                                      "bnb_4bit_use_double_quant": True}}
    report = hfmem.analyze(str(write_stub_repo({"tensors": tensors}, config, tmp_path / "bnb")))
    _, wb = for_report(report)
    unq = 2 * (1000 * h + h)
    assert wb.bytes["bf16"] == 2 * n + unq
    assert wb.bytes["nf4"] == wb.bytes[CHECKPOINT] - 321 == nf4(out, h) + unq
    assert wb.bytes["int4"] == awq(out, h) + unq
