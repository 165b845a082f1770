"""transformers' DynamicCache: the bytes of the tensors the cache object holds after a prefill of `context` tokens
(transformers 5.24 and 5.25, cache_utils.py: DynamicLayer, DynamicSlidingWindowLayer, LinearAttentionLayer,
DummyLayer). The two releases differ by one scalar per linear-attention/SSM layer (_LINEAR_COUNTER); the installed
release decides."""

from __future__ import annotations

from hfmem.memory.kv.estimate import KVCacheEstimate
from hfmem.memory.kv.layers import _add, _attn_bytes_per_token, _Layer, _state_bytes

# transformers, cache_utils.py: DynamicSlidingWindowLayer._sliding_window_tensor, one int64 scalar per sliding layer
_SLIDING_BOOKKEEPING = 8
# transformers >= 5.25, cache_utils.py: LinearAttentionCacheLayerMixin.__init__ keeps cumulative_length_linear =
# torch.tensor(0, dtype=int), one int64 token counter per layer (not per sequence) on every linear-attention / SSM /
# short-conv cache layer (LinearAttentionLayer and the hybrid LinearAttentionAnd*Layer); 5.24 has none.
_LINEAR_COUNTER = 8


def _transformers(layers: list[_Layer], dtype: str, context: int, batch: int, release: str | None = None) -> KVCacheEstimate:
    from hfmem.model.release import at_least

    counter = _LINEAR_COUNTER if at_least(5, 25, release) else 0
    by: dict[str, dict[str, int]] = {}
    per_token = 0
    constant = 0
    bookkeeping = 0
    prefill_storage = 0
    decode_storage = 0
    for layer in layers:
        bpt = _attn_bytes_per_token(layer, dtype, "transformers") if layer.attn else 0
        states = _state_bytes(layer, "transformers")
        tokens = 0
        grow = 0
        bounded = states
        prefill_tokens = decode_tokens = 0
        if layer.attn in ("full", "mla"):
            tokens = prefill_tokens = decode_tokens = context
            grow = bpt
        elif layer.attn in ("sliding", "chunked"):
            assert layer.window is not None  # describe_layers gives every sliding/chunked layer its window
            tokens = min(context, layer.window - 1)  # DynamicSlidingWindowLayer keeps the last window - 1 tokens
            bounded += tokens * bpt
            bookkeeping += _SLIDING_BOOKKEEPING
            prefill_tokens = context  # the kept slice is a view of the full prefill concatenation
            decode_tokens = min(context, layer.window)  # after a decode step: a view of (window - 1) + 1 tokens
            if layer.compressed is not None:  # DeepSeek-V4 CSA/HCA: compressed entries, buffers, overlap state
                logical, after_prefill, while_decoding = layer.compressed.hf_bytes(context, dtype)
                rate = layer.compressed.entry_bytes(dtype) // layer.compressed.rate
                grow = rate
                bounded += logical - rate * context
                prefill_storage += batch * after_prefill
                decode_storage += batch * while_decoding
        elif layer.attn == "cross":
            tokens = prefill_tokens = decode_tokens = layer.window or 0
            bounded += tokens * bpt
        if layer.hf_linear_layer:
            bookkeeping += counter
        per_token += grow
        constant += bounded
        layer_bytes = batch * (grow * context + bounded)
        prefill_storage += batch * (prefill_tokens * bpt + states)
        decode_storage += batch * (decode_tokens * bpt + states)
        if layer.label in ("kv_shared", "no_cache"):
            _add(by, layer.label, layers=1)
            continue
        _add(by, layer.label, layers=1, tokens=tokens, bytes=layer_bytes, bytes_per_token=bpt, state_bytes=states)
        if layer.compressed is not None:
            _add(by, layer.label, compressed_rows=context // layer.compressed.rate,
                 compressed_bytes_per_token=grow)
            by[layer.label]["compress_rate"] = layer.compressed.rate
    for entry in by.values():
        entry.setdefault("bytes_per_token", 0)
        entry.setdefault("state_bytes", 0)
    total = batch * (per_token * context + constant) + bookkeeping
    return KVCacheEstimate(
        engine="transformers", dtype=dtype, context=context, batch=batch, bytes_per_token=per_token,
        constant_bytes=constant, total_bytes=total, by_layer_type=by, total_is=(
            "bytes of the tensors DynamicCache holds after a prefill of the context (sliding layers: window - 1 tokens)"
        ),
        bookkeeping_bytes=bookkeeping,
        storage_bytes={"after_prefill": prefill_storage + bookkeeping, "while_decoding": decode_storage + bookkeeping},
        assumptions=_assumptions(layers, counter) + _compressed_notes(layers),
    )


def _assumptions(layers: list[_Layer], counter: int) -> list[str]:
    if not any(l.states for l in layers):
        return ["transformers 5.24/5.25 DynamicCache"]  # the same tensors in both releases
    if counter and any(l.hf_linear_layer for l in layers):
        return ["transformers 5.25 DynamicCache; recurrent states float32 as on its PyTorch paths; one int64 token "
                "counter per linear-attention/SSM layer (cumulative_length_linear) in bookkeeping_bytes"]
    return ["transformers 5.24 DynamicCache; recurrent states float32 as on its PyTorch paths"]


def _compressed_notes(layers: list[_Layer]) -> list[str]:
    """One line for DeepSeek-V4 compressed layers (models/deepseek_v4/modeling_deepseek_v4.py: DeepseekV4CSACache,
    DeepseekV4HCACache)."""
    kinds: dict[tuple[str, int], int] = {}
    for l in layers:
        if l.compressed is not None:
            kinds[(l.label, l.compressed.rate)] = kinds.get((l.label, l.compressed.rate), 0) + 1
    if not kinds:
        return []
    parts = ", ".join(f"{n} {label} (one entry per {rate} tokens)" for (label, rate), n in kinds.items())
    return [f"DeepSeek-V4 compressed layers: {parts}; each keeps window - 1 tokens (K = V stored once), its "
            "compressed entries, the unfinished window's projected tokens and gates (buffers) and, for CSA, the "
            "float32-gated overlap state; bytes_per_token is the entries' rate, constant_bytes the rest at this context"]
