"""Record what vLLM's own code gives dense models with a TurboQuant KV cache (--kv-cache-dtype turboquant_*), release
by release (developer tool; tests never run it): the layers it keeps at the model dtype, the block size, each layer's
page and the pool blocks, fit-check bytes and concurrency. The result, fixtures/vllm/turboquant.json, is what
tests/test_kv_vllm_dtypes.py holds hfmem's TurboQuant arithmetic to.

Each release runs in its own interpreter with its unpacked wheel first on PYTHONPATH (set-up as in
scripts/record_vllm_planning.py). What is the engine's own code: the boundary layers kept at the model dtype
(model_executor/layers/quantization/turboquant/config.py TurboQuantConfig.get_boundary_skip_layers, as
engine/arg_utils.py create_engine_config calls it), the block size (platforms/interface.py
Platform.update_block_size_for_backend: the backends' preferred size from the release's default, and from 0.25
_align_heterogeneous_kv_block_size for the layers kept at the model dtype), each layer's spec
(Attention.get_kv_cache_spec on a stand-in layer, then the backend's customize_spec where the release has one), and
the grouping and pool (as record_vllm_planning.py). What the harness decides: the layers' backends, TURBOQUANT for the
quantized layers and FLASH_ATTN (FlashAttention 2, which the boundary layers need: arg_utils.py) for the others, in
layer order (the first layer is a boundary layer). A sliding-window model (a stub with 12 sliding-window and 10
full-attention layers) is recorded up to 0.25, where the TURBOQUANT backend takes its sliding-window layers; where the
release's own planning raises on its pages (unify_kv_cache_spec_page_size), the record keeps the refusal.

    python scripts/record_vllm_turboquant.py --src /tmp/vllm-src --deps /tmp/vdeps 0.20.0 0.21.0 0.22.0 0.24.0 \
        0.25.0 0.26.0 0.27.0 0.28.0 0.31.0 0.33.0 0.34.0   # about three minutes
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "fixtures" / "vllm" / "turboquant.json"
CASES = ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2-7B-Instruct", "meta-llama/Llama-3.2-1B-Instruct",
         "hfmem-stubs/gemma3-window-mix-12-10")
# the sliding-window case only where the TURBOQUANT backend takes sliding-window layers (vLLM's selector gives them
# no backend from 0.26: record_vllm_backends.py)
SLIDING_CASES_UNTIL = (0, 26)
PRESETS = ("turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc")
POINTS = ((32_768, 8_192, 20_000_000_000), (131_072, 2_048, 40_000_000_000), (8_192, 8_192, 3_000_000_000))
FIELDS = ("max_model_len", "max_num_batched_tokens", "available_bytes", "num_blocks", "fit_bytes", "concurrency")


def stand_in_config(n: int, heads: int, head_size: int, max_len: int, mbt: int, cache_dtype: str, skip: list,
                    default_block: int, tp: int = 1):
    """A stand-in for the VllmConfig the KV cache planning reads (inside the release's interpreter): a bf16 model of
    `n` layers of `heads` x `head_size` (what get_num_kv_heads and get_head_size answer), `max_len` tokens,
    `mbt` batched tokens, the cache dtype with `skip`'s layers kept at the model dtype, prefix caching on, async
    scheduling, tensor parallel size `tp`; the release's LBNHC layout where it has one."""
    import types

    import torch

    def ns(**kw):
        return types.SimpleNamespace(**kw)

    model = ns(dtype=torch.bfloat16, use_mla=False, is_hybrid=False, max_model_len=max_len,
               hf_text_config=ns(num_hidden_layers=n), hf_config=ns(num_hidden_layers=n),
               get_num_kv_heads=lambda pc: heads, get_head_size=lambda: head_size,
               supports_kv_cache_grouping=False, is_encoder_decoder=False, is_multimodal_model=False)
    cache = ns(cache_dtype=cache_dtype, block_size=default_block, user_specified_block_size=False,
               kv_cache_dtype_skip_layers=skip, skip_page_size_padded=None, mamba_page_size_padded=None,
               num_gpu_blocks_override=None, mamba_cache_mode="none", enable_prefix_caching=True,
               kv_offloading_size=None, kv_cache_layout=None, prefix_cache_retention_interval=None,
               kv_sharing_fast_prefill=False, prefix_match_unit=None)
    try:
        from vllm.v1.kv_cache_layout import KVCacheLayout

        cache.get_resolved_kv_cache_layout = lambda: KVCacheLayout.LBNHC
    except ImportError:
        pass
    return ns(model_config=model, cache_config=cache,
              parallel_config=ns(tensor_parallel_size=tp, pipeline_parallel_size=1,
                                 decode_context_parallel_size=1, prefill_context_parallel_size=1),
              scheduler_config=ns(max_num_batched_tokens=mbt, disable_hybrid_kv_cache_manager=False,
                                  async_scheduling=True, max_num_encoder_input_tokens=mbt),
              kv_transfer_config=None, speculative_config=None, max_concurrent_batches=2,
              max_in_flight_tokens=2 * mbt, attention_config=ns(hisparse_config=None, backend=None),
              compilation_config=ns(static_forward_context={}), additional_config={})


def _inner(config_path: str) -> list[dict]:
    """Runs inside the release's interpreter."""
    import importlib
    import inspect
    import types

    import vllm.config.vllm as config_vllm
    from record_vllm_hybrid import _no_context, layer_spec_tools
    from record_vllm_planning import plan_groups, planning_modules  # this folder is on sys.path
    from vllm.config.cache import CacheConfig, CacheDType
    from vllm.model_executor.layers.quantization.turboquant.config import TurboQuantConfig
    from vllm.platforms.interface import Platform
    from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype

    Attention, AttentionType, customize = layer_spec_tools()
    plan, utils = planning_modules()
    fa = importlib.import_module("vllm.v1.attention.backends.flash_attn").FlashAttentionBackend
    tq = importlib.import_module("vllm.v1.attention.backends.turboquant_attn").TurboQuantAttentionBackend
    config_vllm.set_current_vllm_config = _no_context
    Platform._find_non_ssm_backend = classmethod(lambda c, v: fa)  # up to 0.24: the first layer's
    Platform._find_non_ssm_backends = classmethod(lambda c, v: [fa, tq])  # 0.25 on: every distinct one, layer order
    offered = set(CacheDType.__args__)
    default_block = getattr(CacheConfig, "DEFAULT_BLOCK_SIZE", 16)

    def ns(**kw):
        return types.SimpleNamespace(**kw)

    cfg = json.loads(Path(config_path).read_text())
    n, heads = cfg["num_hidden_layers"], cfg["num_key_value_heads"]
    head_size = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    kinds = cfg.get("layer_types") or ["full_attention"] * n
    out = []
    for preset in PRESETS:
        if preset not in offered:
            continue
        points, layouts = [], set()
        for max_len, mbt, available in POINTS:
            params = inspect.signature(TurboQuantConfig.get_boundary_skip_layers).parameters
            skip = (TurboQuantConfig.get_boundary_skip_layers(n) if "num_layers" in params
                    else TurboQuantConfig.get_boundary_skip_layers(
                        stand_in_config(n, heads, head_size, max_len, mbt, preset, [], default_block).model_config))
            vc = stand_in_config(n, heads, head_size, max_len, mbt, preset, list(skip), default_block)
            model, cache = vc.model_config, vc.cache_config
            for backend in (fa, tq):  # FLASH_ATTN's kernel sizes read the current config (0.20-0.22)
                module = sys.modules[backend.__module__]
                if hasattr(module, "get_current_vllm_config"):
                    module.get_current_vllm_config = lambda vc=vc: vc
            Platform.update_block_size_for_backend(vc)
            specs, pages = {}, []
            for i in range(n):
                kept = str(i) in cache.kv_cache_dtype_skip_layers
                dtype, backend = ("auto", fa) if kept else (preset, tq)
                window = cfg["sliding_window"] if kinds[i] == "sliding_attention" else None
                layer = ns(attn_type=AttentionType.DECODER, kv_cache_dtype=dtype, sliding_window=window,
                           num_kv_heads=heads, head_size=head_size, head_size_v=head_size,
                           kv_cache_torch_dtype=kv_cache_dtype_str_to_dtype(dtype, model), attn_backend=backend,
                           has_sink=False)
                spec = customize(backend, Attention.get_kv_cache_spec(layer, vc))
                specs[f"model.layers.{i}.self_attn.attn"] = spec
                pages.append(spec.page_size_bytes)
            try:
                groups, kv_config, fit = plan_groups(plan, vc, specs, available)
            except (NotImplementedError, AssertionError) as e:  # the release's own planning refuses the pages
                refused = f"{type(e).__name__}: {e}"
                break
            points.append([max_len, mbt, available, kv_config.num_blocks, fit,
                           utils.get_max_concurrency_for_kv_cache_config(vc, kv_config)])
            layouts.add((cache.block_size, tuple(sorted(int(s) for s in skip)), tuple(pages)))
        else:
            refused = None
        if refused is not None:
            out.append({"dtype": preset, "refused": refused, "layer_pages": sorted(set(pages))})
            continue
        assert len(layouts) == 1, layouts
        block_size, kept, pages = layouts.pop()
        out.append({"dtype": preset, "block_size": block_size, "kept_layers": list(kept),
                    "layer_pages": sorted(set(pages)), "points": points})
    return out


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--inner":
        print(json.dumps(_inner(sys.argv[2])))
        return
    from record_vllm_planning import release_arguments, run_release

    args = release_arguments(__doc__).parse_args()
    merged = {(r["vllm"], r["model"], r["dtype"]): r
              for r in (json.loads(OUT.read_text())["records"] if OUT.exists() else [])}
    for release in args.releases:
        for case in CASES:
            if case.startswith("hfmem-stubs/gemma3") and tuple(int(x) for x in release.split(".")[:2]) >= SLIDING_CASES_UNTIL:
                continue
            config = REPO / "fixtures" / "configs" / case / "config.json"
            got, error = run_release(args, release, __file__, str(config))
            if error:
                sys.exit(f"{release} {case}: {error}")
            for rec in got:
                merged[(release, case, rec["dtype"])] = {"vllm": release, "model": case, **rec}
            print(release, case, "done", file=sys.stderr)

    def key(k: tuple) -> tuple:
        return tuple(int(x) for x in k[0].split(".")), CASES.index(k[1]), PRESETS.index(k[2])
    rows = [json.dumps(merged[k]) for k in sorted(merged, key=key)]
    OUT.write_text('{"how": "scripts/record_vllm_turboquant.py", "point_fields": ' + json.dumps(list(FIELDS))
                   + ', "records": [\n' + ",\n".join(rows) + "\n]}\n")


if __name__ == "__main__":
    main()
