"""Record the CUDA graph sizes vLLM's own config code captures by default, release by release (developer tool; tests
never run it). The result, fixtures/vllm/cudagraph_sizes.json, is what tests/test_vllm_cudagraph.py holds hfmem's
capture sizes to (hfmem/memory/vllm_cudagraph.py), which decide how many graphs the start-up estimate of CUDA graph
memory counts and the token count of its first, largest capture.

Each release runs in its own interpreter with its unpacked wheel first on PYTHONPATH (set-up as in
scripts/record_vllm_planning.py). What is the engine's own code: config/vllm.py VllmConfig._set_cudagraph_sizes (and
in 0.34 _split_cudagraph_capture_sizes with config/compilation.py's capture grids), run as a method of a stand-in for
the VllmConfig that carries the fields it reads, on a real CompilationConfig; the platform's compute capability (which
picks the SM100 family's wider defaults) answers as the GPU asked for. What the harness decides: no speculative
decoding, no LoRA, the default performance mode and CUDA-graph mode (FULL_AND_PIECEWISE), nothing set by the user.
Recorded: the token sizes the mixed-batch (PIECEWISE) graphs are captured at and the request counts of the uniform
decode (FULL) graphs: up to 0.33 the shared ``cudagraph_capture_sizes``, the FULL graphs being those up to
max_num_seqs (read, not run: v1/cudagraph_dispatcher.py initialize_cudagraph_keys for the V1 runner, and
v1/worker/gpu/cudagraph_utils.py _init_candidates for V2, keep the sizes of at most max_num_seqs x 1 tokens at one
token per request); in 0.34 ``prefill_cudagraph_capture_token_sizes`` and the request counts of
``decode_cudagraph_capture_shapes``.

    python scripts/record_vllm_cudagraph_sizes.py --src /tmp/vllm-src --deps /tmp/vdeps 0.17.0 0.18.0 0.19.0 \
        0.20.0 0.21.0 0.22.0 0.23.0 0.24.0 0.25.0 0.26.0 0.27.0 0.28.0 0.29.0 0.30.0 0.31.0 0.32.0 0.33.0 0.34.0
"""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "fixtures" / "vllm" / "cudagraph_sizes.json"
SMS = (90, 100)
# (max_num_seqs, max_num_batched_tokens): the API server's defaults (256/2048, 1024/8192, 1024/16384 on >= 160 GiB
# GPUs), and settings off the 8- and 16-token grids, below 512 and below twice the sequences
SETTINGS = ((256, 2048), (1024, 8192), (1024, 16384), (128, 8192), (100, 2048), (48, 500), (8, 2048), (1, 2048),
            (512, 512), (300, 4096), (2048, 32768), (256, 500), (1024, 1000))


def _inner() -> list[list]:
    """Runs inside the release's interpreter: rows of [sm, max_num_seqs, max_num_batched_tokens, piecewise token
    sizes, full request counts]."""
    import types

    from record_vllm_backends import set_capability  # this folder is on sys.path: the script runs from it

    import vllm.config.vllm as config_vllm
    from vllm.config.compilation import CompilationConfig, CUDAGraphMode

    def ns(**kw):
        return types.SimpleNamespace(**kw)

    out = []
    for sm in SMS:
        set_capability(sm // 10, sm % 10)
        for seqs, tokens in SETTINGS:
            compilation = CompilationConfig()
            compilation.cudagraph_mode = CUDAGraphMode.FULL_AND_PIECEWISE  # VllmConfig.__post_init__'s default
            fake = ns(model_config=ns(enforce_eager=False, is_encoder_decoder=False, hf_config=ns(),
                                      use_mla=False, is_deepseek_mla=False),
                      compilation_config=compilation,
                      scheduler_config=ns(max_num_seqs=seqs, max_num_batched_tokens=tokens),
                      speculative_config=None, num_speculative_tokens=0, performance_mode="balanced",
                      parallel_config=ns(tensor_parallel_size=1, pipeline_parallel_size=1, data_parallel_size=1,
                                         enable_dbo=False, use_ubatching=False, enable_expert_parallel=False),
                      lora_config=None, uniform_decode_query_len=1)
            for name, value in vars(config_vllm.VllmConfig).items():  # the methods it calls on itself
                if callable(value) and name.startswith(("_split", "get_decode", "get_draft", "get_varlen")):
                    setattr(fake, name, types.MethodType(value, fake))
            config_vllm.VllmConfig._set_cudagraph_sizes(fake)
            if getattr(compilation, "prefill_cudagraph_capture_token_sizes", None) is not None:
                import vllm.config.compilation as cc

                prefill = list(compilation.prefill_cudagraph_capture_token_sizes)
                shapes = cc.decode_cudagraph_capture_shapes(
                    compilation.decode_cudagraph_capture_request_sizes, {1: seqs},
                    min(tokens, compilation.max_decode_cudagraph_capture_tokens or tokens))
                full = sorted(n for n, _ in shapes)
            else:
                prefill = list(compilation.cudagraph_capture_sizes)
                full = [s for s in prefill if s <= seqs]
            out.append([sm, seqs, tokens, sorted(prefill), full])
    return out


def main() -> None:
    from record_vllm_planning import per_release_main

    old = json.loads(OUT.read_text())["releases"] if OUT.exists() else []
    records = per_release_main(__doc__, __file__, _inner, {r["vllm"]: r for r in old},
                               lambda release, rows: {"vllm": release, "rows": rows})
    if records is None:
        return
    lines = [json.dumps(r, separators=(",", ":")) for r in records]
    OUT.write_text('{"how": "scripts/record_vllm_cudagraph_sizes.py", "fields": ["sm", "max_num_seqs", '
                   '"max_num_batched_tokens", "piecewise_token_sizes", "full_request_counts"], "releases": [\n'
                   + ",\n".join(lines) + "\n]}\n")


if __name__ == "__main__":
    main()
