"""Ground truth for `--engine transformers`: build tiny random-weight models from shrunk real configs, run a prefill of
L tokens x B sequences with use_cache=True, and sum the bytes of every tensor the returned cache holds. hfmem's
figure must equal it exactly (logical bytes, numel x element_size) and so must its storage figure (bytes of the
distinct storages the cache pins: sliding-window layers keep views of the whole prefill).
"""

from __future__ import annotations

import copy
import json
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from stubs import FIXTURES  # noqa: E402

from hfmem.model.architecture import build_architecture  # noqa: E402
from hfmem.memory.kv import estimate_kv  # noqa: E402

transformers.utils.logging.set_verbosity_error()
_TF = tuple(int(x) for x in transformers.__version__.split(".")[:2])  # the release measured


def held_bytes(cache: Any) -> tuple[int, int, list[tuple[str, tuple, str]]]:
    """(sum numel*element_size over distinct tensors, sum of distinct storages' bytes, the tensors found).

    Walks the cache object's attributes, lists, tuples and dicts; a tensor reached twice (same data pointer,
    shape, strides and dtype) counts once, a storage shared by several views counts once."""
    seen_views: set[tuple] = set()
    seen_storages: set[int] = set()
    seen_objects: set[int] = set()
    found: list[tuple[str, tuple, str]] = []
    logical = storage = 0

    def walk(obj: Any, path: str, depth: int) -> None:
        nonlocal logical, storage
        if depth > 10 or obj is None or isinstance(obj, (str, int, float, bool, type)):
            return
        if isinstance(obj, torch.Tensor):
            if obj.numel() == 0:
                return
            view = (obj.data_ptr(), tuple(obj.shape), tuple(obj.stride()), obj.dtype)
            if view not in seen_views:
                seen_views.add(view)
                logical += obj.numel() * obj.element_size()
                found.append((path, tuple(obj.shape), str(obj.dtype).replace("torch.", "")))
            st = obj.untyped_storage()
            if st.data_ptr() not in seen_storages:
                seen_storages.add(st.data_ptr())
                storage += st.nbytes()
            return
        if id(obj) in seen_objects or isinstance(obj, torch.nn.Module):
            return
        seen_objects.add(id(obj))
        if isinstance(obj, (list, tuple)):
            for i, x in enumerate(obj):
                walk(x, f"{path}[{i}]", depth + 1)
        elif isinstance(obj, dict):
            for k, x in obj.items():
                walk(x, f"{path}[{k!r}]", depth + 1)
        elif hasattr(obj, "__dict__"):
            for k, x in vars(obj).items():
                walk(x, f"{path}.{k}", depth + 1)

    walk(cache, "cache", 0)
    return logical, storage, found


def real_config(repo: str, text: bool = False) -> dict[str, Any]:
    cfg = json.loads((FIXTURES / "configs" / repo / "config.json").read_text())
    if text:
        top_dtype = cfg.get("torch_dtype") or cfg.get("dtype")
        cfg = dict(cfg["text_config"])
        cfg.setdefault("torch_dtype", top_dtype)
    return cfg


SMALL = {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
         "vocab_size": 256}


def shrink(cfg: dict[str, Any], layers: int | None = None, drop: tuple[str, ...] = (), **overrides: Any) -> dict[str, Any]:
    """Smaller sizes, same structure: layer_types truncated (pattern kept), quantization removed."""
    out = copy.deepcopy(cfg)
    for key in ("quantization_config", "auto_map", *drop):
        out.pop(key, None)
    if layers is not None:
        out["num_hidden_layers"] = layers
        if isinstance(out.get("layer_types"), list):
            out["layer_types"] = out["layer_types"][:layers]
    out.update(overrides)
    if out.get("pad_token_id") is not None:
        out["pad_token_id"] = 0  # must index the shrunk vocabulary
    return out


