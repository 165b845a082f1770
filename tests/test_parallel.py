"""How many GPUs: --gpus N must be a tensor-parallel size vLLM accepts for the model (a usage error naming the valid
ones otherwise), and --gpus auto finds the fewest GPUs of a type that fit, with pipeline stages across nodes beyond
--gpus-per-node. Through the installed entry point on the local Hub; the truths are vLLM's refusal message for a
28-head model at TP 3 (a published user report) and published deployments of DeepSeek-V3 (FP8 weights: 8 x H100
"falls short", it runs on 8 x H200 at TP 8, and on two nodes of 8 H100s at TP 8 x PP 2)."""

from __future__ import annotations

import json

import pytest

from entry import cli  # noqa: F401  (fixture)
from hfmem.memory.parallel import tp_problem, valid_tp_sizes
from hub_server import RepoSpec

QWEN = "Qwen/Qwen2-7B-Instruct"  # 28 attention heads, 4 KV heads
DSV3 = "deepseek-ai/DeepSeek-V3"


@pytest.fixture
def hub(hub_env, stub_repo):
    def add(repo: str) -> str:
        hub_env.add_repo(repo, RepoSpec(root=stub_repo(repo)))
        return repo

    return add


def test_invalid_tp_is_a_usage_error_naming_the_valid_sizes(hub, cli):  # noqa: F811
    repo = hub(QWEN)
    out = cli([repo, "--gpu", "4090", "--gpus", "3"])
    # vLLM: "Total number of attention heads (28) must be divisible by tensor parallel size (3)."
    assert out.returncode == 2 and not out.stdout
    assert "28 attention heads are not divisible by 3" in out.stderr and "valid sizes: 1, 2, 4," in out.stderr
    # TP 7 divides the 28 heads but not into whole replicas of 4 KV heads (QKVParallelLinear's divide(7, 4) fails)
    seven = cli([repo, "--gpus", "7"])
    assert seven.returncode == 2 and "cannot hold whole replicas of 4 KV heads" in seven.stderr
    ok = cli([repo, "--gpus", "4", "--format", "json"])
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["inference"]["gpus"] == 4
    # with --train, --gpus counts data-parallel GPUs: any number
    train = cli([repo, "--gpus", "3", "--train", "lora", "--format", "json"])
    assert train.returncode == 0, train.stderr
    bad = cli([repo, "--gpus", "two"])
    assert bad.returncode == 2 and "not a number of GPUs or auto" in bad.stderr


def test_valid_sizes_follow_heads_kv_heads_and_intermediate_sizes(stub_repo):
    import hfmem

    arch = hfmem.analyze(str(stub_repo(QWEN))).architecture
    assert valid_tp_sizes(arch, 8) == [1, 2, 4]
    assert "28 attention heads" in tp_problem(arch, 8)
    assert "replicas of 4 KV heads" in tp_problem(arch, 14)  # 14 divides the heads; 14 / 4 KV-head copies does not
    assert "intermediate size 18944" in tp_problem(arch, 28)  # 28 = heads, 7 copies of the KV heads; 18944 / 28 is not whole
    falcon = hfmem.analyze(str(stub_repo("tiiuae/falcon-7b-instruct"))).architecture  # 71 heads, multi-query
    assert valid_tp_sizes(falcon, 8) == [1]


def test_auto_finds_the_fewest_gpus(hub, cli):  # noqa: F811
    repo = hub(QWEN)
    out = cli([repo, "--ctx", "32k", "--gpu", "3060", "--gpus", "auto", "--format", "json"])
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    # 14.19 GiB of BF16 weights cannot fit one 12 GB card's 10.8 GiB budget; two at TP 2 hold 7.1 GiB each
    assert data["inference"]["gpus"] == 2 and data["inference"]["fits"] is True
    assert data["smallest_setup"]["gpus"] == 2 and data["smallest_setup"]["tensor_parallel"] == 2
    assert [s["gpus"] for s in data["setups_tried"]] == [1, 2] and not data["setups_tried"][0]["fits"]
    text = cli([repo, "--ctx", "32k", "--gpu", "3060", "--gpus", "auto"])
    assert text.stdout.splitlines()[0].endswith("FITS on 2 x RTX 3060 12GB (TP 2) at 32,768 tokens x 1 (vllm, checkpoint (BF16), KV bf16)")
    needs_gpu = cli([repo, "--gpus", "auto"])
    assert needs_gpu.returncode == 2 and "--gpus auto needs --gpu" in needs_gpu.stderr


