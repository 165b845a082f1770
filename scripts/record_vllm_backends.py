"""Record which attention backend vLLM's own selector picks for one attention layer, release by release, for its
quantized KV cache dtypes, or why none takes the layer (developer tool; tests never run it). The result,
fixtures/vllm/backends.json.gz, is what tests/test_kv_vllm_dtypes.py holds hfmem's "vLLM does not start this" rules to.

Each release runs in its own interpreter with its unpacked wheel first on PYTHONPATH (set-up as in
scripts/record_vllm_planning.py). What is the engine's own code: platforms/cuda.py CudaPlatform.get_valid_backends
(the release's backend priority list for the device capability, each backend's validate_configuration:
supported dtypes, KV cache dtypes, head sizes, attention sinks, sliding windows from 0.27, attention types, compute
capability) on v1/attention/selector.py AttentionSelectorConfig, as get_attn_backend builds it for one layer with no
backend forced. What the harness decides: the device capability (the platform's get_device_capability answers it;
compiled kernels and NVML are stand-ins that are never called), FlashInfer's TRTLLM cubins reachable
(utils/flashinfer.py has_nvidia_artifactory), bfloat16 weights, no block size given, and the
default for every other selector field. A layer with no valid backend stops vLLM at start-up ("No valid attention
backend found"); the record keeps each backend's reasons for the dtype's own backends. Beside the selector, the
backend a model's own config code forces for all its layers: model_executor/models/config.py Gemma4Config (Gemma 4's
mixed head sizes) on the same GPUs, for four pairs of head sizes.

    python scripts/record_vllm_backends.py --src /tmp/vllm-src --deps /tmp/vdeps 0.20.0 0.21.0 0.22.0 0.23.0 \
        0.24.0 0.25.0 0.26.0 0.27.0 0.28.0 0.29.0 0.30.0 0.31.0 0.32.0 0.33.0 0.34.0   # about two minutes
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "fixtures" / "vllm" / "backends.json.gz"
DTYPES = ("int8_per_token_head", "fp8_per_token_head", "int4_per_token_head", "nvfp4", "nvfp4_4over6",
          "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc")
CAPABILITIES = ((8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (12, 0))
HEAD_SIZES = (64, 80, 96, 128, 192, 256, 512)
# (sliding window, attention sinks, attention type)
LAYERS = ((False, False, "decoder"), (True, False, "decoder"), (False, True, "decoder"), (True, True, "decoder"),
          (False, False, "encoder_decoder"))
FIELDS = ("dtype", "sm", "head_size", "sliding", "sink", "attn_type", "backend", "reasons")
GEMMA4_FIELDS = ("sm", "head_dim", "global_head_dim", "forced_backend")


_CAPABILITY: list = []


def set_capability(major: int, minor: int) -> None:
    """Make the release on the path answer as a CUDA GPU of this compute capability: its compiled kernels and NVML are
    stand-ins (never called), every CUDA platform class reports the capability, the modules that bound the platform
    vLLM resolved on import get the CUDA one, FlashInfer's TRTLLM cubins count as reachable (from NVIDIA's
    artifactory, as on a served machine), the fields the backends' checks read from the current config are set, and
    cached answers that followed the previous capability are forgotten."""
    import types

    from record_vllm_hybrid import _stub_packages  # this folder is on sys.path: the script runs from it

    if not _CAPABILITY:
        _stub_packages("vllm._C", "vllm._C_stable_libtorch", "vllm._moe_C", "vllm._flashmla_C", "vllm._rocm_C",
                       "vllm.vllm_flash_attn._vllm_fa2_C", "vllm.vllm_flash_attn._vllm_fa3_C", "pynvml")
        import vllm.config.vllm as config_vllm
        import vllm.platforms as platforms
        import vllm.platforms.cuda as cuda
        import vllm.utils.flashinfer as flashinfer_utils

        def ns(**kw):
            return types.SimpleNamespace(**kw)

        config_vllm._current_vllm_config = ns(
            attention_config=ns(use_trtllm_attention=None, flash_attn_version=None, use_non_causal=False,
                                backend=None, backend_per_kind=None),
            cache_config=None, model_config=None, kv_transfer_config=None,
            parallel_config=ns(decode_context_parallel_size=1, prefill_context_parallel_size=1,
                               tensor_parallel_size=1, pipeline_parallel_size=1),
            speculative_config=None, compilation_config=ns())
        flashinfer_utils.has_nvidia_artifactory = lambda: True
        for cls in vars(cuda).values():  # with NVML or without: which one a module bound depends on the stand-ins
            if isinstance(cls, type) and issubclass(cls, cuda.CudaPlatform.__mro__[1]) and cls.__module__ == cuda.__name__:
                cls.get_device_capability = classmethod(lambda cls, device_id=0: _CAPABILITY[0])
        platforms._current_platform = cuda.CudaPlatform()
        for name, module in list(sys.modules.items()):
            if name.startswith("vllm.") and hasattr(module, "current_platform"):
                module.current_platform = platforms._current_platform
        _CAPABILITY.append(None)
    from vllm.platforms.interface import DeviceCapability

    _CAPABILITY[0] = DeviceCapability(major, minor)
    _clear_caches()


def _clear_caches() -> None:
    """Forget every cached answer of vLLM's module-level functions (supports_trtllm_attention, FA's version, ...)."""
    import functools

    for name, module in list(sys.modules.items()):
        if name.startswith("vllm") and module is not None:
            for value in list(vars(module).values()):
                if isinstance(value, functools._lru_cache_wrapper):
                    value.cache_clear()


def _inner() -> list[list]:
    """Runs inside the release's interpreter."""
    import torch

    set_capability(9, 0)
    from vllm.config.cache import CacheDType
    from vllm.platforms.cuda import CudaPlatform
    from vllm.v1.attention.selector import AttentionSelectorConfig

    offered = set(CacheDType.__args__)
    fields = AttentionSelectorConfig._fields
    out = []
    for dtype in DTYPES:
        if dtype not in offered:
            continue
        for major, minor in CAPABILITIES:
            set_capability(major, minor)
            for head in HEAD_SIZES:
                for sliding, sink, attn_type in LAYERS:
                    values = dict(head_size=head, dtype=torch.bfloat16, kv_cache_dtype=dtype, block_size=None,
                                  use_mla=False, has_sink=sink, use_sparse=False, use_mm_prefix=False,
                                  use_per_head_quant_scales=False, attn_type=attn_type, has_sliding_window=sliding)
                    selector = AttentionSelectorConfig(**{k: v for k, v in values.items() if k in fields})
                    valid, invalid = CudaPlatform.get_valid_backends(
                        device_capability=_CAPABILITY[0], attn_selector_config=selector, num_heads=32)
                    # (backend, priority) pairs up to 0.33, _BackendCandidate(backend_class, backend, priority) in 0.34
                    best = min(valid, key=lambda c: c[-1]) if valid else None
                    chosen = best[-2].name if best else None
                    # the reasons of the backends that take this dtype at all
                    reasons = {} if chosen else {
                        backend.name: why for backend, (_, why) in invalid.items()
                        if "kv_cache_dtype not supported" not in why}
                    out.append([dtype, major * 10 + minor, head, sliding, sink, attn_type, chosen, reasons])
    return out