@dataclass
class Case:
    name: str
    config: Callable[[], dict[str, Any]]
    L: int = 24
    B: int = 2
    window: int | None = None  # when set, the test checks the window binds (L > window)
    seq2seq: bool = False
    encoder_len: int = 10
    decode: bool = False  # also check one decode step after a prefill of L - 1
    expect_types: dict[str, int] = field(default_factory=dict)


def _custom(model_type: str, **kw: Any) -> Callable[[], dict[str, Any]]:
    return lambda: {"model_type": model_type, "torch_dtype": "bfloat16", "pad_token_id": 0, **SMALL, **kw}


_MLA_SMALL = {**SMALL, "num_key_value_heads": 4, "kv_lora_rank": 32, "q_lora_rank": 48, "qk_rope_head_dim": 8,
              "qk_nope_head_dim": 16, "v_head_dim": 16, "n_routed_experts": 4, "num_experts_per_tok": 2,
              "moe_intermediate_size": 32, "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1,
              "index_head_dim": 32, "index_n_heads": 2, "index_topk": 8}


def _glm_5_2(layers: int) -> dict[str, Any]:
    """GLM-5.2's config, shrunk; indexer_types (the real 'full'/'shared' pattern) and mlp_layer_types cut to
    `layers`. Adjusted beyond shrinking: qk_rope_head_dim. The shipped config says 192 while kv_a_proj_with_mqa
    has 512 + 64 rows; with 192 > index_head_dim 128 transformers' GlmMoeDsaIndexer.forward cannot split its key
    into [qk_rope_head_dim, index_head_dim - qk_rope_head_dim], and the checkpoint would not load. The small
    rope width (8) keeps the config's structure; qk_head_dim follows it (nope + rope)."""
    cfg = real_config("zai-org/GLM-5.2")
    return shrink(cfg, layers, **_MLA_SMALL, qk_head_dim=24, indexer_types=cfg["indexer_types"][:layers],
                  mlp_layer_types=cfg["mlp_layer_types"][:1] + ["sparse"] * (layers - 1))


def _deepseek_v32(layers: int) -> dict[str, Any]:
    """No DeepSeek-V3.2 config is in fixtures: transformers' DeepseekV32Config defaults (the DeepSeek-V3.2-Exp
    shape), shrunk, in bf16."""
    base = transformers.DeepseekV32Config().to_dict()
    return shrink(base, layers, **_MLA_SMALL, mlp_layer_types=None, layer_types=None, torch_dtype="bfloat16")


def _minimax_m3_text(layers: int) -> dict[str, Any]:
    """MiniMax-M3-MXFP8's text_config, shrunk. Adjusted beyond shrinking: model_type (the shipped text_config has
    an empty model_type; its class is minimax_m3_vl_text) and the per-layer lists of sparse_attention_config and
    moe_layer_freq cut to `layers` with one full-attention layer first, as in the real 3 full + 57 sparse."""
    cfg = real_config("MiniMaxAI/MiniMax-M3-MXFP8", text=True)
    sparse = copy.deepcopy(cfg["sparse_attention_config"])
    pattern = [0] + [1] * (layers - 1)
    sparse.update(sparse_attention_freq=pattern, sparse_disable_index_value=pattern, sparse_index_dim=32,
                  sparse_num_index_heads=2, sparse_block_size=4, sparse_topk_blocks=2)
    return shrink(cfg, layers, drop=("architectures",), model_type="minimax_m3_vl_text", **SMALL, head_dim=16,
                  rotary_dim=8, num_local_experts=4, num_experts_per_tok=2, dense_intermediate_size=128,
                  shared_intermediate_size=32, moe_layer_freq=pattern, sparse_attention_config=sparse)


def _v4(**overrides: Any) -> dict[str, Any]:
    """DeepSeek-V4-Flash shrunk: its first 6 layers (2 sliding, then CSA / HCA alternating), window 8."""
    return shrink(real_config("deepseek-ai/DeepSeek-V4-Flash"), 6, **{**SMALL, "num_key_value_heads": 1}, head_dim=32,
                  qk_rope_head_dim=8, q_lora_rank=16, o_groups=2, o_lora_rank=16, index_n_heads=2, index_head_dim=16,
                  index_topk=4, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, sliding_window=8,
                  num_hash_layers=1, **overrides)


