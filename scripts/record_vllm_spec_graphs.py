"""Record the CUDA graphs vLLM's model runners capture, with speculative decoding and at each CUDA-graph support an
attention backend reports, and which backend and support each layer gets, release by release (developer tool; tests
never run it). The result, fixtures/vllm/spec_graphs.json.gz, is what tests/test_vllm_cudagraph.py holds hfmem's
capture sizes (hfmem/memory/vllm_cudagraph.py) and backend rules (hfmem/memory/vllm_graph_support.py) to: they decide
how many graphs the start-up estimate of CUDA graph memory counts, the size of its first capture, and the "Profiling
CUDA graph memory: PIECEWISE=N (largest=T), FULL=M (largest=U)" line.

Each release runs in its own interpreter per part (the selector must not see the sizing's state) with its unpacked
wheel first on PYTHONPATH (set-up as in scripts/record_vllm_planning.py). What is the engine's own code, in that order:
config/vllm.py VllmConfig._set_cudagraph_sizes (its capture ceiling follows max_num_seqs x (1 + num_speculative_tokens)
x 2), run as a method of a stand-in for the VllmConfig that carries the fields it reads, on a real CompilationConfig
whose splitting ops are set as VllmConfig.__post_init__ sets them (set_splitting_ops_for_v1); config/compilation.py
CompilationConfig.resolve_cudagraph_mode_and_sizes, as the runner calls it with the smallest CUDA-graph support of the
model's attention backends and the uniform decode query length (it drops the FULL decode graphs where a backend takes
no multi-token uniform batch, or none at all, and for V1 rounds the capture sizes up to multiples of the query length
where it keeps them); then the graphs the runner captures: V1 (0.20-0.33) v1/cudagraph_dispatcher.py
CudagraphDispatcher initialize_cudagraph_keys and get_capture_descs, V2 (0.29-0.34, where its profile estimates the
graphs) v1/worker/gpu/cudagraph_utils.py CudaGraphManager's capture descriptors. Beside them, the backend the release's
selector picks for one layer with the default KV cache dtypes (platforms/cuda.py get_valid_backends) and the support
its metadata builder reports (get_cudagraph_support), and the state layers' backends' support. What the harness
decides: the support levels (each a backend reports), the GPU's compute capability, tensor parallel size 1, no LoRA,
the default performance mode, MTP drafting (no dynamic schedule, no adaptive verification), nothing set by the user;
for the selector 32 query and 8 KV heads, stand-ins for compiled kernels, CUDA workspaces allocated on the meta device.

    python scripts/record_vllm_spec_graphs.py --src /tmp/vllm-src --deps /tmp/vdeps 0.20.0 0.21.0 0.22.0 0.23.0 \
        0.24.0 0.25.0 0.26.0 0.27.0 0.28.0 0.29.0 0.30.0 0.31.0 0.32.0 0.33.0 0.34.0   # about twenty minutes
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "fixtures" / "vllm" / "spec_graphs.json.gz"
SMS = (90, 100)
# (max_num_seqs, max_num_batched_tokens): the API server's defaults and small-batch settings (where the query length
# moves the capture ceiling), some off the 8- and 16-token grids
SETTINGS = ((256, 2048), (1024, 8192), (48, 8192), (32, 4096), (8, 2048), (2, 2048), (1, 8192), (100, 2048),
            (512, 512), (1024, 1000))
SPEC_TOKENS = (0, 1, 2, 3, 4, 5, 7)  # 0: no speculative decoding
SUPPORTS = ("ALWAYS", "UNIFORM_BATCH", "UNIFORM_SINGLE_TOKEN_DECODE", "NEVER")
FIELDS = ("sm", "max_num_seqs", "max_num_batched_tokens", "num_speculative_tokens", "backend_support",
          "cudagraph_mode", "graphs")


def _inner(runner: str) -> list[list]:
    """Runs inside the release's interpreter: rows of FIELDS; graphs: [mode, count, largest tokens] per captured mode,
    as the profile's log line gives them. runner "v1": v1/cudagraph_dispatcher.py CudagraphDispatcher's capture
    descriptors after the resolution with use_v2_model_runner False; "v2": v1/worker/gpu/cudagraph_utils.py
    CudaGraphManager's (the V2 model runner's own resolution, use_v2_model_runner True where the release has it: no
    rounding of the shared sizes; the FULL decode graphs are each size rounded up to a multiple of the query length)."""
    import inspect
    import sys
    import types

    import vllm.config.vllm as config_vllm
    from record_vllm_backends import set_capability  # this folder is on sys.path: the script runs from it
    from vllm.config.compilation import CompilationConfig, CompilationMode, CUDAGraphMode
    from vllm.v1.attention.backend import AttentionCGSupport

    def ns(**kw):
        return types.SimpleNamespace(**kw)

    if runner == "v1":
        from vllm.v1.cudagraph_dispatcher import CudagraphDispatcher
    else:
        import vllm.v1.worker.gpu.cudagraph_utils as cg_utils

        # the pipeline group, the graph pool and breakable graphs are not sized here: stand-ins for a single GPU
        cg_utils.get_pp_group = lambda: ns(is_first_rank=True, is_last_rank=True)
        cg_utils.is_breakable_cudagraph_enabled = lambda *args, **kwargs: False
        manager_params = inspect.signature(cg_utils.CudaGraphManager.__init__).parameters
    resolve_params = inspect.signature(CompilationConfig.resolve_cudagraph_mode_and_sizes).parameters
    out = []
    for sm in SMS:
        set_capability(sm // 10, sm % 10)
        if runner == "v2":
            sys.modules["vllm.platforms"]._current_platform.get_global_graph_pool = lambda: None
            cg_utils.current_platform = sys.modules["vllm.platforms"]._current_platform
        for seqs, tokens in SETTINGS:
            for k in SPEC_TOKENS:
                for support in SUPPORTS:
                    compilation = CompilationConfig()
                    compilation.mode = CompilationMode.VLLM_COMPILE  # VllmConfig.__post_init__'s default on V1
                    compilation.cudagraph_mode = CUDAGraphMode.FULL_AND_PIECEWISE
                    compilation.set_splitting_ops_for_v1(all2all_backend="allgather_reducescatter",
                                                         data_parallel_size=1)
                    spec = ns(num_speculative_tokens=k, method="mtp", uses_dynamic_speculative_decoding=lambda: False,
                              use_eagle=lambda: True, use_multi_module_mtp=lambda: False,
                              use_gemma4_mtp=lambda: False, enable_adaptive_verification=False,
                              num_speculative_tokens_per_batch_size=None) if k else None
                    fake = ns(model_config=ns(enforce_eager=False, is_encoder_decoder=False, hf_config=ns(),
                                              use_mla=False, is_deepseek_mla=False),
                              compilation_config=compilation,
                              scheduler_config=ns(max_num_seqs=seqs, max_num_batched_tokens=tokens),
                              speculative_config=spec, num_speculative_tokens=k, performance_mode="balanced",
                              parallel_config=ns(tensor_parallel_size=1, pipeline_parallel_size=1,
                                                 data_parallel_size=1, enable_dbo=False, use_ubatching=False,
                                                 enable_expert_parallel=False),
                              cache_config=ns(use_kda_recoverssm=False),
                              lora_config=None, uniform_decode_query_len=1 + k)
                    for name, value in vars(config_vllm.VllmConfig).items():  # the methods it calls on itself
                        if callable(value) and name.startswith(("_split", "get_decode", "get_draft", "get_varlen")):
                            setattr(fake, name, types.MethodType(value, fake))
                    config_vllm.VllmConfig._set_cudagraph_sizes(fake)
                    kw = {name: value for name, value in (("use_v2_model_runner", runner == "v2"),
                                                           ("tensor_parallel_size", 1))
                          if name in resolve_params}  # the keywords the release's signature has
                    mode = compilation.resolve_cudagraph_mode_and_sizes(
                        AttentionCGSupport[support], "stand-in backend", 1 + k, **kw)
                    if runner == "v1":
                        dispatcher = CudagraphDispatcher(fake)
                        dispatcher.initialize_cudagraph_keys(mode, 1 + k)
                        descs = dispatcher.get_capture_descs()
                    else:
                        query = ({"decode_query_lens": fake.get_decode_cudagraph_query_lens(1 + k)}
                                 if "decode_query_lens" in manager_params else {"decode_query_len": 1 + k})
                        manager = cg_utils.CudaGraphManager(fake, "cpu", mode, **query)
                        descs = [(m, manager._capture_descs[m]) for m in (CUDAGraphMode.PIECEWISE, CUDAGraphMode.FULL)
                                 if manager._capture_descs.get(m)]
                    graphs = [[m.name, len(d), max(x.num_tokens for x in d)] for m, d in descs]
                    out.append([sm, seqs, tokens, k, support, mode.name, graphs])
    return out


CAPABILITIES = ((8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (12, 0))
HEAD_SIZES = (64, 80, 96, 128, 192, 256, 512)
# (use_mla, use_sparse, sliding window, attention sinks): the layer kinds whose default backend the selector picks
LAYERS = ((False, False, False, False), (False, False, True, False), (False, False, False, True),
          (True, False, False, False), (True, True, False, False))
BACKEND_FIELDS = ("kv_cache_dtype", "sm", "head_size", "mla", "sparse", "sliding", "sink", "backend", "support")
# the state layers' backends (v1/attention/backends/*.py), whose support each release's builder class states
STATE_BACKENDS = (("mamba1", "mamba1_attn", "Mamba1AttentionBackend"), ("mamba2", "mamba2_attn", "Mamba2AttentionBackend"),
                  ("gdn", "gdn_attn", "GDNAttentionBackend"), ("linear", "linear_attn", "LinearAttentionBackend"),
                  ("short_conv", "short_conv_attn", "ShortConvAttentionBackend"))


def _backends_inner() -> dict:
    """Runs inside the release's interpreter: the backend vLLM's selector picks for one layer with the default KV
    cache dtypes (platforms/cuda.py CudaPlatform.get_valid_backends, as record_vllm_backends.py runs it), and the
    CUDA-graph support its metadata builder reports (get_cudagraph_support, with 32 query and 8 KV heads: FlashInfer's
    depends on TRTLLM attention, SM100 only); and the support of the state layers' backends."""
    import importlib
    import types

    import record_vllm_backends
    import torch
    from record_vllm_backends import set_capability

    set_capability(9, 0)
    from vllm.platforms.cuda import CudaPlatform
    from vllm.v1.attention.selector import AttentionSelectorConfig
    from vllm.v1.kv_cache_interface import FullAttentionSpec

    def ns(**kw):
        return types.SimpleNamespace(**kw)

    def on_meta(make):  # some backend modules allocate a CUDA workspace when imported: a meta tensor stands in
        def made(*args, **kw):
            if "cuda" in str(kw.get("device", "")):
                kw["device"] = "meta"
            return make(*args, **kw)
        return made

    for name in ("zeros", "empty", "ones", "full"):
        setattr(torch, name, on_meta(getattr(torch, name)))
    # ... and size it by the SM count, which no backend's CUDA-graph support reads
    import vllm.platforms as platforms

    type(platforms._current_platform).num_compute_units = classmethod(lambda cls, device_id=0: 132)
    fields = AttentionSelectorConfig._fields
    config = ns(model_config=ns(get_num_attention_heads=lambda parallel_config: 32),
                parallel_config=ns(decode_context_parallel_size=1, prefill_context_parallel_size=1,
                                   tensor_parallel_size=1),
                attention_config=ns(use_non_causal=False, use_trtllm_attention=None))
    rows = []
    for dtype in ("auto", "fp8"):
        for major, minor in CAPABILITIES:
            set_capability(major, minor)
            for head in HEAD_SIZES:
                for mla, sparse, sliding, sink in LAYERS:
                    size = 576 if mla else head
                    if mla and head != 128:
                        continue  # one MLA shape (DeepSeek's 512 + 64)
                    values = dict(head_size=size, dtype=torch.bfloat16, kv_cache_dtype=dtype, block_size=None,
                                  use_mla=mla, has_sink=sink, use_sparse=sparse, use_mm_prefix=False,
                                  use_per_head_quant_scales=False, attn_type="decoder", has_sliding_window=sliding)
                    selector = AttentionSelectorConfig(**{k: v for k, v in values.items() if k in fields})
                    valid, _ = CudaPlatform.get_valid_backends(
                        device_capability=record_vllm_backends._CAPABILITY[0], attn_selector_config=selector,
                        num_heads=32)
                    best = min(valid, key=lambda c: c[-1]) if valid else None
                    if best is None:
                        rows.append([dtype, major * 10 + minor, size, mla, sparse, sliding, sink, None, None])
                        continue
                    backend = best[-2]
                    builder = backend.get_class().get_builder_cls()
                    spec = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=size, dtype=torch.bfloat16)
                    try:
                        support = builder.get_cudagraph_support(config, spec).name
                    except Exception as e:  # what the stand-ins cannot answer is said, not guessed
                        support = f"{type(e).__name__}"
                    rows.append([dtype, major * 10 + minor, size, mla, sparse, sliding, sink, backend.name, support])
    state = {}
    for kind, module, name in STATE_BACKENDS:
        try:
            cls = getattr(importlib.import_module(f"vllm.v1.attention.backends.{module}"), name)
        except (ImportError, AttributeError):
            continue
        state[kind] = cls.get_builder_cls()._cudagraph_support.name
    return {"rows": rows, "state": state}


