"""vLLM's KV cache for DeepSeek-V4 (``deepseek_v4``: CSA / HCA compressed attention beside a sliding window).

vLLM registers several cache layers per decoder layer, pages them at 576-byte alignment, groups them and charges every
group's page as one whole pool block (``bytes_per_block``). Sources (vllm-project/vllm; the PyPI wheels 0.20.0-0.34.0,
where the same default caches are built in every release; paths of 0.20-0.21, from 0.22 under ``vllm/models/deepseek_v4/``):

* ``vllm/model_executor/models/deepseek_v4.py`` ``DeepseekV4Attention.__init__``: compress ratio
  ``max(1, compress_ratios[i])`` on main layers, 1 on MTP layers; an indexer only where the ratio is 4.
* ``vllm/model_executor/layers/deepseek_v4_attention.py`` ``DeepseekV4MLAAttention.__init__`` (fp8 only,
  rewritten to ``fp8_ds_mla``), ``get_kv_cache_spec``; ``DeepseekV4IndexerCache.get_kv_cache_spec``.
* ``vllm/v1/attention/backends/mla/sparse_swa.py`` ``DeepseekV4SWACache``: block 64 on every layer.
* ``vllm/model_executor/layers/deepseek_compressor.py`` ``CompressorStateCache``: fp32 state, block 4
  (ratio 4) or 8, window ``coff * ratio``.
* ``vllm/v1/kv_cache_interface.py`` ``_apply_alignment_padding``, ``MLAAttentionSpec.real_page_size_bytes``,
  ``SlidingWindowSpec.max_admission_blocks_per_request``, ``FullAttentionSpec.max_memory_usage_bytes``,
  ``UniformTypeKVCacheSpecs.get_num_layer_tuples``.
* ``vllm/v1/core/kv_cache_utils.py`` (from 0.33 ``kv_cache_planning.py``) ``group_and_unify_kv_cache_specs``,
  ``_approximate_gcd``, ``_get_kv_cache_groups_uniform_groups``, ``_get_kv_cache_config_deepseek_v4``,
  ``_bucket_layers_by_page_size``, ``_get_packed_kv_cache_layout``, ``_get_packed_kv_cache_groups``,
  ``_pool_bytes_per_block``, ``_max_memory_usage_bytes_from_groups``.
* ``vllm/v1/attention/backends/mla/flashmla_sparse.py`` ``DeepseekV4FlashMLASparseBackend``: kernel block 256 only.

Reproduces vllm-project/vllm#44376 (DeepSeek-V4-Flash, TP2, fp8, block 256, max_model_len 30000): "6.66 GiB KV cache
is needed", "estimated maximum model length is 13528" (tests/test_kv_deepseek_v4.py; docs/kv.md), and the block
counts, fit-check bytes and concurrency that vLLM 0.20-0.34's own planning code gives for V4-Flash and V4-Pro
(layout_for).
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
    """kv_cache_utils.py _approximate_gcd: the d >= lower_bound with least round-up padding, ties to the larger."""
    best, best_pad = lower_bound, None
    for d in range(max(1, lower_bound), max(values) + 1):
        pad = sum(-x % d for x in values)
        if best_pad is None or pad <= best_pad:
            best, best_pad = d, pad
    return best


def _tuples(pages: list[int]) -> int:
    """UniformTypeKVCacheSpecs.get_num_layer_tuples: layers sharing the most common page size."""
    return Counter(pages).most_common(1)[0][1]


def _groups(caches: list[_Cache], pad: bool = True) -> tuple[list[list[_Cache]], dict[int, int], int, int, list[int]]:
    """(groups, page per cache as grouped, layer tuples per pool block, tuple bytes, MLA page sizes) following
    kv_cache_utils.py group_and_unify_kv_cache_specs and _get_kv_cache_groups_uniform_groups (0.20-0.28). pad: window
    and state pages padded up to the nearest compressed page size (0.20-0.26); 0.27-0.28 keep their own pages."""
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
            fit = [p for p in mla_pages if p >= caches[i].page] if pad else [caches[i].page]
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
    """(groups, bytes_per_block) of vLLM 0.29 on (kv_cache_utils.py, from 0.33 kv_cache_planning.py:
    _get_packed_kv_cache_groups, _get_kv_cache_bytes_per_block): buckets as above, only balanced ones (as many layers
    of each page size) split, no padding to compressed pages, one block = the widest group (the block-outermost
    layout the V4 indexer backend asks for; no stride alignment on V4's specs by default)."""
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


# How vLLM lays DeepSeek-V4's pool blocks out, by release (run through each wheel's own kv_cache_utils.py /
# kv_cache_planning.py on V4-Flash and V4-Pro specs: scripts/record_vllm_planning.py, tests/test_vllm_planning_truth.py):
# - "tuples" (0.20-0.22): _get_kv_cache_config_deepseek_v4: a block holds one page of every compressed page size per
#   layer tuple;
# - "buckets" (0.23-0.26): every page size as many times as the most layers of that size in one group;
# - "overlay" (0.27-0.28): _get_packed_kv_cache_layout: window and state pages no longer padded, a block = the widest
#   group. Up to 0.28 the fit check (_max_memory_usage_bytes_from_groups) still charges a request's pages at the
#   tuple size, so it can ask for more than its blocks hold;
# - "packed" (0.29 on): _get_packed_kv_cache_groups; the fit check charges whole blocks.
LAYOUTS = ("tuples", "buckets", "overlay", "packed")
_LAYOUT_FROM = ((0, 29, "packed"), (0, 27, "overlay"), (0, 23, "buckets"))
# v1/core/kv_cache_utils.py get_max_concurrency_for_kv_cache_config: up to 0.26.0 cdiv(the largest group's layer count
# x the sum of the groups' max_memory_usage_bytes, the first group's page_size_bytes x that count); from 0.27.0 (read
# in both wheels) the sum over groups of cdiv(max_memory_usage_bytes, page_size_bytes). They agree wherever every group
# has one page size (vLLM unifies them), so only DeepSeek-V4, whose groups' pages differ, logs another concurrency:
# the layouts of the releases before 0.27 carry it (KVCacheEstimate.blocks_per_request_before_027)
_OLD_CONCURRENCY = ("tuples", "buckets")


def layout_for(release: tuple[int, int] | None) -> str:
    """The DeepSeek-V4 pool layout of a vLLM release (major, minor); None: the newest release read."""
    if release is None:
        return "packed"
    for major, minor, name in _LAYOUT_FROM:
        if release >= (major, minor):
            return name
    return "tuples"


def _bucket_bytes(groups: list[list[_Cache]], page_of: dict[int, int]) -> int:
    """kv_cache_utils.py _bucket_layers_by_page_size (0.23-0.26): each page size times the most layers of it that one
    group holds."""
    slots: dict[int, int] = {}
    for g in groups:
        for size, n in Counter(page_of[id(c)] for c in g).items():
            slots[size] = max(slots.get(size, 0), n)
    return sum(size * n for size, n in slots.items())


def deepseek_v4_vllm(arch: Architecture, layers: list[_Layer], dtype: str, context: int, batch: int, block_size: int,
                     mbt: int, layout: str = "packed") -> KVCacheEstimate:
    """Blocks vLLM reserves for ``batch`` requests of ``context`` tokens of a DeepSeek-V4 model (per GPU, any TP).

    mbt: the tokens a window or state cache admits beyond its window (max_num_batched_tokens, or from 0.26 vLLM's
    max_in_flight_tokens: kv.vllm.admission_tokens). layout: one of LAYOUTS (layout_for(release))."""
    if layout not in LAYOUTS:
        raise UsageError(f"unknown DeepSeek-V4 vLLM layout {layout!r}: one of {', '.join(LAYOUTS)}")
    cfg = arch.text_config or {}
    assumptions: list[str] = []
    if dtype != "fp8":
        assumptions.append(f"vLLM runs DeepSeek-V4 only with fp8 KV (DeepseekV4MLAAttention asserts kv_cache_dtype "
                           f"fp8 and stores fp8_ds_mla; deepseek_v4_attention.py): the figure uses fp8, not {dtype}")
    caches = _caches(layers, cfg)
    index = {id(c): i for i, c in enumerate(caches)}
    if layout == "packed":
        groups, bytes_per_block = _packed_groups(caches)
        padded = {i: c.page for i, c in enumerate(caches)}
        charge = bytes_per_block  # _max_memory_usage_bytes_from_groups: whole blocks
        block_text = f"the widest group's pages = {bytes_per_block:,} B"
    else:
        groups, padded, tuples, tuple_bytes, mla_pages = _groups(caches, pad=layout != "overlay")
        charge = tuple_bytes * tuples  # _max_memory_usage_bytes_from_groups: one page of every MLA size per tuple
        tuple_text = f"{' + '.join(f'{p:,}' for p in mla_pages)} = {tuple_bytes:,} B x {tuples} layer tuples"
        page_of = {id(c): padded[index[id(c)]] for c in caches}
        if layout == "tuples":
            bytes_per_block = charge
            block_text = f"{tuple_text} = {bytes_per_block:,} B"
        elif layout == "buckets":
            bytes_per_block = _bucket_bytes(groups, page_of)
            block_text = f"each page size x its most layers in one group = {bytes_per_block:,} B"
        else:
            bytes_per_block = max(sum(page_of[id(c)] for c in g) for g in groups)
            block_text = f"the widest group's pages = {bytes_per_block:,} B"
        if charge != bytes_per_block:
            block_text += f"; the fit check charges each page at the tuple size, {tuple_text} = {charge:,} B"
    group_pages = [max(c.pages(context, mbt) for c in g) for g in groups]
    pages = sum(group_pages)
    before_027 = None
    if layout in _OLD_CONCURRENCY:
        # vLLM 0.20-0.26, kv_cache_utils.py get_max_concurrency_for_kv_cache_config: the largest group's layer count
        # x every group's max_memory_usage_bytes (UniformTypeKVCacheSpecs: its pages x the sum of its layers' page
        # bytes), over the first group's page bytes x that count; 0.27 sums the groups' pages (as `pages` does)
        group_bytes = [sum(page_of[id(c)] for c in g) for g in groups]
        before_027 = cdiv(sum(n * b for n, b in zip(group_pages, group_bytes)), group_bytes[0])
    per_request = pages * charge  # _max_memory_usage_bytes_from_groups
    growing = sum(n for g, n in zip(groups, group_pages) if g[0].full) * charge  # cdiv(context, 256) pages

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
    where = {"tuples": "0.20-0.22", "buckets": "0.23-0.26", "overlay": "0.27-0.28", "packed": "0.29 on"}[layout]
    assumptions.append(f"vLLM DeepSeek-V4 pool layout '{layout}' (vLLM {where}; layout_for): {specs}"
                       + (", window/state pages padded to a compressed page size" if layout in _OLD_CONCURRENCY else ""))
    assumptions += [
        f"num_blocks = available // bytes_per_block ({block_text}); a request takes {pages:,} blocks, the sum over "
        f"the {n_groups} groups (the concurrency divisor"
        + (f"; vLLM {where} log their concurrency with {before_027:,}: every group's pages at its own page bytes over "
           "the first group's" if before_027 is not None else "")
        + f"); total_bytes = {pages:,} x {charge:,} B, what vLLM's fit check asks for; by_layer_type holds each "
        f"cache's real bytes, {PADDING} the rest; bytes_per_token = {bytes_per_block:,} // 256",
        f"window and compressor-state caches admit {mbt:,} tokens beyond their window: max_num_batched_tokens up to "
        "vLLM 0.25, its max_in_flight_tokens (2 x max_num_batched_tokens with the default async scheduling) from 0.26",
        "tensor parallelism does not divide these caches (one KV head; MLA, indexer and state caches replicated)",
        "--disable-hybrid-kv-cache-manager, DCP/PCP, the fp4 indexer cache and multi-module MTP are not modelled",
    ]
    return KVCacheEstimate(
        engine="vllm", dtype="fp8", context=context, batch=batch,
        bytes_per_token=bytes_per_block // BLOCK, constant_bytes=per_request - growing,
        total_bytes=batch * per_request, by_layer_type=by, block_size=BLOCK, page_reserved_total_bytes=None,
        bytes_per_block=bytes_per_block, blocks_per_request=pages, blocks_per_request_before_027=before_027,
        kv_groups=n_groups, smallest_group_block=min(g[0].block_size for g in groups), startup_check_bytes=per_request,
        total_is="pool blocks vLLM reserves for the requests (DeepSeek-V4: one pool block per page of every group)",
        formulas=formulas, assumptions=assumptions,
    )
