"""llama.cpp partial offload of GGUF files: what -ngl L puts on the GPU (weights, KV, compute buffer) and in RAM,
checked against llama.cpp's own load logs; the -ngl that fits and the llama-server command through the installed
entry point on the local Hub.

Each row is a published llama.cpp log: the file's tensor list is rebuilt (tests/gguf_stub.py) and tied to the log by
its type counts, the placement is the log's own ("offloading N repeating layers", output on or off the GPU), and
hfmem's figures are compared with the logged buffer sizes (MiB with two decimals)."""

from __future__ import annotations

import json
import shlex
from collections import Counter

import pytest
from entry import cli  # noqa: F401  (fixture)
from gguf_stub import llama_q4_k_m
from hub_server import RepoSpec

from hfmem.gguf.model import architecture_from_metadata
from hfmem.gguf.offload import FIT_TARGET, gpu_bytes_at, layer_bytes, placement
from hfmem.gguf.reader import read_local_gguf
from hfmem.memory.kv.llamacpp import llamacpp_memory

MiB = 2**20

# A row: id, source, model shape, logged type counts, n_ctx, sequences, cache type, n_ubatch, flash_attn, repeating
# layers on the GPU, output on the GPU, and the logged MiB: GPU model buffer, CPU model buffer (None: the log's
# figure is the mmap span, not the CPU tensors), GPU KV buffer, GPU compute buffer.
LLAMA3_8B = dict(vocab=128256)
MISTRAL_7B = dict(vocab=32000)
QWEN25_7B = dict(vocab=152064, n_layer=28, embd=3584, heads=28, kv_heads=4, ff=18944, ctx=32768, arch="qwen2")
LLAMA_TYPES = {"F32": 65, "Q4_K": 193, "Q6_K": 33}
QWEN_TYPES = {"F32": 141, "Q4_K": 169, "Q6_K": 29}
ROWS = {
    "llama3-8b-ctx512": ("llama-cpp-python log of llama-3-Korean-Bllossom-8B-Q4_K_M.gguf (mradermacher), RTX 3070, "
                         "'offloaded 33/33 layers to GPU'", LLAMA3_8B, LLAMA_TYPES, 512, 1, "f16", 512, False, 32, True,
                         (4403.49, 281.81, 64.00, 258.50)),
    "llama3.1-8b-ctx8k-nofa": ("ollama log (llama_new_context_with_model: n_seq_max 4, n_ctx 8192, flash_attn 0), "
                               "Llama 3.1 8B Q4_K_M, 33/33 layers", LLAMA3_8B, LLAMA_TYPES, 8192, 1, "f16", 512, False,
                               32, True, (4403.49, 281.81, 1024.00, 560.00)),
    "mistral-7b-ngl20": ("Tel-Zur, 'A GPU-Accelerated RAG-Based Telegram Assistant...', EduHPC25, arXiv 2509.11947: "
                         "mistral-7b-instruct-v0.1.Q4_K_M.gguf, n_gpu_layers 20 ('offloading 20 repeating layers', layer "
                         "32 = output on CPU), n_ctx 768, n_ubatch 256, flash_attn 1", MISTRAL_7B, LLAMA_TYPES, 768, 1,
                         "f16", 256, True, 20, False, (2495.31, None, 60.00, 137.79)),
    "qwen2.5-7b-ctx4k": ("ollama runner log (llama_context, 2026-05), Qwen2.5-7B Q4_K_M, 29/29 layers, n_ctx 4096, "
                         "Flash Attention auto -> enabled", QWEN25_7B, QWEN_TYPES, 4096, 1, "f16", 512, True, 28, True,
                         (4168.09, 292.36, 224.00, 304.00)),
    "qwen2.5-7b-ctx32k": ("the same ollama runner log at n_ctx 32768", QWEN25_7B, QWEN_TYPES, 32768, 1, "f16", 512, True,
                          28, True, (4168.09, 292.36, 1792.00, 382.01)),
    "qwen2.5-7b-q8kv-4slots": ("llama-server -c 16384 -ngl 99 -ctk q8_0 -ctv q8_0 -lv 4 (captured 2026-09-16, "
                               "Qwen2.5-7B-Instruct-Q4_K_M.gguf; n_parallel auto = 4, kv_unified, flash_attn forced on "
                               "for the quantized V cache, sched_reserve)", QWEN25_7B, None, 16384, 4, "q8_0", 512, True,
                               28, True, (4168.09, None, 476.00, 148.09)),
    "llama3.1-8b-ctx16k-vulkan": ("ik_llama.cpp discussion, mainline llama.cpp Vulkan build (Vulkan0 buffers), Llama "
                                  "3.1 8B Instruct Q4_K (a different quant mix: its model buffer is not compared), "
                                  "n_ctx 16384, n_ubatch 1024, flash_attn 1, 33/33 layers", LLAMA3_8B, None, 16384, 1,
                                  "f16", 1024, True, 32, True, (None, 281.81, 2048.00, 613.01)),
}
# Compute-buffer rows hfmem's estimate misses, with the measured ratio (logged / hfmem) and why.
COMPUTE_MISSES = {
    "qwen2.5-7b-q8kv-4slots": "logged 148.09 MiB vs hfmem 352.00 (ratio 0.42): this newer build (sched_reserve) "
                              "reserves the graph with fewer outputs than n_ubatch, so the logits term is far smaller; "
                              "hfmem's all-outputs term is an upper bound there",
}


