"""vLLM V1's paged KV cache: the blocks the block manager reserves for `batch` requests of `context` tokens, per
layer spec and layer group (vllm, v1/kv_cache_interface.py and v1/core/kv_cache_utils.py; sources per function)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from hfmem.errors import UsageError
from hfmem.memory.kv.estimate import DOES_NOT_START, GPU_NOT_CHECKED, KVCacheEstimate
from hfmem.memory.kv.layers import (
    _BITS,
    _add,
    _attn_bytes_per_token,
    _Layer,
    _State,
    _state_bytes,
    index_bytes_per_token,
)
from hfmem.memory.kv.vllm_deepseek_v4 import deepseek_v4_vllm, layout_for
from hfmem.memory.kv.vllm_dtypes import (
    NVFP4,
    TURBOQUANT,
    VLLM_NAME,
    backend_refusal,
    forced_backend_refusal,
    gpu_decides,
    head_size_refusal,
    is_vllm_quantized,
    release_refusal,
    sink_kinds,
    turboquant_block_size,
)
from hfmem.memory.vllm_versions import as_compared
from hfmem.model.architecture import Architecture
from hfmem.units import cdiv, fmt_bytes

# A sliding-window (or chunked) layer admits max_num_batched_tokens beyond its window up to vLLM 0.25; from 0.26
# VllmConfig.max_in_flight_tokens, max_concurrent_batches x max_num_batched_tokens (kv_cache_interface.py
# SlidingWindowSpec / ChunkedLocalAttentionSpec.max_admission_blocks_per_request; read in the 0.25.0 and 0.26.0 wheels),
# where the async scheduling that config/vllm.py turns on by default for generate models runs 2 batches at pipeline
# size 1 (VllmConfig.max_concurrent_batches; MTP and EAGLE drafts keep it on).
IN_FLIGHT_ADMISSION_FROM = (0, 26)
IN_FLIGHT_BATCHES = 2


# A state layer that exports its prefix-cache checkpoint from inside a prefill keeps one more state page per request in
# mamba_cache_mode "align" (MambaSpec.num_prefill_checkpoint_blocks: max_memory_usage_bytes = page x (2 + it)): Mamba2
# mixers from 0.32 (model_executor/layers/mamba/mamba_mixer2.py get_kv_cache_spec), GDN layers (Qwen3-Next, Qwen3.5)
# from 0.33 when their prefill runs FlashInfer's kernel (gdn/qwen_gdn_linear_attn.py _resolve_gdn_prefill_backend:
# on Hopper; on Blackwell only with a CUDA 13 runtime, which the wheel's build decides and hfmem does not assume), KDA
# layers (Kimi-K3) from 0.29 when their prefill runs FlashKDA (models/kimi_k3/nvidia/kda.py resolve_kda_prefill_backend
# "auto": SM 9x, 10x or 12x, a bf16 model, 128-wide heads and a bounded gate, linear_attn_config.gate_lower_bound;
# Kimi-Linear declares no bound and stays on Triton). Read in the 0.29.0-0.34.0 wheels.
CHECKPOINT_PAGE_FROM = {"mamba2": (0, 32), "gdn": (0, 33), "kda": (0, 29)}
GDN_FLASHINFER_SM = 90
FLASHKDA_SM_MAJORS = (9, 10, 12)


# Automatic prefix caching is on by default for hybrid attention/state models from vLLM 0.26
# (config/model.py ModelConfig.is_prefix_caching_supported: up to 0.25 "Hybrid models do not support prefix caching",
# so `vllm serve` starts them without it unless asked). Read in the 0.11.0-0.34.0 wheels.
HYBRID_PREFIX_CACHING_FROM = (0, 26)
# Asked for, prefix caching of a hybrid's state (model_executor/models/config.py MambaModelConfig and
# HybridAttentionMambaModelConfig.verify_and_update_config; no speculative decoding):
# - the models whose vLLM class declares SupportsMambaPrefixCaching (the Mamba/Mamba2 families, ALL_MODE_TYPES) keep a
#   state page for every block of context (MambaSpec.max_memory_usage_bytes with mamba_block_size = the attention
#   block, aligned to the Mamba2 chunk size), from 0.11.1 (0.11.0 switched prefix caching off for every hybrid; 0.11
#   here is 0.11.2, the newest 0.11) up to 0.27, named mamba_cache_mode "all" from 0.15;
# - every other hybrid: prefix caching switched off ("Hybrid or mamba-based model detected without support for prefix
#   caching: disabling") up to 0.14, mamba_cache_mode "align" (two pages) from 0.15, as all of them from 0.28.
ALL_MODE_FROM = (0, 11)
ALIGN_MODE_FROM = (0, 15)
ALL_MODE_UNTIL = (0, 28)
PAGE_PER_BLOCK = 0  # _Spec.usage's state_pages in mode "all": a page per block of context, not a fixed count
ALL_MODE_TYPES = frozenset({"bamba", "falcon_h1", "granitemoehybrid", "jamba", "mamba", "mamba2", "nemotron_h",
                            "zamba2"})
# Speculative decoding (MambaSpec.num_speculative_blocks = num_speculative_tokens, from the state layers'
# get_kv_cache_spec, model_executor/layers/mamba/abstract.py; 0 only with --use-replayssm, off by default): at run time
# every release keeps one more state page per draft token per request (single_type_kv_cache_manager.py MambaManager
# allocate_new_blocks); what its planning charges (MambaSpec.max_memory_usage_bytes) varies by release:
# - up to 0.14 nothing (a page, or pages by mamba_block_size);
# - 0.15-0.21 the pages in mamba_cache_mode "none" (1 + k) and "align" (2 + k), none in "all";
# - from 0.22 in "all" too (a page per block + k).
# The mode itself (model_executor/models/config.py MambaModelConfig): 0.15-0.16 assert that "align" is not run with
# speculative decoding (vLLM does not start); 0.20-0.21 give the Mamba/Mamba2 families "align", not "all", when a
# drafter runs. Read in the 0.10.2-0.34.0 wheels.
SPEC_PAGES_CHARGED_FROM = (0, 15)
SPEC_PAGES_CHARGED_IN_ALL_MODE_FROM = (0, 22)
SPEC_REFUSED_IN_ALIGN = ((0, 15), (0, 17))
SPEC_ALIGN_NOT_ALL = ((0, 20), (0, 22))


def _in(release: tuple[int, int] | None, span: tuple[tuple[int, int], tuple[int, int]]) -> bool:
    return release is not None and span[0] <= release < span[1]


# Draft tokens also widen every conv state by one row each (MambaStateShapeCalculator: conv_kernel - 1 + num_spec
# columns, model_executor/layers/mamba/mamba_utils.py), where the model's get_mamba_state_shape_from_config passes
# num_speculative_tokens and the shape function uses it: GDN models in every release read, KDA from 0.27
# (kda_state_shape took num_spec unused before), the Mamba2 models from these releases (read in the 0.10.2-0.34.0
# wheels). A larger state page, so a larger hybrid attention block.
CONV_DRAFT_ROWS_FROM = {"qwen3_next": (0, 0), "qwen3_5": (0, 0), "qwen3_5_text": (0, 0), "qwen3_5_moe": (0, 0),
                        "qwen3_5_moe_text": (0, 0), "kimi_linear": (0, 27), "kimi_k3": (0, 27),
                        "nemotron_h": (0, 17), "mamba2": (0, 17),
                        "granitemoehybrid": (0, 32), "zamba2": (0, 32), "falcon_h1": (0, 32)}


def _version(release: tuple[int, int] | None) -> str:
    """" 0.26" for a release, "" for the newest read (None): what follows "vLLM" in the words below."""
    return "" if release is None else f" {release[0]}.{release[1]}"


def _does_not_start(release: tuple[int, int] | None, why: str) -> str:
    """The warning that vLLM `release` (None: the newest read) refuses the configuration; the planner lifts it
    (DOES_NOT_START) into the fit verdict."""
    return f"vLLM{_version(release)} {DOES_NOT_START}: {why}"


def _backend_refusal(arch: Architecture, layers: list[_Layer], dtype: str, release: tuple[int, int] | None,
                     gpu_sm: int | None, head_sizes: set[int]) -> str | None:
    """Why no attention backend of the release takes some of this model's layers in this dtype (vllm_dtypes.py
    backend_refusal, or forced_backend_refusal where vLLM forces one backend for the model, given its attention
    layers' head sizes), with how many layers: the layers TurboQuant keeps at the model dtype are not asked."""
    sinks = sink_kinds(arch.model_type, arch.text_config or {}, release)
    forced = forced_backend_refusal(dtype, arch.model_type, head_sizes, release, gpu_sm)
    refused: dict[str, dict[str, int]] = {}  # reason -> layers of each kind
    for l in layers:
        if l.attn and l.kv_dtype is None:
            why = forced or backend_refusal(dtype, release, gpu_sm, l.attn, l.dk, l.attn in sinks)
            if why:
                kinds = refused.setdefault(why, {})
                kinds[l.label] = kinds.get(l.label, 0) + 1
    if not refused:
        return None
    why, kinds = next(iter(refused.items()))  # the first reason, with every layer it refuses
    named = " and ".join(f"{n} {label} layer{'s' if n > 1 else ''}" for label, n in kinds.items())
    return f"no attention backend takes this model's {named} in {VLLM_NAME[dtype]}: {why}"