CASES = [
    Case("qwen2 (GQA, use_sliding_window false)", lambda: shrink(real_config("Qwen/Qwen2-7B-Instruct"), 2, **SMALL),
         expect_types={"full_attention": 2}),
    Case("llama (GQA)", lambda: shrink(real_config("meta-llama/Llama-3.1-8B-Instruct"), 2, **SMALL)),
    Case("gpt2 (MHA, no dtype: float32)", lambda: shrink(
        real_config("openai-community/gpt2"), None, n_embd=64, n_layer=2, n_head=4, vocab_size=256, n_positions=64)),
    Case("mistral (sliding window)", lambda: shrink(real_config("mistralai/Mistral-7B-v0.1"), 2, **SMALL, sliding_window=8),
         window=8, decode=True, expect_types={"sliding_attention": 2}),
    Case("mixtral (MoE)", lambda: shrink(real_config("mistralai/Mixtral-8x7B-v0.1"), 2, **SMALL, num_local_experts=4)),
    Case("gemma2 (alternating sliding, head_dim 256)", lambda: shrink(
        real_config("google/gemma-2-9b-it"), 4, **SMALL, sliding_window=8), window=8, decode=True,
        expect_types={"sliding_attention": 2, "full_attention": 2}),
    Case("gemma3_text (5:1 sliding)", lambda: shrink(
        real_config("google/gemma-3-27b-it", text=True), 6, **SMALL, sliding_window=8), window=8,
        expect_types={"sliding_attention": 5, "full_attention": 1}),
    Case("gpt_oss (window 128)", lambda: shrink(
        real_config("openai/gpt-oss-20b"), 2, **SMALL, num_local_experts=4, num_experts_per_tok=2, torch_dtype="bfloat16"),
        L=140, B=1, window=128, decode=True, expect_types={"sliding_attention": 1, "full_attention": 1}),
    Case("deepseek_v3 (MLA latent)", lambda: shrink(
        real_config("deepseek-ai/DeepSeek-V3"), 2, **{**SMALL, "num_key_value_heads": 4}, kv_lora_rank=32, q_lora_rank=48,
        qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16, n_routed_experts=4, num_experts_per_tok=2,
        moe_intermediate_size=32, n_group=1, topk_group=1, first_k_dense_replace=1), expect_types={"mla": 2}),
    Case("deepseek_v2 (MLA, no q_lora)", lambda: shrink(
        real_config("deepseek-ai/DeepSeek-V2-Lite-Chat"), 2, **{**SMALL, "num_key_value_heads": 4}, kv_lora_rank=32,
        qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16, n_routed_experts=4, num_experts_per_tok=2,
        moe_intermediate_size=32, first_k_dense_replace=1)),
    Case("qwen3_next (gated DeltaNet hybrid)", lambda: shrink(
        real_config("Qwen/Qwen3-Next-80B-A3B-Instruct"), 4, **SMALL, head_dim=16, linear_num_key_heads=2,
        linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=8, num_experts=4, num_experts_per_tok=2,
        moe_intermediate_size=32, shared_expert_intermediate_size=32), decode=True,
        expect_types={"linear_attention": 3, "full_attention": 1}),
    Case("qwen3_5_text (gated DeltaNet, ssm float32)", lambda: shrink(
        real_config("Qwen/Qwen3.5-0.8B-Base", text=True), 4, **SMALL, head_dim=16, linear_num_key_heads=2,
        linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=8)),
    Case("kimi_linear (KDA + MLA)", lambda: shrink(
        real_config("moonshotai/Kimi-Linear-48B-A3B-Instruct"), 2, drop=("linear_attn_config", "num_experts_per_token"),
        **{**SMALL, "num_key_value_heads": 4}, layer_types=["linear_attention", "full_attention"], kv_lora_rank=32,
        qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16, linear_head_dim=16, linear_num_heads=4,
        linear_conv_kernel_dim=4, num_experts=4, num_local_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
        first_k_dense_replace=1, pad_token_id=0), expect_types={"linear_attention": 1, "mla": 1}),
    Case("qwen3_5_text decode (gated DeltaNet, one decode step)", lambda: shrink(
        real_config("Qwen/Qwen3.5-0.8B-Base", text=True), 4, **SMALL, head_dim=16, linear_num_key_heads=2,
        linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=8), decode=True,
        expect_types={"linear_attention": 3, "full_attention": 1}),
    Case("qwen3_5_text 27B pattern (Qwen3.6-27B config, ssm float32)", lambda: shrink(
        real_config("Qwen/Qwen3.6-27B", text=True), 8, **SMALL, head_dim=16, linear_num_key_heads=2,
        linear_num_value_heads=6, linear_key_head_dim=16, linear_value_head_dim=8), L=20, B=3, decode=True,
        expect_types={"linear_attention": 6, "full_attention": 2}),
    Case("kimi_linear decode (KDA + MLA, real linear_attn_config)", lambda: shrink(
        real_config("moonshotai/Kimi-Linear-48B-A3B-Instruct"), 4, drop=("num_experts_per_token",),
        **{**SMALL, "num_key_value_heads": 4}, kv_lora_rank=32, qk_rope_head_dim=8, qk_nope_head_dim=16,
        v_head_dim=16, num_experts=4, num_local_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
        first_k_dense_replace=1, pad_token_id=0,
        linear_attn_config={**real_config("moonshotai/Kimi-Linear-48B-A3B-Instruct")["linear_attn_config"],
                            "num_heads": 4, "head_dim": 16, "full_attn_layers": [4], "kda_layers": [1, 2, 3]}), decode=True,
        expect_types={"linear_attention": 3, "mla": 1}),
    # DeepSeek-V4 (paper §2.3): sliding layers + CSA (window + compressor and indexer every 4 tokens, overlap state)
    # + HCA (window + one entry every compress_rate_hca tokens). L = 40: 10 CSA entries, HCA remainder buffer of 8.
    Case("deepseek_v4 (sliding + CSA + HCA, HCA rate 16)", lambda: _v4(compress_rate_hca=16), L=40, window=8,
         decode=True, expect_types={"sliding_attention": 2, "compressed_sparse_attention": 2,
                                    "heavily_compressed_attention": 2}),
    Case("deepseek_v4 real rates (4 / 128, L past one HCA window)", lambda: _v4(), L=139, B=1, window=8, decode=True,
         expect_types={"compressed_sparse_attention": 2, "heavily_compressed_attention": 2}),
    Case("deepseek_v4 HCA window closing in decode (prefill 127, decode to 128)", lambda: _v4(), L=128, B=1, window=8,
         decode=True),
    Case("mamba (no KV, fixed state, float32 config)", lambda: shrink(
        real_config("state-spaces/mamba-2.8b-hf"), 2, hidden_size=64, intermediate_size=128, vocab_size=256),
        expect_types={"mamba": 2}),
    Case("mamba in bf16 (conv bf16, ssm float32)", lambda: shrink(
        real_config("state-spaces/mamba-2.8b-hf"), 2, hidden_size=64, intermediate_size=128, vocab_size=256,
        torch_dtype="bfloat16"), decode=True),
    Case("nemotron_h (Mamba2 + attention + MLP-only)", lambda: shrink(
        real_config("nvidia/Nemotron-H-56B-Base-8K"), 4, **SMALL, head_dim=16, hybrid_override_pattern="M*-M",
        mamba_num_heads=4, mamba_head_dim=16, n_groups=2, ssm_state_size=8),
        expect_types={"mamba": 2, "full_attention": 1, "no_cache": 1}),
    Case("gemma4_text (per-layer head_dim, k_eq_v)", lambda: shrink(
        real_config("google/gemma-4-31B-it", text=True), 6, **SMALL, head_dim=16, global_head_dim=32,
        num_global_key_value_heads=1, sliding_window=8, vocab_size_per_layer_input=256), window=8, decode=True,
        expect_types={"sliding_attention": 5, "full_attention": 1}),
    Case("t5 (cross-attention)", lambda: shrink(
        real_config("google-t5/t5-small"), None, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=3,
        num_heads=4, vocab_size=256, torch_dtype="bfloat16"), seq2seq=True,
        expect_types={"full_attention": 3, "cross_attention": 3}),
    # Model types with no config in fixtures: small hand-written configs with the real field names.
    Case("bart (cross-attention, decoder heads differ)", lambda: {
        "model_type": "bart", "torch_dtype": "bfloat16", "d_model": 64, "encoder_layers": 2, "decoder_layers": 3,
        "encoder_attention_heads": 4, "decoder_attention_heads": 8, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128,
        "vocab_size": 256, "max_position_embeddings": 64}, seq2seq=True),
    Case("gemma3n_text (KV-shared layers)", _custom(
        "gemma3n_text", num_hidden_layers=4, intermediate_size=[128] * 4, head_dim=32, sliding_window=8,
        layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"], num_kv_shared_layers=2,
        hidden_size_per_layer_input=8, vocab_size_per_layer_input=256, laurel_rank=4, altup_num_inputs=2,
        activation_sparsity_pattern=[0.0] * 4), window=8, decode=True,
        expect_types={"sliding_attention": 1, "full_attention": 1, "kv_shared": 2}),
    Case("llama4_text (chunked attention)", _custom(
        "llama4_text", num_hidden_layers=4, head_dim=16, attention_chunk_size=8, no_rope_layers=[1, 1, 1, 0],
        num_local_experts=2, num_experts_per_tok=1, intermediate_size_mlp=128, moe_layers=[], interleave_moe_layer_step=0),
        window=8, decode=True, expect_types={"chunked_attention": 3, "full_attention": 1}),
    Case("jamba (Mamba1 + attention)", _custom(
        "jamba", num_hidden_layers=2, attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2, num_experts=2,
        mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, mamba_dt_rank=8), expect_types={"mamba": 1, "full_attention": 1}),
    Case("falcon_h1 (attention and Mamba2 in every layer)", _custom(
        "falcon_h1", num_hidden_layers=2, mamba_d_ssm=64, mamba_n_heads=4, mamba_d_head=16, mamba_n_groups=1,
        mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, head_dim=16), decode=True, expect_types={"hybrid": 2}),
    Case("mamba2", _custom("mamba2", num_hidden_layers=2, state_size=8, expand=2, conv_kernel=4, n_groups=2, num_heads=8,
                           head_dim=16)),
    Case("bamba (Mamba2, d_head given)", _custom(
        "bamba", num_hidden_layers=2, attn_layer_indices=[1], mamba_n_heads=4, mamba_d_head=32, mamba_n_groups=1,
        mamba_d_state=8, mamba_d_conv=4, mamba_expand=2)),
    Case("granitemoehybrid", _custom(
        "granitemoehybrid", num_hidden_layers=2, layer_types=["mamba", "attention"], mamba_n_heads=4, mamba_d_head=32,
        mamba_n_groups=1, mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, num_local_experts=2, num_experts_per_tok=1,
        shared_intermediate_size=32)),
    Case("lfm2 (short conv)", _custom("lfm2", num_hidden_layers=2, layer_types=["conv", "full_attention"], conv_L_cache=3),
         expect_types={"conv": 1, "full_attention": 1}),
    # MiMo-V2-Flash: sliding layers double the K/V heads, values are v_head_dim wide (MiMoV2FlashAttention)
    Case("mimo_v2_flash (sliding layers 2x K/V heads, 8-wide values)", _custom(
        "mimo_v2_flash", num_hidden_layers=6, head_dim=16, v_head_dim=8, sliding_window_size=7, n_routed_experts=2,
        num_experts_per_tok=1, moe_intermediate_size=32), window=8, decode=True,
        expect_types={"full_attention": 2, "sliding_attention": 4}),
    Case("minimax (lightning linear attention)", _custom(
        "minimax", num_hidden_layers=2, layer_types=["linear_attention", "full_attention"], num_local_experts=2,
        num_experts_per_tok=1, head_dim=16)),
    # DeepSeek Sparse Attention: MLA latent + indexer keys (cache.update_indexer -> DynamicIndexedLayer.indexer_keys).
    Case("glm_moe_dsa (GLM-5.2: indexer keys on 'full' indexer layers only)", lambda: _glm_5_2(7), decode=True,
         expect_types={"sparse_mla": 4, "mla": 3}),
    Case("deepseek_v32 (indexer keys on every layer)", lambda: _deepseek_v32(3), decode=True,
         expect_types={"sparse_mla": 3}),
    Case("minimax_m3_vl_text (MiniMax-M3: index keys on sparse layers)", lambda: _minimax_m3_text(3), decode=True,
         expect_types={"full_attention": 1, "sparse_attention": 2}),
]


