"""DeepSeek-V4 compressed attention (``deepseek_v4``): what a compressed-sparse-attention (CSA) or
heavily-compressed-attention (HCA) layer caches beside its sliding window.

Paper: DeepSeek-V4 technical report, §2.3.1 (CSA: overlapping windows of ``m = compress_rate_csa`` tokens pooled into
one entry, plus a lightning-indexer compressor at ``index_head_dim``) and §2.3.2 (HCA: non-overlapping windows of
``m' = compress_rate_hca`` tokens, no indexer).

transformers 5.24 and 5.25 (models/deepseek_v4/modeling_deepseek_v4.py; measured under both), per layer and per sequence after ``T`` tokens:

* ``DeepseekV4HCACache.update`` (a ``DynamicSlidingWindowLayer``): the last ``sliding_window - 1`` tokens of the
  shared-KV MQA head, ``[B, 1, W - 1, head_dim]``, stored once (``values`` is ``keys``).
* ``store_compression_weights``: ``buffer_kv`` / ``buffer_gate`` hold the ``T mod m`` projected tokens of the
  unfinished window, ``[B, T mod m, width]`` each in the model dtype (CSA width ``2 * head_dim``, its indexer
  ``2 * index_head_dim``; HCA ``head_dim``). Right after a one-shot prefill they are slices of the whole
  ``kv_proj`` / ``gate_proj`` output (``[B, T, width]``), which their storage keeps alive until the next call.
* ``update_compressor_states``: ``compressed_kv`` ``[B, T // m, head_dim]`` (CSA indexer: ``index_head_dim``), model
  dtype.
* ``DeepseekV4CSACache.update_overlap_state`` (CSA only, once a window has closed): the last window's Ca half,
  ``overlap_kv`` ``[B, m, head_dim]`` in the model dtype and ``overlap_gate`` in float32 (the gate has the float32
  ``position_bias`` added), for the compressor and the indexer each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CSA = "compressed_sparse_attention"
HCA = "heavily_compressed_attention"
COMPRESSED_TYPES = (CSA, HCA)
# transformers, models/deepseek_v4/configuration_deepseek_v4.py: DeepseekV4Config.default_compress_rates
_DEFAULT_RATES = {CSA: 4, HCA: 128}
_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1, "int8": 1}


@dataclass(frozen=True)
class Compressed:
    """The compressed branch of one CSA/HCA layer: per-token entry widths of its compressors, their rate and
    whether they keep an overlap state (CSA)."""

    kind: str  # CSA | HCA
    rate: int
    widths: tuple[int, ...]  # compressed entry width per compressor (CSA: head_dim, index_head_dim; HCA: head_dim)
    buffer_factor: int  # projected width per token = factor x entry width (CSA 2: two overlapping series; HCA 1)
    overlap: bool

    def entry_bytes(self, act: str) -> int:
        """Bytes of one compressed entry (all compressors of the layer) in the activation dtype."""
        return sum(self.widths) * _BYTES.get(act, 2)

    def hf_bytes(self, context: int, act: str) -> tuple[int, int, int]:
        """(logical bytes, storage right after a one-shot prefill, storage while decoding) of the compressed branch,
        one sequence, transformers 5.24 and 5.25 (window excluded)."""
        a = _BYTES.get(act, 2)
        rows, rem = divmod(context, self.rate)
        compressed = rows * sum(self.widths) * a
        buffer_width = self.buffer_factor * sum(self.widths)
        buffers = 2 * rem * buffer_width * a  # buffer_kv + buffer_gate
        overlap = self.rate * sum(self.widths) * (a + 4) if self.overlap and rows else 0
        logical = compressed + buffers + overlap
        # after a one-shot prefill a non-empty buffer is a slice of the [T, width] projection output
        prefill = compressed + overlap + (2 * context * buffer_width * a if rem else 0)
        return logical, prefill, logical


def compressed_layer(cfg: dict[str, Any], name: str) -> Compressed | None:
    """The compressed branch of a ``deepseek_v4`` layer named ``name`` (None for other layer types)."""
    if name not in COMPRESSED_TYPES:
        return None
    rates = dict(_DEFAULT_RATES)
    declared = cfg.get("compress_rates")
    if isinstance(declared, dict):
        rates.update({k: int(v) for k, v in declared.items() if k in rates and isinstance(v, int) and v > 0})
    for key, kind in (("compress_rate_csa", CSA), ("compress_rate_hca", HCA)):  # legacy scalars (config __post_init__)
        if isinstance(cfg.get(key), int) and cfg[key] > 0:
            rates[kind] = cfg[key]
    head_dim = int(cfg.get("head_dim") or 512)
    if name == CSA:
        index_dim = int(cfg.get("index_head_dim") or 128)
        return Compressed(CSA, rates[CSA], (head_dim, index_dim), 2, True)
    return Compressed(HCA, rates[HCA], (head_dim,), 1, False)

