"""llama.cpp's memory for a GGUF model's context: the KV cache (K and V cells per attention layer in the cache type)
and, for recurrent and hybrid architectures, the recurrent state (r and s rows per sequence, F32).

Mirrors llama.cpp: src/llama-context.cpp (llama_context: n_ctx padded to 256, n_ctx_seq, kv_unified);
src/llama-model.cpp (llama_model::create_memory: which memory, which layers); src/llama-kv-cache.cpp
(llama_kv_cache::llama_kv_cache: K and V tensors, has_v = !is_mla); src/llama-kv-cache-iswa.cpp
(llama_kv_cache_iswa: the window-sized SWA cache); src/llama-memory-recurrent.cpp (llama_memory_recurrent: r and s
tensors); src/llama-hparams.cpp (n_embd_r, n_embd_s, is_mla). Docs: docs/gguf.md."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hfmem.errors import UsageError
from hfmem.gguf.ggml import block_of
from hfmem.units import cdiv, round_up

# Sliding-window layer patterns llama.cpp hard-codes per architecture when the GGUF has no
# attention.sliding_window_pattern (src/llama-model.cpp: load_swa_pattern -> llama_hparams::set_swa_pattern):
# every n-th layer is full attention, the others use the window.
_SWA_PATTERN = {"gemma2": 2, "gemma3": 6, "gemma3n": 5, "cohere2": 4, "gpt-oss": 2, "llama4": 4}
_N_UBATCH = 512  # llama.cpp's default physical batch size (n_ubatch)
_PAD = 256  # llama_context pads n_ctx (and n_ctx_seq) to a multiple of 256; the SWA cache too

# Pure recurrent architectures (src/llama-arch.cpp: llm_arch_is_recurrent): llama_memory_recurrent, no KV at all.
RECURRENT_ARCHS = frozenset({"mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"})
# Hybrid architectures (llm_arch_is_hybrid): llama_memory_hybrid = a KV cache for the attention layers plus a
# recurrent memory for the others; how each marks its recurrent layers (the model's load_arch_hparams):
_INTERVAL_HYBRIDS = frozenset({"qwen3next", "qwen35", "qwen35moe", "qwen4exp", "minimax-01"})  # (i+1) % interval
_ALL_LAYERS_HYBRIDS = frozenset({"falcon-h1"})  # create_memory: filter_attn and filter_recr both true
_NEMOTRON_HYBRIDS = frozenset({"nemotron_h", "nemotron_h_moe"})  # recurrent: no KV heads and no FFN
_HEADLESS_HYBRIDS = frozenset({"jamba", "plamo2", "granitehybrid", "lfm2", "lfm2moe", "kimi-linear",
                               "bailingmoe3", "kimi-k3", "glm5-next"})  # recurrent: head_count_kv == 0
HYBRID_ARCHS = _INTERVAL_HYBRIDS | _ALL_LAYERS_HYBRIDS | _NEMOTRON_HYBRIDS | _HEADLESS_HYBRIDS
# Recurrent layers whose state llama_hparams::n_embd_r/n_embd_s size from keys hfmem does not read yet
# (Kimi KDA head size, MiniMax linear-attention head size).
_STATE_UNMODELLED = frozenset({"kimi-linear", "kimi-k3", "glm5-next", "minimax-01"})

# Architectures whose memory has caches beyond K/V/r/s that hfmem does not size (create_memory: llama_kv_cache_dsa,
# _msa, _dsv4, llama_memory_hybrid_idx: sparse-attention indexer keys, compressed caches).
_EXTRA_CACHES = frozenset({"deepseek32", "glm-dsa", "minimax-m3", "hy-v4", "dots3note", "deepseek4", "qwen4exp",
                           "glm5-next"})

# llama.cpp's cache type names (common/arg.cpp: kv_cache_types) -> ggml type; --kv-dtype spellings map onto them.
CACHE_TYPE_NAMES = ("f16", "bf16", "f32", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl")
LLAMA_CPP_CACHE_TYPES = {"auto": "f16", "fp16": "f16", "fp32": "f32", **{t: t for t in CACHE_TYPE_NAMES}}
KV_TYPES = CACHE_TYPE_NAMES  # the cache types gguf_kv accepts (block sizes from hfmem.gguf.ggml)


@dataclass(frozen=True)
class ContextDefaults:
    """The context parameters that decide the cache's shape, as one llama.cpp front end sets them by default."""

    name: str
    kv_unified: bool  # one KV stream shared by all sequences (else one stream of n_ctx_seq cells per sequence)
    swa_full: bool  # sliding-window layers keep the full context instead of the window
    flash_attn: bool  # without flash attention V is stored transposed, padded to the widest layer's V
    n_ubatch: int = _N_UBATCH


