"""Record how vLLM's own planning unifies attention pages that do not divide each other, release by release
(developer tool; tests never run it). The result, fixtures/vllm/page_padding.json, is what tests/test_kv_vllm_dtypes.py
holds hfmem's page unification to (hfmem/memory/kv/vllm.py _vllm_groups).

Pages that do not divide each other come from the per-token-head KV dtypes (int8/fp8/int4_per_token_head add two fp32
scales per token and head, so a 512-wide head's page is not twice a 256-wide one's) on models whose layers differ in
head size or count (Gemma 4), and from int4_per_token_head in 0.25-0.27, where sliding-window pages keep one byte per
value and full-attention pages two values per byte (Gemma 2 and 3). v1/core/kv_cache_utils.py (kv_cache_planning.py
from 0.33) unify_kv_cache_spec_page_size raises NotImplementedError on them up to 0.23; from 0.24 it pads such a
layer's page to the largest one when the spec says its backend indexes KV pages by the block stride (the model runner's
get_kv_cache_spec sets AttentionSpec.indexes_kv_by_block_stride from the backend's own method, 0.24-0.28), and from 0.29
for every non-MLA attention layer.

Each release runs in its own interpreter with its unpacked wheel first on PYTHONPATH (set-up as in
scripts/record_vllm_planning.py). What is the engine's own code: each layer's spec (Attention.get_kv_cache_spec on a
stand-in layer, then the packing the runner applies), the backend's indexes_kv_by_block_stride, the block size
(Platform.update_block_size_for_backend), the grouping and the pool (as record_vllm_planning.py). What the harness
decides: every layer's backend is TRITON_ATTN, the one vLLM's selector gives these dtypes on every CUDA GPU
(fixtures/vllm/backends.json.gz) and the one Gemma 4's config forces where its head sizes differ; the layers' head
counts and sizes at the tensor-parallel size (Gemma 4's full-attention layers: num_global_key_value_heads of
global_head_dim, vLLM's gemma4.py with attention_k_eq_v); bfloat16 weights.

    python scripts/record_vllm_page_padding.py --src /tmp/vllm-src --deps /tmp/vdeps 0.20.0 0.21.0 0.22.0 0.23.0 \
        0.24.0 0.25.0 0.26.0 0.27.0 0.28.0 0.29.0 0.30.0 0.31.0 0.32.0 0.33.0 0.34.0
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "fixtures" / "vllm" / "page_padding.json"
# (config, tensor-parallel size)
CASES = (("google/gemma-4-31B-it", 1), ("google/gemma-4-31B-it", 2), ("google/gemma-3-27b-it", 1),
         ("google/gemma-2-9b-it", 1))
DTYPES = ("int8_per_token_head", "fp8_per_token_head", "int4_per_token_head")
POINTS = ((32_768, 2_048, 20_000_000_000), (131_072, 8_192, 11_317_000_000))
FIELDS = ("max_model_len", "max_num_batched_tokens", "available_bytes", "num_blocks", "concurrency")


def layer_shapes(config: dict, tp: int) -> list[tuple[str, int, int, int | None]]:
    """(kind, KV heads per GPU, head size, sliding window) of each decoder layer, as vLLM's gemma2/3/4.py build them."""
    text = config.get("text_config", config)
    n = text["num_hidden_layers"]
    kinds = text.get("layer_types")
    if not kinds:  # Gemma 2 alternates from a sliding-window layer; Gemma 3 puts a full one every sliding_window_pattern
        pattern = text.get("sliding_window_pattern") or (2 if text.get("model_type") == "gemma2" else 6)
        kinds = ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(n)]
    out = []
    for kind in kinds:
        if kind == "full_attention" and text.get("global_head_dim"):
            heads = text.get("num_global_key_value_heads") if text.get("attention_k_eq_v") else None
            heads, size = heads or text["num_key_value_heads"], text["global_head_dim"]
        else:
            heads, size = text["num_key_value_heads"], text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"]
        out.append((kind, max(1, heads // tp), size, text["sliding_window"] if kind == "sliding_attention" else None))
    return out


def _inner(config_path: str, tp: str) -> list[dict]:
    """Runs inside the release's interpreter."""
    import dataclasses
    import importlib
    import types

    import vllm.config.vllm as config_vllm
    from record_vllm_hybrid import _no_context, layer_spec_tools
    from record_vllm_planning import plan_groups, planning_modules  # this folder is on sys.path
    from record_vllm_turboquant import stand_in_config
    from vllm.config.cache import CacheConfig, CacheDType
    from vllm.platforms.interface import Platform
    from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype

    Attention, AttentionType, customize = layer_spec_tools()
    plan, utils = planning_modules()
    triton = importlib.import_module("vllm.v1.attention.backends.triton_attn").TritonAttentionBackend
    config_vllm.set_current_vllm_config = _no_context
    Platform._find_non_ssm_backend = classmethod(lambda c, v: triton)  # up to 0.24
    Platform._find_non_ssm_backends = classmethod(lambda c, v: [triton])  # 0.25 on
    offered = set(CacheDType.__args__)
    default_block = getattr(CacheConfig, "DEFAULT_BLOCK_SIZE", 16)

    def ns(**kw):
        return types.SimpleNamespace(**kw)

    shapes = layer_shapes(json.loads(Path(config_path).read_text()), int(tp))
    n = len(shapes)
    out = []
    for dtype in DTYPES:
        if dtype not in offered:
            continue
        points, layouts, refused = [], set(), None
        for max_len, mbt, available in POINTS:
            vc = stand_in_config(n, shapes[0][1], shapes[0][2], max_len, mbt, dtype, [], default_block, int(tp))
            model, cache = vc.model_config, vc.cache_config
            # the backend's kernel sizes and KV cache layout (no KV connector: NHD) read the current config
            for name in (triton.__module__, "vllm.distributed.kv_transfer.kv_connector.utils"):
                module = sys.modules.get(name)
                if module is not None and hasattr(module, "get_current_vllm_config"):
                    module.get_current_vllm_config = lambda vc=vc: vc
            Platform.update_block_size_for_backend(vc)
            specs, pages = {}, []
            for i, (_kind, heads, size, window) in enumerate(shapes):
                layer = ns(attn_type=AttentionType.DECODER, kv_cache_dtype=dtype, sliding_window=window,
                           num_kv_heads=heads, head_size=size, head_size_v=size,
                           kv_cache_torch_dtype=kv_cache_dtype_str_to_dtype(dtype, model), attn_backend=triton,
                           has_sink=False)
                spec = customize(triton, Attention.get_kv_cache_spec(layer, vc))
                if "indexes_kv_by_block_stride" in {f.name for f in dataclasses.fields(spec)}:
                    # gpu_model_runner.py get_kv_cache_spec (0.24-0.28) sets it from the layer's backend
                    spec = dataclasses.replace(spec, indexes_kv_by_block_stride=triton.indexes_kv_by_block_stride())
                specs[f"model.layers.{i}.self_attn.attn"] = spec
                pages.append(spec.page_size_bytes)
            try:
                _, kv_config, _ = plan_groups(plan, vc, specs, available)
            except (NotImplementedError, AssertionError, ValueError) as e:  # the release's own planning refuses
                refused = f"{type(e).__name__}: {str(e)[:200]}"
                break
            unified = {g.kv_cache_spec.page_size_bytes for g in kv_config.kv_cache_groups}
            block_sizes = sorted({g.kv_cache_spec.block_size for g in kv_config.kv_cache_groups})
            points.append([max_len, mbt, available, kv_config.num_blocks,
                           utils.get_max_concurrency_for_kv_cache_config(vc, kv_config)])
            layouts.add((cache.block_size, tuple(sorted(set(pages))), tuple(sorted(unified)), tuple(block_sizes),
                         len(kv_config.kv_cache_groups)))
        if refused is not None:
            out.append({"dtype": dtype, "refused": refused, "layer_pages": sorted(set(pages))})
            continue
        assert len(layouts) == 1, layouts
        block_size, layer_pages, unified, block_sizes, groups = layouts.pop()
        out.append({"dtype": dtype, "block_size": block_size, "layer_pages": list(layer_pages),
                    "unified_pages": list(unified), "group_block_sizes": list(block_sizes), "groups": groups,
                    "points": points})
    return out


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--inner":
        print(json.dumps(_inner(sys.argv[2], sys.argv[3])))
        return
    from record_vllm_planning import release_arguments, run_release

    args = release_arguments(__doc__).parse_args()
    merged = {(r["vllm"], r["model"], r["tp"], r["dtype"]): r
              for r in (json.loads(OUT.read_text())["records"] if OUT.exists() else [])}
    for release in args.releases:
        for case, tp in CASES:
            config = REPO / "fixtures" / "configs" / case / "config.json"
            got, error = run_release(args, release, __file__, str(config), str(tp))
            if error:
                sys.exit(f"{release} {case} TP {tp}: {error}")
            for rec in got:
                merged[(release, case, tp, rec["dtype"])] = {"vllm": release, "model": case, "tp": tp, **rec}
            print(release, case, tp, "done", file=sys.stderr)

    def key(k: tuple) -> tuple:
        return tuple(int(x) for x in k[0].split(".")), CASES.index((k[1], k[2])), DTYPES.index(k[3])
    rows = [json.dumps(merged[k]) for k in sorted(merged, key=key)]
    OUT.write_text('{"how": "scripts/record_vllm_page_padding.py", "point_fields": ' + json.dumps(list(FIELDS))
                   + ', "records": [\n' + ",\n".join(rows) + "\n]}\n")


if __name__ == "__main__":
    main()