def _build(cfg_dict: dict[str, Any], seq2seq: bool):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = transformers.AutoConfig.for_model(cfg_dict["model_type"], **{k: v for k, v in cfg_dict.items() if k != "model_type"})
        dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(
            str(cfg_dict.get("torch_dtype") or cfg_dict.get("dtype")), torch.float32)
        auto = transformers.AutoModelForSeq2SeqLM if seq2seq else transformers.AutoModelForCausalLM
        torch.manual_seed(0)
        return auto.from_config(cfg, dtype=dtype).eval(), cfg


def _forward(model, cfg, case: Case, length: int, cache=None, ids=None):
    vocab = cfg.get_text_config(decoder=True).vocab_size
    g = torch.Generator().manual_seed(1)
    ids = ids if ids is not None else torch.randint(1, vocab, (case.B, length), generator=g)
    kwargs: dict[str, Any] = {"use_cache": True}
    if cache is not None:
        kwargs["cache"] = cache
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if case.seq2seq:
            enc = torch.randint(1, vocab, (case.B, case.encoder_len), generator=g)
            out = model(input_ids=enc, decoder_input_ids=ids, **kwargs)
        else:
            out = model(input_ids=ids, **kwargs)
    return out.cache if getattr(out, "cache", None) is not None else out.past_key_values