# llama-server (tools/server, common/common.h common_params): kv_unified (with -np auto), swa_full = false,
# flash attention auto (on where supported). llama_context_default_params (src/llama-context.cpp), which
# llama-cpp-python's Llama() uses: kv_unified = false, swa_full = true; Llama(flash_attn=False) by default.
DEFAULTS = {
    "llama-server": ContextDefaults("llama-server", kv_unified=True, swa_full=False, flash_attn=True),
    "llama-cpp-python": ContextDefaults("llama-cpp-python", kv_unified=False, swa_full=True, flash_attn=False),
}


@dataclass
class GGUFKV:
    context: int
    batch: int
    dtype: str
    cells: int
    bytes_per_token: int
    constant_bytes: int
    total_bytes: int  # KV cache + recurrent state
    by_layer_type: dict[str, dict[str, int]]
    kv_bytes: int = 0
    recurrent_bytes: int = 0
    defaults: str = "llama-server"
    kv_unified: bool = True
    swa_full: bool = False
    streams: int = 1
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": "llama.cpp", "defaults": self.defaults, "dtype": self.dtype, "context": self.context,
            "batch": self.batch, "cells": self.cells, "kv_unified": self.kv_unified, "swa_full": self.swa_full,
            "streams": self.streams, "bytes_per_token": self.bytes_per_token, "constant_bytes": self.constant_bytes,
            "kv_bytes": self.kv_bytes, "recurrent_bytes": self.recurrent_bytes, "total_bytes": self.total_bytes,
            "by_layer_type": self.by_layer_type, "notes": list(self.notes),
        }  # fmt: skip


def _per_layer(value: Any, n: int, default: int = 0) -> list[int]:
    if isinstance(value, list):
        return [int(v) for v in value] + [default] * (n - len(value))
    return [int(value if value is not None else default)] * n


def recurrent_layers(arch: dict[str, Any]) -> list[bool]:
    """Which trunk layers are recurrent (llama_hparams::is_recr as each model's load_arch_hparams sets it)."""
    name = arch["architecture"]
    n = int(arch.get("trunk_layers") or arch.get("num_layers") or 0)
    if name in RECURRENT_ARCHS or name in _ALL_LAYERS_HYBRIDS:
        return [True] * n
    heads_kv = _per_layer(arch.get("num_kv_heads"), n)
    if name in _INTERVAL_HYBRIDS:
        marked = arch.get("recurrent_layers")  # attention.recurrent_layers, when the converter wrote it
        if isinstance(marked, list):
            return [bool(v) for v in marked[:n]] + [False] * (n - len(marked))
        interval = int(arch.get("full_attention_interval") or 4)
        return [(i + 1) % interval != 0 for i in range(n)]
    if name in _NEMOTRON_HYBRIDS:
        ff = _per_layer(arch.get("feed_forward_length"), n)
        return [heads_kv[i] == 0 and ff[i] == 0 for i in range(n)]
    if name in _HEADLESS_HYBRIDS:
        return [h == 0 for h in heads_kv]
    return [False] * n


def _attention_layers(arch: dict[str, Any], recr: list[bool]) -> list[bool]:
    """Which trunk layers get a KV cache (create_memory's filter_attn; NextN/MTP layers are never in the trunk)."""
    name = arch["architecture"]
    if name in RECURRENT_ARCHS:
        return [False] * len(recr)
    if name in _ALL_LAYERS_HYBRIDS:
        return [True] * len(recr)
    if name in _NEMOTRON_HYBRIDS:
        ff = _per_layer(arch.get("feed_forward_length"), len(recr))
        return [not r and ff[i] == 0 for i, r in enumerate(recr)]
    return [not r for r in recr]


def swa_layers(arch: dict[str, Any]) -> list[bool]:
    """Sliding-window layers (llama_hparams::is_swa: attention.sliding_window_pattern, an array or a period, or
    the architecture's hard-coded period; lfm2: every attention layer when a window is set)."""
    n = int(arch.get("trunk_layers") or arch.get("num_layers") or 0)
    if not arch.get("sliding_window"):
        return [False] * n
    pattern = arch.get("sliding_window_pattern")
    if isinstance(pattern, list):
        return [bool(v) for v in pattern[:n]] + [False] * (n - len(pattern))
    if arch["architecture"] in ("lfm2", "lfm2moe"):
        return [not r for r in recurrent_layers(arch)]
    period = int(pattern) if isinstance(pattern, int) else _SWA_PATTERN.get(arch["architecture"])
    if period is None:
        return [False] * n
    return [period == 0 or i % period < period - 1 for i in range(n)]


