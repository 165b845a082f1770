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

from dataclasses import dataclass

MiB = 1 << 20
STEP = 2 * MiB  # the smallest growth a capture shows: one 2 MiB segment/page
LARGE_SEGMENT = 20 * MiB  # PyTorch's kLargeBuffer: a segment for blocks of 1-10 MiB
MAX_CAPTURE = 512  # vllm/config/vllm.py _set_cudagraph_sizes


def capture_sizes(max_num_seqs: int, max_num_batched_tokens: int, decode_query_len: int = 1) -> list[int]:
    """The default ``cudagraph_capture_sizes`` (vllm/config/vllm.py ``_set_cudagraph_sizes``), ascending."""
    top = min(min(max_num_seqs * decode_query_len * 2, MAX_CAPTURE), max_num_batched_tokens)
    sizes = [s for s in (1, 2, 4) if s <= top]
    if top >= 8:
        sizes += list(range(8, min(top + 1, 256), 8))
    if top >= 256:
        sizes += list(range(256, top + 1, 16))
    return sizes


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


def estimate(max_num_seqs: int, max_num_batched_tokens: int, forward_peak: int) -> CudagraphEstimate | None:
    """vLLM's estimate for these batch settings. ``forward_peak``: the forward-activation peak in bytes at the
    largest capture size (the planner's forward phases at that token count). None where nothing is captured."""
    sizes = capture_sizes(max_num_seqs, max_num_batched_tokens)
    if not sizes:
        return None
    full = [s for s in sizes if s <= max_num_seqs]
    further = max(0, len(sizes) - 1) + max(0, len(full) - 1)
    first = 2 * forward_peak
    return CudagraphEstimate(len(sizes), len(full), sizes[-1], first, first + further * STEP,
                             first + further * (STEP + LARGE_SEGMENT))