def _id(case: Case) -> str:
    return case.name.split(" (")[0].replace(" ", "_")


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_prefill_cache_bytes_exact(case: Case):
    cfg_dict = case.config()
    arch, _ = build_architecture(cfg_dict)
    model, cfg = _build(cfg_dict, case.seq2seq)
    cache = _forward(model, cfg, case, case.L)
    logical, storage, found = held_bytes(cache)
    est = estimate_kv(arch, case.L, batch=case.B, engine="transformers",
                      encoder_len=case.encoder_len if case.seq2seq else None)
    assert logical > 0 and found
    assert est.total_bytes == logical, (est.to_dict(), found)
    assert est.storage_bytes["after_prefill"] == storage, (est.to_dict(), found)
    for layer_type, n in case.expect_types.items():
        assert est.by_layer_type[layer_type]["layers"] == n, est.by_layer_type
    if case.window is not None:
        assert case.L > case.window, "the window must bind in this test"
        assert logical < storage, "sliding layers keep views: their storage still pins the prefill"
        full_length = sum(e["bytes_per_token"] for e in est.by_layer_type.values()) * case.L * case.B
        assert logical < full_length, "the window saves memory against full attention on every layer"


@pytest.mark.parametrize("case", [c for c in CASES if c.decode], ids=_id)
def test_decode_step_cache_bytes_exact(case: Case):
    """Prefill L - 1 tokens, then one decode step: the cache now holds `L` tokens of context."""
    cfg_dict = case.config()
    arch, _ = build_architecture(cfg_dict)
    model, cfg = _build(cfg_dict, case.seq2seq)
    vocab = cfg.get_text_config(decoder=True).vocab_size
    ids = torch.randint(1, vocab, (case.B, case.L), generator=torch.Generator().manual_seed(2))
    cache = _forward(model, cfg, case, case.L - 1, ids=ids[:, :-1])
    cache = _forward(model, cfg, case, 1, cache=cache, ids=ids[:, -1:])
    logical, storage, found = held_bytes(cache)
    est = estimate_kv(arch, case.L, batch=case.B, engine="transformers")
    assert est.total_bytes == logical, (est.to_dict(), found)
    assert est.storage_bytes["while_decoding"] == storage, (est.to_dict(), found)


