"""Record what vLLM's own KV-cache planning code gives for a few models, release by release (developer tool; tests
never run it): the pool block count for an available memory, the bytes its fit check asks one request of
max_model_len for, and the concurrency it logs. The result, fixtures/vllm/planning.json, is what
tests/test_kv_deepseek_v4.py and tests/test_kv_vllm.py hold hfmem's KV arithmetic to.

Each release runs in its own interpreter with that release's unpacked wheel first on PYTHONPATH; the wheel's
kv_cache_interface.py builds the specs and its kv_cache_utils.py (kv_cache_planning.py from 0.33) groups and sizes
them. No GPU and no model weights are involved. The specs are built as the model's layers build them in that
release (DeepSeek-V4: every release from 0.20.0 to 0.34.0 registers the same caches with the same page bytes by
default: models/deepseek_v4/attention.py, compressor.py, v1/attention/backends/mla/sparse_swa.py; the generic
models: FullAttentionSpec / SlidingWindowSpec of their KV heads and head size in bf16). The VllmConfig is a stand-in
carrying the fields these functions read, with vLLM's defaults for a `vllm serve` start: async scheduling on
(2 batches in flight from 0.26), no prefix-cache retention, no connector, pipeline size 1.

    pip download --no-deps vllm==0.25.0 && unzip -q vllm-0.25.0-*.whl 'vllm/*' -d /tmp/vllm-src/0.25.0
    # the pure-Python modules these imports reach (cbor2, msgspec, pyzmq, ... as ImportErrors name them)
    pip install --no-deps --target /tmp/vdeps cbor2 msgspec ...
    python scripts/record_vllm_planning.py --src /tmp/vllm-src --deps /tmp/vdeps 0.20.2 0.22.0 0.23.0 0.25.0 \
        0.26.0 0.27.0 0.28.0 0.29.0 0.34.0
    python scripts/record_vllm_planning.py --src /tmp/vllm-src --deps /tmp/vdeps 0.10.2 0.11.0 0.11.2 0.12.0 \
        0.13.0 0.14.0 0.15.0 0.16.0 0.17.0 0.18.0 0.19.0 --model google/gemma-3-27b-it --model openai/gpt-oss-20b \
        --model hfmem-stubs/gemma3-window-mix-12-10 --model hfmem-stubs/gemma3-window-mix-14-10 \
        --model openai/whisper-large-v3   # Whisper in every release above and those of the first command
A run merges its records into the file (one per release and model). DeepSeek-V4 is skipped before 0.20, where vLLM
has no such model. The fit-check bytes are the release's start-up check: check_enough_kv_cache_memory over the
per-layer specs up to 0.13 (inside get_kv_cache_config up to 0.10), _max_memory_usage_bytes_from_groups
from 0.14.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "fixtures" / "vllm" / "planning.json"
CASES = ("deepseek-ai/DeepSeek-V4-Flash", "deepseek-ai/DeepSeek-V4-Pro", "google/gemma-3-27b-it", "openai/gpt-oss-20b",
         # stubs whose layer counts tell the releases' group sizes apart (12 or 14 sliding-window layers, 10 full)
         "hfmem-stubs/gemma3-window-mix-12-10", "hfmem-stubs/gemma3-window-mix-14-10",
         # cross attention, whose spec charges max_num_encoder_input_tokens (max_num_batched_tokens from 0.11)
         "openai/whisper-large-v3")
# (max_model_len, max_num_batched_tokens, available bytes): 30,000 / 16,384 / 5,554 V4-Flash blocks is
# vllm-project/vllm#44376's start
V4_FROM = (0, 20)  # the first release with DeepSeek-V4
# Whisper's decoder takes 448 tokens; the points vary the batched tokens, which its cross-attention spec charges
WHISPER_POINTS = ((448, 8_192, 10_000_000_000), (448, 2_048, 2_000_000_000), (448, 16_384, 20_000_000_000),
                  (448, 448, 1_000_000_000))
POINTS = ((32_768, 8_192, 10_000_000_000), (1_048_576, 8_192, 50_000_000_000), (30_000, 16_384, 5_841_563_904),
          (8_192, 2_048, 20_000_000_000), (800_000, 512, 21_000_000_000), (131_072, 8_192, 40_000_000_000))


def planning_modules() -> tuple:
    """(the module with the release's KV cache planning functions, v1/core/kv_cache_utils.py): kv_cache_planning.py
    from 0.33, kv_cache_utils.py before (run inside the release's interpreter)."""
    import importlib

    try:
        plan = importlib.import_module("vllm.v1.core.kv_cache_planning")
    except ImportError:
        plan = importlib.import_module("vllm.v1.core.kv_cache_utils")
    return plan, importlib.import_module("vllm.v1.core.kv_cache_utils")


def _inner(config_path: str, points: list[list[int]]) -> list[dict]:
    """Runs inside the release's interpreter."""
    import dataclasses
    import types

    import torch
    import vllm.v1.kv_cache_interface as K

    plan, utils = planning_modules()

    def make(cls, **kw):  # the release's own fields only (compress_ratio became tokens_per_state, ...)
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in kw.items() if k in names})

    cfg = json.loads(Path(config_path).read_text())
    cfg = cfg.get("text_config", cfg)
    specs: dict = {}
    # the release's default block size (config/cache.py CacheConfig.DEFAULT_BLOCK_SIZE: 64 from 0.34; 16 before, where
    # older releases name no constant), which every backend of these models takes
    from vllm.config.cache import CacheConfig

    default_block = getattr(CacheConfig, "DEFAULT_BLOCK_SIZE", 16)
    n = cfg["num_hidden_layers"]
    if cfg.get("compress_ratios"):
        hd, idx = cfg["head_dim"], cfg.get("index_head_dim", 128)
        for i, r in enumerate(max(1, int(r)) for r in cfg["compress_ratios"][:n]):
            p = f"model.layers.{i}.self_attn"
            if r == 4:  # the indexer is built first: its key cache and its compressor's state
                specs[f"{p}.indexer.k_cache"] = make(
                    K.MLAAttentionSpec, block_size=256, num_kv_heads=1, head_size=idx + idx // 128 * 4,
                    dtype=torch.uint8, compress_ratio=4, tokens_per_state=4, alignment=576, max_tp_shards=1)
                specs[f"{p}.indexer.compressor.state_cache"] = make(
                    K.SlidingWindowMLASpec, block_size=4, num_kv_heads=1, head_size=2 * 2 * idx, dtype=torch.float32,
                    sliding_window=8, alignment=576, max_tp_shards=1)
            specs[f"{p}.swa_cache"] = make(
                K.SlidingWindowMLASpec, block_size=64, num_kv_heads=1, head_size=hd, dtype=torch.uint8,
                sliding_window=cfg.get("sliding_window", 128), cache_dtype_str="fp8_ds_mla", alignment=576,
                model_version="deepseek_v4", state_content_bytes=584, max_tp_shards=1)
            if r > 1:
                specs[f"{p}.attn"] = make(
                    K.MLAAttentionSpec, block_size=256, num_kv_heads=1, head_size=hd, dtype=torch.uint8,
                    compress_ratio=r, tokens_per_state=r, cache_dtype_str="fp8_ds_mla", alignment=576,
                    model_version="deepseek_v4", state_content_bytes=584, max_tp_shards=1)
                coff = 2 if r == 4 else 1
                specs[f"{p}.compressor.state_cache"] = make(
                    K.SlidingWindowMLASpec, block_size=4 if r == 4 else 8, num_kv_heads=1, head_size=2 * coff * hd,
                    dtype=torch.float32, sliding_window=coff * r, alignment=576, max_tp_shards=1)
    elif cfg.get("is_encoder_decoder") and cfg.get("decoder_layers"):  # Whisper: each decoder layer's self and cross
        heads = cfg["decoder_attention_heads"]  # attention, in the order WhisperDecoderLayer builds them
        common = dict(block_size=default_block, num_kv_heads=heads, head_size=cfg["d_model"] // heads,
                      dtype=torch.bfloat16, use_mla=False)
        for i in range(cfg["decoder_layers"]):
            specs[f"model.decoder.layers.{i}.self_attn.attn"] = make(K.FullAttentionSpec, **common)
            specs[f"model.decoder.layers.{i}.encoder_attn.attn"] = make(K.CrossAttentionSpec, **common)
        if hasattr(K, "MULTIMODAL_REGISTRY"):  # up to 0.10 the spec asks the registry for the encoder's length, which
            # Whisper's processing info gives as its 1,500 audio frames: max_source_positions stands in for it here
            K.MULTIMODAL_REGISTRY.get_encdec_max_encoder_len = lambda model_config: cfg["max_source_positions"]
    else:
        types_ = cfg.get("layer_types") or [
            "full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(n)]  # Gemma 3's pattern
        for i, kind in enumerate(types_[:n]):
            common = dict(block_size=default_block, num_kv_heads=cfg["num_key_value_heads"], head_size=cfg["head_dim"],
                          dtype=torch.bfloat16, use_mla=False)  # use_mla: a field up to 0.10
            specs[f"model.layers.{i}.self_attn.attn"] = (
                make(K.SlidingWindowSpec, sliding_window=cfg["sliding_window"], **common)
                if kind == "sliding_attention" else make(K.FullAttentionSpec, **common))

    def ns(**kw):
        return types.SimpleNamespace(**kw)

    out = []
    for max_len, mbt, available in points:
        cache = ns(num_gpu_blocks_override=None, mamba_cache_mode="none", block_size=256, enable_prefix_caching=False,
                   kv_offloading_size=None, kv_cache_layout="BLHNC", prefix_cache_retention_interval=None,
                   kv_sharing_fast_prefill=False)
        try:  # 0.29 on: the block-outermost layout V4's indexer backend declares (supported_kv_cache_layouts)
            from vllm.v1.kv_cache_layout import KVCacheLayout

            cache.get_resolved_kv_cache_layout = lambda: KVCacheLayout.BLHNC
        except ImportError:
            pass
        config = ns(model_config=ns(max_model_len=max_len, supports_kv_cache_grouping=False, is_hybrid=True,
                                     is_encoder_decoder=bool(cfg.get("is_encoder_decoder")), is_multimodal_model=False),
                    cache_config=cache,
                    scheduler_config=ns(max_num_batched_tokens=mbt, disable_hybrid_kv_cache_manager=False,
                                        async_scheduling=True, max_num_encoder_input_tokens=mbt),
                    parallel_config=ns(decode_context_parallel_size=1, prefill_context_parallel_size=1,
                                       pipeline_parallel_size=1, tensor_parallel_size=1),
                    kv_transfer_config=None, speculative_config=None, max_concurrent_batches=2,
                    max_in_flight_tokens=2 * mbt, attention_config=ns(hisparse_config=None))
        groups, kv_config, fit = plan_groups(plan, config, specs, available)
        out.append({"max_model_len": max_len, "max_num_batched_tokens": mbt, "available_bytes": available,
                    "num_blocks": kv_config.num_blocks, "fit_bytes": fit,
                    "concurrency": utils.get_max_concurrency_for_kv_cache_config(config, kv_config),
                    "groups": [len(g.layer_names) for g in groups]})
    return out


def release_arguments(doc: str | None) -> argparse.ArgumentParser:
    """The command line both recording scripts share: the releases and where their wheels and imports are."""
    ap = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    ap.add_argument("releases", nargs="+")
    ap.add_argument("--src", required=True, help="folder with one unpacked wheel per release: SRC/<release>/vllm")
    ap.add_argument("--deps", required=True, help="folder with the pure-Python modules vLLM's imports need")
    ap.add_argument("--python", default=sys.executable, help="an interpreter with torch (CPU is enough)")
    return ap


def run_release(args, release: str, script: str, *inner: str, **env: str) -> tuple[Any, str | None]:
    """Run `script --inner INNER...` in an interpreter with the release's unpacked wheel first on PYTHONPATH (and `env`
    added): (the JSON of its last line of output, None), or (None, its last line of errors) when it failed."""
    path = f"{Path(args.src) / release}{os.pathsep}{args.deps}"
    run = subprocess.run([args.python, script, "--inner", *inner], env=dict(os.environ, PYTHONPATH=path, **env),
                         capture_output=True, text=True, check=False)
    if run.returncode:
        return None, run.stderr.strip().splitlines()[-1]
    return json.loads(run.stdout.strip().splitlines()[-1]), None


def per_release_main(doc: str | None, script: str, inner: Callable[[], Any], merged: dict[str, dict],
                     record: Callable[[str, Any], dict]) -> list[dict] | None:
    """The main of a recorder whose inner part runs once per release: with --inner, print what `inner` returns (in
    the release's interpreter) and return None; else run it for each release asked, merge record(release, result) into
    `merged` (the records already written, by release) and return them all in release order."""
    if len(sys.argv) > 1 and sys.argv[1] == "--inner":
        print(json.dumps(inner()))
        return None
    args = release_arguments(doc).parse_args()
    for release in args.releases:
        got, error = run_release(args, release, script)
        if error:
            sys.exit(f"{release}: {error}")
        merged[release] = record(release, got)
        print(release, "done", file=sys.stderr)
    return [merged[r] for r in sorted(merged, key=lambda r: tuple(int(x) for x in r.split(".")))]


def plan_groups(plan, config, specs: dict, available: int) -> tuple:
    """(groups, KV cache config, fit-check bytes) from the release's own planning functions (record_vllm_hybrid.py
    uses it too)."""
    if hasattr(plan, "DefaultKVCacheConfigBuilder"):  # 0.34: the platform's builder places the groups
        builder = plan.DefaultKVCacheConfigBuilder()
        groups = builder.get_kv_cache_groups(config, dict(specs))
        per_block = plan._pool_bytes_per_block_from_builder(builder, config, groups)
        kv_config = builder.get_kv_cache_config_from_groups(config, groups, available // per_block)
        return groups, kv_config, plan._max_memory_usage_bytes_from_groups(builder, config, groups)
    if not hasattr(plan, "get_kv_cache_groups"):  # up to 0.10: get_kv_cache_config checks, groups and sizes at once
        check, plan.check_enough_kv_cache_memory = plan.check_enough_kv_cache_memory, lambda *a: None
        try:  # the check's figure is recorded below, not raised on
            kv_config = plan.get_kv_cache_config(config, dict(specs), available)
        finally:
            plan.check_enough_kv_cache_memory = check
        return kv_config.kv_cache_groups, kv_config, plan.max_memory_usage_bytes(config, specs.values())
    groups = plan.get_kv_cache_groups(config, dict(specs))
    if "kv_cache_specs" in inspect.signature(plan.get_kv_cache_config_from_groups).parameters:  # up to 0.15
        kv_config = plan.get_kv_cache_config_from_groups(config, groups, dict(specs), available)
    else:
        kv_config = plan.get_kv_cache_config_from_groups(config, groups, available)
    if hasattr(plan, "_max_memory_usage_bytes_from_groups"):  # 0.16 on: per group, padded to the largest
        return groups, kv_config, plan._max_memory_usage_bytes_from_groups(config, groups)
    # up to 0.15 check_enough_kv_cache_memory sums every layer's own max_memory_usage_bytes
    return groups, kv_config, plan.max_memory_usage_bytes(config, specs.values())


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--inner":
        print(json.dumps(_inner(sys.argv[2], json.loads(sys.argv[3]))))
        return
    ap = release_arguments(__doc__)
    ap.add_argument("--model", action="append", choices=CASES, help="only these models (default: every case)")
    args = ap.parse_args()
    records = []
    for release in args.releases:
        for case in args.model or CASES:
            if "DeepSeek-V4" in case and tuple(int(x) for x in release.split(".")[:2]) < V4_FROM:
                continue
            config = REPO / "fixtures" / "configs" / case / "config.json"
            points = WHISPER_POINTS if "whisper" in case else POINTS
            got, error = run_release(args, release, __file__, str(config), json.dumps(points))
            if error:
                sys.exit(f"{release} {case}: {error}")
            records.append({"vllm": release, "model": case, "points": got})
            print(release, case, "done", file=sys.stderr)
    write(records)


FIELDS = ("max_model_len", "max_num_batched_tokens", "available_bytes", "num_blocks", "fit_bytes", "concurrency")


def write(records: list[dict]) -> None:
    """Merge into OUT, one line per release and model (a new record replaces the one of the same release and model),
    each point a row of FIELDS."""
    def key(r: dict) -> tuple:
        return tuple(int(x) for x in r["vllm"].split(".")), CASES.index(r["model"])
    merged = {key(r): r for r in (json.loads(OUT.read_text())["records"] if OUT.exists() else [])}
    merged.update({key(r): {"vllm": r["vllm"], "model": r["model"],
                            "points": [[p[f] for f in FIELDS] for p in r["points"]]} for r in records})
    rows = [json.dumps(merged[k]) for k in sorted(merged)]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text('{"how": "scripts/record_vllm_planning.py", "fields": ' + json.dumps(list(FIELDS))
                   + ', "records": [\n' + ",\n".join(rows) + "\n]}\n")


if __name__ == "__main__":
    main()
