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
]
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
}
STUB_FOLDERS = ["Qwen/Qwen2-7B-Instruct"]
# Config-only fixtures (no inventory): used by the KV-cache tests (tests/test_kv_truth.py, tests/test_kv_vllm.py).
CONFIG_ONLY = ["nvidia/Nemotron-H-56B-Base-8K", "openai/gpt-oss-120b", "Qwen/Qwen3-235B-A22B"]


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
    for name, dtype, shape, _ in tensors:
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


def main() -> None:
    out_inv = ROOT / "fixtures" / "inventories"
    out_cfg = ROOT / "fixtures" / "configs"
    for repo in FROM_HEADERS + list(DERIVED):
        inv = inventory_from_header(repo) if repo in FROM_HEADERS else inventory_derived(repo, DERIVED[repo])
        dest = out_inv / f"{repo}.json.gz"
        dest.parent.mkdir(parents=True, exist_ok=True)
        with gzip.GzipFile(dest, "wb", mtime=0) as fh:
            fh.write(json.dumps(inv, separators=(",", ":")).encode())
        cfg_dir = out_cfg / repo
        cfg_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy(SHARED / repo / "config.json", cfg_dir / "config.json")
        shutil.copy(SHARED / repo / "SOURCE.json", cfg_dir / "SOURCE.json")
        print(f"{repo}: {len(inv['tensors'])} tensors{' (derived)' if inv['derived'] else ''}")
    copy_configs(CONFIG_ONLY)
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


if __name__ == "__main__":
    main()