def _quantized_dtype_warnings(arch: Architecture, layers: list[_Layer], dtype: str, release: tuple[int, int] | None,
                              gpu_sm: int | None, hybrid: bool) -> list[str]:
    """What a quantized dtype adds to the estimate's warnings: vLLM's refusal, checked in its own order (the dtype
    choice, the backend each layer gets when it is built, then its spec), or where the GPU decides and is not known,
    that it was not checked. Raises where vLLM starts but hfmem has not recorded the pages (_check_started_layers)."""
    heads = {l.dk for l in layers if l.attn}
    refusal = release_refusal(dtype, release, hybrid) or _backend_refusal(arch, layers, dtype, release, gpu_sm, heads) or (
        next((r for l in layers if l.attn and (r := head_size_refusal(dtype, l.dk, l.dv, release))), None))
    if refusal:
        return [_does_not_start(release, refusal)]
    _check_started_layers(arch, layers, dtype, release)
    if gpu_sm is None and gpu_decides(dtype, arch.model_type, heads, release):
        # the rules that follow the GPU (vllm_dtypes.py) cannot be asked: said, not assumed either way
        return [f"the GPU is {GPU_NOT_CHECKED}: whether vLLM gives this model's layers a backend for "
                f"{VLLM_NAME[dtype]} depends on its compute capability (recorded for CUDA GPUs only), which was not "
                "checked"]
    return []


def _check_started_layers(arch: Architecture, layers: list[_Layer], dtype: str,
                          release: tuple[int, int] | None) -> None:
    """The layers a started vLLM caches in these dtypes whose pages hfmem has not recorded: a usage error that names
    them (TurboQuant's chunked layers, which its backend takes, and encoder-decoder models; NVFP4's cross-attention
    layers under FlashAttention 3 in 0.20-0.21)."""
    quantized = [l for l in layers if l.attn and l.kv_dtype is None]
    if dtype in TURBOQUANT:
        if arch.is_encoder_decoder:
            raise UsageError(f"--kv-dtype {dtype}: hfmem models vLLM's TurboQuant cache for decoder-only models")
        unmodelled = [l for l in quantized if l.attn not in ("full", "sliding")]
    elif dtype in NVFP4:
        unmodelled = [l for l in quantized if l.attn == "cross"]
    else:
        return
    if unmodelled:
        raise UsageError(f"--kv-dtype {dtype}: hfmem does not model vLLM{_version(release)}'s {VLLM_NAME[dtype]} pages "
                         f"for this model's {len(unmodelled)} {unmodelled[0].label} layers")


def conv_draft_rows(model_type: str, release: tuple[int, int] | None, drafts: int) -> int:
    """Rows the release adds to this model's conv states for `drafts` speculative tokens (the rule above)."""
    first = CONV_DRAFT_ROWS_FROM.get(model_type)
    return drafts if first is not None and (release is None or release >= first) else 0


def _with_states(layers: list[_Layer], change: Callable[[_State, _Layer], _State | None]) -> list[_Layer]:
    """Copies of the layers with each state `change` returns a replacement for (None: kept); layers whose states all
    stay are the same objects."""
    out = []
    for layer in layers:
        states = [change(st, layer) or st for st in layer.states]
        out.append(replace(layer, states=states) if any(a is not b for a, b in zip(states, layer.states)) else layer)
    return out


