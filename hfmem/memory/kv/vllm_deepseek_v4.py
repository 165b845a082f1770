"""vLLM's KV cache for DeepSeek-V4 (``deepseek_v4``: CSA / HCA compressed attention beside a sliding window).

vLLM registers several cache layers per decoder layer, pages them at 576-byte alignment, groups them and charges every
group's page as one whole pool block (``bytes_per_block``). Sources (vllm-project/vllm; commits as read):

* ``vllm/model_executor/models/deepseek_v4.py`` (023da1fc) ``DeepseekV4Attention.__init__``: compress ratio
  ``max(1, compress_ratios[i])`` on main layers, 1 on MTP layers; an indexer only where the ratio is 4.
* ``vllm/model_executor/layers/deepseek_v4_attention.py`` (0a291a2e) ``DeepseekV4MLAAttention.__init__`` (fp8 only,
  rewritten to ``fp8_ds_mla``), ``get_kv_cache_spec``; ``DeepseekV4IndexerCache.get_kv_cache_spec``.
* ``vllm/v1/attention/backends/mla/sparse_swa.py`` (03dc5649) ``DeepseekV4SWACache``: block 64 on every layer.
* ``vllm/model_executor/layers/deepseek_compressor.py`` (0de10a27) ``CompressorStateCache``: fp32 state, block 4
  (ratio 4) or 8, window ``coff * ratio``.
* ``vllm/v1/kv_cache_interface.py`` ``_apply_alignment_padding``, ``MLAAttentionSpec.real_page_size_bytes``,
  ``SlidingWindowSpec.max_admission_blocks_per_request``, ``FullAttentionSpec.max_memory_usage_bytes``,
  ``UniformTypeKVCacheSpecs.get_num_layer_tuples``.
* ``vllm/v1/core/kv_cache_planning.py`` (fc23e695) ``group_and_unify_kv_cache_specs``, ``_approximate_gcd``,
  ``_get_kv_cache_groups_uniform_groups``, ``_get_kv_cache_config_deepseek_v4``, ``_pool_bytes_per_block``,
  ``_max_memory_usage_bytes_from_groups``.
* ``vllm/v1/attention/backends/mla/flashmla_sparse.py`` ``DeepseekV4FlashMLASparseBackend``: kernel block 256 only.

Reproduces vllm-project/vllm#44376 (DeepSeek-V4-Flash, TP2, fp8, block 256, max_model_len 30000): "6.66 GiB KV cache
is needed", "estimated maximum model length is 13528" (tests/test_kv_deepseek_v4.py; docs/kv.md).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from hfmem.errors import UsageError
from hfmem.memory.kv.estimate import KVCacheEstimate
from hfmem.memory.kv.layers import _Layer
from hfmem.model.architecture import Architecture
from hfmem.units import cdiv, round_up

ALIGN = 576  # every DeepSeek-V4 spec: page_size_padded = round_up(real page, 576) (_apply_alignment_padding)
BLOCK = 256  # DeepseekV4FlashMLASparseBackend.get_supported_kernel_block_sizes() == [256]
SWA_BLOCK = 64  # DeepseekV4SWACache: block 64, "constrained by tensor sharing"
PADDING = "pool_padding"


@dataclass(frozen=True)
class _Cache:
    """One cache layer vLLM registers (one KV cache spec)."""

    kind: str  # by_layer_type key
    full: bool  # MLAAttentionSpec (grows with the context) | SlidingWindowMLASpec (window / state)
    block_size: int  # tokens per page
    real_page: int  # real_page_size_bytes
    window: int = 0  # sliding_window of a SlidingWindowMLASpec

    @property
    def page(self) -> int:
        return round_up(self.real_page, ALIGN)

    def pages(self, context: int, mbt: int) -> int:
        """cdiv(max_memory_usage_bytes, page_size_bytes) for one request of ``context`` tokens."""
        if self.full:  # FullAttentionSpec.max_memory_usage_bytes (no DCP/PCP)
            return cdiv(context, self.block_size)
        # SlidingWindowSpec.max_admission_blocks_per_request: the window may start mid-block
        return cdiv(min(self.window - 1 + mbt, context), self.block_size) + 1


def _token_bytes(cfg: dict, head_dim: int) -> int:
    """fp8_ds_mla bytes per token (DeepseekV4MultiHeadLatentAttentionWrapper.__init__: nope fp8 + rope bf16 + one
    scale byte per 64 nope values + 1 pad): 448 + 128 + 7 + 1 = 584 for head_dim 512, rope 64."""
    rope = cfg.get("qk_rope_head_dim")
    if not isinstance(rope, int) or isinstance(rope, bool) or rope <= 0:
        rope = int(head_dim * float(cfg.get("partial_rotary_factor") or 0.125))
    nope = head_dim - rope
    return nope + rope * 2 + nope // 64 + 1


def _caches(layers: list[_Layer], cfg: dict) -> list[_Cache]:
    """Every cache layer, in vLLM's registration order (swa_cache, attn, compressor, indexer k, indexer compressor)."""
    index_dim = int(cfg.get("index_head_dim") or 128)
    index_row = index_dim + index_dim // 128 * 4  # DeepseekV4Indexer: fp8 keys + one fp32 scale per 128
    out: list[_Cache] = []
    for l in layers:
        if not l.attn:
            continue
        head_dim = l.dk
        tok = _token_bytes(cfg, head_dim)
        # deepseek_v4.py: DeepseekV4Attention.__init__: MTP layers get ratio 1 (window only)
        r = l.compressed.rate if l.compressed is not None else 1
        swa = "mtp_sliding_window" if l.label == "mtp" else "sliding_window"
        out.append(_Cache(swa, False, SWA_BLOCK, SWA_BLOCK * tok, l.window or 128))  # DeepseekV4SWACache
        if r == 1:
            continue  # DeepseekV4MLAAttention.get_kv_cache_spec returns None for ratio <= 1
        if BLOCK % r:
            raise UsageError(f"DeepSeek-V4 compress ratio {r} does not divide vLLM's block of {BLOCK}: no vLLM estimate")
        name = "csa" if r == 4 else "hca"  # vLLM keys the indexer and the overlapping compressor on ratio == 4
        # MLAAttentionSpec (model_version deepseek_v4, fp8_ds_mla): storage_block_size = block_size // ratio entries
        out.append(_Cache(f"{name}_compressed_kv", True, BLOCK, BLOCK // r * tok))
        coff = 2 if r == 4 else 1  # deepseek_compressor.py: CompressorStateCache: kv_state + score_state, fp32
        state_block = 4 if r == 4 else 8
        out.append(_Cache(f"{name}_compressor_state", False, state_block, state_block * 2 * coff * head_dim * 4,
                          coff * r))
        if r == 4:
            # DeepseekV4IndexerCache: MLAAttentionSpec of one uint8 head of index_row bytes, ratio 4
            out.append(_Cache("csa_indexer_keys", True, BLOCK, BLOCK // 4 * index_row))
            out.append(_Cache("csa_indexer_state", False, 4, 4 * 2 * 2 * index_dim * 4, 8))
    return out


def _approximate_gcd(values: list[int], lower_bound: int) -> int:
    """kv_cache_planning.py: _approximate_gcd: the d >= lower_bound with least round-up padding, ties to the larger."""
    best, best_pad = lower_bound, None
    for d in range(max(1, lower_bound), max(values) + 1):
        pad = sum(-x % d for x in values)
        if best_pad is None or pad <= best_pad:
            best, best_pad = d, pad
    return best


def _tuples(pages: list[int]) -> int:
    """UniformTypeKVCacheSpecs.get_num_layer_tuples: layers sharing the most common page size."""
    return Counter(pages).most_common(1)[0][1]


def _groups(caches: list[_Cache]) -> tuple[list[list[_Cache]], dict[int, int], int, int, list[int]]:
    """(groups, padded page per cache, layer tuples per pool block, tuple bytes, MLA page sizes) following
    kv_cache_planning.py @ fc23e695: group_and_unify_kv_cache_specs, _get_kv_cache_groups_uniform_groups,
    _pool_bytes_per_block."""
    mla = [c for c in caches if c.full]
    if not mla:
        raise UsageError("DeepSeek-V4 model without a compressed layer: vLLM's layout needs one; no vLLM estimate")
    buckets: dict[tuple[int, int], list[int]] = {}  # SlidingWindowMLASpecs by (block_size, sliding_window)
    for i, c in enumerate(caches):
        if not c.full:
            buckets.setdefault((c.block_size, c.window), []).append(i)
    counts = [_tuples([c.page for c in mla])] + [_tuples([caches[i].page for i in b]) for b in buckets.values()]
    repeat = _approximate_gcd(counts, counts[0])
    mla_pages = sorted({c.page for c in mla})
    padded = {i: c.page for i, c in enumerate(caches)}
    groups = [[c for c in caches if c.full]]
    for members in buckets.values():
        by_size: dict[int, list[int]] = {}
        for i in members:
            fit = [p for p in mla_pages if p >= caches[i].page]
            if not fit:
                raise UsageError("vLLM cannot pad a DeepSeek-V4 window/state page to a compressed page; no vLLM estimate")
            padded[i] = fit[0]  # object.__setattr__(layer_spec, "page_size_padded", candidate)
            by_size.setdefault(fit[0], []).append(i)
        sizes = {len(v) for v in by_size.values()}
        if len(sizes) != 1:
            raise UsageError("vLLM requires as many layers of each page size in a DeepSeek-V4 group; no vLLM estimate")
        n_sub = cdiv(sizes.pop(), repeat)
        rows = list(zip(*by_size.values()))
        for k in range(n_sub):
            groups.append([caches[i] for row in rows[k::n_sub] for i in row])
    index = {id(c): i for i, c in enumerate(caches)}
    tuples = max(_tuples([padded[index[id(c)]] for c in g]) for g in groups)
    return groups, padded, tuples, sum(mla_pages), mla_pages


def _packed_groups(caches: list[_Cache]) -> tuple[list[list[_Cache]], int]:
    """(groups, bytes_per_block) of newer vLLM main (kv_cache_planning.py @ 4253bd44: _get_packed_kv_cache_groups,
    _get_kv_cache_bytes_per_block): buckets as above, only balanced ones (as many layers of each page size) split,
    no padding to compressed pages, one block = the widest group. Per-layer specs assumed as at fc23e695."""
    buckets: dict[tuple[bool, int, int], list[_Cache]] = {}
    for c in caches:
        buckets.setdefault((c.full, 0, 0) if c.full else (False, c.block_size, c.window), []).append(c)
    plans = []
    for members in buckets.values():
        by_size: dict[int, list[_Cache]] = {}
        for c in members:
            by_size.setdefault(c.page, []).append(c)
        counts = {len(v) for v in by_size.values()}
        plans.append((by_size, len(counts) == 1, max(counts)))
    lower = max((m for by_size, balanced, m in plans if balanced and len(by_size) > 1), default=0)
    repeat = _approximate_gcd([m for _, balanced, m in plans if balanced], lower) if lower else 0
    groups: list[list[_Cache]] = []
    for by_size, balanced, m in plans:
        n_sub = cdiv(m, repeat) if balanced and repeat else 1
        rows = list(zip(*by_size.values())) if n_sub > 1 else [tuple(c for v in by_size.values() for c in v)]
        for k in range(n_sub):
            groups.append([c for row in rows[k::n_sub] for c in row])
    return groups, max(sum(c.page for c in g) for g in groups)


def deepseek_v4_vllm(arch: Architecture, layers: list[_Layer], dtype: str, context: int, batch: int, block_size: int,
                     mbt: int, layout: str = "dsv4_tuples") -> KVCacheEstimate:
    """Blocks vLLM reserves for ``batch`` requests of ``context`` tokens of a DeepSeek-V4 model (per GPU, any TP).

    layout: "dsv4_tuples" (kv_cache_planning.py @ fc23e695, reproduces vllm#44376; hfmem's figure) or "packed"
    (newer main @ 4253bd44, not checked against a log; API only)."""
    if layout not in ("dsv4_tuples", "packed"):
        raise UsageError(f"unknown DeepSeek-V4 vLLM layout {layout!r}: dsv4_tuples or packed")
    cfg = arch.text_config or {}
    assumptions: list[str] = []
    if dtype != "fp8":
        assumptions.append(f"vLLM runs DeepSeek-V4 only with fp8 KV (DeepseekV4MLAAttention asserts kv_cache_dtype "
                           f"fp8 and stores fp8_ds_mla; deepseek_v4_attention.py): the figure uses fp8, not {dtype}")
    caches = _caches(layers, cfg)
    if layout == "packed":
        groups, bytes_per_block = _packed_groups(caches)
        padded = {i: c.page for i, c in enumerate(caches)}
        block_text = f"the widest group's pages = {bytes_per_block:,} B"
    else:
        groups, padded, tuples, tuple_bytes, mla_pages = _groups(caches)
        bytes_per_block = tuple_bytes * tuples  # _pool_bytes_per_block: one page of every MLA page size per layer tuple
        block_text = (f"{' + '.join(f'{p:,}' for p in mla_pages)} = {tuple_bytes:,} B x {tuples} layer tuples = "
                      f"{bytes_per_block:,} B")
    group_pages = [max(c.pages(context, mbt) for c in g) for g in groups]
    pages = sum(group_pages)
    index = {id(c): i for i, c in enumerate(caches)}
    before_027 = None
    if layout == "dsv4_tuples":
        # vLLM 0.20-0.26, kv_cache_utils.py get_max_concurrency_for_kv_cache_config: the largest group's layer count
        # x every group's max_memory_usage_bytes (UniformTypeKVCacheSpecs: its pages x the sum of its layers' page
        # bytes), over the first group's page bytes x that count; 0.27 sums the groups' pages (as `pages` does)
        group_bytes = [sum(padded[index[id(c)]] for c in g) for g in groups]
        before_027 = cdiv(sum(n * b for n, b in zip(group_pages, group_bytes)), group_bytes[0])
    per_request = pages * bytes_per_block  # _max_memory_usage_bytes_from_groups
    growing = sum(n for g, n in zip(groups, group_pages) if g[0].full) * bytes_per_block  # cdiv(context, 256) blocks

    by: dict[str, dict[str, int]] = {}
    for c in caches:
        n = c.pages(context, mbt)
        e = by.setdefault(c.kind, {"layers": 0, "tokens": 0, "bytes": 0, "bytes_per_token": 0, "state_bytes": 0,
                                   "block_size": c.block_size, "pages": n, "page_bytes": c.real_page,
                                   "padded_page_bytes": padded[index[id(c)]]})
        e["layers"] += 1
        e["tokens"] = n * c.block_size
        e["bytes"] += batch * n * c.real_page
    real = sum(e["bytes"] for e in by.values())
    by[PADDING] = {"layers": 0, "tokens": 0, "bytes": batch * per_request - real, "bytes_per_token": 0,
                   "state_bytes": 0}

    formulas: dict[str, str] = {}
    for kind, e in by.items():
        if kind == PADDING:
            continue
        c = next(c for c in caches if c.kind == kind)
        what = ("cdiv(context, 256) pages" if c.full else
                f"(cdiv(min({c.window} - 1 + {mbt}, context), {c.block_size}) + 1) pages")
        formulas[kind] = (f"{e['layers']} x {what} of {c.block_size} tokens x {c.real_page:,} B "
                          f"(aligned {c.page:,}, padded {e['padded_page_bytes']:,})")
    n_groups = len(groups)
    formulas["pool"] = (f"{n_groups} groups x pages per group ({' + '.join(f'{p:,}' for p in group_pages)} = "
                        f"{pages:,}) x bytes_per_block ({block_text}) per sequence")
    if block_size != BLOCK:
        assumptions.append(f"DeepSeek-V4: vLLM's FlashMLA-sparse kernel supports block_size 256 only "
                           f"(in place of {block_size}); window cache blocks of 64, compressor state blocks of 4 / 8")
    specs = ("every layer a 64-token window cache (584 B/token fp8_ds_mla); CSA (ratio 4) compressed KV + indexer "
             "keys (132 B) + fp32 compressor and indexer-compressor states; HCA compressed KV + fp32 compressor state; "
             "pages aligned to 576 B")
    if layout == "packed":
        assumptions.append(f"vLLM DeepSeek-V4 'packed' layout of newer main (kv_cache_planning.py: "
                           f"_get_packed_kv_cache_groups; not checked against a log; the null block vLLM reserves is "
                           f"not in total_bytes): {specs}")
    else:
        assumptions.append("vLLM DeepSeek-V4 layout (kv_cache_planning.py: _get_kv_cache_config_deepseek_v4, "
                           f"'dsv4_tuples', the one that reproduces vllm#44376): {specs}, window/state pages padded "
                           "to a compressed page size")
        assumptions.append("newer vLLM main packs the groups instead (kv_cache_planning.py: "
                           "_get_packed_kv_cache_groups: no padding to compressed pages, bytes_per_block = the widest "
                           "group, one null block reserved): not modelled here")
    assumptions += [
        f"every group's page costs one whole pool block of {bytes_per_block:,} B; "
        f"blocks_per_request = {pages:,} = the sum over the {n_groups} groups; by_layer_type holds each cache's real "
        f"bytes, {PADDING} the rest of the blocks; bytes_per_token = {bytes_per_block:,} // 256 (the compressed-KV "
        "group's charge per token, floored)",
        f"window and compressor-state caches are sized by max_num_batched_tokens ({mbt:,}): vLLM's default is 8,192 "
        "for `vllm serve` and 16,384 for the offline LLM class on GPUs >= 70 GiB (--max-batched-tokens)",
        "tensor parallelism does not divide these caches (one KV head; MLA, indexer and state caches replicated)",
        "--disable-hybrid-kv-cache-manager, DCP/PCP and multi-module MTP are not modelled",
    ]
    return KVCacheEstimate(
        engine="vllm", dtype="fp8", context=context, batch=batch,
        bytes_per_token=bytes_per_block // BLOCK, constant_bytes=per_request - growing,
        total_bytes=batch * per_request, by_layer_type=by, block_size=BLOCK, page_reserved_total_bytes=None,
        bytes_per_block=bytes_per_block, blocks_per_request=pages, blocks_per_request_before_027=before_027,
        total_is="pool blocks vLLM reserves for the requests (DeepSeek-V4: one pool block per page of every group)",
        formulas=formulas, assumptions=assumptions,
    )
