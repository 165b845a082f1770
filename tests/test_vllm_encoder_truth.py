"""Qwen3.5's vision tower in vLLM's profile (hfmem/memory/vllm_encoder.py qwen3_5_profile) against tensors MEASURED
in transformers' Qwen3_5VisionModel on CPU, and its terms in the L4 row of tests/test_vllm_logs.py.

What transformers can measure for vLLM: the MLP step and the outputs. transformers' Qwen3_5VisionBlock.forward is
vLLM's qwen3_vl.py Qwen3_VisionBlock.forward line for line (``x = x + attn(norm1(x))``, ``x = x + mlp(norm2(x))``,
the caller's loop keeping the block input) and its MLP is the same fc1 -> activation -> fc2, so the bytes alive at
the MLP's activation are the same tensors. Its attention and position-embedding code are not vLLM's (transformers
keeps the four bilinear neighbours of each position, rotates q/k its own way and calls SDPA), so those terms come
from vLLM's source alone (qwen3_5_profile's docstring) and are not compared here.
"""

from __future__ import annotations

import json

import pytest
from stubs import FIXTURES, load_config

from hfmem.memory.vllm_encoder import encoder_profile, is_modelled, qwen3_5_profile

SMALL = {"hidden_size": 64, "num_heads": 4, "intermediate_size": 256, "depth": 2, "out_hidden_size": 80}


def test_qwen3_5_mlp_step_and_outputs_against_transformers():
    """A shrunk Qwen3.5-4B vision config (width 64, 4 heads, intermediate 256 = 4 x width as in the real one, the
    real patch 16 / temporal 2 / merge 2 / position grid) run once in float32 on an 8 x 8-patch image: the live bytes
    the first block creates, measured at its MLP activation, plus the block input the caller holds, are hfmem's MLP
    step per patch (3d + 2I); the merged output is hfmem's encoder-cache bytes per embedding (out_hidden_size)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import training_measure as tm
    from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5VisionConfig
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5VisionModel

    tm.quiet()
    vision = {**load_config("Qwen/Qwen3.5-4B")["vision_config"], **SMALL}
    torch.manual_seed(0)
    model = Qwen3_5VisionModel._from_config(Qwen3_5VisionConfig(**vision), torch_dtype=torch.float32).eval()
    patches, a, d = 64, 4, SMALL["hidden_size"]
    pixels = torch.randn(patches, 3 * 2 * 16 * 16)  # C x T x P² values per patch row
    mode = tm.LiveTensorBytes(exclude=list(model.parameters()) + list(model.buffers()))
    marks: dict[str, int] = {}
    shapes: dict[str, tuple[int, ...]] = {}

    def before_block(_module, args):
        marks["block input"] = mode.current()
        shapes["block input"] = tuple(args[0].shape)

    def at_activation(_module, _args, _out):
        marks["activation"] = mode.current()

    model.blocks[0].register_forward_pre_hook(before_block)
    model.blocks[0].mlp.act_fn.register_forward_hook(at_activation)
    with torch.no_grad(), mode:
        out = model(pixels, torch.tensor([[1, 8, 8]]))
    assert shapes["block input"] == (patches, d)
    in_block = marks["activation"] - marks["block input"]  # the sum after attention, norm2, fc1, activation
    enc = qwen3_5_profile(vision, a, 1)
    assert enc is not None
    assert (in_block + patches * d * a) / patches == enc.phases["mlp"] / enc.patches  # + the held block input
    tokens = patches // 4
    assert tuple(out.pooler_output.shape) == (tokens, SMALL["out_hidden_size"])
    assert out.pooler_output.numel() * a / tokens == enc.cache_bytes / enc.tokens


def test_qwen3_5_encoder_terms_of_the_l4_row():
    """Qwen3.5-4B's tower (width 1024, 16 heads, intermediate 4096, out 2560, no deepstack) in bf16 at TP 1: the
    dummy is one 4096 x 4096 image at the processor's 16,777,216-pixel cap (65,536 patches, 16,384 embeddings; a
    two-frame video at the same per-frame cap would give fewer); alive through the blocks the pixels [65536, 1536],
    the position embeddings [65536, 1024] and cos/sin [65536, 32] each; the attention step 11 x 1024 per patch
    (input, norm1, qkv, the contiguous q/k copy and its rotated copy, FlashAttention's output, the projection), the
    MLP step 3 x 1024 + 2 x 4096 (the same 11 x 1024 at this ratio); the outputs kept [16384, 2560]."""
    vision = load_config("Qwen/Qwen3.5-4B")["vision_config"]
    assert is_modelled(vision)
    enc = encoder_profile(vision, 2, 1, (0, 29), 32_768)
    n = 65_536
    assert enc is not None and enc.modality == "image" and (enc.patches, enc.tokens, enc.budget_tokens) == (n, 16_384, 16_384)
    assert enc.pixel_bytes == n * 1536 * 2
    assert enc.phases["inputs"] == n * (1536 + 1024 + 64) * 2
    assert enc.phases["attention"] == enc.phases["mlp"] == n * 2 * 11 * 1024
    assert enc.run_bytes == enc.phases["inputs"] + n * 2 * 11 * 1024
    assert enc.cache_bytes == 16_384 * 2560 * 2
    two = qwen3_5_profile(vision, 2, 2)  # TP 2: 3d + 8d/2 and 3d + 2I/2 per patch
    assert two is not None and two.phases["attention"] == n * 2 * 7 * 1024 and two.phases["mlp"] == n * 2 * 7 * 1024
    moe = json.loads((FIXTURES / "normalise" / "Qwen" / "Qwen3.5-35B-A3B" / "config.json").read_text())["vision_config"]
    assert moe["model_type"] == "qwen3_5_moe_vision"  # Qwen3_5MoeForConditionalGeneration builds the same tower
    assert is_modelled(moe) and qwen3_5_profile(moe, 2, 1) is not None


def test_qwen3_vl_tower_follows_the_read_release():
    """Qwen3-VL's tower is the same Qwen3_VisionTransformer: from 0.17.0 (read there, at 0.19.0 and 0.29.0) and for
    the newest code it is modelled as Qwen3.5's (position embeddings and cos/sin alive, attention 3d + 8d/TP, MLP
    3d + 2I/TP, its three deepstack outputs kept); 0.13.0 keeps the form read in that release's source, whose row
    is tests/test_vllm_logs.py's qwen3-vl-30b-a3b-h100nvl-v0.13."""
    vision = load_config("Qwen/Qwen3-VL-30B-A3B-Instruct")["vision_config"]
    d, inter, n, tokens = 1152, 4304, 65_536, 16_384
    for release in ((0, 17), (0, 29), None):
        enc = encoder_profile(vision, 2, 1, release)
        assert enc is not None and (enc.modality, enc.patches, enc.tokens) == ("image", n, tokens)
        assert enc.phases["inputs"] == n * (1536 + d + d // 16) * 2
        assert enc.phases["attention"] == n * 2 * 11 * d and enc.phases["mlp"] == n * 2 * (3 * d + 2 * inter)
        assert enc.phases["deepstack"] == 3 * tokens * 2048 * 2
    old = encoder_profile(vision, 2, 1, (0, 13))
    assert old is not None and old.phases["attention"] == n * 2 * 8 * d and old.phases["inputs"] == n * 1536 * 2