def state_rows(arch: dict[str, Any]) -> tuple[int, int] | None:
    """(n_embd_r, n_embd_s): F32 values per sequence per recurrent layer (llama_hparams::n_embd_r / n_embd_s);
    None where hfmem does not read the keys that size them."""
    name = arch["architecture"]
    if name in _STATE_UNMODELLED:
        return None
    embd = int(arch.get("hidden_size") or 0)
    ssm = arch.get("ssm") or {}
    if ssm.get("wkv_head_size"):  # RWKV: token shift and wkv state
        return int(ssm.get("token_shift_count") or 2) * embd, embd * int(ssm["wkv_head_size"])
    if ssm.get("shortconv_l_cache"):  # LFM2 short convolution: no s state
        return embd * (int(ssm["shortconv_l_cache"]) - 1), int(ssm.get("d_state") or 0) * int(ssm.get("d_inner") or 0)
    d_conv, d_inner = int(ssm.get("d_conv") or 0), int(ssm.get("d_inner") or 0)
    d_state, n_group = int(ssm.get("d_state") or 0), int(ssm.get("n_group") or 0)
    # Mamba's conv_states (the first column is shifted out, so d_conv - 1) and ssm_states; gated delta net
    # layers (Qwen3-Next / Qwen3.5) use the same formula with n_group = key heads, d_state = key head size.
    return max(d_conv - 1, 0) * (d_inner + 2 * n_group * d_state), d_state * d_inner


def _row(values: int, cache_type: str) -> int:
    block, size = block_of(cache_type)
    return cdiv(values, block) * size


def _check_heads(cache_type: str, which: str, heads: set[int]) -> None:
    """llama_init_from_model (src/llama-context.cpp) refuses a quantized cache whose block does not divide every
    layer's head size (n_embd_head_k / n_embd_head_v)."""
    block, _ = block_of(cache_type)
    bad = sorted(h for h in heads if h % block)
    if block > 1 and bad:
        raise UsageError(f"llama.cpp refuses a {cache_type} {which} cache here: its block of {block} values does not "
                         f"divide the head size {bad[0]} (llama_init_from_model)")


