"""`--engine vllm` against hand-worked numbers from vLLM's own rules and public logs (sources cited per test), context
parsing, the CLI contract, and properties (hypothesis) of both engines: monotone in context and batch, linear in
batch, bounded by the window on sliding layers.

vLLM rules followed: vllm/v1/kv_cache_interface.py (page sizes, max_memory_usage_bytes per spec),
vllm/v1/core/kv_cache_utils.py (grouping, padding, get_num_blocks, get_max_concurrency_for_kv_cache_config),
vllm/model_executor/layers/mamba/mamba_utils.py (state shapes), vllm/model_executor/models/config.py
(HybridAttentionMambaModelConfig).
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from stubs import FIXTURES

from hfmem.model.architecture import build_architecture
from hfmem.cli import main
from hfmem.errors import UsageError
from hfmem.memory.kv import cdiv, estimate_kv, parse_context
from hfmem.memory.kv.vllm import admission_tokens

GiB = 2**30


def arch_of(repo: str):
    return build_architecture(json.loads((FIXTURES / "configs" / repo / "config.json").read_text()))[0]


# --- the worked check, both engines ------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["vllm", "transformers"])
def test_qwen2_7b_worked_check(engine):
    """28 layers x 4 KV heads x 128 x 2 (K and V) x 2 bytes = 57,344 B/token; 32k tokens = 1,879,048,192 (1.75 GiB)."""
    est = estimate_kv(arch_of("Qwen/Qwen2-7B-Instruct"), 32 * 1024, engine=engine)
    assert est.dtype == "bf16"
    assert est.bytes_per_token == 28 * 4 * 128 * 2 * 2 == 57_344
    assert est.total_bytes == 1_879_048_192 == int(1.75 * GiB)
    assert est.constant_bytes == 0
    assert est.by_layer_type == {"full_attention": {"layers": 28, "tokens": 32768, "bytes": 1_879_048_192,
                                                    "bytes_per_token": 57_344, "state_bytes": 0}}


# --- public vLLM logs --------------------------------------------------------------------------------------------


def test_llama31_8b_rtx3090_log():
    """§7 row 1 (vllm-project/vllm#10517): 1952 blocks, 'Maximum concurrency for 20000 tokens per request: 1.56x';
    1478 blocks at 29k -> 23,648 tokens < 29,000 -> the startup error."""
    arch = arch_of("meta-llama/Llama-3.1-8B-Instruct")
    at_20k = estimate_kv(arch, 20_000, block_size=16)  # the log's 16-token blocks (64 from vLLM 0.34)
    assert at_20k.bytes_per_block == 32 * 16 * 8 * 256 * 2 == 2 * 2**20  # 32 layers x one 64 KiB page
    num_blocks = 1952
    assert num_blocks * at_20k.bytes_per_block == int(3.8125 * GiB)  # logged as "3.81 GiB"
    assert at_20k.blocks_per_request == cdiv(20_000, 16) == 1250
    assert f"{num_blocks / at_20k.blocks_per_request:.2f}x" == "1.56x"
    at_29k = estimate_kv(arch, 29_000, block_size=16)
    assert 1478 * 16 == 23_648 and at_29k.blocks_per_request > 1478


def test_llama31_70b_w8a8_concurrency_log():
    """§7 row 4 (vllm-project/vllm#12569): 1381 blocks at max_len 2048 -> 'Maximum concurrency ... 10.79x'."""
    est = estimate_kv(arch_of("meta-llama/Llama-3.1-8B-Instruct"), 2048, block_size=16)  # 2048 / 16 blocks
    assert est.blocks_per_request == 128
    assert f"{1381 / est.blocks_per_request:.2f}x" == "10.79x"
    assert f"{2_042_016 // 16 / est.blocks_per_request:.2f}x" == "997.08x"  # §7 row 3 (vllm-project/vllm#13596)


def test_qwen3_235b_tp4_per_gpu():
    """§7 row 2 (vllm-project/vllm#21348): per GPU at TP=4, 94 layers x 1 KV head x 128 x 2 x 2 = 48,128 B/token;
    'GPU KV cache size: 178,880 tokens' = 11,180 blocks = 8.02 GiB."""
    est = estimate_kv(arch_of("Qwen/Qwen3-235B-A22B"), 16, tp=4, block_size=16)
    assert est.bytes_per_token == 48_128 and est.to_dict()["per_gpu"] is True
    assert est.bytes_per_block == 16 * 48_128
    assert round(178_880 // 16 * est.bytes_per_block / GiB, 2) == 8.02


def test_tp_replicates_kv_heads_below_one_and_never_splits_mla():
    """§2.2: per-GPU KV heads = max(1, n_kv // tp); MLA latent not divided (get_num_kv_heads returns 1 for MLA)."""
    qwen = arch_of("Qwen/Qwen2-7B-Instruct")
    assert estimate_kv(qwen, 1024, tp=8).bytes_per_token == estimate_kv(qwen, 1024, tp=4).bytes_per_token == 28 * 1 * 256 * 2
    ds = arch_of("deepseek-ai/DeepSeek-V3")
    assert estimate_kv(ds, 1024, tp=8).bytes_per_token == estimate_kv(ds, 1024).bytes_per_token == 576 * 2 * 61


# --- hand-worked from the spec rules ---------------------------------------------------------------------------------


def test_mla_latent_bf16_and_fp8():
    """§2.4: DeepSeek-V3 576 x 2 x 61 = 70,272 B/token in BF16, 35,136 in FP8; 128k tokens = 8.58 GiB."""
    ds = arch_of("deepseek-ai/DeepSeek-V3")
    bf16 = estimate_kv(ds, 131_072)
    assert bf16.bytes_per_token == 70_272 and round(bf16.total_bytes / GiB, 2) == 8.58
    assert estimate_kv(ds, 131_072, kv_dtype="fp8").bytes_per_token == 35_136
    assert estimate_kv(ds, 131_072, engine="transformers").bytes_per_token == 70_272  # v5 stores the latent too


def test_mistral_v01_sliding_admission():
    """§2.4: Mistral-7B-v0.1, 32 layers all W=4096, 32k: up to vLLM 0.25 (cdiv(min(4095 + 8192, 32768), 16) + 1) =
    769 blocks per layer -> 1.50 GiB; from 0.26 the window admits the 2 x 8192 tokens in flight: 1,281 blocks ->
    2.50 GiB; transformers keeps 4095 tokens -> 0.5 GiB; full-length pages would be 4 GiB."""
    arch = arch_of("mistralai/Mistral-7B-v0.1")
    page = 16 * 8 * 256 * 2
    old = estimate_kv(arch, 32_768, vllm_release=(0, 25))
    assert old.total_bytes == 32 * 769 * page == 1_612_709_888
    assert old.by_layer_type["sliding_attention"]["tokens"] == 769 * 16
    est = estimate_kv(arch, 32_768, vllm_release=(0, 33))
    assert est.total_bytes == 32 * (cdiv(4095 + 16_384, 16) + 1) * page == 32 * 1281 * page
    # 0.34 (the default) starts with 64-token blocks: the window's extra block is 64 tokens
    assert estimate_kv(arch, 32_768).total_bytes == 32 * (cdiv(4095 + 16_384, 64) + 1) * 4 * page
    assert est.total_bytes == estimate_kv(arch, 32_768, vllm_release=(0, 26)).total_bytes
    assert est.page_reserved_total_bytes == 4 * GiB
    assert est.total_is.startswith("window-capped")
    assert est.bytes_per_token == 0 and est.constant_bytes == est.total_bytes
    hf = estimate_kv(arch, 32_768, engine="transformers")
    assert hf.total_bytes - hf.bookkeeping_bytes == 32 * 4095 * 8 * 256 * 2 and round(hf.total_bytes / GiB, 3) == 0.5


def test_gemma3_27b_group_padding():
    """§2.4: Gemma-3-27B at 128k: 52 sliding + 10 full, group size 10 -> 6 sliding groups (8 padding layers);
    per request 10 x 131,072 B x (8192 + 6 x (cdiv(1023 + 8192, 16) + 1)) ~ 14.2 GiB up to vLLM 0.25, 16,384 tokens
    in flight from 0.26 ~ 18.0 GiB; transformers 10.41 GiB."""
    arch = arch_of("google/gemma-3-27b-it")
    page = 16 * 16 * 256 * 2
    old = estimate_kv(arch, 131_072, vllm_release=(0, 25))
    assert old.total_bytes == 10 * page * (8192 + 6 * (cdiv(1023 + 8192, 16) + 1))
    assert round(old.total_bytes / GiB, 1) == 14.2
    est = estimate_kv(arch, 131_072, vllm_release=(0, 33))
    assert est.total_bytes == 10 * page * (8192 + 6 * (cdiv(1023 + 16_384, 16) + 1))
    assert round(est.total_bytes / GiB, 1) == 18.0
    assert est.by_layer_type["sliding_attention"]["padding_layers"] == 8
    assert est.bytes_per_block == 10 * page
    assert round(estimate_kv(arch, 131_072, engine="transformers").total_bytes / GiB, 2) == 10.41


def test_gemma2_no_window_saving_at_8k():
    """§2.2: gemma-2-9b (W=4096) at max_len 8192 with max_num_batched_tokens >= 4097: no saving (the +1 block even
    costs one page more than full attention)."""
    arch = arch_of("google/gemma-2-9b-it")
    est = estimate_kv(arch, 8192, block_size=16)
    page = 16 * 8 * 512 * 2
    assert est.total_bytes == 21 * page * (512 + 513)
    assert est.page_reserved_total_bytes == 42 * page * 512 < est.total_bytes
    smaller_batch = estimate_kv(arch, 8192, max_batched_tokens=2048, vllm_release=(0, 25))
    assert smaller_batch.total_bytes == 21 * page * (512 + cdiv(4095 + 2048, 16) + 1)
    # from 0.26 two batches are in flight: 4095 + 4096 tokens, one short of the context, no saving again
    assert (estimate_kv(arch, 8192, max_batched_tokens=2048, vllm_release=(0, 33)).total_bytes
            == 21 * page * (512 + cdiv(8191, 16) + 1))


def test_qwen3_next_hybrid_block_size_and_state():
    """§2.4 + models/config.py: GDN state 1,097,728 B per layer (conv 8192 x 3 + 32 x 128 x 128, BF16); attention
    block raised to 16 x cdiv(1,097,728, 16 x 2048) = 544 tokens; 12 full + 36 GDN -> group size 12, 3 GDN groups,
    each 2 state pages per request with prefix caching (mamba_cache_mode "align", vLLM's default), 1 without; from
    0.33 on a Hopper GPU a third, the prefill-checkpoint page of FlashInfer's GDN prefill
    (gdn/qwen_gdn_linear_attn.py: num_prefill_checkpoint_blocks=1), as without a GPU (the H100-class default), and
    the block a multiple of that prefill's 64-token checkpoint alignment: 64 x cdiv(1,097,728, 64 x 2048) = 576."""
    arch = arch_of("Qwen/Qwen3-Next-80B-A3B-Instruct")
    for release, sm in (((0, 33), 90), (None, 90)):
        three = estimate_kv(arch, 32_768, vllm_release=release, gpu_sm=sm)
        assert three.block_size == 576
        assert three.total_bytes == 12 * (576 * 2 * 256 * 2 * 2) * (cdiv(32_768, 576) + 3 * 3) == 934_281_216
        assert any("a multiple of 64" in a for a in three.assumptions)
        assert any("three state pages" in a and "gdn layers' prefill-checkpoint page" in a for a in three.assumptions)
    attn_page = 544 * 2 * 256 * 2 * 2
    for release, sm in (((0, 32), 90), ((0, 33), 89), ((0, 33), 100), ((0, 33), None)):  # before 0.33; Ada; Blackwell; unknown
        assert estimate_kv(arch, 32_768, vllm_release=release, gpu_sm=sm).total_bytes == 12 * attn_page * (61 + 3 * 2)
    # 0.34 starts from its 64-token default block (platforms/interface.py _align_hybrid_block_size: the alignment is
    # at least cache_config.block_size): 64 x cdiv(1,097,728, 64 x 2048) = 576 without the checkpoint page too
    for sm in (89, 100, None):
        assert estimate_kv(arch, 32_768, gpu_sm=sm).total_bytes == 12 * 576 * 2048 * (cdiv(32_768, 576) + 3 * 2)
    est = estimate_kv(arch, 32_768, vllm_release=(0, 32))
    assert est.by_layer_type["linear_attention"]["state_bytes"] == 36 * 1_097_728
    assert est.block_size == 544
    attn_page = 544 * 2 * 256 * 2 * 2
    assert est.total_bytes == 12 * attn_page * (cdiv(32_768, 544) + 3 * 2)
    assert est.blocks_per_request == cdiv(32_768, 544) + 6
    assert any("two state pages" in a for a in est.assumptions)
    off = estimate_kv(arch, 32_768, prefix_caching=False, vllm_release=(0, 33))  # mode "none": no checkpoint page
    assert off.total_bytes == 12 * attn_page * (cdiv(32_768, 544) + 3) and off.blocks_per_request == 61 + 3
    assert any("one state page" in a for a in off.assumptions)
    assert round(36 * 1_097_728 / 2**20, 1) == 37.7  # "37.7 MiB per sequence"
    hf = estimate_kv(arch, 32_768, engine="transformers")  # conv kept at the full kernel width, state in float32
    assert hf.constant_bytes == 36 * (8192 * 4 * 2 + 32 * 128 * 128 * 4)


def test_qwen36_27b_tp2_fp8_startup_log():
    """A public vLLM start-up log of a Qwen3.5-style hybrid 27B (TP2, fp8 KV, max_model_len 131,072): attention
    block size 1568 and "Maximum concurrency for 131,072 tokens per request: 2.31x". Qwen3.6-27B's config (64 layers:
    16 full attention, 48 gated DeltaNet; mamba_ssm_dtype float32) reproduces both, and only with two state pages
    per request per group (prefix caching on: mamba_cache_mode "align"). The log gives neither its release nor its
    GPU; two pages mean a release before 0.33 or a GPU where vLLM's GDN prefill is not FlashInfer's (0.32 here).

    Per GPU: attention 2 KV heads x 256 x 2 (K, V) x 1 B = 1,024 B/token; GDN state (10,240 / 2) x 3 x 2 B conv +
    24 x 128 x 128 x 4 B recurrent = 1,603,584 B -> block 16 x cdiv(1,603,584, 16 x 1,024) = 1568 tokens. Groups of
    16 layers: 1 attention group (cdiv(131,072, 1568) = 84 blocks) + 3 GDN groups x 2 pages = 90 blocks per request;
    one page would be 87. vLLM: concurrency = num_blocks / blocks per request; the log's 2.31x needs num_blocks 208
    (207 gives 2.30x, 209 2.32x), and 208 / 87 = 2.39x."""
    arch = arch_of("Qwen/Qwen3.6-27B")
    est = estimate_kv(arch, 131_072, kv_dtype="fp8", tp=2, vllm_release=(0, 32))
    assert est.block_size == 1568
    assert est.by_layer_type["linear_attention"]["state_bytes"] == 48 * (5120 * 3 * 2 + 24 * 128 * 128 * 4)
    assert est.blocks_per_request == 84 + 3 * 2 == 90
    one_page = estimate_kv(arch, 131_072, kv_dtype="fp8", tp=2, prefix_caching=False, vllm_release=(0, 32))
    assert one_page.blocks_per_request == 87
    matching = [n for n in range(150, 300) if f"{n / est.blocks_per_request:.2f}x" == "2.31x"]
    assert matching == [208]
    assert f"{208 / one_page.blocks_per_request:.2f}x" == "2.39x"
    assert not [n for n in range(150, 300) if f"{n / one_page.blocks_per_request:.2f}x" == "2.31x"
                and n * est.bytes_per_block == n * one_page.bytes_per_block and f"{n / 90:.2f}x" == "2.31x"]
    assert est.bytes_per_block == one_page.bytes_per_block == 16 * 1568 * 1024


def test_mamba_state_only():
    """mamba_utils.py mamba1_state_shape: conv (intermediate, kernel - 1) + ssm (intermediate, state), per request."""
    arch = arch_of("state-spaces/mamba-2.8b-hf")
    est = estimate_kv(arch, 100_000)
    assert est.dtype == "bf16" and any("float32 model" in a for a in est.assumptions)
    assert est.total_bytes == 64 * (5120 * 3 + 5120 * 16) * 2
    assert est.bytes_per_token == 0 and est.total_bytes == estimate_kv(arch, 10).total_bytes


def test_whisper_cross_attention_blocks():
    """CrossAttentionSpec: cdiv(max_num_encoder_input_tokens = 1500, 16) = 94 blocks per decoder layer."""
    arch = arch_of("openai/whisper-large-v3")
    est = estimate_kv(arch, 448, block_size=16)
    page = 16 * 20 * 128 * 2
    assert est.encoder_len == 1500
    assert est.by_layer_type["cross_attention"]["bytes"] == 32 * 94 * page
    assert est.by_layer_type["full_attention"]["bytes"] == 32 * 28 * page


@pytest.mark.parametrize("dtype, per_layer", [
    ("fp16", 8 * 256 * 2), ("fp32", 8 * 256 * 4), ("fp8", 8 * 256),
    ("int8", 8 * 256 + 2 * 8 * 4),  # int8_per_token_head: + fp32 K and V scale per head (AttentionSpec.page_size_bytes)
    ("int4", 8 * 256 // 2 + 2 * 8 * 4),  # int4_per_token_head (0.25 on): two values per byte, the same scales
    ("q8_0", 2 * (1024 // 32) * 34),  # ggml block_q8_0: 34 bytes per 32 values, per K row and per V row
    ("q4_0", 2 * (1024 // 32) * 18),
])
def test_kv_dtypes(dtype, per_layer):
    est = estimate_kv(arch_of("meta-llama/Llama-3.1-8B-Instruct"), 4096, kv_dtype=dtype)
    assert est.dtype == dtype and est.bytes_per_token == 32 * per_layer


def test_auto_dtype_of_quantized_checkpoints_is_the_activation_dtype():
    for repo in ("Qwen/Qwen3-8B-FP8", "openai/gpt-oss-20b", "deepseek-ai/DeepSeek-V3"):
        assert estimate_kv(arch_of(repo), 16).dtype == "bf16", repo
    assert estimate_kv(arch_of("TheBloke/Llama-2-7B-AWQ"), 16).dtype == "fp16"


def test_auto_dtype_follows_transformers_loading_rules():
    """modeling_utils._get_dtype: the top-level config dtype wins over sub-configs (Qwen2.5-VL's text_config says
    float32, the checkpoint and top level bf16); without any config dtype, the stored weights' dtype is used."""
    assert estimate_kv(arch_of("Qwen/Qwen2.5-VL-7B-Instruct"), 16, engine="transformers").dtype == "bf16"
    gpt2 = arch_of("openai-community/gpt2")
    assert estimate_kv(gpt2, 16, engine="transformers", weights_dtype="F32").dtype == "fp32"
    assert estimate_kv(gpt2, 16, engine="transformers", weights_dtype="BF16").dtype == "bf16"
    assert estimate_kv(gpt2, 16, engine="vllm", weights_dtype="F32").dtype == "bf16"


def test_kv_shared_and_mlp_only_layers_keep_nothing():
    nem = arch_of("nvidia/Nemotron-H-56B-Base-8K")
    est = estimate_kv(nem, 8192)
    assert est.by_layer_type["no_cache"]["bytes"] == 0
    assert est.by_layer_type["full_attention"]["layers"] == 10 and est.by_layer_type["mamba"]["layers"] == 54


def test_mamba2_checkpoint_page_from_032():
    """Nemotron-H-56B (10 attention + 54 Mamba2 layers, groups of 10: 6 state groups, attention block 4128): from vLLM
    0.32 a Mamba2 mixer exports its prefill checkpoint (mamba_mixer2.py get_kv_cache_spec:
    num_prefill_checkpoint_blocks=1), so with prefix caching each state group keeps 3 pages per request, on any GPU;
    0.31 and before 2. At 8k: 2 attention blocks + 6 x 2 = 14 blocks, then 2 + 6 x 3 = 20."""
    nem = arch_of("nvidia/Nemotron-H-56B-Base-8K")
    before = estimate_kv(nem, 8192, vllm_release=(0, 31), gpu_sm=89)
    after = estimate_kv(nem, 8192, vllm_release=(0, 32), gpu_sm=89)
    assert before.block_size == after.block_size == 4128
    assert (before.blocks_per_request, after.blocks_per_request) == (2 + 6 * 2, 2 + 6 * 3)
    assert after.total_bytes == before.total_bytes // 14 * 20
    assert estimate_kv(nem, 8192, gpu_sm=None).blocks_per_request == 20  # the newest release, whatever the GPU
    assert estimate_kv(nem, 8192, prefix_caching=False).blocks_per_request == 2 + 6


def test_qwen2_sliding_window_off_trap():
    """Qwen2.5 configs carry sliding_window but use_sliding_window false: full attention everywhere."""
    est = estimate_kv(arch_of("Qwen/Qwen2.5-7B-Instruct"), 131_072)
    assert set(est.by_layer_type) == {"full_attention"}
    assert est.page_reserved_total_bytes == est.total_bytes


# --- parse_context ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("32768", [32768]), ("32k", [32768]), ("32K", [32768]), ("128k", [131072]), ("1M", [1048576]),
    ("4k,32k,128k", [4096, 32768, 131072]), ("1.5k", [1536]), (" 8k ", [8192]),
])
def test_parse_context(text, expected):
    assert parse_context(text) == expected


def test_parse_context_max_and_errors():
    assert parse_context("max", arch_of("Qwen/Qwen2-7B-Instruct")) == [32768]
    for bad in ("abc", "0", "1.0001k", "", "32kk", "-5"):
        with pytest.raises(UsageError):
            parse_context(bad)
    with pytest.raises(UsageError, match="max_position_embeddings"):
        parse_context("max", arch_of("state-spaces/mamba-2.8b-hf"))


def test_bad_arguments():
    arch = arch_of("Qwen/Qwen2-7B-Instruct")
    with pytest.raises(UsageError):
        estimate_kv(arch, 0)
    with pytest.raises(UsageError):
        estimate_kv(arch, 10, engine="llamacpp")
    with pytest.raises(UsageError):
        estimate_kv(arch, 10, kv_dtype="fp12")


# --- CLI ----------------------------------------------------------------------------------------------------------------

QWEN = str(FIXTURES / "models/Qwen/Qwen2-7B-Instruct")


def test_cli_json_one_context():
    result = CliRunner().invoke(main, [QWEN, "--ctx", "32k", "--format", "json"])
    assert result.exit_code == 0, result.output
    kv = json.loads(result.output)["kv_cache"]
    assert {k: kv[k] for k in ("engine", "dtype", "context", "batch", "bytes_per_token", "constant_bytes", "total_bytes")} == {
        "engine": "vllm", "dtype": "bf16", "context": 32768, "batch": 1, "bytes_per_token": 57_344, "constant_bytes": 0,
        "total_bytes": 1_879_048_192}
    assert kv["by_layer_type"]["full_attention"]["layers"] == 28


def test_cli_several_contexts_list_in_order_and_options():
    result = CliRunner().invoke(main, [QWEN, "--ctx", "32k,4k,max", "--batch", "3", "--engine", "transformers",
                                       "--kv-dtype", "fp8", "--format", "json"])
    assert result.exit_code == 0, result.output
    kv = json.loads(result.output)["kv_cache"]
    assert [e["context"] for e in kv] == [32768, 4096, 32768]
    assert all(e["engine"] == "transformers" and e["batch"] == 3 and e["dtype"] == "fp8" for e in kv)
    assert kv[1]["total_bytes"] == 3 * 4096 * 28 * 4 * 128 * 2


def test_cli_table_shows_kv_and_without_ctx_nothing_new():
    table = CliRunner().invoke(main, [QWEN, "--ctx", "32k"])
    assert table.exit_code == 0 and "KV cache (vllm, bf16, 32,768 tokens x 1 sequence)" in table.output
    assert "1,879,048,192" in table.output and "1.75 GiB" in table.output
    plain = CliRunner().invoke(main, [QWEN, "--format", "json"])
    assert "kv_cache" not in json.loads(plain.output)
    several = CliRunner().invoke(main, [QWEN, "--ctx", "4k,32k", "--format", "markdown"])
    assert several.exit_code == 0 and "| 4,096 " in several.output and "| 32,768 " in several.output


@pytest.mark.parametrize("args, needle", [
    (["--ctx", "lots"], "--ctx"), (["--batch", "2"], "needs --ctx"), (["--ctx", "4k", "--kv-dtype", "fp12"], "fp12"),
])
def test_cli_bad_options_exit_2(args, needle):
    result = CliRunner().invoke(main, [QWEN, *args])
    assert result.exit_code == 2 and needle in result.output


# --- properties ----------------------------------------------------------------------------------------------------------

REPOS = ["Qwen/Qwen2-7B-Instruct", "mistralai/Mistral-7B-v0.1", "google/gemma-3-27b-it", "google/gemma-2-9b-it",
         "openai/gpt-oss-20b", "deepseek-ai/DeepSeek-V3", "Qwen/Qwen3-Next-80B-A3B-Instruct", "state-spaces/mamba-2.8b-hf",
         "google/gemma-4-31B-it", "moonshotai/Kimi-Linear-48B-A3B-Instruct", "google-t5/t5-small",
         "nvidia/Nemotron-H-56B-Base-8K"]
ARCHS = {r: arch_of(r) for r in REPOS}
contexts = st.integers(min_value=1, max_value=300_000)
batches = st.integers(min_value=1, max_value=64)
engines = st.sampled_from(["vllm", "transformers"])
repos = st.sampled_from(REPOS)


def _growing(est):
    return est.total_bytes - est.bookkeeping_bytes


@settings(max_examples=60, deadline=None)
@given(repos, engines, contexts, contexts, batches)
def test_monotone_in_context(repo, engine, c1, c2, batch):
    lo, hi = sorted((c1, c2))
    a, b = (estimate_kv(ARCHS[repo], c, batch=batch, engine=engine) for c in (lo, hi))
    assert a.total_bytes <= b.total_bytes
    assert a.bytes_per_token == b.bytes_per_token


@settings(max_examples=60, deadline=None)
@given(repos, engines, contexts, batches, batches)
def test_linear_and_monotone_in_batch(repo, engine, ctx, b1, b2):
    one = estimate_kv(ARCHS[repo], ctx, batch=1, engine=engine)
    for b in (b1, b2):
        est = estimate_kv(ARCHS[repo], ctx, batch=b, engine=engine)
        assert _growing(est) == b * _growing(one)
        assert est.bookkeeping_bytes == one.bookkeeping_bytes
        for name, entry in est.by_layer_type.items():
            assert entry["bytes"] == b * one.by_layer_type[name]["bytes"]
    lo, hi = sorted((b1, b2))
    assert estimate_kv(ARCHS[repo], ctx, batch=lo, engine=engine).total_bytes <= estimate_kv(
        ARCHS[repo], ctx, batch=hi, engine=engine).total_bytes


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["mistralai/Mistral-7B-v0.1", "google/gemma-3-27b-it", "google/gemma-2-9b-it",
                        "openai/gpt-oss-20b", "google/gemma-4-31B-it"]), contexts, st.integers(1, 32_768))
def test_sliding_layers_bounded_by_window(repo, ctx, mbt):
    arch = ARCHS[repo]
    window = arch.sliding_window
    hf = estimate_kv(arch, ctx, engine="transformers").by_layer_type["sliding_attention"]
    assert hf["tokens"] == min(ctx, window - 1)
    assert hf["bytes"] <= (window - 1) * hf["bytes_per_token"]
    vl = estimate_kv(arch, ctx, max_batched_tokens=mbt)
    big = estimate_kv(arch, 10 * ctx, max_batched_tokens=mbt).by_layer_type["sliding_attention"]
    mbt = admission_tokens(mbt, None)  # what the window admits in the newest release: two async batches in flight
    sliding = vl.by_layer_type["sliding_attention"]
    assert sliding["tokens"] <= (cdiv(window - 1 + mbt, vl.block_size) + 1) * vl.block_size * 2  # page unification x2
    if ctx >= window - 1 + mbt:  # once the window (plus the chunked-prefill allowance) is full, it stops growing
        assert big["bytes"] == sliding["bytes"]
    # Window-capped beats full-length pages once the context is past the window, except that group padding layers
    # (e.g. Gemma-3's 52 sliding layers padded to 60) cost window pages too: past (n + pad) / n windows it must win.
    n_sliding = sliding["layers"]
    padded = n_sliding + sliding.get("padding_layers", 0)
    reach = window - 1 + mbt + 2 * vl.block_size
    assert vl.total_bytes <= vl.page_reserved_total_bytes or ctx * n_sliding <= padded * reach


@settings(max_examples=40, deadline=None)
@given(repos, contexts)
def test_parts_add_up(repo, ctx):
    for engine in ("vllm", "transformers"):
        est = estimate_kv(ARCHS[repo], ctx, batch=2, engine=engine)
        assert sum(e["bytes"] for e in est.by_layer_type.values()) + est.bookkeeping_bytes == est.total_bytes
        assert est.constant_bytes >= 0 and est.bytes_per_token >= 0
        if engine == "transformers":
            assert est.total_bytes == 2 * (est.bytes_per_token * ctx + est.constant_bytes) + est.bookkeeping_bytes
        else:
            assert est.total_bytes >= 2 * (est.bytes_per_token * ctx + est.constant_bytes)
