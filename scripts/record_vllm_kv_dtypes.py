"""Record the page bytes vLLM's own code gives one token of one attention layer for its quantized KV cache dtypes,
release by release (developer tool; tests never run it). The result, fixtures/vllm/kv_dtypes.json, is what
tests/test_kv_vllm_dtypes.py holds hfmem's per-layer KV bytes to.

The dtypes are the per-token-head ones (int8_per_token_head and fp8_per_token_head from 0.20, int4_per_token_head from
0.25), NVFP4 (nvfp4 from 0.20, nvfp4_4over6 from 0.28) and two TurboQuant presets (turboquant_k8v4 and
turboquant_3bit_nc, from 0.20, under the TURBOQUANT backend), for full-attention and sliding-window layers of a few head
shapes (K/V heads, key and value head sizes). Each release runs in its own interpreter with its unpacked wheel first
on PYTHONPATH (set-up as in scripts/record_vllm_planning.py). What is the engine's own code: the dtype's torch dtype
and quant mode (utils/torch_utils.py kv_cache_dtype_str_to_dtype, v1/kv_cache_interface.py get_kv_quant_mode), the
layer's spec (model_executor/layers/attention/attention.py Attention.get_kv_cache_spec, run on a stand-in layer that
carries the fields it reads), the backend's packing where the release has one (AttentionBackend.customize_spec, from
0.28; v1/worker/utils.py customize_attention_spec from 0.32), and the page bytes (the spec classes). The backend is
the one vLLM can pick for the dtype on CUDA (supported_kv_cache_dtypes): TRITON_ATTN for the per-token-head dtypes,
FLASHINFER for NVFP4 (flashinfer itself stubbed: only the class is read). A spec the release refuses (an assertion,
e.g. NVFP4 with unequal key and value head sizes) is recorded as refused.

    python scripts/record_vllm_kv_dtypes.py --src /tmp/vllm-src --deps /tmp/vdeps 0.20.0 0.21.0 0.22.0 0.23.0 \
        0.24.0 0.25.0 0.26.0 0.27.0 0.28.0 0.29.0 0.30.0 0.31.0 0.32.0 0.33.0 0.34.0   # about a minute
"""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "fixtures" / "vllm" / "kv_dtypes.json"
DTYPES = ("int8_per_token_head", "fp8_per_token_head", "int4_per_token_head", "nvfp4", "nvfp4_4over6", "turboquant_k8v4",
          "turboquant_3bit_nc")
# (K/V heads, key head size, value head size): Llama-3.1-8B, Qwen3.5's attention layers, an MQA layer with 64-wide
# heads, MiMo-V2's 192-wide keys with 128-wide values (and its sliding layers' 8 heads), Gemma 3 27B, gpt-oss
SHAPES = ((8, 128, 128), (4, 256, 256), (1, 64, 64), (4, 192, 128), (8, 192, 128), (16, 128, 128), (8, 64, 64))
KINDS = ("full", "sliding")


def _inner() -> list[dict]:
    """Runs inside the release's interpreter."""
    import importlib
    import types

    import torch

    from record_vllm_hybrid import _stub_packages, layer_spec_tools  # this folder is on sys.path: the script runs from it

    _stub_packages("flashinfer", "pynvml")
    from vllm.config.cache import CacheDType
    from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype

    Attention, AttentionType, customize = layer_spec_tools()
    backends = "vllm.v1.attention.backends"
    triton = importlib.import_module(f"{backends}.triton_attn").TritonAttentionBackend
    flashinfer = importlib.import_module(f"{backends}.flashinfer").FlashInferBackend
    turboquant = importlib.import_module(f"{backends}.turboquant_attn").TurboQuantAttentionBackend
    offered = set(CacheDType.__args__)

    def ns(**kw):
        return types.SimpleNamespace(**kw)

    model = ns(dtype=torch.bfloat16, use_mla=False)
    vc = ns(model_config=model, cache_config=ns(block_size=16, skip_page_size_padded=None))
    out = []
    for dtype in DTYPES:
        if dtype not in offered:
            continue
        backend = (flashinfer if dtype.startswith("nvfp4") else turboquant if dtype.startswith("turboquant_")
                   else triton)
        for kind in KINDS:
            for heads, dk, dv in SHAPES:
                layer = ns(attn_type=AttentionType.DECODER, kv_cache_dtype=dtype,
                           sliding_window=4096 if kind == "sliding" else None, num_kv_heads=heads, head_size=dk,
                           head_size_v=dv, kv_cache_torch_dtype=kv_cache_dtype_str_to_dtype(dtype, model),
                           attn_backend=backend, has_sink=False)
                record = {"dtype": dtype, "kind": kind, "heads": heads, "dk": dk, "dv": dv}
                try:
                    spec = customize(backend, Attention.get_kv_cache_spec(layer, vc))
                    record["bytes_per_token"] = spec.page_size_bytes // spec.block_size
                    assert spec.page_size_bytes % spec.block_size == 0
                except AssertionError as e:
                    record["refused"] = str(e) or "assertion"
                out.append(record)
    return out


def main() -> None:
    from record_vllm_planning import per_release_main

    fields = ("dtype", "kind", "heads", "dk", "dv")
    old = json.loads(OUT.read_text())["records"] if OUT.exists() else []
    records = per_release_main(  # pages: rows of `fields`, then the bytes or the refusal
        __doc__, __file__, _inner, {r["vllm"]: r for r in old},
        lambda release, pages: {"vllm": release, "pages": [[p[f] for f in fields]
                                                           + [p.get("bytes_per_token", p.get("refused"))]
                                                           for p in pages]})
    if records is None:
        return
    rows = [json.dumps(r) for r in records]
    OUT.write_text('{"how": "scripts/record_vllm_kv_dtypes.py", "fields": ' + json.dumps([*fields, "bytes_per_token"])
                   + ', "records": [\n' + ",\n".join(rows) + "\n]}\n")


if __name__ == "__main__":
    main()
