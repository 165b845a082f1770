"""Regenerate fixtures/ from ../shared/models (run by developers, never by tests).

fixtures/configs/ORG/NAME/{config.json,SOURCE.json}   real configs and their provenance
fixtures/inventories/ORG/NAME.json.gz                  compact tensor inventories: {"tensors": [[name, dtype, shape, file]], "derived": bool}
fixtures/models/Qwen/Qwen2-7B-Instruct/                a committed header-only stub folder for the README example

Models whose folder in shared/ is config-only get an inventory DERIVED by building the transformers model on
the meta device (needs torch); those are marked "derived": true and tested only against independent counts.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "models"
sys.path.insert(0, str(ROOT / "tests"))
from stubs import DTYPE_BITS, write_stub_repo  # noqa: E402

FROM_HEADERS = [
    "Qwen/Qwen2-0.5B-Instruct", "Qwen/Qwen2-7B-Instruct", "Qwen/Qwen2.5-0.5B", "Qwen/Qwen2.5-7B-Instruct",
    "Qwen/Qwen2.5-72B-Instruct", "Qwen/Qwen3-0.6B", "Qwen/Qwen3-8B", "Qwen/Qwen3-8B-FP8", "Qwen/Qwen3-32B-AWQ",
    "Qwen/Qwen3-Coder-30B-A3B-Instruct", "Qwen/Qwen3-Next-80B-A3B-Instruct", "Qwen/Qwen3-VL-30B-A3B-Instruct",
    "Qwen/Qwen3.5-0.8B-Base", "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-2-7b-hf",
    "TheBloke/Llama-2-7B-AWQ", "deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-V2-Lite-Chat",
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "openai/gpt-oss-20b", "unsloth/gpt-oss-20b-BF16",
    "google/gemma-4-31B-it", "moonshotai/Kimi-K2-Instruct", "moonshotai/Kimi-Linear-48B-A3B-Instruct",
    "zai-org/GLM-4.7-Flash", "MiniMaxAI/MiniMax-M2.5",
    # quantized / MoE / composite checkpoints for tests/test_quant.py and tests/test_moe.py (all < 100k tensors)
    "Qwen/Qwen3-32B", "Qwen/Qwen3-30B-A3B-Thinking-2507-FP8", "zai-org/GLM-4.5-FP8", "MiniMaxAI/MiniMax-M3-MXFP8",
    "deepseek-ai/DeepSeek-V4-Flash", "Qwen/Qwen3-Omni-30B-A3B-Instruct",
    # the llm-d-planner vLLM version sweep's model (tests/test_vllm_logs.py)
    "Qwen/Qwen3-14B",
    # the vLLM 0.29.0 L4 log's model (tests/test_vllm_logs.py)
    "Qwen/Qwen3.5-4B",
    # the vLLM 0.31.0 A10G log's model (tests/test_vllm_logs.py TOKEN_ROWS)
    "Qwen/Qwen2.5-1.5B-Instruct",
    # MiMo-V2's hybrid layer pattern, sliding-layer head sizes and MTP layer (tests/test_mimo_v2.py)
    "XiaomiMiMo/MiMo-V2.5",
]
# Real inventories too large to keep whole (> 100k tensors): only the tensors outside numbered layers and those of
# the first N layers are kept (the inventory says "truncated_to_layers": N); tests compare them layer for layer.
TRUNCATED = {"moonshotai/Kimi-K2.5": 3, "moonshotai/Kimi-K3": 3, "zai-org/GLM-5.2": 4,
             # layers 0-4 hold its four layer shapes (hash-routed or not, compress ratio 128 or 4); every later
             # layer repeats layer 3 or 4 by its ratio (tests/test_vllm_logs.py _deepseek_v4_layers)
             "deepseek-ai/DeepSeek-V4-Pro": 5}
# Config-only in shared/: inventories derived from transformers' meta-device models.
DERIVED = {
    "openai-community/gpt2": "AutoModelForCausalLM",
    "google-bert/bert-base-uncased": "AutoModel",
    "google-t5/t5-small": "AutoModelForSeq2SeqLM",
    "state-spaces/mamba-2.8b-hf": "AutoModelForCausalLM",
    "mistralai/Mixtral-8x7B-v0.1": "AutoModelForCausalLM",
    "mistralai/Mistral-7B-v0.1": "AutoModelForCausalLM",
    "google/gemma-2-9b-it": "AutoModelForCausalLM",
    "google/gemma-3-27b-it": "AutoModelForImageTextToText",
    "microsoft/Phi-3-mini-4k-instruct": "AutoModelForCausalLM",
    "tiiuae/falcon-7b-instruct": "AutoModelForCausalLM",
    "Qwen/Qwen2.5-VL-7B-Instruct": "AutoModelForImageTextToText",
    "openai/whisper-large-v3": "AutoModelForSpeechSeq2Seq",
    "openai/gpt-oss-120b": "AutoModelForCausalLM",
    "meta-llama/Llama-3.2-1B-Instruct": "AutoModelForCausalLM",
}
# Derived inventories are of the unquantized model: their config copy drops quantization_config (noted in the
# inventory's "config_edits") so the fixture is not a config that contradicts its tensors.
STUB_FOLDERS = ["Qwen/Qwen2-7B-Instruct"]
# Config-only fixtures (no inventory): used by the KV-cache tests (tests/test_kv_truth.py, tests/test_kv_vllm.py).
CONFIG_ONLY = ["nvidia/Nemotron-H-56B-Base-8K", "Qwen/Qwen3-235B-A22B"]  # gpt-oss-120b is in DERIVED


def copy_configs(repos: list[str]) -> None:
    out_cfg = ROOT / "fixtures" / "configs"
    for repo in repos:
        cfg_dir = out_cfg / repo
        cfg_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy(SHARED / repo / "config.json", cfg_dir / "config.json")
        shutil.copy(SHARED / repo / "SOURCE.json", cfg_dir / "SOURCE.json")
        print(f"{repo}: config only")


def _shard_evenly(tensors: list[list], n_files: int) -> None:
    """Assign files where the source did not name them, splitting by cumulative bytes into n_files shards."""
    sizes = []
    for _name, dtype, shape, _ in tensors:
        numel = 1
        for d in shape:
            numel *= d
        sizes.append(numel * DTYPE_BITS[dtype] // 8)
    total = sum(sizes) or 1
    running = 0
    for t, size in zip(tensors, sizes):
        k = min(n_files - 1, running * n_files // total)
        t[3] = "model.safetensors" if n_files == 1 else f"model-{k + 1:05d}-of-{n_files:05d}.safetensors"
        running += size


def inventory_from_header(repo: str) -> dict:
    folder = SHARED / repo
    path = folder / "header.json"
    data = json.loads(gzip.open(str(path) + ".gz").read() if not path.exists() else path.read_text())
    source = json.loads((folder / "SOURCE.json").read_text())
    n_files = int((source.get("reported") or {}).get("n_files") or 1)
    tensors = [[name, info["dtype"], info["shape"], info.get("file")] for name, info in data.items()]
    if any(t[3] is None for t in tensors):
        _shard_evenly(tensors, n_files)
    return {"derived": False, "tensors": tensors}


def inventory_derived(repo: str, auto_class: str) -> dict:
    import torch
    import transformers

    config = json.loads((SHARED / repo / "config.json").read_text())
    cfg = transformers.AutoConfig.for_model(config["model_type"], **{k: v for k, v in config.items() if k != "model_type"})
    with torch.device("meta"):
        model = getattr(transformers, auto_class).from_config(cfg)
    dtype = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}.get(
        str(config.get("torch_dtype") or config.get("dtype") or "float32").replace("torch.", ""), "F32"
    )
    unique = dict(model.named_parameters())  # remove_duplicate=True drops tied copies, as save_pretrained does
    state = model.state_dict()
    tensors = []
    torch_to_st = {torch.float32: dtype, torch.bfloat16: dtype, torch.float16: dtype, torch.int64: "I64", torch.bool: "BOOL"}
    for name, tensor in state.items():
        if name not in unique and not any(name == b for b, _ in model.named_buffers()):
            continue
        tensors.append([name, torch_to_st.get(tensor.dtype, dtype), list(tensor.shape), None])
    _shard_evenly(tensors, 1 if sum(t.numel() for t in unique.values()) < 2e9 else 4)
    return {"derived": True, "derived_with": f"transformers {transformers.__version__} {auto_class} on meta", "tensors": tensors}


def inventory_truncated(repo: str, keep_layers: int) -> dict:
    import re

    layer_re = re.compile(r"(?:^|\.)layers\.(\d+)\.")
    inv = inventory_from_header(repo)
    kept = []
    for t in inv["tensors"]:
        m = layer_re.search(t[0])
        if m is None or int(m.group(1)) < keep_layers:
            kept.append(t)
    return {"derived": False, "truncated_to_layers": keep_layers, "tensors": kept}


def write_inventory(out_inv: Path, repo: str, inv: dict) -> None:
    dest = out_inv / f"{repo}.json.gz"
    dest.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(dest, "wb", mtime=0) as fh:
        fh.write(json.dumps(inv, separators=(",", ":")).encode())


def main() -> None:
    out_inv = ROOT / "fixtures" / "inventories"
    out_cfg = ROOT / "fixtures" / "configs"
    for repo in FROM_HEADERS + list(TRUNCATED) + list(DERIVED):
        if repo in FROM_HEADERS:
            inv = inventory_from_header(repo)
        elif repo in TRUNCATED:
            inv = inventory_truncated(repo, TRUNCATED[repo])
        else:
            inv = inventory_derived(repo, DERIVED[repo])
        config = json.loads((SHARED / repo / "config.json").read_text())
        if inv["derived"] and "quantization_config" in config:
            config.pop("quantization_config")
            inv["config_edits"] = ["removed quantization_config: the derived inventory is the unquantized model"]
        write_inventory(out_inv, repo, inv)
        cfg_dir = out_cfg / repo
        cfg_dir.mkdir(parents=True, exist_ok=True)
        if inv.get("config_edits"):
            (cfg_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        else:
            shutil.copy(SHARED / repo / "config.json", cfg_dir / "config.json")
        shutil.copy(SHARED / repo / "SOURCE.json", cfg_dir / "SOURCE.json")
        print(f"{repo}: {len(inv['tensors'])} tensors{' (derived)' if inv['derived'] else ''}")
    copy_configs(CONFIG_ONLY)
    make_quant_stubs(out_inv, out_cfg)
    for repo in STUB_FOLDERS:
        inv = json.loads(gzip.open(out_inv / f"{repo}.json.gz").read())
        dest = ROOT / "fixtures" / "models" / repo
        shutil.rmtree(dest, ignore_errors=True)
        write_stub_repo(inv, json.loads((out_cfg / repo / "config.json").read_text()), dest)
    # The one fully real header we have: all-MiniLM-L6-v2 (first 8+N bytes of the real file).
    mini = ROOT / "fixtures" / "models" / "sentence-transformers" / "all-MiniLM-L6-v2"
    mini.mkdir(parents=True, exist_ok=True)
    src = SHARED / "sentence-transformers" / "all-MiniLM-L6-v2"
    shutil.copy(src / "model.safetensors.header-only", mini / "model.safetensors")
    shutil.copy(src / "config.json", mini / "config.json")


# ---------------------------------------------------------------------------------------------------------------
# Quantized stubs of a tiny Llama, for layouts no checkpoint in shared/ has (GPTQ, bitsandbytes).

STUB_ORG = "hfmem-stubs"
TINY_LLAMA = {
    "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 128, "intermediate_size": 352,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
    "max_position_embeddings": 256, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}
# GPTQ needs in_features % 32 == 0 for 3-bit packing (auto_gptq QuantLinear packs 32 rows into 3 words): 352 = 11 * 32.
GPTQ_VARIANTS = [(4, 32, False), (4, -1, False), (3, 32, True), (2, 64, False), (8, 32, True)]
AWQ_VARIANTS = [(4, 32)]


def _tiny_llama():
    import torch
    import transformers

    cfg = transformers.LlamaConfig(**{k: v for k, v in TINY_LLAMA.items() if k not in ("model_type", "architectures")})
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    return model, sum(p.numel() for p in model.parameters())


def _write_stub(out_inv: Path, out_cfg: Path, name: str, tensors: list, config: dict, source: dict) -> None:
    repo = f"{STUB_ORG}/{name}"
    write_inventory(out_inv, repo, {"derived": True, "derived_with": source["generated_with"], "tensors": tensors})
    cfg_dir = out_cfg / repo
    cfg_dir.mkdir(parents=True, exist_ok=True)
    (cfg_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (cfg_dir / "SOURCE.json").write_text(json.dumps({"repo_id": repo} | source, indent=1) + "\n")
    print(f"{repo}: {len(tensors)} tensors (generated)")


def _linear_names(model) -> list[str]:
    import torch

    return [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and not n.endswith("lm_head")]


def make_quant_stubs(out_inv: Path, out_cfg: Path) -> None:
    import math

    import torch

    model, n_params = _tiny_llama()
    base = [[k, "BF16", list(v.shape), "model.safetensors"] for k, v in model.state_dict().items()]
    measured = {"unquantized_parameters": n_params, "measured_with": "sum(p.numel() for p in LlamaForCausalLM.parameters())"}
    _write_stub(out_inv, out_cfg, "tiny-llama", base, TINY_LLAMA, measured | {"generated_with": "transformers LlamaForCausalLM state_dict"})
    linears = {n: m for n, m in model.named_modules() if n in set(_linear_names(model))}

    def packed(layout: str, bits: int, group: int) -> list:
        out = []
        for k, v in model.state_dict().items():
            stem = k[: -len(".weight")]
            if stem not in linears or not k.endswith(".weight"):
                out.append([k, "BF16", list(v.shape), "model.safetensors"])
                continue
            o, i = v.shape
            g = i if group == -1 else group
            if layout == "gptq":  # auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py QuantLinear.__init__
                out += [[stem + ".qweight", "I32", [i // 32 * bits, o], "model.safetensors"],
                        [stem + ".qzeros", "I32", [math.ceil(i / g), o // 32 * bits], "model.safetensors"],
                        [stem + ".scales", "F16", [math.ceil(i / g), o], "model.safetensors"],
                        [stem + ".g_idx", "I32", [i], "model.safetensors"]]
            else:  # AutoAWQ WQLinear_GEMM: packed along out_features
                out += [[stem + ".qweight", "I32", [i, o // (32 // bits)], "model.safetensors"],
                        [stem + ".qzeros", "I32", [i // g, o // (32 // bits)], "model.safetensors"],
                        [stem + ".scales", "F16", [i // g, o], "model.safetensors"]]
        return out

    for bits, group, desc_act in GPTQ_VARIANTS:
        qc = {"quant_method": "gptq", "bits": bits, "group_size": group, "desc_act": desc_act, "sym": True,
              "checkpoint_format": "gptq"}
        _write_stub(out_inv, out_cfg, f"tiny-llama-gptq-{bits}bit-g{group}", packed("gptq", bits, group),
                    TINY_LLAMA | {"quantization_config": qc},
                    measured | {"generated_with": "AutoGPTQ QuantLinear buffer shapes (qlinear_cuda_old.py), formula"})
    for bits, group in AWQ_VARIANTS:
        qc = {"quant_method": "awq", "bits": bits, "group_size": group, "version": "gemm", "zero_point": True}
        _write_stub(out_inv, out_cfg, f"tiny-llama-awq-{bits}bit-g{group}", packed("awq", bits, group),
                    TINY_LLAMA | {"quantization_config": qc},
                    measured | {"generated_with": "AutoAWQ WQLinear_GEMM buffer shapes, formula"})
    try:
        import bitsandbytes as bnb
    except ImportError:
        print("bitsandbytes not importable: bitsandbytes stubs kept as committed")
        return
    st = {torch.uint8: "U8", torch.int8: "I8", torch.bfloat16: "BF16", torch.float32: "F32", torch.float16: "F16"}
    variants = [("nf4", True, torch.uint8), ("fp4", False, torch.uint8), ("nf4", True, torch.bfloat16), ("int8", None, None)]
    for quant_type, double, storage in variants:
        qmodel, _ = _tiny_llama()
        for name in _linear_names(qmodel):
            parent_name, _, child = name.rpartition(".")
            parent = qmodel.get_submodule(parent_name)
            lin = getattr(parent, child)
            if quant_type == "int8":
                new = bnb.nn.Linear8bitLt(lin.in_features, lin.out_features, bias=lin.bias is not None, has_fp16_weights=False)
            else:
                new = bnb.nn.Linear4bit(lin.in_features, lin.out_features, bias=lin.bias is not None,
                                        compute_dtype=torch.bfloat16, compress_statistics=double,
                                        quant_type=quant_type, quant_storage=storage)
            new.load_state_dict(lin.state_dict())
            setattr(parent, child, new.to("cpu"))  # moving to a device quantizes (bitsandbytes CPU backend)
        tensors = [[k, st[v.dtype], list(v.shape), "model.safetensors"] for k, v in qmodel.state_dict().items()]
        if quant_type == "int8":
            qc = {"quant_method": "bitsandbytes", "load_in_8bit": True, "load_in_4bit": False}
            name = "tiny-llama-bnb-int8"
        else:
            qc = {"quant_method": "bitsandbytes", "load_in_4bit": True, "load_in_8bit": False,
                  "bnb_4bit_quant_type": quant_type, "bnb_4bit_use_double_quant": double,
                  "bnb_4bit_compute_dtype": "bfloat16", "bnb_4bit_quant_storage": str(storage).replace("torch.", "")}
            name = f"tiny-llama-bnb-{quant_type}{'-dq' if double else ''}-{st[storage].lower()}"
        _write_stub(out_inv, out_cfg, name, tensors, TINY_LLAMA | {"quantization_config": qc},
                    measured | {"generated_with": f"bitsandbytes {bnb.__version__} Linear4bit/Linear8bitLt quantized on CPU, state_dict shapes"})


if __name__ == "__main__":
    main()