# (head_dim, global_head_dim): Gemma 4 31B's, equal sizes, both within FlashAttention 3's 256, one above 512
GEMMA4_HEADS = ((256, 512), (256, 256), (128, 256), (256, 640))


def _gemma4_inner() -> list[list]:
    """Runs inside the release's interpreter: rows of [sm, head_dim, global_head_dim, the backend Gemma4Config forces
    or None] from model_executor/models/config.py Gemma4Config.verify_and_update_config on a stand-in VllmConfig
    (no backend or FlashAttention version given, the default KV cache dtype)."""
    import types

    set_capability(9, 0)
    from vllm.model_executor.models.config import Gemma4Config

    def ns(**kw):
        return types.SimpleNamespace(**kw)

    out = []
    for major, minor in CAPABILITIES:
        set_capability(major, minor)
        for head, global_head in GEMMA4_HEADS:
            layer_types = ["sliding_attention"] * 5 + ["full_attention"]
            per_layer = [ns(head_size=global_head if t == "full_attention" else head) for t in layer_types]
            arch = type("Arch", (), {"total_num_hidden_layers": 6, "__getitem__": lambda self, i: per_layer[i]})()
            config = ns(model_config=ns(hf_text_config=ns(head_dim=head, global_head_dim=global_head,
                                                          layer_types=layer_types), model_arch_config=arch),
                        attention_config=ns(backend=None, flash_attn_version=None),
                        cache_config=ns(cache_dtype="auto"))
            Gemma4Config.verify_and_update_config(config)
            forced = config.attention_config.backend
            out.append([major * 10 + minor, head, global_head, forced.name if forced is not None else None])
    return out


def main() -> None:
    from record_vllm_planning import per_release_main

    old = json.loads(gzip.decompress(OUT.read_bytes()))["releases"] if OUT.exists() else []
    records = per_release_main(__doc__, __file__, lambda: {"rows": _inner(), "gemma4": _gemma4_inner()},
                               {r["vllm"]: r for r in old}, lambda release, got: {"vllm": release, **got})
    if records is None:
        return
    lines = [json.dumps(r, separators=(",", ":")) for r in records]
    text = ('{"how": "scripts/record_vllm_backends.py", "fields": ' + json.dumps(list(FIELDS)) + ', "gemma4_fields": '
            + json.dumps(list(GEMMA4_FIELDS)) + ', "releases": [\n' + ",\n".join(lines) + "\n]}\n")
    OUT.write_bytes(gzip.compress(text.encode(), mtime=0))


if __name__ == "__main__":
    main()