def _setup(tmp_path, shape):
    path = llama_q4_k_m(tmp_path / "m-Q4_K_M.gguf", name="stub", **shape)
    header = read_local_gguf(path)
    arch = architecture_from_metadata(header.metadata, header.array_lengths)
    return header, arch


def _row(tmp_path, key):
    _, shape, types, n_ctx, seqs, cache, ub, fa, on, out, logged = ROWS[key]
    header, arch = _setup(tmp_path, shape)
    if types is not None:  # the log's "llama_model_loader: - type" lines
        assert dict(Counter(t.ggml_type for t in header.tensors)) == types
    lb = layer_bytes(header, arch["num_layers"])
    mem = llamacpp_memory(arch, n_ctx, seqs, cache, kv_unified=True, flash_attn=fa, n_ubatch=ub)
    b = gpu_bytes_at(lb, mem["per_layer"], arch, header.metadata, layers_on_gpu=on, output_on_gpu=out, n_kv=n_ctx,
                     n_ubatch=ub, flash_attn=fa)
    return b, logged


@pytest.mark.parametrize("key", ROWS)
def test_model_and_kv_buffers_match_llamacpp_logs(tmp_path, key):
    b, (gpu_model, cpu_model, gpu_kv, _) = _row(tmp_path, key)
    if gpu_model is not None:
        assert b["gpu_model"] / MiB == pytest.approx(gpu_model, rel=0.01)
        assert round(b["gpu_model"] / MiB, 2) == gpu_model  # in fact to the printed digit
    if cpu_model is not None:
        assert round(b["ram_model"] / MiB, 2) == cpu_model
    assert b["gpu_kv"] / MiB == gpu_kv


@pytest.mark.parametrize("key", [pytest.param(k, marks=pytest.mark.xfail(strict=True, reason=COMPUTE_MISSES[k]))
                                 if k in COMPUTE_MISSES else k for k in ROWS])
def test_compute_buffer_matches_llamacpp_logs(tmp_path, key):
    """Within 5 %: ggml_gallocr's best-fit placement can leave gaps hfmem does not simulate, and fills some (the
    passing rows are -3 % to +5 % off)."""
    b, (_, _, _, compute) = _row(tmp_path, key)
    assert b["compute"]["total"] / MiB == pytest.approx(compute, rel=0.05)


def test_partial_offload_ram_side(tmp_path):
    """The ngl-20 row's CPU side: its 36 MiB CPU KV buffer is the 12 CPU layers' cache; the logged 4165.37 MiB
    CPU_Mapped buffer is the mmap span from token_embd to output (the whole file), of which hfmem counts the CPU
    tensors (token_embd, 12 layers, output), all of them inside that span."""
    header, arch = _setup(tmp_path, MISTRAL_7B)
    lb = layer_bytes(header, 32)
    mem = llamacpp_memory(arch, 768, 1, "f16", kv_unified=True, flash_attn=True, n_ubatch=256)
    b = gpu_bytes_at(lb, mem["per_layer"], arch, header.metadata, layers_on_gpu=20, output_on_gpu=False, n_kv=768,
                     n_ubatch=256, flash_attn=True)
    assert b["ram_kv"] / MiB == 36.00
    assert b["ram_model"] < 4165.37 * MiB <= header.weight_bytes + header.header_bytes