def llamacpp_memory(
    arch: dict[str, Any],
    n_ctx: int,
    n_seq_max: int = 1,
    cache_type: str = "f16",
    *,
    kv_unified: bool = True,
    swa_full: bool = False,
    flash_attn: bool = True,
    n_ubatch: int = _N_UBATCH,
    type_v: str | None = None,
) -> dict[str, Any]:
    """llama.cpp's allocations for a context created with these llama_context_params (n_ctx = all sequences'
    cells, as llama.cpp takes it): per memory object, the cells, streams, layers and K / V / R / S bytes."""
    type_k = cache_type
    type_v = type_v or cache_type
    for t in (type_k, type_v):
        if t not in KV_TYPES:
            raise UsageError(f"unknown llama.cpp cache type {t!r}; use one of {', '.join(KV_TYPES)}")
    n_seq_max = max(1, int(n_seq_max))
    n_ctx = round_up(n_ctx, _PAD)  # llama_context::llama_context: GGML_PAD(n_ctx, 256)
    n_ctx_seq = n_ctx if kv_unified else round_up(n_ctx // n_seq_max, _PAD)
    streams = 1 if kv_unified else n_seq_max
    n = int(arch.get("trunk_layers") or arch.get("num_layers") or 0)
    recr = recurrent_layers(arch)
    attn = _attention_layers(arch, recr)
    swa = swa_layers(arch)
    heads_kv = _per_layer(arch.get("num_kv_heads"), n)
    k_len, v_len = int(arch.get("key_length") or 0), int(arch.get("value_length") or 0)
    k_swa = int(arch.get("key_length_swa") or k_len)
    v_swa = int(arch.get("value_length_swa") or v_len)
    is_mla = bool(arch.get("is_mla"))
    _check_heads(type_k, "K", {k_swa if swa[i] else k_len for i in range(n)})
    _check_heads(type_v, "V", {v_swa if swa[i] else v_len for i in range(n)})
    if block_of(type_v)[0] > 1:
        flash_attn = True  # a quantized V cache needs flash attention (llama_init_from_model turns it on, or fails)
    k_width = [heads_kv[i] * (k_swa if swa[i] else k_len) for i in range(n)]
    v_width = [heads_kv[i] * (v_swa if swa[i] else v_len) for i in range(n)]
    v_max = max(v_width, default=0)  # llama_hparams::n_embd_v_gqa_max, the transposed-V row without flash attention
    size_swa = n_ctx_seq
    if any(swa) and not swa_full:
        window = int(arch.get("sliding_window") or 0)
        size_swa = round_up(min(n_ctx_seq, window * (n_seq_max if kv_unified else 1) + n_ubatch), _PAD)
    # llama_hparams::has_kv: layers from n_layer_kv_from_start on reuse an earlier layer's cache (gemma3n: 20;
    # gemma4: n_layer_all - attention.shared_kv_layers; src/models/gemma3n.cpp, gemma4.cpp load_arch_hparams)
    kv_from_start = n
    if arch["architecture"] == "gemma3n":
        kv_from_start = 20
    elif arch.get("shared_kv_layers"):
        kv_from_start = int(arch.get("num_layers") or n) - int(arch["shared_kv_layers"])
    caches: dict[str, dict[str, int]] = {}
    per_layer = [0] * n  # K + V (+ r + s) bytes of each trunk layer: llama.cpp puts them on that layer's device
    for i in range(n):
        if not attn[i] or i >= kv_from_start:
            continue
        kind = "sliding_attention" if swa[i] else "full_attention"
        cells = size_swa if swa[i] else n_ctx_seq
        c = caches.setdefault(kind, {"layers": 0, "cells": cells, "streams": streams, "k_bytes": 0, "v_bytes": 0})
        c["layers"] += 1
        k = _row(k_width[i], type_k) * cells * streams
        v = 0
        if not is_mla:  # llama_kv_cache: has_v = !is_mla (MLA caches the compressed latent + rope key only)
            v = _row(v_width[i] if flash_attn else v_max, type_v) * cells * streams
        c["k_bytes"] += k
        c["v_bytes"] += v
        per_layer[i] += k + v
    recurrent: dict[str, int] | None = None
    rows = state_rows(arch) if any(recr) else None
    if any(recr) and rows is not None:
        cells = max(1, n_seq_max)  # create_memory: recurrent_rs_size = max(1, n_seq_max), one row per sequence
        layers = sum(recr)
        recurrent = {"layers": layers, "cells": cells, "r_bytes": rows[0] * 4 * cells * layers,
                     "s_bytes": rows[1] * 4 * cells * layers}
        for i in range(n):
            if recr[i]:
                per_layer[i] += (rows[0] + rows[1]) * 4 * cells
    return {"n_ctx": n_ctx, "n_ctx_seq": n_ctx_seq, "streams": streams, "kv": caches, "recurrent": recurrent,
            "per_layer": per_layer,
            "recurrent_unmodelled": any(recr) and rows is None}


def gguf_kv(arch: dict[str, Any], context: int, batch: int = 1, cache_type: str = "f16",
            defaults: str = "llama-server") -> GGUFKV:
    """llama.cpp's KV cache (and recurrent state) for `batch` sequences of `context` tokens each, from
    architecture_from_metadata's facts, with the context parameters `defaults` names ("llama-server":
    unified KV, window-sized SWA; "llama-cpp-python": llama_context_default_params, one stream per sequence,
    full-size SWA)."""
    if cache_type not in KV_TYPES:
        raise UsageError(f"unknown llama.cpp cache type {cache_type!r}; use one of {', '.join(KV_TYPES)}")
    d = DEFAULTS.get(defaults)
    if d is None:
        raise UsageError(f"unknown llama.cpp defaults {defaults!r}; use one of {', '.join(DEFAULTS)}")
    m = llamacpp_memory(arch, context * batch, batch, cache_type, kv_unified=d.kv_unified, swa_full=d.swa_full,
                        flash_attn=d.flash_attn, n_ubatch=d.n_ubatch)
    by_type: dict[str, dict[str, int]] = {}
    per_token = constant = kv_total = 0
    full_cells = m["n_ctx_seq"]
    for kind, c in m["kv"].items():
        b = c["k_bytes"] + c["v_bytes"]
        by_type[kind] = {"layers": c["layers"], "tokens": c["cells"], "bytes": b}
        kv_total += b
        if c["cells"] < full_cells:
            constant += b  # the window-sized cache does not grow with the context
        else:
            per_token += b // (c["cells"] * c["streams"]) if c["cells"] else 0
    rec = m["recurrent"]
    rec_total = 0
    if rec:
        rec_total = rec["r_bytes"] + rec["s_bytes"]
        by_type["recurrent"] = {"layers": rec["layers"], "tokens": rec["cells"], "bytes": rec_total}
        constant += rec_total
    notes = [f"llama.cpp context defaults of {d.name}: kv_unified={str(d.kv_unified).lower()}, "
             f"swa_full={str(d.swa_full).lower()}, flash_attn={'on' if d.flash_attn else 'off'}, n_ubatch={d.n_ubatch}"]
    if m["recurrent_unmodelled"]:
        notes.append(f"{arch['architecture']}: the recurrent state of its linear-attention layers is not modelled")
    if arch["architecture"] in _EXTRA_CACHES:
        notes.append(f"{arch['architecture']}: llama.cpp also keeps an indexer / compressed cache that is not modelled")
    if arch.get("is_mla"):
        notes.append("MLA: llama.cpp caches K only (kv_lora_rank + rope dims per cell), no V")
    return GGUFKV(context, batch, cache_type, full_cells, per_token, constant, kv_total + rec_total, by_type,
                  kv_total, rec_total, d.name, d.kv_unified, d.swa_full, m["streams"], notes)