def main() -> None:
    import sys

    from record_vllm_planning import release_arguments, run_release

    if sys.argv[1:2] == ["--inner"]:  # each part in its own interpreter: the selector must not see the sizing's state
        print(json.dumps(_backends_inner() if sys.argv[2] == "backends" else _inner(sys.argv[2])))
        return
    args = release_arguments(__doc__).parse_args()
    merged = {r["vllm"]: r for r in (json.loads(gzip.decompress(OUT.read_bytes()))["releases"] if OUT.exists() else [])}
    for release in args.releases:
        version = tuple(int(x) for x in release.split(".")[:2])
        record: dict = {"vllm": release}
        # V1 up to 0.33 (removed in 0.34); V2 from 0.29, where its profile first estimates the graphs
        parts = [("rows", "v1")] * (version < (0, 34)) + [("v2_rows", "v2")] * (version >= (0, 29))
        for field, part in [*parts, ("backends", "backends")]:
            got, error = run_release(args, release, __file__, part)
            if error:
                sys.exit(f"{release} {part}: {error}")
            if part == "backends":
                record.update(backends=got["rows"], state=got["state"])
            else:
                record[field] = got
        merged[release] = record
        print(release, "done", file=sys.stderr)
    records = [merged[r] for r in sorted(merged, key=lambda r: tuple(int(x) for x in r.split(".")))]
    lines = [json.dumps(r, separators=(",", ":")) for r in records]
    text = ('{"how": "scripts/record_vllm_spec_graphs.py", "fields": ' + json.dumps(list(FIELDS))
            + ', "backend_fields": ' + json.dumps(list(BACKEND_FIELDS)) + ', "releases": [\n' + ",\n".join(lines)
            + "\n]}\n")
    OUT.write_bytes(gzip.compress(text.encode(), mtime=0))


if __name__ == "__main__":
    main()