def test_tied_output_is_a_gpu_copy_of_token_embd(tmp_path):
    """Llama 3.2 3B Q4_K_M (tied embeddings, no output.weight): llama.cpp loads token_embd for the input (RAM) and a
    duplicate as the output matrix on the GPU. Logged, 29/29 layers: CUDA0 model buffer 1918.35 MiB (ollama
    llama3.2:latest, RTX 5050; koboldcpp's log the same; another build 1918.36), CPU_Mapped 308.23 MiB (ramalama
    troubleshooting notes). Within 1 %: hfmem's 1918.33 lacks the buffer's per-tensor alignment padding."""
    header, arch = _setup(tmp_path, dict(vocab=128256, n_layer=28, embd=3072, heads=24, kv_heads=8, ff=8192, tied=True))
    lb = layer_bytes(header, 28)
    assert any("tied output" in n for n in lb.notes)
    b = gpu_bytes_at(lb, [0] * 28, arch, header.metadata, layers_on_gpu=28, output_on_gpu=True, n_kv=4096,
                     n_ubatch=512, flash_attn=True)
    assert b["gpu_model"] / MiB == pytest.approx(1918.35, rel=0.01)
    assert round(b["ram_model"] / MiB, 2) == 308.23
    assert b["gpu_model"] - sum(lb.layers) > 308 * MiB  # without the duplicate it would be 1610 MiB


def test_ngl_placement_rules():
    # current llama.cpp: i_gpu_start = max(n_layer + 1 - ngl, 0), the output layer first
    assert placement(32, 0) == (0, False)
    assert placement(32, 1) == (0, True)
    assert placement(32, 20) == (19, True)
    assert placement(32, 33) == (32, True) == placement(32, 99)
    # older builds: i_gpu_start = n_layer - ngl, the output with -ngl > n_layer (the ngl-20 row's log)
    assert placement(32, 20, output_first=False) == (20, False)
    assert placement(32, 33, output_first=False) == (32, True)


@pytest.fixture
def gguf_hub(hub_env, tmp_path):
    repo = tmp_path / "llama"
    repo.mkdir()
    llama_q4_k_m(repo / "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", name="Llama 3.1 8B", vocab=128256)
    hub_env.add_repo("org/Llama-3.1-8B-GGUF", RepoSpec(root=repo))
    return hub_env


REPO = "org/Llama-3.1-8B-GGUF"
FILE = "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"


def _json(cli, *args):  # noqa: F811
    r = cli([REPO, "--quant", "Q4_K_M", *args, "--format", "json"])
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_whole_model_fits_a_4090(cli, gguf_hub):  # noqa: F811
    data = _json(cli, "--ctx", "8k", "--gpu", "4090")
    off = data["gpu_offload"]
    assert off["full_offload"] and off["fits"] and off["ngl"] == 33 == off["n_layer"] + 1
    assert round(off["gpu"]["model_bytes"] / MiB, 2) == 4403.49  # the logged CUDA0 model buffer of this file
    assert off["gpu"]["kv_bytes"] == 1024 * MiB  # the logged CUDA0 KV buffer at n_ctx 8192
    assert round(off["ram"]["model_bytes"] / MiB, 2) == 281.81 and off["ram"]["kv_bytes"] == 0  # token_embd only
    assert off["flash_attn"] is True  # llama-server's default (auto: on where supported)
    assert data["serve"]["argv"] == ["llama-server", "-m", FILE, "-c", "8192", "-ngl", "33"]