def test_sliding_layers_hold_window_minus_one_tokens():
    """The measured shape itself: [B, n_kv, W - 1, d] on sliding layers, [B, n_kv, L, d] on full ones."""
    case = CASES[5]  # gemma2
    cfg_dict = case.config()
    model, cfg = _build(cfg_dict, False)
    cache = _forward(model, cfg, case, case.L)
    shapes = {p: s for p, s, _ in held_bytes(cache)[2]}
    assert shapes["cache.layers[0].keys"] == (case.B, 2, 7, 256)
    assert shapes["cache.layers[1].keys"] == (case.B, 2, case.L, 256)


def test_mla_cache_is_the_compressed_latent():
    case = next(c for c in CASES if c.name.startswith("deepseek_v3"))
    model, cfg = _build(case.config(), False)
    shapes = {p: (s, d) for p, s, d in held_bytes(_forward(model, cfg, case, case.L))[2]}
    assert shapes["cache.layers[0].keys"] == ((case.B, 1, case.L, 32), "bfloat16")  # kv_lora_rank
    assert shapes["cache.layers[0].values"] == ((case.B, 1, case.L, 8), "bfloat16")  # qk_rope_head_dim


def test_recurrent_state_is_float32_in_a_bf16_model():
    case = next(c for c in CASES if c.name.startswith("mamba in bf16"))
    model, cfg = _build(case.config(), False)
    dtypes = {p.split(".")[-1].split("[")[0]: d for p, _, d in held_bytes(_forward(model, cfg, case, case.L))[2]}
    counter = {"cumulative_length_linear": "int64"} if _TF >= (5, 25) else {}  # see the next test
    assert dtypes == {"conv_states": "bfloat16", "recurrent_states": "float32", **counter}


