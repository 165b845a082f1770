"""vLLM's "Estimated CUDA graph memory" (deducted from the KV budget from 0.20 on), following what its code does.

``GPUModelRunner.profile_cudagraph_memory`` (vllm/v1/worker/gpu_model_runner.py), called from ``gpu_worker.py``
``determine_available_memory``, does not capture every graph. For each CUDA-graph mode (PIECEWISE: mixed batches,
one graph per piece between attention ops; FULL: uniform decode batches) it captures the two largest capture sizes
into a temporary pool, reads ``torch.cuda.mem_get_info`` around each, and extrapolates::

    total = max over modes of (first capture) + sum over modes of (second capture) x (graphs in the mode - 1)

with at least 1 MiB per graph ("driver overhead"). So three things make the figure:

1. **How many graphs.** ``VllmConfig._set_cudagraph_sizes`` (vllm/config/vllm.py): ``max_cudagraph_capture_size =
   min(max_num_seqs x decode_query_len x 2, 512)``, capped at ``max_num_batched_tokens``; the sizes are
   ``[1, 2, 4] + range(8, 256, 8) + range(256, max + 1, 16)`` up to it. PIECEWISE captures them all; FULL (the
   default ``cudagraph_mode`` FULL_AND_PIECEWISE) the uniform-decode sizes up to ``max_num_seqs``. At 256 sequences
   that is 51 and 35 graphs, as the logs' "Profiling CUDA graph memory: PIECEWISE=51 (largest=512), FULL=35
   (largest=256)" line prints.
2. **The first capture** holds the largest batch's activations, which every smaller graph then reuses from the
   shared pool: ``_warmup_and_capture`` runs the eager warm-up (its activations stay cached in torch's default pool:
   nothing empties it before the sample is read) and then the capture, which allocates them again in the graph
   pool. hfmem counts the forward-activation peak of the largest size twice (the planner's forward phases).
3. **The per-graph step** is the second capture's growth of device memory: the new graph's own allocations, which
   the driver and PyTorch's caching allocator hand out in 2 MiB steps (c10/cuda/CUDACachingAllocator.cpp:
   ``kSmallBuffer`` = 2 MiB segments for small blocks, large ones rounded to ``kRoundLarge`` = 2 MiB). hfmem counts
   one such step per graph. The sample is whatever the allocator happened to need for that one capture, so vLLM's
   own figure varies between starts of the same command: when the second capture opens a large-block segment
   (``kLargeBuffer`` = 20 MiB) every graph is charged 20 MiB more. Both are given (the note shows the range).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

from hfmem.memory.vllm_versions import as_compared

MiB = 1 << 20
STEP = 2 * MiB  # the smallest growth a capture shows: one 2 MiB segment/page
LARGE_SEGMENT = 20 * MiB  # PyTorch's kLargeBuffer: a segment for blocks of 1-10 MiB
MAX_CAPTURE = 512  # vllm/config/vllm.py _set_cudagraph_sizes: default_max_graph_size
# The rules by release, read in the 0.17.0-0.34.0 wheels' config/vllm.py and held to what their own
# _set_cudagraph_sizes gives (scripts/record_vllm_cudagraph_sizes.py, fixtures/vllm/cudagraph_sizes.json):
MAX_NUM_TOKENS_CAPTURED_FROM = (0, 21)  # max_num_batched_tokens appended when within the capture ceiling
SM100_MAX_CAPTURE_FROM = (0, 28)  # the ceiling is 1024 on the SM100 family (B200, GB200, B300)
MAX_NUM_SEQS_CAPTURED_FROM = (0, 31)  # max_num_seqs appended (a uniform decode batch) when within the ceiling
# with speculative decoding, the uniform decode batches of every request count (the default grid up to max_num_seqs,
# and max_num_seqs) times 1 + num_speculative_tokens appended when within the ceiling (scripts/record_vllm_spec_graphs.py)
SPEC_DECODE_SIZES_CAPTURED_FROM = (0, 29)
# _split_cudagraph_capture_sizes: on the SM100 family the PIECEWISE graphs take the prefill grid up to
# min(8192, max_num_batched_tokens) and the FULL ones the decode grid up to max_num_seqs (up to 8192 tokens)
SM100_WIDE_GRIDS_FROM = (0, 34)
WIDE_GRID_TOKENS = 8192


def _grid(top: int) -> list[int]:
    """1, 2, 4, every 8 below 256, every 16 from 256, up to `top` (_set_cudagraph_sizes's default grid)."""
    sizes = [s for s in (1, 2, 4) if s <= top]
    if top >= 8:
        sizes += list(range(8, min(top + 1, 256), 8))
    if top >= 256:
        sizes += list(range(256, top + 1, 16))
    return sizes


def capture_sizes(max_num_seqs: int, max_num_batched_tokens: int, decode_query_len: int = 1,
                  release: tuple[int, int] | None = None, sm: int | None = None) -> list[int]:
    """The default shared ``cudagraph_capture_sizes`` (vllm/config/vllm.py ``_set_cudagraph_sizes``), ascending, in
    vLLM `release` (None: the newest read) on a GPU of compute capability `sm` x10 (None: not SM100).
    decode_query_len: 1 + num_speculative_tokens. The uniform decode batches are appended within the ceiling: with
    drafts from 0.29 every request count of the grid up to max_num_seqs (and max_num_seqs itself) times the query
    length, without them from 0.31 max_num_seqs."""
    newest = as_compared(release)
    ceiling = 1024 if sm is not None and sm // 10 == 10 and newest >= SM100_MAX_CAPTURE_FROM else MAX_CAPTURE
    uncapped = min(max_num_seqs * decode_query_len * 2, ceiling)
    top = min(uncapped, max_num_batched_tokens)
    sizes = _grid(top)
    if newest >= MAX_NUM_TOKENS_CAPTURED_FROM and max_num_batched_tokens <= top:
        sizes.append(max_num_batched_tokens)
    decode: set[int] = set()
    if decode_query_len > 1 and newest >= SPEC_DECODE_SIZES_CAPTURED_FROM:
        requests = min(max_num_seqs, ceiling)
        decode = {n * decode_query_len for n in {*_grid(requests), requests} if n * decode_query_len <= uncapped}
    elif decode_query_len == 1 and newest >= MAX_NUM_SEQS_CAPTURED_FROM and max_num_seqs <= uncapped:
        decode = {max_num_seqs}
    sizes += [d for d in decode if d <= max_num_batched_tokens]
    return sorted(set(sizes))


def spec_decode_graph_sizes(max_num_seqs: int, max_num_batched_tokens: int, decode_query_len: int,
                            full_decode: bool, release: tuple[int, int] | None = None,
                            sm: int | None = None) -> tuple[list[int], list[int]]:
    """(the token counts of the PIECEWISE graphs, those of the FULL uniform-decode graphs) vLLM's V1 runner captures
    (0.20-0.33), decode_query_len = 1 + num_speculative_tokens. full_decode: whether every attention backend of the
    model takes the uniform decode batches (AttentionCGSupport UNIFORM_BATCH or ALWAYS with drafts, anything but
    NEVER without: vllm_graph_support.py). config/compilation.py resolve_cudagraph_mode_and_sizes (from
    gpu_model_runner.py _check_and_update_cudagraph_mode): without it FULL_AND_PIECEWISE falls back to PIECEWISE,
    the shared sizes as they are; with it adjust_cudagraph_sizes_for_spec_decode rounds every size up to a multiple of
    the query length, drops those above the largest, and the FULL graphs are the rounded sizes from one query to
    max_num_seqs queries (v1/cudagraph_dispatcher.py initialize_cudagraph_keys)."""
    sizes = capture_sizes(max_num_seqs, max_num_batched_tokens, decode_query_len, release, sm)
    if not full_decode or not sizes:
        return sizes, []
    if decode_query_len == 1:
        return sizes, [s for s in sizes if s <= max_num_seqs]
    top = sizes[-1]
    rounded = sorted({r for s in sizes if (r := math.ceil(s / decode_query_len) * decode_query_len) <= top})
    rounded = rounded or ([decode_query_len] if decode_query_len <= top else [])
    return rounded, [s for s in rounded if decode_query_len <= s <= decode_query_len * max_num_seqs]


def v2_graph_sizes(max_num_seqs: int, max_num_batched_tokens: int, decode_query_len: int, full_decode: bool,
                   release: tuple[int, int] | None = None, sm: int | None = None) -> tuple[list[int], list[int]]:
    """(the token counts of the PIECEWISE graphs, those of the FULL uniform-decode graphs) Model Runner V2 captures
    (v1/worker/gpu/cudagraph_utils.py CudaGraphManager._init_candidates; 0.29 on, where its profile estimates them),
    decode_query_len = 1 + num_speculative_tokens; full_decode as for spec_decode_graph_sizes. The mode resolution is
    V1's, without its rounding of the shared sizes (use_v2_model_runner). Up to 0.33 the PIECEWISE graphs take the
    shared sizes as they are and each size rounded up to a multiple of the query length, within max_num_seqs queries
    and the largest size, is a FULL graph. From 0.34 the FULL graphs are the decode shapes
    (config/compilation.py decode_cudagraph_capture_shapes) of the decode request counts (config/vllm.py
    _split_cudagraph_capture_sizes: off the SM100 family each shared size's requests, rounded up, within the largest;
    on it the decode grid) up to min(max_num_seqs, the decode token ceiling // query length), and the PIECEWISE graphs
    the prefill sizes (the shared ones; on the SM100 family the prefill grid)."""
    q = decode_query_len
    shared = capture_sizes(max_num_seqs, max_num_batched_tokens, q, release, sm)
    if not shared:
        return [], []
    if as_compared(release) < SM100_WIDE_GRIDS_FROM:
        top = min(q * max_num_seqs, shared[-1])
        return shared, sorted({r for s in shared if (r := math.ceil(s / q) * q) <= top}) if full_decode else []
    if sm is not None and sm // 10 == 10:  # the wide grids (config/compilation.py, as graph_sizes says)
        max_tokens = min(max_num_batched_tokens, WIDE_GRID_TOKENS)
        prefill = _walk_grid(max_tokens, lambda t: min(t, max(8, t / 4), 0.07 * max(t, 4096)))
        requests = _walk_grid(max_num_seqs, lambda n: 0.65 * n ** (2 / 3))
    else:
        prefill, max_tokens = shared, shared[-1]
        requests = sorted({min(math.ceil(s / q), max_num_seqs) for s in shared if math.ceil(s / q) * q <= shared[-1]})
    limit = min(max_num_seqs, max_tokens // q)
    if limit < 1 or not full_decode:
        return prefill, []
    reachable = requests[:bisect.bisect_left(requests, limit) + 1]
    return prefill, sorted({min(n, limit) * q for n in reachable})


def _walk_grid(limit: int, step) -> list[int]:
    """config/compilation.py _walk_grid: 1, ..., `limit`, each the next multiple of the largest power of two not above
    step(size)."""
    grid, size = [], 1
    while size < limit:
        grid.append(size)
        stride = 1 << max(0, math.floor(math.log2(max(1.0, step(size)))))
        size = (size // stride + 1) * stride
    return [*grid, limit] if limit else []


def graph_sizes(max_num_seqs: int, max_num_batched_tokens: int, release: tuple[int, int] | None = None,
                sm: int | None = None) -> tuple[list[int], list[int]]:
    """(the token counts of the PIECEWISE graphs, the request counts of the FULL uniform-decode graphs) vLLM captures
    by default, without drafts and with FULL decode graphs kept (v2_graph_sizes at one query per request, which is
    both runners' rule there). Up to the wide grids, both come from the shared sizes (FULL: those up to max_num_seqs).
    From 0.34 on the SM100 family: config/compilation.py prefill_cudagraph_capture_grid (1, 2, 4, every 8 up to 64,
    four sizes per doubling up to 1024, then every 256 and every 512 once 7 % of the size exceeds 512) and
    decode_cudagraph_capture_grid (every count up to 6, then steps of the largest power of two not above
    0.65 x n^(2/3)), the decode graphs cut at the first size that reaches the request or token limit
    (decode_cudagraph_capture_shapes)."""
    return v2_graph_sizes(max_num_seqs, max_num_batched_tokens, 1, True, release, sm)


@dataclass(frozen=True)
class CudagraphEstimate:
    piecewise: int  # graphs per mode
    full: int
    largest: int  # tokens of the largest (first) capture
    first_capture: int  # bytes: warm-up + captured activations of the largest size
    bytes: int  # the estimate with one 2 MiB step per further graph
    high: int  # the same when every further graph opens a 20 MiB large-block segment as well

    def detail(self) -> str:
        return (f"PIECEWISE={self.piecewise}, FULL={self.full} graphs (largest={self.largest}): first capture "
                f"{self.first_capture / MiB:.0f} MiB + {STEP // MiB} MiB per further graph")


def estimate(sizes: list[int], full: list[int], forward_peak: int) -> CudagraphEstimate | None:
    """vLLM's estimate for the graphs graph_sizes gives (the PIECEWISE token sizes, ascending, and the FULL request
    counts). ``forward_peak``: the forward-activation peak in bytes at the largest capture size (the planner's forward
    phases at that token count). None where nothing is captured."""
    if not sizes:
        return None
    further = max(0, len(sizes) - 1) + max(0, len(full) - 1)
    first = 2 * forward_peak
    return CudagraphEstimate(len(sizes), len(full), sizes[-1], first, first + further * STEP,
                             first + further * (STEP + LARGE_SEGMENT))