def test_partial_offload_on_a_small_gpu(cli, gguf_hub):  # noqa: F811
    data = _json(cli, "--ctx", "8k", "--gpu", "4GB")
    off = data["gpu_offload"]
    assert off["fits"] and not off["full_offload"] and 1 < off["ngl"] < 33
    assert off["layers_on_gpu"] == off["ngl"] - 1 and off["output_on_gpu"]
    assert off["budget_bytes"] == 4 * 2**30 - FIT_TARGET
    assert off["gpu"]["total_bytes"] <= off["budget_bytes"]
    # one more layer (its weights + its 32 MiB of KV at 8k) would not fit: the ngl is the largest that does
    per_layer = (off["gpu"]["model_bytes"] - 430940160 - 16384) / off["layers_on_gpu"]  # less the output layer
    assert off["gpu"]["total_bytes"] + per_layer + 32 * MiB > off["budget_bytes"]
    # what stays in RAM: token_embd and the other layers, and their KV
    assert off["ram"]["kv_bytes"] == (32 - off["layers_on_gpu"]) * 32 * MiB
    total = data["parameters"]["weight_bytes"]
    assert off["ram"]["model_bytes"] + off["gpu"]["model_bytes"] == total
    assert data["serve"]["argv"][-2:] == ["-ngl", str(off["ngl"])]
    assert "partial offload" in data["serve"]["notes"][0]
    text = cli([REPO, "--quant", "Q4_K_M", "--ctx", "8k", "--gpu", "4GB"]).stdout.splitlines()
    assert text[0].startswith(f"{REPO}: PARTIAL OFFLOAD on 4GB") and f"-ngl {off['ngl']}" in text[0]
    assert any(line.split()[:2] == ["run", "it"] and line.endswith(data["serve"]["command"]) for line in text[:6])
    assert any(line.split()[:2] == ["in", "RAM"] for line in text[:6])


def test_recommend_quantized_cache(cli, gguf_hub):  # noqa: F811
    r = cli([REPO, "--quant", "Q4_K_M", "--ctx", "32k", "--gpu", "3060", "--kv-dtype", "q8_0", "--recommend"])
    assert r.returncode == 0, r.stderr
    argv = shlex.split(r.stdout)
    assert argv[:5] == ["llama-server", "-m", FILE, "-c", "32768"]
    flags = dict(zip(argv[5::2], argv[6::2]))
    assert flags["--cache-type-k"] == flags["--cache-type-v"] == "q8_0" and flags["-fa"] == "on"
    data = _json(cli, "--ctx", "32k", "--gpu", "3060", "--kv-dtype", "q8_0")
    assert flags["-ngl"] == str(data["gpu_offload"]["ngl"]) and data["gpu_offload"]["cache_type"] == "q8_0"
    # q8_0 halves the KV (34 bytes per 32 values instead of 64): at 32k the f16 plan holds fewer layers
    f16 = _json(cli, "--ctx", "32k", "--gpu", "3060")["gpu_offload"]
    assert f16["gpu"]["kv_bytes"] / f16["layers_on_gpu"] == 128 * MiB
    assert data["gpu_offload"]["gpu"]["kv_bytes"] / data["gpu_offload"]["layers_on_gpu"] == 128 * MiB * 34 // 64
    assert f16["ngl"] <= data["gpu_offload"]["ngl"]


def test_batch_is_parallel_slots(cli, gguf_hub):  # noqa: F811
    data = _json(cli, "--ctx", "4k", "--batch", "4", "--gpu", "4090")
    assert data["serve"]["argv"][3:5] == ["-c", "16384"] and data["serve"]["argv"][-2:] == ["-np", "4"]
    assert data["gpu_offload"]["gpu"]["kv_bytes"] == 2048 * MiB


def test_gguf_gpu_usage_errors(cli, gguf_hub):  # noqa: F811
    r = cli([REPO, "--quant", "Q4_K_M", "--ctx", "8k", "--gpu", "4090", "--gpus", "2"])
    assert r.returncode == 2 and "one GPU" in r.stderr and "Traceback" not in r.stderr
    r = cli([REPO, "--quant", "Q4_K_M", "--gpu", "4090", "--recommend"])
    assert r.returncode == 2 and "--ctx" in r.stderr


def test_brief_and_download_note(cli, gguf_hub):  # noqa: F811
    r = cli([REPO, "--quant", "Q4_K_M", "--ctx", "8k", "--gpu", "4090", "--brief"])
    assert r.returncode == 0 and r.stdout.count("\n") == 1 and r.stdout.startswith(f"{REPO}: FITS on RTX 4090")
    data = _json(cli, "--ctx", "8k", "--gpu", "4090")
    assert f"hf download {REPO} {FILE} --revision {data['revision']}" in data["serve"]["notes"][-1]