@pytest.mark.parametrize("name", ["mamba in bf16", "jamba", "falcon_h1", "lfm2", "qwen3_next", "minimax"])
def test_linear_token_counter_by_release(name):
    """transformers 5.25 added cumulative_length_linear (cache_utils.py: LinearAttentionCacheLayerMixin), one int64
    scalar per linear/SSM cache layer whatever the batch; 5.24 has none; MiniMax's own cache has none in either.
    hfmem counts what the installed release holds in bookkeeping_bytes (total_bytes is checked in the tests above)."""
    case = next(c for c in CASES if c.name.startswith(name))
    cfg_dict = case.config()
    model, cfg = _build(cfg_dict, False)
    found = held_bytes(_forward(model, cfg, case, case.L))[2]
    counters = [(s, d) for p, s, d in found if p.endswith(".cumulative_length_linear")]
    assert all(c == ((), "int64") for c in counters)
    sliding = sum(1 for p, _, _ in found if p.endswith("._sliding_window_tensor"))
    est = estimate_kv(build_architecture(cfg_dict)[0], case.L, batch=case.B, engine="transformers")
    assert est.bookkeeping_bytes == 8 * (len(counters) + sliding)
    if _TF >= (5, 25) and name != "minimax":
        assert counters and any("cumulative_length_linear" in a for a in est.assumptions)
    else:
        assert not counters


