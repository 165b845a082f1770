"""The command that runs the plan: `vllm serve` with the engine arguments the plan assumed (context, parallel layout,
memory utilisation, KV dtype, concurrency, precision), in the verdict, the JSON and alone with --recommend; no
command, and why, where vLLM cannot run the plan as asked. Through the installed entry point on the local Hub."""

from __future__ import annotations

import json
import shlex

import pytest
from entry import cli  # noqa: F401  (fixture)
from hub_server import RepoSpec

QWEN = "Qwen/Qwen2-7B-Instruct"


@pytest.fixture
def hub(hub_env, stub_repo):
    for repo in (QWEN, "Qwen/Qwen3-32B-AWQ", "Qwen/Qwen3-8B-FP8"):
        hub_env.add_repo(repo, RepoSpec(root=stub_repo(repo)))
    return hub_env


def _run(cli, args):
    r = cli([*args, "--format", "json"])
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    return data, data["serve"]


def _flags(argv):
    """--flag value pairs of an argv (vllm serve REPO first)."""
    assert argv[:2] == ["vllm", "serve"]
    out, i = {}, 3
    while i < len(argv):
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            out[argv[i]] = argv[i + 1]
            i += 2
        else:
            out[argv[i]] = True
            i += 1
    return out


def test_the_command_is_the_plan(cli, hub):  # noqa: F811
    data, serve = _run(cli, [QWEN, "--ctx", "32k", "--gpu", "4090"])
    inf = data["inference"]
    flags = _flags(serve["argv"])
    assert serve["argv"][2] == QWEN and flags["--revision"] == data["revision"]  # the commit hfmem read
    assert flags["--max-model-len"] == str(inf["context"]) == "32768"
    assert float(flags["--gpu-memory-utilization"]) == inf["gpu_util"]
    assert int(flags["--max-num-seqs"]) == int(inf["concurrency"]) >= 1
    assert "--tensor-parallel-size" not in flags and "--quantization" not in flags and "--kv-cache-dtype" not in flags
    assert shlex.split(serve["command"]) == serve["argv"]
    text = cli([QWEN, "--ctx", "32k", "--gpu", "4090"]).stdout.splitlines()
    assert any(line.split()[:2] == ["run", "it"] and line.endswith(serve["command"]) for line in text[:10])
    alone = cli([QWEN, "--ctx", "32k", "--gpu", "4090", "--recommend"])
    assert alone.returncode == 0 and alone.stdout == serve["command"] + "\n"


def test_not_fitting_runs_the_smallest_setup(cli, hub):  # noqa: F811
    data, serve = _run(cli, [QWEN, "--ctx", "32k", "--gpu", "3060"])
    assert data["inference"]["fits"] is False
    setup = data["smallest_setup"]
    flags = _flags(serve["argv"])
    assert flags["--tensor-parallel-size"] == str(setup["tensor_parallel"]) == "2"
    assert int(flags["--max-num-seqs"]) == int(setup["concurrency"])


def test_precisions_vllm_makes_and_ones_it_cannot(cli, hub):  # noqa: F811
    _, serve = _run(cli, [QWEN, "--ctx", "16k", "--gpu", "4090", "--dtype", "fp8", "--kv-dtype", "fp8"])
    flags = _flags(serve["argv"])
    assert flags["--quantization"] == "fp8" and flags["--kv-cache-dtype"] == "fp8"  # online dynamic FP8
    _, serve = _run(cli, [QWEN, "--ctx", "16k", "--gpu", "4090", "--dtype", "nf4"])
    assert _flags(serve["argv"])["--quantization"] == "bitsandbytes"
    _, serve = _run(cli, [QWEN, "--ctx", "16k", "--gpu", "4090", "--dtype", "int4"])
    assert serve["command"] is None and "AWQ" in serve["notes"][0]
    r = cli([QWEN, "--ctx", "16k", "--gpu", "4090", "--dtype", "int4", "--recommend"])
    assert r.returncode == 1 and r.stdout == "" and "AWQ" in r.stderr and len(r.stderr.splitlines()) == 1
    # a pre-quantized checkpoint serves as stored: vLLM reads its quantization_config
    _, serve = _run(cli, ["Qwen/Qwen3-32B-AWQ", "--ctx", "8k", "--gpu", "4090"])
    assert serve["command"] and "--quantization" not in serve["argv"]
    _, serve = _run(cli, ["Qwen/Qwen3-8B-FP8", "--ctx", "8k", "--gpu", "4090"])
    assert serve["command"] and "--quantization" not in serve["argv"]


def test_gpu_without_bf16_serves_half_and_one_without_the_kernels_gets_none(cli, hub):  # noqa: F811
    _, serve = _run(cli, [QWEN, "--ctx", "4k", "--gpu", "a100-40gb"])
    assert "--dtype" not in serve["argv"]
    _, serve = _run(cli, [QWEN, "--ctx", "4k", "--gpu", "t4"])  # compute capability 7.5: no bf16 (vLLM's _check_valid_dtype)
    assert _flags(serve["argv"])["--dtype"] == "half" and "fp16" in serve["notes"][0]
    _, serve = _run(cli, ["Qwen/Qwen3-8B-FP8", "--ctx", "4k", "--gpu", "t4"])
    assert serve["command"] is None and "cannot run" in serve["notes"][0]


def test_recommend_is_a_usage_error_without_gpu(cli, hub):  # noqa: F811
    r = cli([QWEN, "--ctx", "4k", "--recommend"])
    assert r.returncode == 2 and "--recommend" in r.stderr