def test_deepseek_v3_needs_two_h100_nodes_and_one_h200_node(hub, cli):  # noqa: F811
    repo = hub(DSV3)
    h100 = json.loads(cli([repo, "--ctx", "4k", "--gpu", "h100", "--gpus", "auto", "--format", "json"]).stdout)
    assert h100["smallest_setup"]["tensor_parallel"] == 8 and h100["smallest_setup"]["pipeline_parallel"] == 2
    assert [s["fits"] for s in h100["setups_tried"]] == [False, False, False, False, True]  # TP 1, 2, 4, 8; then PP 2
    h200 = json.loads(cli([repo, "--ctx", "4k", "--gpu", "h200", "--gpus", "auto", "--format", "json"]).stdout)
    assert h200["smallest_setup"]["gpus"] == 8 and h200["smallest_setup"]["pipeline_parallel"] == 1
    assert h200["inference"]["gpus"] == 8 and h200["inference"]["fits"]
    # four GPUs per node: TP 4, then pipeline stages over nodes of 4
    small_nodes = json.loads(cli([repo, "--ctx", "4k", "--gpu", "h200", "--gpus", "auto", "--gpus-per-node", "4", "--format", "json"]).stdout)
    assert small_nodes["smallest_setup"]["tensor_parallel"] == 4 and small_nodes["smallest_setup"]["pipeline_parallel"] == 2
    text = cli([repo, "--ctx", "4k", "--gpu", "h100", "--gpus", "auto"]).stdout.splitlines()
    assert "FITS on 16 x H100 80GB (TP 8 x PP 2: 2 nodes of 8)" in text[0] and "upper bound" in text[1]


def test_verbose_has_the_plan_at_every_valid_tp_size(hub, cli):  # noqa: F811
    """-v adds one row per TP size vLLM accepts on one node; each row is the plan `--gpus N` makes at that size."""
    from hfmem.api import analyze

    path = "fixtures/models/Qwen/Qwen2-7B-Instruct"
    report = analyze(path, ctx="32k", gpu="3060", every_tp=True)
    rows = report.to_dict()["tp_sizes"]
    assert [r["tensor_parallel"] for r in rows] == [1, 2, 4]  # 28 heads, 4 KV heads
    for r in rows:
        alone = json.loads(cli([path, "--ctx", "32k", "--gpu", "3060", "--gpus", str(r["tensor_parallel"]),
                                "--format", "json"]).stdout)["inference"]
        assert (r["need_bytes"], r["budget_bytes"], r["fits"]) == (alone["total_bytes"], alone["budget_bytes"], alone["fits"])
    text = cli([path, "--ctx", "32k", "--gpu", "3060", "-v"]).stdout
    assert "Every tensor-parallel size vLLM accepts (one node)" in text and "4 x RTX 3060 12GB (TP 4)" in text
    assert "tp_sizes" not in json.loads(cli([path, "--ctx", "32k", "--gpu", "3060", "--format", "json"]).stdout)


def test_one_pipeline_stage_is_the_plan_itself(stub_repo):
    """A pipeline of one stage holds every layer: its per-GPU need, pool and concurrency must be the plan's at the
    same TP and GPU, term for term (vLLM's GPU defaults, the Model Runner V2 state and the CUDA-graph memory
    included), so that the stages --gpus auto adds over nodes are the plan's arithmetic, not a lighter one."""
    import hfmem
    from hfmem.memory.gpus import resolve_gpu
    from hfmem.memory.parallel import pipeline_setup
    from hfmem.memory.planner import Planner

    report = hfmem.analyze(str(stub_repo(QWEN)))
    for gpu_key, tp in (("h100", 1), ("a100-40", 2), ("3060", 2)):
        gpu = resolve_gpu(gpu_key)
        planner = Planner(report, "bf16", tp=tp)
        plan = planner.plan(32_768, 1, gpu, with_catalog=False)
        assert plan.budget_bytes is not None and plan.cudagraph_bytes  # the term the stages once left out
        stage = pipeline_setup(planner, gpu, plan.budget_bytes, 1, 32_768, 1)
        assert stage.need_bytes == plan.total_bytes, gpu_key
        assert stage.max_context == plan.max_context and stage.fits == plan.fits, gpu_key
        assert stage.concurrency == pytest.approx(plan.concurrency, rel=1e-3), gpu_key
