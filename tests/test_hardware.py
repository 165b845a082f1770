"""The GPU catalog knows what each GPU can run: no GPU is recommended (verdict, fits_on, cards, --gpus auto) for a
weight precision vLLM refuses on it. Truths: vLLM's own refusals, as users meet them: "Bfloat16 is only supported on
GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has compute capability 7.5. You can use float16
instead ... --dtype=half" (vllm/platforms/cuda.py), and the quantization methods' get_min_capability (FP8 80: a T4
cannot load FP8 weights; AWQ 75: a T4 can). Through the installed entry point."""

from __future__ import annotations

import json

from entry import cli  # noqa: F401  (fixture)

from hfmem.memory.gpus import CATALOG
from hfmem.memory.hardware import HARDWARE, can_run, runnable_precisions

LOCAL = "fixtures/models/Qwen/Qwen2-7B-Instruct"


def test_t4_refuses_fp8_runs_awq_and_bf16_as_fp16(cli):  # noqa: F811
    fp8 = cli([LOCAL, "--ctx", "32k", "--gpu", "t4", "--dtype", "fp8"])
    assert fp8.returncode == 0 and fp8.stdout.splitlines()[0].endswith("CANNOT RUN on 1 x Tesla T4 16GB (vllm, fp8, KV bf16)")
    assert "compute capability 7.5) cannot run fp8 weights in vLLM (needs 8.0)" in fp8.stdout
    check = cli(["check", LOCAL, "--ctx", "32k", "--gpu", "t4", "--dtype", "fp8"])
    assert check.returncode == 1 and "cannot run" in check.stdout  # the bytes fit (11.4 of 13.5 GiB); the chip cannot
    awq = cli([LOCAL, "--ctx", "32k", "--gpu", "t4", "--dtype", "int4", "--format", "json"])
    data = json.loads(awq.stdout)
    assert data["hardware"]["runs"] is True and data["inference"]["fits"] is True
    assert data["hardware"]["compute_capability"] == "7.5" and data["hardware"]["bf16_tflops"] is None
    bf16 = cli([LOCAL, "--ctx", "4k", "--gpu", "t4"])
    assert "runs as fp16 (vllm serve --dtype half)" in bf16.stdout


def test_fits_on_and_cards_never_recommend_a_gpu_that_cannot_run_it(cli):  # noqa: F811
    out = json.loads(cli([LOCAL, "--ctx", "64k", "--dtype", "fp8", "--format", "json"]).stdout)["inference"]
    rows = {r["gpu"]: r for r in out["fits_on"]}
    # FP8 Qwen2-7B at 64k: a T4's 13.8 GiB budget holds the bytes (1.6 GiB to spare), a 3060's 11.0 GiB does not
    assert not rows["t4"]["fits"] and rows["t4"]["margin_bytes"] > 0 and not rows["rtx3060"]["fits"]
    assert any("t4 hold the bytes but cannot run fp8" in n for n in out["notes"])
    card = json.loads(cli(["card", LOCAL, "--ctx", "64k", "--precisions", "fp8,int4", "--no-training", "--format", "json"]).stdout)
    smallest = {c["precision"]: c["smallest_gpu"] for c in card["inference"]}
    assert smallest["fp8"] == "RTX 4060 Ti 16GB"  # not the T4 (15 GiB) that holds the bytes
    assert smallest["int4"] == "RTX 3060 12GB"


def test_catalog_capabilities_are_consistent():
    assert {g.key for g in CATALOG if g.kind != "apple"} == set(HARDWARE)
    for key, hw in HARDWARE.items():
        assert hw.bandwidth_gbs and hw.source
        if hw.sm is not None and hw.sm < 89:
            assert hw.fp8_tflops is None, key  # FP8 tensor cores arrive with Ada (8.9) and Hopper (9.0)
        if hw.sm is not None and hw.sm < 80:
            assert hw.bf16_tflops is None, key
        if hw.fp8_tflops:
            assert abs(hw.fp8_tflops / hw.bf16_tflops - 2) < 0.03, key  # FP8 tensor rate is twice bf16's (datasheets round)
    t4 = next(g for g in CATALOG if g.key == "t4")
    assert runnable_precisions(t4) == ["fp32", "bf16", "int8", "nf4", "nf4-nodq", "int4", "gptq", "q8_0", "q6_k", "q5_k_m", "q4_k_m"]
    a100 = next(g for g in CATALOG if g.key == "a100-80gb")
    assert can_run(a100, "fp8")[0] and "Marlin" in can_run(a100, "fp8")[1]
    mac = next(g for g in CATALOG if g.kind == "apple")
    assert not can_run(mac, "int4")[0] and can_run(mac, "q4_k_m")[0]


def test_gpus_auto_finds_no_setup_of_a_gpu_that_cannot_run_it(cli):  # noqa: F811
    out = cli([LOCAL, "--ctx", "32k", "--gpu", "t4", "--dtype", "fp8", "--gpus", "auto", "--format", "json"])
    data = json.loads(out.stdout)
    assert out.returncode == 0 and data["smallest_setup"] is None and data["hardware"]["runs"] is False