def test_dsa_indexer_keys_measured_where_the_code_keeps_them():
    """GLM-5.2's indexer_types: layers 0-2 and 6 run their own indexer ('full') and keep [B, L, index_head_dim]
    bf16 keys; 3-5 reuse the previous top-k ('shared') and keep only the latent (GlmMoeDsaAttention.__init__)."""
    case = next(c for c in CASES if c.name.startswith("glm_moe_dsa"))
    model, cfg = _build(case.config(), False)
    shapes = {p: (s, d) for p, s, d in held_bytes(_forward(model, cfg, case, case.L))[2]}
    kept = sorted(int(p.split("[")[1].split("]")[0]) for p in shapes if p.endswith("indexer_keys"))
    assert kept == [0, 1, 2, 6]
    assert shapes["cache.layers[0].indexer_keys"] == ((case.B, case.L, 32), "bfloat16")
    assert shapes["cache.layers[3].keys"] == ((case.B, 1, case.L, 32), "bfloat16")  # the latent is still cached


def test_minimax_m3_index_keys_are_one_head():
    case = next(c for c in CASES if c.name.startswith("minimax_m3"))
    model, cfg = _build(case.config(), False)
    shapes = {p: (s, d) for p, s, d in held_bytes(_forward(model, cfg, case, case.L))[2]}
    assert "cache.layers[0].idx_keys" not in shapes
    assert shapes["cache.layers[1].idx_keys"] == ((case.B, 1, case.L, 32), "bfloat16")  # sparse_index_dim


def test_deepseek_v4_cache_tensors():
    """What DeepseekV4CSACache / DeepseekV4HCACache hold after a prefill of 39 tokens (CSA rate 4, HCA rate 16):
    K = V once (no values tensor), remainder buffers, compressed entries, float32 overlap gates on CSA only."""
    case = next(c for c in CASES if c.name.startswith("deepseek_v4 (sliding"))
    model, cfg = _build(case.config(), False)
    shapes = {p: (s, d) for p, s, d in held_bytes(_forward(model, cfg, case, 39))[2]}
    csa, hca = "cache.layers[2]", "cache.layers[3]"
    assert shapes[f"{csa}.keys"] == ((2, 1, 7, 32), "bfloat16") and f"{csa}.values" not in shapes
    assert shapes[f"{csa}.buffer_kv['compressor']"] == ((2, 3, 64), "bfloat16")  # 39 mod 4 tokens x 2 x head_dim
    assert shapes[f"{csa}.buffer_gate['indexer']"] == ((2, 3, 32), "bfloat16")
    assert shapes[f"{csa}.compressed_kv['compressor']"] == ((2, 9, 32), "bfloat16")
    assert shapes[f"{csa}.compressed_kv['indexer']"] == ((2, 9, 16), "bfloat16")
    assert shapes[f"{csa}.overlap_gate['compressor']"] == ((2, 4, 32), "float32")
    assert shapes[f"{hca}.buffer_kv['compressor']"] == ((2, 7, 32), "bfloat16")
    assert shapes[f"{hca}.compressed_kv['compressor']"] == ((2, 2, 32), "bfloat16")
    assert not any(p.startswith(f"{hca}.overlap") for p in shapes)
    assert shapes["cache.layers[0].values"] == ((2, 1, 7, 32), "bfloat16")  # pure sliding layers keep K and V


def test_deepseek_v4_flash_per_token():
    """DeepSeek-V4-Flash (43 layers: 2 sliding, 21 CSA, 20 HCA; head_dim 512, index_head_dim 128, bf16):
    21 x (512 + 128) x 2 / 4 + 20 x 512 x 2 / 128 = 6,880 B/token per sequence under transformers."""
    arch, _ = build_architecture(real_config("deepseek-ai/DeepSeek-V4-Flash"))
    est = estimate_kv(arch, 32_768, engine="transformers")
    assert est.bytes_per_token == 21 * 320 + 20 * 8 == 6_880
    assert not est.warnings
    by = est.by_layer_type
    assert (by["compressed_sparse_attention"]["layers"], by["heavily_compressed_attention"]["layers"]) == (21, 20)
    # 32,768 is a multiple of both rates: no buffers; windows 127 tokens; CSA overlap 4 x 640 x (2 + 4) per layer
    window = 2 * 127 * 2048 + 41 * 127 * 1024
    assert est.total_bytes == 6_880 * 32_768 + window + 21 * 4 * 640 * 6 + 43 * 8
