"""vLLM's multimodal encoder profile: the vision tower's run on one dummy item of the maximum feature size.

V1's ``gpu_model_runner.py`` ``profile_run`` first runs ``get_multimodal_embeddings`` on
``max_items_per_batch`` dummy items of the modality with the most tokens per item (``MultiModalBudget``,
``get_modality_with_max_tokens``; log: "Encoder cache will be initialized with a budget of N tokens, and profiled
with K <modality> items of the maximum feature size"), keeps the outputs in ``encoder_cache`` through the text
dummy run and the dummy sampler run, and clears them after. The torch peak is therefore the largest of the encoder
run and the text phases with the encoder outputs alive.

Modelled here for Qwen3-VL's vision tower (``model_executor/models/qwen3_vl.py``), where every number is read from
the config's ``vision_config`` and the processor defaults the checkpoint ships (named below); other vision towers
get a note from the planner, not a guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Qwen3-VL's preprocessors (the checkpoints' video_preprocessor_config.json / preprocessor_config.json
# ``size.longest_edge``, the defaults of transformers' Qwen3VLVideoProcessor / Qwen2VLImageProcessorFast as Qwen3-VL
# configures them): a video holds at most 25,165,824 pixels over all its frames (vLLM qwen3_vl.py: "Official
# recommended max pixels is 24576 * 32 * 32"), an image 16,777,216.
QWEN3_VL_VIDEO_MAX_PIXELS = 24576 * 32 * 32
QWEN3_VL_IMAGE_MAX_PIXELS = 16_777_216
# qwen3_vl.py Qwen3VLProcessingInfo.get_max_video_tokens: each merged video token is budgeted as 12.5 prompt tokens
# (its "<t seconds>" timestamp text and the vision start/pad/end tokens)
QWEN3_VL_VIDEO_TOKEN_FACTOR = 12.5


@dataclass(frozen=True)
class EncoderProfile:
    modality: str
    patches: int  # rows through the vision blocks (one per patch_size² x temporal_patch_size pixels)
    tokens: int  # merged embeddings the item gives the language model (patches / spatial_merge_size²)
    budget_tokens: int  # the log's "Encoder cache will be initialized with a budget of N tokens"
    run_bytes: int  # the encoder run's peak, per GPU
    cache_bytes: int  # the outputs kept in encoder_cache through the text dummy run and the sampler, per GPU
    phases: dict[str, int]  # the run's parts, for the docs and tests

    def detail(self) -> str:
        return (f"1 dummy {self.modality} of {self.patches:,} patches -> {self.tokens:,} embeddings "
                f"(vLLM's encoder budget {self.budget_tokens:,} tokens)")


def is_qwen3_vl(vision: dict[str, Any]) -> bool:
    return str(vision.get("model_type", "")).startswith("qwen3_vl")


# The first release whose Qwen3-VL video budget is its plain embedding count (no x 12.5): 0.11.0 has the factor
# (qwen3_vl.py at 0.11.0, and the 0.11.0 log's 153,600-token budget), 0.13.0 does not (its log profiles "1 image
# items" at 16,384 tokens); the release between them that dropped it is not pinned down here.
VIDEO_FACTOR_DROPPED = (0, 12)


def encoder_profile(vision: dict[str, Any], act_bytes: int, tp: int,
                    release: tuple[int, int] | None = None) -> EncoderProfile | None:
    """The dummy item and the encoder run's peak for Qwen3-VL's vision tower; None for any other tower.

    The dummy item, by vLLM release (``release`` None: the newest):
    - before VIDEO_FACTOR_DROPPED: a video, whose budget (12.5 x its embeddings) beats an image's 16,384.
      ``Qwen3VLDummyInputsBuilder`` sizes it with ``video_smart_resize``, which caps frames x height x width at the
      video's max pixels; the frame count is the ``_MAX_FRAMES_PER_VIDEO`` cap (24,576 frames of 32 x 32), so the
      cap is met exactly: patches = max pixels / (patch_size² x temporal_patch_size). Qwen3-VL-30B: 49,152 patches,
      12,288 embeddings, budget 153,600 (the 0.11.0 log's figure);
    - from it: the video's budget is its 12,288 embeddings, below the image's, so the dummy is one image at the
      image processor's cap: 16,777,216 pixels = 65,536 patches (one 4096 x 4096 frame pair), 16,384 embeddings
      (the 0.13.0 log: "budget of 16384 tokens, and profiled with 1 image items").

    The run, per GPU (the vision linears are Column/RowParallel split TP ways, vLLM's default mm_encoder_tp_mode
    "weights"; attention is FlashAttention/xFormers/SDPA varlen per frame, no score matrix is stored):
    - inputs: the processor's float32 ``pixel_values_videos`` [patches, 3 x T x P²] (held by the batched kwargs)
      and its cast to the model dtype (``_process_video_input``);
    - the larger of one block's attention step (``Qwen2_5_VisionAttention.split_qkv`` at TP > 1:
      ``all_gather_interleave`` holds the gathered shards and their concatenation [patches, 3d] beside the local
      qkv [patches, 3d/TP], the block input and norm1's output; at TP 1 the qkv and its contiguous q/k/v) and its MLP
      (``Qwen3_VisionMLP``: input, norm2, fc1 and activation [patches, I/TP]);
    - the deepstack features already produced [embeddings, out_hidden_size] each (``Qwen3_VisionTransformer.forward``).
    The outputs kept: [embeddings, out_hidden_size x (1 + deepstack levels)] (the merger's and deepstack mergers').
    """
    if not is_qwen3_vl(vision):
        return None
    try:
        d = int(vision["hidden_size"])
        inter = int(vision["intermediate_size"])
        patch = int(vision.get("patch_size", 16))
        temporal = int(vision.get("temporal_patch_size", 2))
        merge = int(vision.get("spatial_merge_size", 2))
        out = int(vision.get("out_hidden_size", d))
        channels = int(vision.get("in_channels", 3))
        deep = len(vision.get("deepstack_visual_indexes") or [])
    except (KeyError, TypeError, ValueError):
        return None
    a = act_bytes
    patches = QWEN3_VL_VIDEO_MAX_PIXELS // (patch * patch * temporal)
    tokens = patches // (merge * merge)
    old_budget = release is not None and release < VIDEO_FACTOR_DROPPED
    budget = int(tokens * QWEN3_VL_VIDEO_TOKEN_FACTOR) if old_budget else tokens
    image_tokens = QWEN3_VL_IMAGE_MAX_PIXELS // (patch * merge) ** 2
    modality = "video" if budget >= image_tokens else "image"
    if modality == "image":  # the image's budget wins: the dummy is one image at the image processor's cap
        patches, tokens, budget = image_tokens * merge * merge, image_tokens, image_tokens
    pixels = patches * channels * temporal * patch * patch
    inputs = pixels * 4 + pixels * a
    split = max(1, tp)
    if split > 1:
        attention = patches * a * (2 * d + 3 * d // split + 2 * 3 * d)
    else:
        attention = patches * a * (2 * d + 3 * d + 3 * d)
    mlp = patches * a * (2 * d + 2 * (inter // split))
    deepstack = deep * tokens * out * a
    run = inputs + max(attention, mlp) + deepstack
    cache = tokens * out * (1 + deep) * a
    phases = {"inputs": inputs, "attention": attention, "mlp": mlp, "deepstack": deepstack}
    return EncoderProfile(modality, patches, tokens, budget, run, cache, phases)
