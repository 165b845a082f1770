"""vLLM's multimodal encoder profile: the vision tower's run on one dummy item of the maximum feature size.

V1's ``gpu_model_runner.py`` ``profile_run`` first runs ``get_multimodal_embeddings`` on
``max_items_per_batch`` dummy items of the modality with the most tokens per item (``MultiModalBudget``,
``get_modality_with_max_tokens``; log: "Encoder cache will be initialized with a budget of N tokens, and profiled
with K <modality> items of the maximum feature size"), keeps the outputs in ``encoder_cache`` through the text
dummy run and the dummy sampler run, and clears them after; the batched dummy inputs stay referenced by profile_run
until it returns. The torch peak is therefore the largest of the encoder run and the text phases with the encoder
outputs and the dummy pixel values alive.

The pixel values are in the model dtype, not the processor's float32: ``InputProcessingContext.call_hf_processor``
casts every floating-point output of the HF processor to ``model_config.dtype`` (``_postprocess_output``, "mimics the
behavior of transformers.BatchFeature"; multimodal/processing.py at 0.11.0 and 0.13.0, multimodal/processing/context.py
at 0.23.0), and the dummy item is built through it (``BaseMultiModalProcessor._call_hf_processor``). The towers'
``.type(self.visual.dtype)`` / ``x.to(dtype=self.dtype)`` casts are then no-ops: one copy, not two.

Modelled here for Qwen3-VL's vision tower (``model_executor/models/qwen3_vl.py``), Qwen2.5-VL's
(``model_executor/models/qwen2_5_vl.py``, whose dummy item follows ``qwen2_vl.py``) and Qwen3.5's (``qwen3_5.py``, which
builds Qwen3-VL's tower and dummy), where every number is read from
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


# Qwen2.5-VL's image processor cap (the checkpoints' preprocessor_config.json "max_pixels": 12845056 = 3584², the
# figure Qwen2VLImageProcessor's smart_resize bounds every image and video frame by)
QWEN2_5_VL_MAX_PIXELS = 12_845_056


@dataclass(frozen=True)
class EncoderProfile:
    modality: str
    patches: int  # rows through the vision blocks (one per patch_size² x temporal_patch_size pixels)
    tokens: int  # merged embeddings the item gives the language model (patches / spatial_merge_size²)
    budget_tokens: int  # the log's "Encoder cache will be initialized with a budget of N tokens"
    run_bytes: int  # the encoder run's peak, per GPU
    cache_bytes: int  # the outputs kept in encoder_cache through the text dummy run and the sampler, per GPU
    phases: dict[str, int]  # the run's parts, for the docs and tests
    pixel_bytes: int = 0  # the dummy pixel values, alive through the text dummy run and the sampler too

    @property
    def held_bytes(self) -> int:
        """Alive beside the text phases: profile_run keeps ``batched_dummy_mm_inputs`` (the pixel values) as a local
        until it returns and the outputs in ``encoder_cache`` until after the sampler run (gpu_model_runner.py
        profile_run at 0.11.0, 0.13.0 and 0.23.0)."""
        return self.cache_bytes + self.pixel_bytes

    def detail(self) -> str:
        return (f"1 dummy {self.modality} of {self.patches:,} patches -> {self.tokens:,} embeddings "
                f"(vLLM's encoder budget {self.budget_tokens:,} tokens)")


def is_qwen3_vl(vision: dict[str, Any]) -> bool:
    return str(vision.get("model_type", "")).startswith("qwen3_vl")


def _tower_dims(vision: dict[str, Any], default_patch: int) -> tuple[int, int, int, int, int, int, int] | None:
    """(hidden, intermediate, patch, temporal patch, spatial merge, output hidden, input channels) of a Qwen-VL
    vision config, with the defaults its config class has (the patch size differs by family), or None when one is
    missing or not a number."""
    try:
        d = int(vision["hidden_size"])
        return (d, int(vision["intermediate_size"]), int(vision.get("patch_size", default_patch)),
                int(vision.get("temporal_patch_size", 2)), int(vision.get("spatial_merge_size", 2)),
                int(vision.get("out_hidden_size", d)), int(vision.get("in_channels", 3)))
    except (KeyError, TypeError, ValueError):
        return None


def is_qwen2_5_vl(vision: dict[str, Any]) -> bool:
    return str(vision.get("model_type", "")).startswith("qwen2_5_vl")


def is_qwen3_5(vision: dict[str, Any]) -> bool:
    """Qwen3.5's vision tower (qwen3_5_vision, qwen3_5_moe_vision): vLLM builds it as Qwen3-VL's."""
    return str(vision.get("model_type", "")).startswith("qwen3_5")


def is_modelled(vision: dict[str, Any]) -> bool:
    return is_qwen3_vl(vision) or is_qwen2_5_vl(vision) or is_qwen3_5(vision)


# Qwen3.5's image processor cap: the checkpoints' preprocessor_config.json ("size": {"longest_edge": 16777216,
# "shortest_edge": 65536}, patch 16, merge 2, Qwen2VLImageProcessorFast under Qwen3VLProcessor, as the Qwen3.5 base
# checkpoints ship it), the same figure as Qwen3-VL's
QWEN3_5_IMAGE_MAX_PIXELS = 16_777_216


def qwen3_5_profile(vision: dict[str, Any], act_bytes: int, tp: int) -> EncoderProfile | None:
    """The dummy item and the encoder run's peak for Qwen3.5's vision tower, read in vLLM 0.17.0 (the first release
    with model_executor/models/qwen3_5.py), 0.19.0 and 0.29.0, where the live tensors are the same.

    qwen3_5.py registers Qwen3_5ForConditionalGeneration with Qwen3VLMultiModalProcessor, Qwen3VLDummyInputsBuilder
    and a Qwen3VLProcessingInfo subclass, and builds its tower as qwen3_vl.py Qwen3_VisionTransformer (deepstack
    levels from the config: none for Qwen3.5). The dummy: ``get_max_video_tokens`` prices a video at two frames of
    half the video cap (one temporal patch), at most 12,288 embeddings for a 25,165,824-pixel cap, below one image at
    the image cap (``get_image_size_with_most_features``: 16,384 merged tokens factored square, a 4096 x 4096 image,
    65,536 patches), so vLLM profiles 1 image item of 16,384 embeddings.

    The run, per GPU (eager: ``compile_mm_encoder`` is off by default; linears split TP ways, the default
    mm_encoder_tp_mode "weights"):
    - inputs alive through every block: the pixel values [patches, C x T x P²] in the model dtype (module
      docstring), ``fast_pos_embed_interpolate``'s position embeddings [patches, d] (a local of
      ``Qwen3_VisionTransformer.forward`` at 0.17.0, an entry of ``prepare_encoder_metadata`` later, either way
      referenced until forward returns) and ``rot_pos_emb``'s cos and sin [patches, head_dim / 2] each (the rotary
      dim is half the head, partial_rotary_factor 0.5, gathered for the two axes; get_rope's cache in the model
      dtype);
    - the larger of the attention step, ``Qwen2_5_VisionAttention.forward``: the block input, norm1's output, qkv
      [3d/TP], the contiguous q/k copy ``qk_reshaped`` [2d/TP] and ``ApplyRotaryEmb``'s out-of-place ``qk_rotated``
      [2d/TP] (all locals until it returns), FlashAttention's varlen output [d/TP] and the projection's [d]:
      3d + 8d/TP; and the MLP step, ``Qwen3_VisionBlock.forward`` ``x = x + self.mlp(self.norm2(x))``: the block
      input (still referenced by the caller's ``hidden_states``), the post-attention sum, norm2's output, fc1
      [I/TP] and the activation [I/TP]: 3d + 2I/TP. The patch embedding (Conv3dLayer as an unfold, a copy and a
      linear with torch >= 2.9) and the merger stay below both.
    The outputs kept: the merger's [embeddings, out_hidden_size] (and deepstack levels' where a config has them).
    """
    return qwen3_vl_tower_profile(vision, act_bytes, tp, QWEN3_5_IMAGE_MAX_PIXELS)


# The first release whose Qwen3_VisionTransformer hfmem read in the form qwen3_vl_tower_profile models (0.17.0, the
# same live tensors at 0.19.0 and 0.29.0). Qwen3-VL's own tower is this class, so from here it is modelled the same
# way; 0.13.0's attention (read for encoder_profile) had no contiguous q/k copy and its forward no position
# embeddings kept through the blocks; 0.15-0.16 are not read and keep that earlier form.
QWEN3_VL_TOWER_READ = (0, 17)


def qwen3_vl_tower_profile(vision: dict[str, Any], act_bytes: int, tp: int, image_max_pixels: int) -> EncoderProfile | None:
    """qwen3_vl.py Qwen3_VisionTransformer's profile run on one image at ``image_max_pixels`` (the dummy from 0.12 on,
    when the video's budget no longer beats the image's), as qwen3_5_profile's docstring reads it, with the
    deepstack levels a config names (their outputs [embeddings, out_hidden_size] each kept beside the blocks)."""
    dims = _tower_dims(vision, default_patch=16)
    try:
        heads = int(vision["num_heads"])
        deep = len(vision.get("deepstack_visual_indexes") or [])
    except (KeyError, TypeError, ValueError):
        return None
    if dims is None or heads < 1:
        return None
    d, inter, patch, temporal, merge, out, channels = dims
    a, split = act_bytes, max(1, tp)
    tokens = image_max_pixels // (patch * merge) ** 2
    patches = tokens * merge * merge
    pixels = patches * channels * temporal * patch * patch * a
    positions = patches * d * a
    rotary = patches * (d // heads) * a  # cos and sin, head_dim / 2 each
    inputs = pixels + positions + rotary
    attention = patches * a * (3 * d + 8 * d // split)
    mlp = patches * a * (3 * d + 2 * (inter // split))
    deepstack = deep * tokens * out * a
    run = inputs + max(attention, mlp) + deepstack
    cache = tokens * out * (1 + deep) * a
    phases = {"inputs": inputs, "attention": attention, "mlp": mlp, "deepstack": deepstack}
    return EncoderProfile("image", patches, tokens, tokens, run, cache, phases, pixels)


def qwen2_5_vl_profile(vision: dict[str, Any], act_bytes: int, tp: int, max_model_len: int) -> EncoderProfile | None:
    """The dummy item and the encoder run's peak for Qwen2.5-VL's vision tower at ``max_model_len``.

    The dummy (qwen2_vl.py ``Qwen2VLProcessingInfo``, which Qwen2.5-VL inherits): the image with most features is a
    9,999,999-pixel square through ``smart_resize`` at the processor's max_pixels, a side of
    floor(sqrt(max_pixels) / (patch x merge)) x patch x merge (3584 for Qwen2.5-VL: 256 x 256 patches, 16,384
    embeddings a frame pair). ``_get_max_video_frames(seq_len)`` adds frames at that size while the video's tokens
    (frames padded to the temporal patch, ``_get_vision_info``) stay within max_model_len, and the budget
    (``get_mm_max_tokens_per_item``) takes the modality with more tokens: at 128,000 tokens a 14-frame video, 7 frame
    pairs = 458,752 patches and 114,688 embeddings (a 0.23.0 log prints "a budget of 114688 tokens, and profiled
    with 1 video items"). ``_MAX_FRAMES_PER_VIDEO`` (600, later 32) caps the frames only beyond 262,144 tokens at
    32, past this family's 128k context; not applied.

    The run, per GPU, from ``Qwen2_5_VisionTransformer.forward`` and ``Qwen2_5_VisionBlock.forward`` (read at 0.11.0
    and 0.23.0; the live tensors are the same), linears split TP ways as for Qwen3-VL:
    - inputs: ``pixel_values_videos`` [patches, C x T x P²] in the model dtype (module docstring) and the rotary
      table: float32 [patches, head_dim / 2] at 0.11.0, at 0.23.0 ``prepare_encoder_metadata``'s cos and sin
      [patches, head_dim / 2] each from get_rope's model-dtype cache: the same bytes;
    - the larger of the attention step (block input, norm1's output, qkv, ``qk_concat`` and ``qk_rotated`` [2d],
      the attention output and the projection's: 11d at TP 1; at TP > 1 ``all_gather_interleave`` adds the gathered
      shards and their concatenation [3d] each) and the MLP step (block input, the attention output, the fused
      add-norm's sum and normalised output alive through ``Qwen2_5_VisionMLP.forward``, whose ``gate_up`` [2I] and
      activation [I] stay referenced until ``down_proj``'s output [d]: 5d + 3I at TP 1). At 0.23.0 under the
      default Inductor compilation the vision blocks run eagerly (``compile_mm_encoder`` False), RMSNorm's
      fused add-norm takes the IR op's native, out-of-place path (CudaPlatform.get_default_ir_op_priority: "native"
      when Inductor compiles) and SiluAndMul's native form is compiled into one kernel (``compile_native=True``),
      so the same tensors are alive; the patch embedding's Conv3dLayer is an unfold and a linear there (torch >=
      2.9), below the MLP step. The attention step stays below it too.
    Outputs kept: the merger's [embeddings, out_hidden_size].
    """
    dims = _tower_dims(vision, default_patch=14)
    try:
        heads = int(vision["num_heads"])
    except (KeyError, TypeError, ValueError):
        return None
    if dims is None:
        return None
    d, inter, patch, temporal, merge, out, channels = dims
    from math import isqrt

    factor = patch * merge
    side = isqrt(QWEN2_5_VL_MAX_PIXELS) // factor * factor
    grid = side // patch
    pair_tokens = grid * grid // (merge * merge)  # one image, or one temporal pair of video frames

    def video_tokens(frames: int) -> int:
        return max((frames + frames % temporal) // temporal, 1) * pair_tokens

    frames = 1
    while video_tokens(frames + 1) <= max_model_len:
        frames += 1
    tokens = video_tokens(frames)
    modality = "video" if tokens > pair_tokens else "image"  # a tie keeps the first key, the image
    if modality == "image":
        tokens = pair_tokens
    patches = tokens * merge * merge
    a, split = act_bytes, max(1, tp)
    pixels = patches * channels * temporal * patch * patch * act_bytes
    inputs = pixels + patches * (d // heads // 2) * 4
    gathered = 2 * 3 * d if split > 1 else 0
    attention = patches * a * (2 * d + 3 * d // split + gathered + 4 * d // split + d // split + d)
    mlp = patches * a * (4 * d + 3 * (inter // split) + d)
    run = inputs + max(attention, mlp)
    cache = tokens * out * a
    phases = {"inputs": inputs, "attention": attention, "mlp": mlp}
    return EncoderProfile(modality, patches, tokens, tokens, run, cache, phases, pixels)


# The first release whose Qwen3-VL video budget is its plain embedding count (no x 12.5): 0.11.0 has the factor
# (qwen3_vl.py at 0.11.0, and the 0.11.0 log's 153,600-token budget), 0.13.0 does not (its log profiles "1 image
# items" at 16,384 tokens); the release between them that dropped it is not pinned down here.
VIDEO_FACTOR_DROPPED = (0, 12)


def encoder_profile(vision: dict[str, Any], act_bytes: int, tp: int,
                    release: tuple[int, int] | None = None, max_model_len: int | None = None) -> EncoderProfile | None:
    """The dummy item and the encoder run's peak for Qwen3-VL's vision tower (Qwen2.5-VL's: qwen2_5_vl_profile, at
    ``max_model_len``); None for any other tower.

    The dummy item, by vLLM release (``release`` None: the newest):
    - before VIDEO_FACTOR_DROPPED: a video, whose budget (12.5 x its embeddings) beats an image's 16,384.
      ``Qwen3VLDummyInputsBuilder`` sizes it with ``video_smart_resize``, which caps frames x height x width at the
      video's max pixels; the frame count is the ``_MAX_FRAMES_PER_VIDEO`` cap (24,576 frames of 32 x 32), so the
      cap is met exactly: patches = max pixels / (patch_size² x temporal_patch_size). Qwen3-VL-30B: 49,152 patches,
      12,288 embeddings, budget 153,600 (the 0.11.0 log's figure);
    - from it: the video's budget is its 12,288 embeddings, below the image's, so the dummy is one image at the
      image processor's cap: 16,777,216 pixels = 65,536 patches (one 4096 x 4096 frame pair), 16,384 embeddings
      (the 0.13.0 log: "budget of 16384 tokens, and profiled with 1 image items").

    The run from QWEN3_VL_TOWER_READ on (and for ``release`` None): qwen3_vl_tower_profile. Before it, per GPU, as
    read at 0.11.0 and 0.13.0 (the vision linears are Column/RowParallel split TP ways, vLLM's default
    mm_encoder_tp_mode "weights"; no attention score matrix is stored: Qwen3-VL's vision head size is 72, outside 0.11.0's
    FlashAttention list (FlashAttentionBackend.get_supported_head_sizes), so CudaPlatform.get_vit_attn_backend
    picks xFormers' memory-efficient kernel on sm80-sm90 unless the flash_attn package is installed; 0.13.0's
    FlashAttention takes any multiple of 8 (supports_head_size) and runs varlen. Not counted: the patch
    embedding's workspace at 0.11.0, an nn.Conv3d over all patches whose cuDNN engine and workspace are chosen at
    run time (0.13.0 with torch 2.9.0 runs Conv3dLayer as an unfold and a linear instead)):
    - inputs: ``pixel_values_videos`` [patches, 3 x T x P²] in the model dtype (module docstring), held by the
      batched kwargs;
    - the larger of one block's attention step (``Qwen2_5_VisionAttention.split_qkv`` at TP > 1:
      ``all_gather_interleave`` holds the gathered shards and their concatenation [patches, 3d] beside the local
      qkv [patches, 3d/TP], the block input and norm1's output; at TP 1 the qkv and its contiguous q/k/v) and its MLP
      (``Qwen3_VisionMLP``: input, norm2, fc1 and activation [patches, I/TP]);
    - the deepstack features already produced [embeddings, out_hidden_size] each (``Qwen3_VisionTransformer.forward``).
    The outputs kept: [embeddings, out_hidden_size x (1 + deepstack levels)] (the merger's and deepstack mergers').
    """
    if is_qwen2_5_vl(vision) and max_model_len:
        return qwen2_5_vl_profile(vision, act_bytes, tp, max_model_len)
    if is_qwen3_5(vision):
        return qwen3_5_profile(vision, act_bytes, tp)
    if not is_qwen3_vl(vision):
        return None
    if release is None or release >= QWEN3_VL_TOWER_READ:
        return qwen3_vl_tower_profile(vision, act_bytes, tp, QWEN3_VL_IMAGE_MAX_PIXELS)
    dims = _tower_dims(vision, default_patch=16)
    try:
        deep = len(vision.get("deepstack_visual_indexes") or [])
    except TypeError:
        return None
    if dims is None:
        return None
    d, inter, patch, temporal, merge, out, channels = dims
    a = act_bytes
    patches = QWEN3_VL_VIDEO_MAX_PIXELS // (patch * patch * temporal)
    tokens = patches // (merge * merge)
    old_budget = release is not None and release < VIDEO_FACTOR_DROPPED
    budget = int(tokens * QWEN3_VL_VIDEO_TOKEN_FACTOR) if old_budget else tokens
    image_tokens = QWEN3_VL_IMAGE_MAX_PIXELS // (patch * merge) ** 2
    modality = "video" if budget >= image_tokens else "image"
    if modality == "image":  # the image's budget wins: the dummy is one image at the image processor's cap
        patches, tokens, budget = image_tokens * merge * merge, image_tokens, image_tokens
    pixels = patches * channels * temporal * patch * patch * a
    inputs = pixels
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
    return EncoderProfile(modality, patches, tokens, budget, run, cache, phases, pixels)
