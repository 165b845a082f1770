"""Record what vLLM's own code gives for hybrid attention/state models, release by release (developer tool; tests
never run it): the attention block size and padded state page its hybrid alignment picks, and from them the pool
block count, fit-check bytes and concurrency its KV-cache planning gives. The result, fixtures/vllm/hybrid.json, is
what tests/test_vllm_planning_truth.py holds hfmem's hybrid KV arithmetic to.

Each release runs in its own interpreter with that release's unpacked wheel first on PYTHONPATH (see
scripts/record_vllm_planning.py for the set-up; the model modules also need einops, compressed-tensors, loguru and
diskcache, and from 0.31 fastapi, starlette, annotated-doc, opentelemetry-api/-sdk/-semantic-conventions and
partial-json-parser, all pure Python; Qwen3.5's module imports torchvision, which a stub stands in for: only its import
is reached). What is the engine's own code:
- the block size and padding: Platform._align_hybrid_block_size (platforms/interface.py, 0.20 on;
  HybridAttentionMambaModelConfig in model_executor/models/config.py before), after the release's
  MambaModelConfig (mamba_cache_mode from prefix caching) and the model's own config hook, fed the model
  class's own get_mamba_state_shape_from_config / get_mamba_state_dtype_from_config (the real model module is
  imported; no layer is built) and the attention backend class vLLM picks first on the GPU (FLASH_ATTN for GQA and
  FLASH_ATTN_MLA for MLA on Hopper, FLASHINFER and FLASHINFER_MLA on Blackwell, with flashinfer's own kernels stubbed:
  platforms/cuda.py _get_backend_priorities) with its supported kernel block sizes
  (FLASH_ATTN_MLA imports only with its CUDA extension; TRITON_MLA, whose kernel block sizes are the same in every
  release read, stands in for it);
- the specs' page bytes: the release's FullAttentionSpec / MLAAttentionSpec / MambaSpec;
- the grouping, block layout, fit check and concurrency: kv_cache_utils.py / kv_cache_planning.py, as in
  record_vllm_planning.py.
What the harness decides, as each release's layer code does (read, not run, since no layer is built): the state
page's prefill-checkpoint page (MambaMixer2 from 0.32, GDN with FlashInfer prefill from 0.33: Hopper) and the GDN
layers' checkpoint alignment in "align" mode (FLASHINFER_GDN_CHECKPOINT_ALIGNMENT, imported from the release).
The VllmConfig is a stand-in carrying the fields these functions read, with a `vllm serve` start's defaults (the
block size the hooks start from is the release's CacheConfig.DEFAULT_BLOCK_SIZE: 64 from 0.34). With --kv-dtype the
attention layers take a quantized cache: the per-token-head dtypes on TRITON_ATTN and NVFP4 on FLASHINFER (the
release's spec with its kv_quant_mode, then the backend's customize_spec), TurboQuant on its own backend through the
layer's own Attention.get_kv_cache_spec (a stand-in layer), after engine/arg_utils.py's boundary layers (none for
hybrids; 0.20 refuses them, recorded as refused).

    python scripts/record_vllm_hybrid.py --src /tmp/vllm-src --deps /tmp/vdeps 0.18.0 0.19.0 0.20.2 0.22.0 0.25.0 \
        0.26.0 0.27.0 0.28.0 0.29.0 0.31.0 0.32.0 0.33.0 0.34.0   # Hopper and Blackwell: 25 minutes on 2 cores
    python scripts/record_vllm_hybrid.py --src /tmp/vllm-src --deps /tmp/vdeps --sm 90 0.11.2 0.12.0 0.13.0 \
        0.14.0 0.15.0 0.16.0 0.17.0   # before 0.20 only Hopper's rules exist: 20 minutes (older releases also want
                                      # setproctitle, blake3, mistral-common and its imports)
    python scripts/record_vllm_hybrid.py --src /tmp/vllm-src --deps /tmp/vdeps --sm 90 --kv-dtype int8_per_token_head \
        --model Qwen/Qwen3.5-4B ... 0.20.0 0.22.0 0.25.0 0.28.0 0.31.0 0.33.0 0.34.0   # also int4_per_token_head
        # (0.25 on), nvfp4 with --sm 100, turboquant_k8v4 (0.20-0.34) and turboquant_3bit_nc (0.34): the GDN and
        # Mamba2 models (MLA models take none of these dtypes)
    python scripts/record_vllm_hybrid.py --src /tmp/vllm-src --deps /tmp/vdeps --speculative 0.11.2 0.12.0 0.13.0 \
        0.14.0 0.15.0 0.16.0 0.17.0 0.18.0 0.19.0 0.20.2 0.21.0 0.22.0 0.25.0 0.26.0 0.27.0 0.28.0 0.29.0 0.31.0 \
        0.32.0 0.33.0 0.34.0   # SPECULATIVE_SETTINGS on Hopper: 25 minutes
0.10.2's and 0.11.0's model modules call Triton at import (tl.exp), beyond the placeholder vLLM keeps without a GPU's
Triton; they are read, not run.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "fixtures" / "vllm" / "hybrid.json"
CASES = ("Qwen/Qwen3-Next-80B-A3B-Instruct", "Qwen/Qwen3.5-4B", "Qwen/Qwen3.6-27B", "Qwen/Qwen3.5-35B-A3B",
         "nvidia/Nemotron-H-56B-Base-8K", "moonshotai/Kimi-Linear-48B-A3B-Instruct",
         "moonshotai/Kimi-K3")  # Kimi-K3: vLLM 0.27 on
# (tensor parallel size, prefix caching, num_speculative_tokens) x (max_model_len, max_num_batched_tokens, available
# bytes)
SETTINGS = ((1, True, 0), (1, False, 0), (4, True, 0), (4, False, 0))
# speculative decoding (--speculative; Hopper only): the state layers' MambaSpec.num_speculative_blocks, the release's
# mode hooks seeing a speculative config, and the checkpoint's MTP layers as full-attention specs (those of
# qwen3_next_mtp.py / qwen3_5_mtp.py: num_nextn_predict_layers / mtp_num_hidden_layers, default 1; none for the models
# without MTP layers, as with an n-gram drafter)
SPECULATIVE_SETTINGS = ((1, True, 2), (1, False, 2), (4, True, 1))
MTP_LAYER_KEYS = {"gdn": ("mtp_num_hidden_layers", "num_nextn_predict_layers")}
POINTS = ((32_768, 8_192, 20_000_000_000), (262_144, 2_048, 40_000_000_000), (8_192, 8_192, 5_000_000_000))


def _stub_packages(*names: str) -> None:
    """Stand-ins for packages whose kernels or transforms the modules imported here import at module level and never
    run here (Qwen3.5's torchvision; the FlashInfer backends' flashinfer): any attribute, call, base class, type union
    or subscript of them is another stand-in."""
    import importlib.abc
    import importlib.machinery
    import types

    class _Any(types.ModuleType):
        def __getattr__(self, name: str):
            if name.startswith("__"):
                raise AttributeError(name)
            return _Any(f"{self.__name__}.{name}")

        def __call__(self, *a, **k):
            return self

        def __mro_entries__(self, bases):
            return (object,)

        def __or__(self, other):
            return object

        __ror__ = __or__

        def __getitem__(self, key):
            return self

    class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path, target=None):
            if any(name == n or name.startswith(n + ".") for n in names):
                return importlib.machinery.ModuleSpec(name, self, is_package=True)
            return None

        def create_module(self, spec):
            return _Any(spec.name)

        def exec_module(self, module):
            module.__path__ = []

    sys.meta_path.insert(0, _Finder())


def layer_spec_tools() -> tuple:
    """(Attention, AttentionType, customize) of the release on the path: its attention layer class, whose
    get_kv_cache_spec the recorders run on stand-in layers, the attention-type enum, and the spec packing the runner
    applies (v1/worker/utils.py customize_attention_spec from 0.32; before, the backend's own customize_spec where it
    has one, from 0.28)."""
    import importlib

    from vllm.model_executor.layers.attention.attention import Attention

    try:
        from vllm.v1.attention.backend import AttentionType
    except ImportError:
        from vllm.attention.backends.abstract import AttentionType
    try:
        customize = importlib.import_module("vllm.v1.worker.utils").customize_attention_spec
    except AttributeError:
        def customize(backend_cls, spec):
            return backend_cls.customize_spec(spec) if hasattr(backend_cls, "customize_spec") else spec
    return Attention, AttentionType, customize


def _inner(config_path: str, sm: int, speculative: bool, kv_dtype: str = "auto") -> list[dict]:
    """Runs inside the release's interpreter. kv_dtype: vLLM's --kv-cache-dtype (KV_DTYPE_SETTINGS)."""
    import dataclasses
    import importlib
    import inspect
    import types

    import torch
    from transformers import AutoConfig

    _stub_packages("torchvision")
    import vllm.v1.kv_cache_interface as K
    from record_vllm_planning import planning_modules  # this folder is on sys.path: the script runs from it
    from vllm.model_executor.models import ModelRegistry
    from vllm.platforms.interface import Platform

    plan, utils = planning_modules()
    from record_vllm_planning import plan_groups  # this folder is on sys.path: the script runs from it
    from vllm.model_executor.models.registry import _VLLM_MODELS
    abstract = importlib.import_module("vllm.model_executor.layers.mamba.abstract")
    try:
        gdn_attn = importlib.import_module("vllm.v1.attention.backends.gdn_attn")
        gdn_alignment = gdn_attn.FLASHINFER_GDN_CHECKPOINT_ALIGNMENT
    except (ImportError, AttributeError):
        gdn_alignment = None
    release = tuple(int(x) for x in os.environ["HFMEM_VLLM_RELEASE"].split(".")[:2])

    def make(spec_cls, **kw):  # the release's own fields only
        names = {f.name for f in dataclasses.fields(spec_cls)}
        return spec_cls(**{k: v for k, v in kw.items() if k in names})

    raw = json.loads(Path(config_path).read_text())
    architecture = raw["architectures"][0]
    if architecture not in _VLLM_MODELS:  # the release's registry: where the model class lives (Kimi-K3 from 0.27)
        return []
    module, cls_name = _VLLM_MODELS[architecture]
    if not module.startswith("vllm."):
        module = f"vllm.model_executor.models.{module}"
    model_cls = getattr(importlib.import_module(module), cls_name)
    if raw.get("model_type") == "kimi_k3":  # a type transformers does not know, around a kimi_linear text config
        text = AutoConfig.for_model(**raw["text_config"])
        hf_config = types.SimpleNamespace(**{**raw, "text_config": text}, get_text_config=lambda: text)
    else:
        hf_config = AutoConfig.for_model(**raw)
        text = hf_config.get_text_config()
    n = text.num_hidden_layers
    if getattr(text, "linear_attn_config", None):  # Kimi-Linear: full_attn_layers (1-based) are MLA, the rest KDA
        full = set(text.linear_attn_config["full_attn_layers"])
        attention = [(i + 1) in full for i in range(n)]
        family = "kda"
    elif getattr(text, "hybrid_override_pattern", None):  # Nemotron-H: M mamba, * attention, - MLP, E MoE
        attention = [c == "*" for c in text.hybrid_override_pattern if c in "M*"]
        family = "mamba2"
    else:  # Qwen3-Next / Qwen3.5: "full_attention" | "linear_attention"
        attention = [t == "full_attention" for t in text.layer_types[:n]]
        family = "gdn"
    use_mla = family == "kda"
    if kv_dtype != "auto" and use_mla:
        return []
    quant_backend = None  # the backend vLLM takes the quantized dtype with (record_vllm_kv_dtypes.py)
    turboquant = kv_dtype.startswith("turboquant_")
    if kv_dtype.startswith("nvfp4"):
        _stub_packages("flashinfer", "pynvml")
        quant_backend = importlib.import_module("vllm.v1.attention.backends.flashinfer").FlashInferBackend
    elif turboquant:
        quant_backend = importlib.import_module("vllm.v1.attention.backends.turboquant_attn").TurboQuantAttentionBackend
    elif kv_dtype != "auto":
        quant_backend = importlib.import_module("vllm.v1.attention.backends.triton_attn").TritonAttentionBackend
    if quant_backend is not None:
        backend = quant_backend
    elif sm // 10 == 10:  # Blackwell: FLASHINFER first, FLASHINFER_MLA for MLA (flashinfer itself stubbed: only the
        # backend classes' kernel block sizes are read)
        _stub_packages("flashinfer")
        try:
            backends = "vllm.v1.attention.backends"
            backend = (importlib.import_module(f"{backends}.mla.flashinfer_mla").FlashInferMLABackend if use_mla
                       else importlib.import_module(f"{backends}.flashinfer").FlashInferBackend)
        except (ImportError, AssertionError, RuntimeError):  # 0.20's FlashInfer MLA module wants CUDA at import
            return []
    elif use_mla:
        backend = importlib.import_module("vllm.v1.attention.backends.mla.triton_mla").TritonMLABackend
        # FLASH_ATTN_MLA (the first MLA choice on Hopper) cannot be imported without its CUDA extension; its
        # get_supported_kernel_block_sizes is [MultipleOf(16)] in every release read (0.20-0.34), as TRITON_MLA's is
    else:
        backend = importlib.import_module("vllm.v1.attention.backends.flash_attn").FlashAttentionBackend
    from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype

    Attention, AttentionType, customize = layer_spec_tools()
    num_kv_heads_total = 1 if use_mla else text.num_key_value_heads
    head_size = (text.kv_lora_rank + text.qk_rope_head_dim) if use_mla else (
        getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads)

    def ns(**kw):
        return types.SimpleNamespace(**kw)

    # the block size the platform hooks start from: the release's default (config/cache.py
    # CacheConfig.DEFAULT_BLOCK_SIZE, 64 from 0.34), which every backend here takes (Platform
    # update_block_size_for_backend's first phase keeps it)
    from vllm.config.cache import CacheConfig

    default_block = getattr(CacheConfig, "DEFAULT_BLOCK_SIZE", 16)
    # the GDN layer's own choice (gdn/qwen_gdn_linear_attn.py: FlashInfer prefill on Hopper from 0.33, checkpoints in
    # "align" mode), made when the layers are built, i.e. after MambaModelConfig has set the mode
    gdn_flashinfer = family == "gdn" and sm == 90 and release >= (0, 33)
    # the KDA layer's (models/kimi_k3/nvidia/kda.py resolve_kda_prefill_backend, "auto", from 0.29): FlashKDA, whose
    # prefill exports a checkpoint, on SM 9x/10x/12x for bf16 models with 128-wide heads and a bounded gate
    lin = getattr(text, "linear_attn_config", None) or {}
    kda_flashkda = (family == "kda" and release >= (0, 29) and sm // 10 in (9, 10, 12) and lin.get("head_dim") == 128
                    and lin.get("gate_lower_bound") is not None)
    # what every point's hooks see of the model, the backend and the layers' checkpoint choice
    ModelRegistry.resolve_model_cls = lambda *a, **k: (model_cls, architecture)
    Platform._find_non_ssm_backends = classmethod(lambda c, v: [backend])
    abstract.get_mamba_prefill_checkpoint_alignment = (
        lambda v: gdn_alignment if gdn_flashinfer and v.cache_config.mamba_cache_mode == "align" else None)
    import vllm.config.vllm as config_vllm

    config_vllm.set_current_vllm_config = _no_context
    backend_module = sys.modules[backend.__module__]
    hooks = importlib.import_module("vllm.model_executor.models.config")
    keys = MTP_LAYER_KEYS.get(family, ())
    mtp = next((getattr(text, k) for k in keys if isinstance(getattr(text, k, None), int)), 1 if keys else 0)
    out = []
    for tp, prefix_caching, drafts in SPECULATIVE_SETTINGS if speculative else SETTINGS:
        points, layout, refused = [], set(), None
        # the hooks run at every point: they set mamba_block_size from max_model_len (without prefix caching), and up
        # to 0.14 MambaSpec.max_memory_usage_bytes pages a request by it
        for max_len, mbt, available in POINTS:
            parallel = ns(tensor_parallel_size=tp, pipeline_parallel_size=1, decode_context_parallel_size=1,
                          prefill_context_parallel_size=1)
            cache = ns(cache_dtype=kv_dtype, block_size=default_block, user_specified_block_size=False, mamba_cache_mode="none",
                       mamba_block_size=None, user_specified_mamba_block_size=False, mamba_page_size_padded=None,
                       mamba_cache_dtype="auto", mamba_ssm_cache_dtype="auto", kv_cache_dtype_skip_layers=None,
                       enable_prefix_caching=prefix_caching, use_replayssm=False, use_kda_recoverssm=False,
                       num_gpu_blocks_override=None, kv_offloading_size=None, kv_cache_layout=None,
                       prefix_cache_retention_interval=None,
                       kv_sharing_fast_prefill=False, prefix_match_unit=None, calculate_kv_scales=False)
            try:  # 0.29 on; every page is the same size after the padding, so no layout packs groups (FLASH_ATTN: NHD)
                from vllm.v1.kv_cache_layout import KVCacheLayout

                cache.get_resolved_kv_cache_layout = lambda: KVCacheLayout.LBNHC
            except ImportError:
                pass
            model = ns(dtype=torch.bfloat16, use_mla=use_mla, is_hybrid=True, architecture=architecture,
                       hf_config=hf_config, hf_text_config=text,
                       get_num_kv_heads=lambda pc: max(1, num_kv_heads_total // pc.tensor_parallel_size),
                       get_head_size=lambda: head_size,  # ModelConfig.get_mamba_chunk_size's two names:
                       get_mamba_chunk_size=lambda: (getattr(text, "mamba_chunk_size", None)
                                                     or getattr(text, "chunk_size", None)),
                       max_model_len=max_len, supports_kv_cache_grouping=False,
                       supports_mamba_prefix_caching=getattr(model_cls, "supports_mamba_prefix_caching", False))
            vc = ns(model_config=model, cache_config=cache, parallel_config=parallel,
                    # what the hooks and planning read of an MTP drafter's SpeculativeConfig (one MTP module)
                    speculative_config=ns(method="mtp", num_speculative_tokens=drafts, use_eagle=lambda: True,
                                          use_eagle_block_drop=lambda: True, use_dflash=lambda: False,
                                          uses_draft_model=lambda: False, use_multi_module_mtp=lambda: False)
                    if drafts else None,
                    additional_config={}, use_flashinfer_replayssm=False, num_speculative_tokens=drafts,
                    compilation_config=ns(static_forward_context={}),
                    scheduler_config=ns(max_num_batched_tokens=mbt, disable_hybrid_kv_cache_manager=False,
                                        async_scheduling=True, enable_chunked_prefill=True),
                    kv_transfer_config=None, max_concurrent_batches=2,
                    attention_config=ns(hisparse_config=None, backend=None))
            vc.with_hf_config = lambda hf, vc=vc: ns(**{  # Kimi-K3's state shape reads its text config through it
                **vars(vc), "model_config": ns(**{**vars(vc.model_config), "hf_config": hf, "hf_text_config": hf})})
            if hasattr(backend_module, "get_current_vllm_config"):  # FLASH_ATTN's kernel sizes read it (0.20-0.22)
                backend_module.get_current_vllm_config = lambda vc=vc: vc
            try:
                if turboquant:  # engine/arg_utils.py: 0.20 refuses hybrids; later boundary layers (none on hybrids)
                    from vllm.model_executor.layers.quantization.turboquant.config import TurboQuantConfig

                    if "num_layers" in inspect.signature(TurboQuantConfig.get_boundary_skip_layers).parameters:
                        # 0.20's create_engine_config raises this before it asks for the boundary layers (its words)
                        raise NotImplementedError(
                            "TurboQuant KV cache is not supported for hybrid (attention + Mamba) models. Boundary "
                            "layer protection requires uniform attention layers.")
                    cache.kv_cache_dtype_skip_layers = list(TurboQuantConfig.get_boundary_skip_layers(model))
                if hasattr(Platform, "_align_hybrid_block_size"):  # 0.20 on: the config hooks, then the alignment
                    hooks.MambaModelConfig.verify_and_update_config(vc)  # mamba_cache_mode from prefix caching
                    if architecture in hooks.MODELS_CONFIG_MAP:  # the model's own (Qwen3.5, Nemotron-H: SSM dtype)
                        hooks.MODELS_CONFIG_MAP[architecture].verify_and_update_config(vc)
                    Platform._align_hybrid_block_size(vc, backend)
                else:  # up to 0.19 the architecture hook runs first, then the hybrid hook (MambaModelConfig inside)
                    if architecture in hooks.MODELS_CONFIG_MAP:
                        hooks.MODELS_CONFIG_MAP[architecture].verify_and_update_config(vc)
                    hooks.HybridAttentionMambaModelConfig.verify_and_update_config(vc)
            except NotImplementedError as e:  # TurboQuant where the release refuses the model
                refused = str(e)
                break
            except AssertionError as e:  # 0.15-0.16: "align" with speculative decoding
                if not drafts:
                    raise
                refused = str(e)
                break
            mode = cache.mamba_cache_mode
            bs = cache.block_size
            padded = cache.mamba_page_size_padded
            shapes = model_cls.get_mamba_state_shape_from_config(vc)
            dtypes = model_cls.get_mamba_state_dtype_from_config(vc)
            checkpoint = 1 if mode == "align" and (
                (family == "mamba2" and release >= (0, 32)) or gdn_flashinfer or kda_flashkda) else 0
            specs: dict = {}
            for i, is_attn in enumerate(attention):
                if is_attn:
                    common = dict(block_size=bs, num_kv_heads=model.get_num_kv_heads(parallel), head_size=head_size,
                                  dtype=torch.bfloat16)
                    if turboquant:  # the layer's own spec (TQFullAttentionSpec in 0.20-0.27), then the packing
                        layer = ns(attn_type=AttentionType.DECODER, kv_cache_dtype=kv_dtype, sliding_window=None,
                                   num_kv_heads=model.get_num_kv_heads(parallel), head_size=head_size,
                                   head_size_v=head_size, kv_cache_torch_dtype=kv_cache_dtype_str_to_dtype(kv_dtype, model),
                                   attn_backend=quant_backend, has_sink=False)
                        specs[f"l{i}.attn"] = customize(quant_backend, Attention.get_kv_cache_spec(layer, vc))
                        continue
                    if quant_backend is not None:  # the layer's spec for the dtype, then its backend's packing
                        common.update(dtype=kv_cache_dtype_str_to_dtype(kv_dtype, model),
                                      kv_quant_mode=K.get_kv_quant_mode(kv_dtype))
                        specs[f"l{i}.attn"] = customize(quant_backend, make(K.FullAttentionSpec, **common))
                        continue
                    specs[f"l{i}.attn"] = (make(K.MLAAttentionSpec, cache_dtype_str="auto", **common) if use_mla
                                           else make(K.FullAttentionSpec, **common))
                else:
                    specs[f"l{i}.state"] = make(
                        K.MambaSpec, block_size=cache.mamba_block_size or bs, shapes=tuple(shapes),
                        dtypes=tuple(dtypes),
                        page_size_padded=padded, mamba_cache_mode=mode, num_prefill_checkpoint_blocks=checkpoint,
                        num_speculative_blocks=drafts)
            for j in range(mtp if drafts else 0):  # the drafter's layers, after the model's
                specs[f"mtp{j}.attn"] = make(K.FullAttentionSpec, block_size=bs,
                                             num_kv_heads=model.get_num_kv_heads(parallel), head_size=head_size,
                                             dtype=torch.bfloat16)
            vc.max_in_flight_tokens = 2 * mbt
            groups, kv_config, fit = plan_groups(plan, vc, specs, available)
            points.append([max_len, mbt, available, kv_config.num_blocks, fit,
                           utils.get_max_concurrency_for_kv_cache_config(vc, kv_config)])
            layout.add((bs, padded))
        spec = {"speculative_tokens": drafts, "mtp_layers": mtp} if drafts else {}
        if refused is not None:
            out.append({"tp": tp, "prefix_caching": prefix_caching, "sm": sm, **spec, "refused": refused})
            continue
        assert len(layout) == 1, layout  # the block size and state page do not depend on the point
        out.append({"tp": tp, "prefix_caching": prefix_caching, "sm": sm, **spec, "block_size": bs,
                    "state_page_padded": padded, "groups": [len(g.layer_names) for g in groups], "points": points})
    return out


class _no_context:  # set_current_vllm_config wants a real VllmConfig; the functions run read nothing through it
    def __init__(self, *a, **k):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--inner":
        print(json.dumps(_inner(sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1", sys.argv[5])))
        return
    from record_vllm_planning import release_arguments, run_release

    ap = release_arguments(__doc__)
    ap.add_argument("--sm", default="90,100", help="GPUs (compute capability x 10): 90 Hopper, 100 Blackwell (from "
                    "0.20, where the backend class decides the alignment)")
    ap.add_argument("--model", action="append", choices=CASES, help="only these models (default: every case)")
    ap.add_argument("--speculative", action="store_true", help="the SPECULATIVE_SETTINGS (on Hopper) in place of "
                    "SETTINGS")
    ap.add_argument("--kv-dtype", default="auto", help="vLLM's --kv-cache-dtype for the attention layers (a "
                    "per-token-head dtype, TRITON_ATTN; nvfp4, FLASHINFER); MLA models are skipped")
    args = ap.parse_args()
    records = []
    for release in args.releases:
        for sm in (int(x) for x in args.sm.split(",")):
            if sm != 90 and (args.speculative or tuple(int(x) for x in release.split(".")[:2]) < (0, 20)):
                continue  # HybridAttentionMambaModelConfig: no backend class read, the same as on Hopper
            for case in args.model or CASES:
                config = REPO / "fixtures" / "configs" / case / "config.json"
                got, error = run_release(args, release, __file__, str(config), str(sm),
                                         "1" if args.speculative else "0", args.kv_dtype, HFMEM_VLLM_RELEASE=release)
                if error:
                    print(f"{release} sm{sm} {case}: {error}", file=sys.stderr)
                    continue
                dtype = {"kv_dtype": args.kv_dtype} if args.kv_dtype != "auto" else {}
                records += [{"vllm": release, "model": case, **dtype, **rec} for rec in got]
                print(release, f"sm{sm}", case, "done" if got else "not in this release / backend not importable",
                      file=sys.stderr)
    write(records)


def write(records: list[dict]) -> None:
    """Merge into OUT: a new record replaces the one of the same release, model, GPU, TP, prefix caching, draft
    tokens and KV dtype."""
    def key(r: dict) -> tuple:
        return (tuple(int(x) for x in r["vllm"].split(".")), CASES.index(r["model"]), r["sm"], r["tp"],
                not r["prefix_caching"], r.get("speculative_tokens", 0), r.get("kv_dtype", ""))
    merged = {key(r): r for r in (json.loads(OUT.read_text())["records"] if OUT.exists() else [])}
    merged.update({key(r): r for r in records})
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text('{"how": "scripts/record_vllm_hybrid.py", "point_fields": ["max_model_len", '
                   '"max_num_batched_tokens", "available_bytes", "num_blocks", "fit_bytes", "concurrency"], '
                   '"records": [\n' + ",\n".join(json.dumps(merged[k]) for k in sorted(merged)) + "\n]}\n")


if __name__ == "__main__":
    main()