def _with_conv_rows(layers: list[_Layer], rows: int) -> list[_Layer]:
    """Copies of the layers whose conv states are `rows` rows wider (the channels: elements / window rows)."""
    return _with_states(layers, lambda st, _: replace(
        st, vllm_elements=st.vllm_elements // st.vllm_rows * (st.vllm_rows + rows), vllm_rows=st.vllm_rows + rows)
        if st.vllm_rows else None)


def speculative_pages_charged(mode: str, release: tuple[int, int] | None) -> bool:
    """Whether the release's planning charges the draft tokens' state pages (the rules above)."""
    if release is not None and release < SPEC_PAGES_CHARGED_FROM:
        return False
    return mode != "all" or release is None or release >= SPEC_PAGES_CHARGED_IN_ALL_MODE_FROM


# Nemotron-H's SSM state takes the config's mamba_ssm_cache_dtype (float32 in transformers' NemotronHConfig) through the
# model's own config hook (model_executor/models/config.py NemotronHForCausalLMConfig) from 0.13; before it, vLLM's
# "auto": the model dtype, half the state page. Read in the 0.11.2-0.13.0 wheels.
NEMOTRON_H_SSM_DTYPE_FROM = (0, 13)


def _ssm_in_model_dtype(arch: Architecture, release: tuple[int, int] | None) -> bool:
    """Whether the release keeps the SSM state in the model dtype where the config names another (the rule above)."""
    return arch.model_type == "nemotron_h" and release is not None and release < NEMOTRON_H_SSM_DTYPE_FROM


def _ssm_states_in_model_dtype(layers: list[_Layer]) -> list[_Layer]:
    """Copies of the layers whose SSM state takes the conv state's dtype (the model dtype)."""
    def change(st: _State, layer: _Layer) -> _State | None:
        conv = next((c for c in layer.states if c.name == "conv"), None) if st.name == "ssm" else None
        return replace(st, vllm_dtype=conv.vllm_dtype) if conv is not None else None
    return _with_states(layers, change)


# The attention block a hybrid's state page is padded to is a whole number of kernel blocks of the attention backend
# vLLM picks first (platforms/interface.py Platform._align_hybrid_block_size from 0.20, model_executor/models/config.py
# HybridAttentionMambaModelConfig before): 16 for FLASH_ATTN / FLASHINFER (GQA) and for FLASH_ATTN_MLA (MLA on Hopper);
# FLASHINFER_MLA (MLA on Blackwell) 32; MLA 64 up to 0.19 and at least 128 from 0.27 (TRTLLM/FlashInfer MLA decode
# alignment). In "align" mode from 0.33 also a multiple of a GDN layer's prefill-checkpoint alignment, 64 with
# FlashInfer's GDN prefill (v1/attention/backends/gdn_attn.py FLASHINFER_GDN_CHECKPOINT_ALIGNMENT).
MLA_HYBRID_ALIGNMENT_UNTIL_020 = 64
MLA_HYBRID_ALIGNMENT_FROM_027 = 128
GDN_CHECKPOINT_ALIGNMENT = 64


def prefix_caching_default(release: tuple[int, int] | None) -> bool:
    """Whether `vllm serve` of this release starts a hybrid attention/state model with prefix caching."""
    return release is None or release >= HYBRID_PREFIX_CACHING_FROM


def mamba_cache_mode(model_type: str, prefix_caching: bool, release: tuple[int, int] | None,
                     speculative_tokens: int = 0) -> str:
    """vLLM's mamba_cache_mode for a hybrid model: "none", "align" or "all" (as named from 0.15; the rules above)."""
    if not prefix_caching:
        return "none"
    if model_type in ALL_MODE_TYPES and release is not None and release < ALL_MODE_UNTIL:
        if speculative_tokens and _in(release, SPEC_ALIGN_NOT_ALL):
            return "align"
        return "all" if release >= ALL_MODE_FROM else "none"
    return "align" if release is None or release >= ALIGN_MODE_FROM else "none"


def hybrid_alignment(mla: bool, mode: str, checkpoint: str | None, release: tuple[int, int] | None,
                     gpu_sm: int | None, block_size: int = 16) -> int:
    """Tokens the hybrid attention block size is a multiple of (the kernel-block rules above); block_size: the block
    size the platform starts from (platforms/interface.py _align_hybrid_block_size: the kernel alignment is at least
    cache_config.block_size, 64 by default from 0.34)."""
    align = 16
    if mla:
        if release is not None and release < (0, 20):
            align = MLA_HYBRID_ALIGNMENT_UNTIL_020
        elif release is None or release >= (0, 27):
            align = MLA_HYBRID_ALIGNMENT_FROM_027
        elif gpu_sm is not None and gpu_sm // 10 == 10:
            align = 32
    align = max(align, block_size)
    if mode == "align" and checkpoint == "gdn":
        align = math.lcm(align, GDN_CHECKPOINT_ALIGNMENT)
    return align


def flashkda_prefill(arch: Architecture, layers: list[_Layer], gpu_sm: int | None) -> bool:
    """Whether vLLM's KDA layers run FlashKDA's prefill on this GPU (FLASHKDA rule above; gpu_sm None: not known)."""
    raw = (arch.text_config or {}).get("linear_attn_config")
    lin: dict = raw if isinstance(raw, dict) else {}
    kda = next((l for l in layers if l.state_family == "kda"), None)
    return (kda is not None and gpu_sm is not None and gpu_sm // 10 in FLASHKDA_SM_MAJORS and lin.get("head_dim") == 128
            and lin.get("gate_lower_bound") is not None and kda.states[0].vllm_dtype == "bf16")  # conv: model dtype


def checkpoint_page(layers: list[_Layer], release: tuple[int, int] | None, gpu_sm: int | None,
                    flashkda: bool = False) -> str | None:
    """The state family that keeps a prefill-checkpoint page in this release on this GPU (compute capability x 10;
    None: not known), else None. flashkda: flashkda_prefill's answer."""
    for family, first in CHECKPOINT_PAGE_FROM.items():
        if not any(l.state_family == family for l in layers):
            continue
        if release is not None and release < first:
            continue
        if family == "gdn" and gpu_sm != GDN_FLASHINFER_SM:
            continue
        if family == "kda" and not flashkda:
            continue
        return family
    return None


def admission_tokens(max_batched_tokens: int, release: tuple[int, int] | None) -> int:
    """Tokens a window layer admits beyond its window in a vLLM release (None: the newest read)."""
    if release is None or release >= IN_FLIGHT_ADMISSION_FROM:
        return IN_FLIGHT_BATCHES * max_batched_tokens
    return max_batched_tokens


# Layers of several KV types are split into groups of one size (kv_cache_utils.py
# _get_kv_cache_groups_uniform_page_size): the fewest layers of any type, or the most when that is less than a factor
# above it (fewer padding layers): no factor up to 0.11, 1.25 in 0.12-0.17, 1.5 from 0.18. Read in the 0.10.2-0.34.0
# wheels.
GROUP_SIZE_FACTORS = (((0, 12), None), ((0, 18), 1.25))
GROUP_SIZE_FACTOR = 1.5


def group_size_factor(release: tuple[int, int] | None) -> float | None:
    """The release's factor (above); None: the group size is always the fewest layers of any type."""
    for until, factor in GROUP_SIZE_FACTORS:
        if release is not None and release < until:
            return factor
    return GROUP_SIZE_FACTOR


# The start-up check ("To serve at least one request with the model's max seq len ... KV cache is needed") asks, by
# release (kv_cache_utils.py get_kv_cache_configs, get_kv_cache_config up to 0.10; read in the 0.10.2-0.34.0 wheels):
# - up to 0.13, check_enough_kv_cache_memory: every layer's own max_memory_usage_bytes, summed over the layers
#   before grouping: no padding layers;
# - 0.14-0.18, _max_memory_usage_bytes_from_groups: the group size x the page x the blocks of the first group's spec
#   only, for every group;
# - from 0.19, the same sum over every group: what a request reserves.
# The pool and the concurrency it logs are the request's whole need in every release.
STARTUP_CHECK_PER_LAYER_UNTIL = (0, 14)
STARTUP_CHECK_FIRST_GROUP_UNTIL = (0, 19)
# From 0.11 CrossAttentionSpec.max_memory_usage_bytes charges scheduler max_num_encoder_input_tokens, which
# SchedulerConfig sets to max_num_batched_tokens (config/scheduler.py __post_init__), in the start-up check and the
# logged concurrency (up to 0.10 the encoder's length, MULTIMODAL_REGISTRY.get_encdec_max_encoder_len); at run time a
# request holds its encoder's own tokens (single_type_kv_cache_manager.py CrossAttentionManager, num_encoder_tokens).
CROSS_CHARGES_BATCHED_TOKENS_FROM = (0, 11)


@dataclass(frozen=True)
class _Spec:
    """One layer's vLLM KV cache spec (per GPU)."""

    kind: str  # full | sliding | chunked | mamba | cross
    block_size: int
    page: int  # bytes of one block of this layer
    window: int | None = None

    def usage(self, context: int, mbt: int, encoder_len: int | None, state_pages: int = 1, draft_pages: int = 0) -> int:
        """max_memory_usage_bytes with max_model_len = context (vllm, v1/kv_cache_interface.py: each spec's
        max_memory_usage_bytes). state_pages: pages a mamba/linear-attention spec reserves per request
        (PAGE_PER_BLOCK: one per block of context); draft_pages: its pages for speculative tokens, on top."""
        bs = self.block_size
        if self.kind == "full":
            return cdiv(context, bs) * self.page
        if self.kind in ("sliding", "chunked"):
            assert self.window is not None  # _vllm_specs gives every sliding/chunked spec its window
            if self.kind == "sliding":  # SlidingWindowSpec: +1 because the window may start mid-block
                return (cdiv(min(self.window - 1 + mbt, context), bs) + 1) * self.page
            # ChunkedLocalAttentionSpec
            return cdiv(min(self.window + mbt, context), bs) * self.page
        if self.kind == "mamba":  # MambaSpec: page x (1 + spec) in mode "none", page x (2 + spec) in "align"
            if state_pages == PAGE_PER_BLOCK:  # mode "all": a page per block of context, as full attention
                return (cdiv(context, bs) + draft_pages) * self.page
            return self.page * (state_pages + draft_pages)
        if self.kind == "cross":  # CrossAttentionSpec: the encoder tokens given (a request's own, or vLLM's charge)
            return cdiv(encoder_len or 0, bs) * self.page
        raise AssertionError(self.kind)


def _vllm_specs(layers: list[_Layer], dtype: str, block_size: int, full_only: bool,
                assumptions: list[str], alignment: int = 16, chunk: int | None = None,
                release: tuple[int, int] | None = None) -> tuple[dict[int, _Spec], int]:
    """Per-layer specs after the hybrid block-size/padding rule (vllm, platforms/interface.py:
    Platform._align_hybrid_block_size; model_executor/models/config.py: HybridAttentionMambaModelConfig before 0.20).
    alignment: hybrid_alignment's; chunk: the Mamba2 chunk size in mamba_cache_mode "all", else None."""
    attn_layers = [l for l in layers if l.attn]
    state_layers = [l for l in layers if l.states]
    bs = block_size
    if attn_layers and state_layers:
        # attention page (per token) from the first attention layer; block size = a multiple of the alignment whose
        # page holds the largest state page (in mode "all" a multiple of lcm(chunk, alignment)), if larger than the
        # configured one
        p1 = _attn_bytes_per_token(attn_layers[0], dtype, "vllm", release)
        mamba_page = max(_state_bytes(l, "vllm") for l in state_layers)
        if chunk:
            step = math.lcm(chunk, alignment)
            needed = step * cdiv(cdiv(mamba_page, p1), step)
        else:
            needed = alignment * cdiv(mamba_page, alignment * p1)
        if bs < needed:
            why = (f"a multiple of lcm(Mamba2 chunk size {chunk}, {alignment}): mamba_cache_mode 'all'" if chunk
                   else f"a multiple of {alignment}")
            assumptions.append(f"hybrid attention/state model: vLLM raises the attention block size to {needed} tokens "
                               f"({why}) so one attention page holds one state page (state page padded to it)")
            bs = needed
    specs: dict[int, _Spec] = {}
    attn_page_for_state = None
    if attn_layers and state_layers:
        attn_page_for_state = bs * _attn_bytes_per_token(attn_layers[0], dtype, "vllm", release)
    for l in layers:
        if l.attn:
            kind = {"mla": "full", "full": "full", "sliding": "sliding", "chunked": "chunked", "cross": "cross"}[l.attn]
            if full_only and kind in ("sliding", "chunked"):
                kind = "full"
            page = bs * _attn_bytes_per_token(l, dtype, "vllm", release)
            specs[l.index] = _Spec(kind, bs, page, l.window if kind in ("sliding", "chunked") else None)
        if l.states:
            page = _state_bytes(l, "vllm")
            padded = max(page, attn_page_for_state or 0)
            # a hybrid layer (attention + state in one layer, e.g. Falcon-H1) registers two specs in vLLM
            specs[-1 - l.index if l.attn else l.index] = _Spec("mamba", bs, padded)
    return specs, bs


# kv_cache_utils.py (kv_cache_planning.py from 0.33) unify_kv_cache_spec_page_size, for an attention page that does
# not divide the largest one (per-token-head scales on Gemma 4's two head sizes; int4_per_token_head's unhalved
# sliding-window pages in 0.25-0.27): up to 0.23 it raises NotImplementedError; from 0.24 it pads the page to the
# largest when the layer's backend indexes KV pages by the block stride (AttentionSpec.indexes_kv_by_block_stride, set
# by the model runner from the backend: every CUDA attention backend but TURBOQUANT and the sparse MLA ones); from 0.29
# it pads every non-MLA attention page. Held to the releases' own planning (scripts/record_vllm_page_padding.py).
PAD_UNALIGNED_PAGES_FROM = (0, 24)
PAD_EVERY_ATTENTION_PAGE_FROM = (0, 29)


def unaligned_page_refusal(dtype: str, release: tuple[int, int] | None, mla: bool) -> str | None:
    """Why vLLM `release` cannot unify an attention page that does not divide the largest (None: it pads it)."""
    newest = as_compared(release)
    if newest < PAD_UNALIGNED_PAGES_FROM:
        return ("vLLM cannot unify this model's KV page sizes (not divisible: unify_kv_cache_spec_page_size raises "
                "before 0.24, which pads them); no vLLM estimate")
    if mla:
        return ("vLLM cannot unify this model's KV page sizes (an MLA page does not divide the largest; how the "
                "release's MLA backend lays it out is not modelled); no vLLM estimate")
    if dtype in TURBOQUANT and newest < PAD_EVERY_ATTENTION_PAGE_FROM:
        return ("vLLM cannot unify this model's KV page sizes (not divisible: the TURBOQUANT backend does not index "
                "KV pages by the block stride, which unify_kv_cache_spec_page_size needs to pad one before 0.29); no "
                "vLLM estimate")
    return None


def _vllm_groups(specs: dict[int, _Spec], assumptions: list[str], factor: float | None,
                 refusal: Callable[[int], str | None] = lambda key: None
                 ) -> tuple[list[tuple[_Spec, list[int]]], int, bool]:
    """(groups as (spec, member layer keys), group_size, general_case) following vllm, v1/core/kv_cache_utils.py:
    get_kv_cache_groups; factor: group_size_factor's; refusal: unaligned_page_refusal for the layer of this key."""
    values = list(specs.values())
    if not values:
        return [], 0, False
    if all(v == values[0] for v in values):  # vllm, v1/core/kv_cache_utils.py: is_kv_cache_spec_uniform
        return [(values[0], list(specs))], len(values), False
    kinds = {(v.kind, v.window, v.block_size) for v in values}
    if len(kinds) == 1:  # UniformTypeKVCacheSpecs: one group, pages summed per layer
        return [(v, [k]) for k, v in specs.items()], 1, False
    # kv_cache_utils.py: unify_kv_cache_spec_page_size: enlarge the block size of smaller pages to the largest page
    max_page = max(v.page for v in values)
    unified: dict[int, _Spec] = {}
    padded: dict[tuple[str, int], int] = {}
    for key, v in specs.items():
        if v.page == max_page:
            unified[key] = v
            continue
        if max_page % v.page:
            why = refusal(key)
            if why is not None:
                raise UsageError(why)
            padded[(v.kind, v.page)] = padded.get((v.kind, v.page), 0) + 1
            unified[key] = replace(v, page=max_page)  # page_size_padded: the block keeps its tokens
            continue
        ratio = max_page // v.page
        unified[key] = replace(v, block_size=v.block_size * ratio, page=max_page)
    for (kind, page), n in padded.items():
        assumptions.append(f"vLLM pads {n} {kind} layer(s)' {page:,} B pages to the largest, {max_page:,} B, which "
                           f"they do not divide ({1 - page / max_page:.0%} of those pages unused; "
                           "unify_kv_cache_spec_page_size, 0.24 on)")
    same: dict[_Spec, list[int]] = {}
    for key, v in unified.items():
        same.setdefault(v, []).append(key)
    counts = [len(m) for m in same.values()]
    group_size = min(counts)
    if factor is not None and max(counts) < group_size * factor:
        group_size = max(counts)
    groups: list[tuple[_Spec, list[int]]] = []
    for spec, members in same.items():
        n_groups = cdiv(len(members), group_size)
        pad = n_groups * group_size - len(members)
        if pad:
            assumptions.append(f"vLLM pads {len(members)} {spec.kind} layers to {n_groups * group_size} "
                               f"(groups of {group_size}): {pad} padding layer(s) of pages")
        for g in range(n_groups):
            groups.append((spec, members[g::n_groups]))
    return groups, group_size, True


@dataclass(frozen=True)
class _Groups:
    """The KV cache groups of one set of specs and what the per-request sums need of them (context-free)."""

    groups: list[tuple[_Spec, list[int]]]
    group_size: int
    general: bool
    label_of: dict[int, str]
    encoder_tokens: int | None
    bytes_per_block: int

    @property
    def count(self) -> int:
        """KV cache groups vLLM forms (kv_cache_utils.py get_kv_cache_groups): one for a single layer type."""
        return len(self.groups) if self.general else 1


def _groups_of(layers: list[_Layer], specs: dict[int, _Spec], assumptions: list[str],
               factor: float | None, dtype: str = "auto", release: tuple[int, int] | None = None) -> _Groups:
    mla = {l.index for l in layers if l.attn == "mla"}
    kept = {l.index for l in layers if l.kv_dtype}  # TurboQuant's boundary layers: the model dtype, FLASH_ATTN
    groups, group_size, general = _vllm_groups(
        specs, assumptions, factor,
        lambda key: unaligned_page_refusal("auto" if key in kept else dtype, release, key in mla))
    label_of = {}
    for l in layers:
        if l.attn:
            label_of[l.index] = l.label
        if l.states:
            label_of[-1 - l.index if l.attn else l.index] = l.label
    enc = next((l.window for l in layers if l.attn == "cross"), None)
    if general:
        bytes_per_block = group_size * groups[0][0].page
    else:
        bytes_per_block = sum(spec.page * len(members) for spec, members in groups)
    return _Groups(groups, group_size, general, label_of, enc, bytes_per_block)


def _vllm_per_request(g: _Groups, context: int, mbt: int, state_pages: int = 1,
                      encoder_tokens: int | None = None,
                      draft_pages: int = 0) -> tuple[int, int, dict[str, dict[str, int]], int]:
    """(bytes one request of `context` tokens reserves, of which in growing full-attention pages, per-label split,
    bytes of one pool block across layers: the divisor of kv_cache_utils.py: get_num_blocks and
    get_max_concurrency_for_kv_cache_config). encoder_tokens: the cross-attention tokens charged, if not the
    encoder's own; draft_pages: the state pages of speculative tokens per state layer."""
    groups, group_size, general, label_of = g.groups, g.group_size, g.general, g.label_of
    enc = g.encoder_tokens if encoder_tokens is None else encoder_tokens
    by: dict[str, dict[str, int]] = {}
    total = growing = 0
    for spec, members in groups:
        # whole blocks per request per group
        blocks = cdiv(spec.usage(context, mbt, enc, state_pages, draft_pages), spec.page)
        if general:  # kv_cache_utils.py: _max_memory_usage_bytes_from_groups: group_size pools, one layer of every group each
            group_bytes = group_size * spec.page * blocks
            _add(by, label_of[members[0]], bytes=group_bytes, padding_slots=group_size - len(members),
                 tokens=blocks * spec.block_size if spec.kind != "mamba" else 0)
        else:  # uniform spec / uniform type: every layer its own pages
            group_bytes = len(members) * spec.page * blocks
            for key in members:
                _add(by, label_of[key], bytes=spec.page * blocks,
                     tokens=blocks * spec.block_size if spec.kind != "mamba" else 0)
        total += group_bytes
        if spec.kind == "full":
            growing += group_bytes
        elif spec.kind == "mamba" and state_pages == PAGE_PER_BLOCK:  # mode "all" grows too, but for the draft pages
            growing += group_bytes * (blocks - draft_pages) // blocks
    return total, growing, by, g.bytes_per_block


def _sparse_block_size(layers: list[_Layer], dtype: str, block_size: int, assumptions: list[str]) -> int:
    """Block size and cache layout of sparse-attention models, whose attention backend forces its block size.

    DSA (DeepSeek-V3.2, GLM-MoE-DSA): the FlashMLA-sparse backend forces 64 tokens per block (vLLM platform code,
    "Forcing kv cache block size to 64"); each indexer layer adds a DeepseekV32IndexerCache spec (vllm,
    model_executor/models/deepseek_v2.py: Indexer.__init__) of index_head_dim + index_head_dim // 128 * 4 uint8 per
    token, an MLAAttentionSpec with one head in the same KV cache group as the latent: the two cannot merge
    (different cache_dtype_str), so the group is a UniformTypeKVCacheSpecs whose page per layer is the sum of both
    (vllm, v1/core/kv_cache_utils.py). MiniMax-M3-style block-sparse layers: one index key of index_head_dim per
    token and sparse layer, not split by TP, blocks of 128."""
    kinds = {l.index_kind for l in layers if l.index_kind}
    if not kinds:
        return block_size
    dsa = next((l for l in layers if l.index_dim and l.index_kind == "dsa"), None)
    if "dsa" in kinds:
        forced = 64
        line = "DeepSeek Sparse Attention: vLLM's FlashMLA-sparse backend forces block_size 64 (CUTLASS MLA: 128)"
        if dsa is not None:
            per = index_bytes_per_token(dsa, dtype, "vllm")
            line += (f"; indexer keys: {dsa.index_dim} fp8 + {dsa.index_dim // 128} x 4 B fp32 scales = {per} B per token "
                     "per indexer layer, a second spec in the latent's KV cache group (pages summed)")
        if dtype == "fp8":
            mla = next(l for l in layers if l.attn == "mla")
            line += (f"; fp8 KV uses the fp8_ds_mla layout: {mla.dk} fp8 + {mla.dk // 128} x 4 B scales + "
                     f"{mla.dv} x 2 B rope = {mla.dk + mla.dk // 128 * 4 + mla.dv * 2} B per token per layer")
    else:
        forced = 128
        idx = next((l for l in layers if l.index_dim), None)
        line = "block-sparse attention: vLLM uses block_size 128 for every layer"
        if idx is not None:
            line += (f"; index keys: {idx.index_dim} values = {index_bytes_per_token(idx, dtype, 'vllm')} B "
                     "per token per sparse layer (assumed in the KV cache dtype), not divided by tensor parallelism, "
                     "summed into the layer's page")
    if block_size != forced:
        line += f" (in place of block_size {block_size})"
    assumptions.append(line)
    return forced


def _state_pages(mode: str) -> int:
    """State pages one request reserves per mamba/linear-attention group in a mamba_cache_mode, before those of
    speculative tokens (num_speculative_blocks, added in _Spec.usage): "align" page x 2, "none" page x 1, "all" one per
    block of context, PAGE_PER_BLOCK (vllm, v1/kv_cache_interface.py: MambaSpec.max_memory_usage_bytes)."""
    return {"all": PAGE_PER_BLOCK, "align": 2}.get(mode, 1)


def _state_pages_note(layers: list[_Layer], pages: int, checkpoint: str | None, prefix_caching: bool, hybrid: bool,
                      release: tuple[int, int] | None, drafts: int = 0) -> str:
    """The assumption line for the state pages one request reserves per state group (drafts: speculative tokens, a
    page each)."""
    spec = (f"and {drafts} more for the {drafts} speculative token(s), MambaSpec.num_speculative_blocks" if drafts
            else "no speculative decoding")
    default = ("vLLM's default for hybrid models from 0.26" if prefix_caching_default(release)
               else "not vLLM's default for hybrid models before 0.26, where it is off unless asked")
    if pages == PAGE_PER_BLOCK:
        return ("state layers: one state page per block of context per state group (prefix caching on, "
                f"{default}: mamba_cache_mode 'all', which vLLM up to 0.27 runs for the Mamba/Mamba2 families; "
                f"{spec})")
    if pages == 3 and checkpoint is not None:
        first = ".".join(map(str, CHECKPOINT_PAGE_FROM[checkpoint]))
        gdn = {"gdn": ", FlashInfer's GDN prefill on Hopper", "kda": ", FlashKDA's prefill (SM 9x, 10x, 12x)"}.get(
            checkpoint, "")
        return (f"state layers: three state pages per request per state group (prefix caching on, {default}: "
                f"mamba_cache_mode 'align', two pages, and the {checkpoint} layers' prefill-checkpoint page of vLLM "
                f"{first} on{gdn}; {spec})")
    if pages == 2:
        gdn = ("; a GDN layer keeps a third, its prefill-checkpoint page, in vLLM 0.33 on with FlashInfer's GDN "
               "prefill, which vLLM picks on Hopper GPUs (on Blackwell with a CUDA 13 runtime)"
               if any(l.state_family == "gdn" for l in layers) else "")
        return (f"state layers: two state pages per request per state group (prefix caching on, {default}: "
                f"mamba_cache_mode 'align'; {spec}{gdn})")
    if not hybrid:
        return ("state layers: one state page per request (state-only model: mamba_cache_mode 'none' assumed; the "
                "two-page 'align' rule is applied to hybrid attention/state models" + (f"; {spec}" if drafts else "") + ")")
    if prefix_caching:  # asked for, in a release that switches it off for this hybrid
        return ("state layers: one state page per request per state group (prefix caching asked for, which this vLLM "
                "release switches off for this model: 0.11.0 for every hybrid, up to 0.14 for those outside the "
                f"Mamba/Mamba2 families; {spec})")
    why = "prefix caching off" if prefix_caching_default(release) else (
        "prefix caching off, vLLM's default for hybrid models before 0.26")
    return f"state layers: one state page per request per state group ({why}: mamba_cache_mode 'none'; {spec})"


@dataclass(frozen=True)
class _VllmLayout:
    """What _vllm computes once per layer list, KV dtype, block size and prefix-caching setting."""

    notes: list[str]  # block-size and padding notes, in the order vLLM's rules apply
    block_size: int
    pages: int
    specs: dict[int, _Spec]  # each layer's own spec, before the groups unify page sizes (the old start-up check)
    groups: _Groups
    full_groups: _Groups | None  # sliding/chunked layers as full attention (page_reserved_total_bytes); None: none
    by: dict[str, dict[str, int]]  # per label: layers, bytes per token, state bytes
    per_token: int


def _vllm_layout(layers: list[_Layer], dtype: str, block_size: int, mode: str, checkpoint: str | None,
                 alignment: int, chunk: int | None, factor: float | None,
                 release: tuple[int, int] | None = None) -> _VllmLayout:
    """mode: the hybrid model's mamba_cache_mode ("none" for every other model), checkpoint: checkpoint_page's,
    factor: group_size_factor's; release: whose page rules apply to the quantized KV dtypes (vllm_dtypes.py)."""
    local: list[str] = []
    block_size = _sparse_block_size(layers, dtype, block_size, local)
    kept = next((l for l in layers if l.kv_dtype), None)
    if dtype in TURBOQUANT and kept is not None:
        raised = turboquant_block_size(block_size, kept.kv_heads, kept.dk, _BITS[kept.kv_dtype or "bf16"] // 8, release)
        if raised != block_size:
            local.append(f"{dtype} beside {kept.kv_dtype} boundary layers: vLLM raises the block size to {raised} so a "
                         "quantized page covers a boundary layer's at the smallest kernel block "
                         "(platforms/interface.py _align_heterogeneous_kv_block_size, 0.25 on)")
            block_size = raised
    pages = _state_pages(mode)  # "align" and "all" on hybrid models only (docs/kv.md)
    if checkpoint and mode == "align":
        pages += 1  # the prefill-checkpoint page (CHECKPOINT_PAGE_FROM)
    specs, bs = _vllm_specs(layers, dtype, block_size, False, local, alignment, chunk, release)
    groups = _groups_of(layers, specs, local, factor, dtype, release)
    full_groups = None
    if any(l.attn in ("sliding", "chunked") for l in layers):
        full_specs, _ = _vllm_specs(layers, dtype, block_size, True, [], alignment, chunk, release)
        full_groups = _groups_of(layers, full_specs, [], factor, dtype, release)
    by: dict[str, dict[str, int]] = {}
    per_token = 0
    for l in layers:
        if l.label in ("kv_shared", "no_cache"):
            _add(by, l.label, layers=1)
            continue
        bpt = _attn_bytes_per_token(l, dtype, "vllm", release) if l.attn else 0
        if l.attn in ("full", "mla"):
            per_token += bpt
        _add(by, l.label, layers=1, bytes_per_token=bpt, state_bytes=_state_bytes(l, "vllm"))
    return _VllmLayout(local, bs, pages, specs, groups, full_groups, by, per_token)


def _startup_check_bytes(layout: _VllmLayout, context: int, mbt: int, release: tuple[int, int] | None,
                         per_request: int, encoder_tokens: int | None, draft_pages: int) -> tuple[int, str]:
    """(bytes the release's start-up check asks for one request of `context` tokens, how: the rules above).
    per_request: the groups' sum as vLLM's specs charge it; encoder_tokens and draft_pages: the cross-attention
    tokens and speculative state pages they charge."""
    if release is None or release >= STARTUP_CHECK_FIRST_GROUP_UNTIL:
        return per_request, ""
    g = layout.groups
    if release < STARTUP_CHECK_PER_LAYER_UNTIL:
        got = sum(spec.usage(context, mbt, encoder_tokens, layout.pages, draft_pages) for spec in layout.specs.values())
        return got, "each layer's own pages summed, without the padding layers"
    if not g.general:
        return per_request, ""
    spec = g.groups[0][0]
    got = g.group_size * spec.page * cdiv(spec.usage(context, mbt, encoder_tokens, layout.pages, draft_pages), spec.page)
    return got, f"the first KV cache group's {spec.kind} blocks only, for all {len(g.groups)} groups"


def _vllm(arch: Architecture, layers: list[_Layer], dtype: str, context: int, batch: int, block_size: int, mbt: int,
          assumptions: list[str], warnings: list[str], prefix_caching: bool | None = None,
          memo: dict | None = None, release: tuple[int, int] | None = None,
          gpu_sm: int | None = 90, speculative_tokens: int = 0) -> KVCacheEstimate:
    """memo: a dict kept with `layers` (KVLayout.memo) for the context-free part of the estimate. mbt:
    max_num_batched_tokens; release: the vLLM release (major, minor) whose window admission, DeepSeek-V4 layout and
    state checkpoint page apply (None: the newest read); gpu_sm: the GPU's compute capability x 10 (None: not known);
    speculative_tokens: vLLM's num_speculative_tokens (0: no speculative decoding)."""
    admitted = admission_tokens(mbt, release)
    stateful = any(l.states for l in layers)
    hybrid = stateful and any(l.attn for l in layers)
    if is_vllm_quantized(dtype):  # a release without the dtype, or a layer shape it refuses (vllm_dtypes.py)
        checked = ("quantized dtype", dtype, release, gpu_sm)  # context-free: asked once per layout
        said = memo.get(checked) if memo is not None else None
        if said is None:
            said = _quantized_dtype_warnings(arch, layers, dtype, release, gpu_sm, hybrid)
            if memo is not None:
                memo[checked] = said
        warnings.extend(said)
    refused = next((w for w in warnings if DOES_NOT_START in w), None)
    if any(l.compressed is not None for l in layers):  # DeepSeek-V4 CSA/HCA: its own cache layout
        return deepseek_v4_vllm(arch, layers, dtype, context, batch, block_size, admitted, layout_for(release))
    if prefix_caching and not hybrid and stateful:
        # config/model.py is_prefix_caching_supported: off by default for attention-free models in every release read
        warnings.append("prefix caching was asked for a state-only (attention-free) model: vLLM leaves it off for them "
                        "by default, and what it reserves with it is not modelled: the figure is one state page per "
                        "request, as without it")
    if prefix_caching is None:
        prefix_caching = prefix_caching_default(release)
    mode = mamba_cache_mode(arch.model_type, prefix_caching, release, speculative_tokens) if hybrid else "none"
    # the speculative tokens' state pages a request holds, and those the release's planning charges (the rules above)
    held_draft = speculative_tokens if stateful else 0
    charged_draft = held_draft if speculative_pages_charged(mode, release) else 0
    if held_draft and mode == "align" and _in(release, SPEC_REFUSED_IN_ALIGN):
        warnings.append(_does_not_start(release, "with prefix caching on a hybrid model (mamba_cache_mode 'align') "
                                        "it asserts that speculative decoding is off (MambaModelConfig); the figures "
                                        "are what 'align' would reserve"))
    checkpoint = None
    if mode == "align":
        checkpoint = checkpoint_page(layers, release, gpu_sm, flashkda_prefill(arch, layers, gpu_sm))
    alignment = hybrid_alignment(any(l.attn == "mla" for l in layers), mode, checkpoint, release, gpu_sm, block_size)
    chunk = None
    if mode == "all":  # ModelConfig.get_mamba_chunk_size: mamba_chunk_size, else chunk_size
        cfg = arch.text_config or {}
        raw = cfg.get("mamba_chunk_size") or cfg.get("chunk_size")
        chunk = raw if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0 else None
    factor = group_size_factor(release)
    model_dtype_ssm = _ssm_in_model_dtype(arch, release)
    rows = conv_draft_rows(arch.model_type, release, held_draft)
    # the release only matters to the quantized dtypes' pages (vllm_dtypes.py)
    page_release = release if is_vllm_quantized(dtype) else None
    key = ("vllm", dtype, block_size, mode, checkpoint, alignment, chunk, factor, model_dtype_ssm, rows, page_release)
    layout = memo.get(key) if memo is not None else None
    if layout is None:
        described = _ssm_states_in_model_dtype(layers) if model_dtype_ssm else layers
        try:
            layout = _vllm_layout(_with_conv_rows(described, rows) if rows else described, dtype, block_size, mode,
                                  checkpoint, alignment, chunk, factor, page_release)
        except UsageError:
            if refused is None:
                raise
            # the pages of layers vLLM gives no backend are not recorded (they never get one): the refusal is the answer
            raise UsageError(refused) from None
        if memo is not None:
            memo[key] = layout
    bs, pages, has_window = layout.block_size, layout.pages, layout.full_groups is not None
    if mode == "all" and chunk is None:
        warnings.append("mamba_cache_mode 'all': the config names no Mamba2 chunk size (mamba_chunk_size or "
                        "chunk_size), which vLLM aligns the block size to; the block size here is only a multiple of "
                        f"{alignment}, so vLLM's may be larger by up to one chunk")
    if (mode == "align" and gpu_sm is None and (release is None or release >= CHECKPOINT_PAGE_FROM["kda"])
            and flashkda_prefill(arch, layers, 90)):
        n_state = sum(1 for l in layers if l.state_family == "kda")
        warnings.append(f"the GPU is not known: its {n_state} KDA layers keep a third state page per request (a "
                        "prefill checkpoint) when vLLM runs FlashKDA's prefill, on SM 9x, 10x or 12x GPUs; the figure "
                        "counts two, so one more state page per state group may be reserved")
    per_request, growing, by_req, bytes_per_block = _vllm_per_request(layout.groups, context, admitted, pages,
                                                                      draft_pages=held_draft)
    reserved = per_request
    if layout.full_groups is not None:
        reserved, _, _, _ = _vllm_per_request(layout.full_groups, context, admitted, pages, draft_pages=held_draft)
    by = {label: dict(entry) for label, entry in layout.by.items()}
    for label, entry in by_req.items():
        target = by.setdefault(label, {"layers": 0})
        target["bytes"] = batch * entry.get("bytes", 0)
        target["tokens"] = entry.get("tokens", 0)
        if entry.get("padding_slots"):
            target["padding_layers"] = entry["padding_slots"]
    for entry in by.values():
        for field_name in ("tokens", "bytes", "bytes_per_token", "state_bytes"):
            entry.setdefault(field_name, 0)
    assumptions_v = [f"vLLM V1 paged KV cache: block_size {bs}, rounded up to whole blocks per layer group"]
    if has_window:
        assumptions_v.append(
            f"sliding/chunked layers: vLLM's admission bound min(window - 1 + {admitted:,}, context) + 1 block "
            + (f"({admitted:,} = max_in_flight_tokens: 2 async-scheduled batches of max_num_batched_tokens "
               f"{mbt:,}, vLLM 0.26 on)" if admitted != mbt else "(max_num_batched_tokens, vLLM up to 0.25)")
            + "; page_reserved_total_bytes gives them full-length pages (--disable-hybrid-kv-cache-manager)"
        )
    if arch.mla is not None and not any(l.index_kind for l in layers):
        assumptions_v.append("MLA backends that force a larger block size (FlashMLA: 64) round to that instead")
    if stateful:
        assumptions_v.append(_state_pages_note(layers, pages, checkpoint, prefix_caching, hybrid, release, held_draft))
    # what vLLM's specs charge a request (CROSS_CHARGES_BATCHED_TOKENS_FROM, speculative_pages_charged); per_request
    # is what it holds
    encoder = charged_encoder = layout.groups.encoder_tokens
    if encoder is not None and (release is None or release >= CROSS_CHARGES_BATCHED_TOKENS_FROM):
        charged_encoder = mbt
    charged = per_request
    if charged_encoder != encoder or charged_draft != held_draft:
        charged, _, _, _ = _vllm_per_request(layout.groups, context, admitted, pages, encoder_tokens=charged_encoder,
                                             draft_pages=charged_draft)
        if charged_draft != held_draft:
            assert release is not None  # the newest release charges them
            assumptions_v.append(
                f"speculative decoding: vLLM {release[0]}.{release[1]}'s start-up check and logged concurrency charge "
                f"no state pages for the {held_draft} draft token(s)"
                + (" in mamba_cache_mode 'all'" if mode == "all" else "")
                + f" (MambaSpec.max_memory_usage_bytes), while each request holds {held_draft} more page(s) per state "
                f"layer at run time: {fmt_bytes(per_request - charged)} per request beyond the charge (the total here "
                "counts them)")
        if charged_encoder != encoder and charged != per_request:
            assumptions_v.append(
                f"cross attention: vLLM's start-up check and logged concurrency charge each request "
                f"max_num_batched_tokens ({mbt:,}) encoder tokens of pages (CrossAttentionSpec: "
                f"max_num_encoder_input_tokens), {fmt_bytes(charged)} per request, and refuse to start with a smaller "
                f"pool; a request holds its encoder's {layout.groups.encoder_tokens:,} ({fmt_bytes(per_request)}, "
                f"the total here), so about {charged / per_request:.2f}x the logged concurrency fits at run time")
    blocks_per_request = cdiv(charged, bytes_per_block) if bytes_per_block else 0
    startup, how = _startup_check_bytes(layout, context, admitted, release, charged, charged_encoder, charged_draft)
    # the group rules' shortfall (the draft pages' is said above)
    full_charge = per_request if charged_draft == held_draft else charged
    if startup < full_charge:
        assert release is not None  # the newest release's check charges every group
        assumptions_v.append(
            f"vLLM {release[0]}.{release[1]}'s start-up check asks {fmt_bytes(startup)} for one request of "
            f"{context:,} tokens ({how}), less than the {fmt_bytes(full_charge)} the request reserves: vLLM starts "
            "even where its pool cannot hold one request that long (0.19 on check the whole request)")
    total_is = ("window-capped: hybrid KV cache manager on (vLLM default)" if has_window
                else "blocks vLLM reserves for the requests")
    return KVCacheEstimate(
        engine="vllm", dtype=dtype, context=context, batch=batch, bytes_per_token=layout.per_token,
        constant_bytes=max(0, per_request - growing), total_bytes=batch * per_request, by_layer_type=by, block_size=bs,
        page_reserved_total_bytes=batch * reserved, bytes_per_block=bytes_per_block,
        blocks_per_request=blocks_per_request, total_is=total_is, assumptions=assumptions_v + list(layout.notes),
        kv_groups=layout.groups.count, startup_check_bytes=startup,
    )
