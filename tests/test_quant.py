"""Quantized checkpoints: logical parameter counts, overhead bytes, schemes and config/tensor cross-checks.

Truths used: the unquantized sibling checkpoint (real headers), counts computed from config.json (not from the
tensors hfmem reads), and, for the generated GPTQ/AWQ/bitsandbytes stubs, the parameter count torch measured on
the unquantized tiny model (recorded in each stub's SOURCE.json by scripts/make_fixtures.py). The bitsandbytes
stubs hold the state_dict shapes bitsandbytes 0.50.2 itself produced when quantizing on CPU.
"""

from __future__ import annotations

import copy
import json
import re
import time
from functools import lru_cache

import pytest

import hfmem
from hfmem.api import analyze_files
from hfmem.hub.header import FileHeader, TensorEntry
from hfmem.model.inventory import count_tensors, summarize
from hfmem.model.quant import packed_linear_geometry
from stubs import DTYPE_BITS, FIXTURES, load_config, load_inventory, model_files

STUBS = "hfmem-stubs"


@lru_cache(maxsize=None)
def report(repo: str):
    return analyze_files(model_files(repo))


def stub_truth(name: str) -> int:
    return json.loads((FIXTURES / "configs" / STUBS / name / "SOURCE.json").read_text())["unquantized_parameters"]


# ---------------------------------------------------------------------------------------------------------------
# Real checkpoints against their unquantized siblings


SIBLINGS = [
    # quantized, unquantized sibling, exact logical total
    ("Qwen/Qwen3-8B-FP8", "Qwen/Qwen3-8B", 8_190_735_360),
    ("Qwen/Qwen3-32B-AWQ", "Qwen/Qwen3-32B", 32_762_123_264),
    ("openai/gpt-oss-20b", "unsloth/gpt-oss-20b-BF16", 20_914_757_184),
    ("TheBloke/Llama-2-7B-AWQ", "meta-llama/Llama-2-7b-hf", 6_738_415_616),
    # same architecture as Qwen3-30B-A3B (KerasHub qwen3_moe_30b_a3b_en: 30,532,122,624)
    ("Qwen/Qwen3-30B-A3B-Thinking-2507-FP8", "Qwen/Qwen3-Coder-30B-A3B-Instruct", 30_532_122_624),
]


@pytest.mark.parametrize("quantized,sibling,expected", SIBLINGS)
def test_logical_total_equals_unquantized_sibling(quantized, sibling, expected):
    q, u = report(quantized).parameters, report(sibling).parameters
    assert q.total == u.total == expected
    assert q.by_component == u.by_component  # same split, component by component
    assert q.quantization.quantized_parameters + q.quantization.unquantized_parameters == q.total
    assert q.quantization.overhead_bytes > 0
    assert q.stored_elements < q.total or q.quantization.bits == 8  # peers' stored-element count is wrong


def test_awq_scheme_and_geometry_llama2():
    q = report("TheBloke/Llama-2-7B-AWQ").parameters.quantization.to_dict()
    assert (q["method"], q["bits"], q["group_size"]) == ("awq", 4, 128)
    assert q["layout"].startswith("awq") and q["bits_from_shapes"] == 4 and q["group_size_from_shapes"] == 128
    # Llama-2-7B's Linear shapes (config: hidden 4096, intermediate 11008, 32 layers): q/k/v/o, gate/up, down
    shapes = {(m["in_features"], m["out_features"]): m["count"] for m in q["linears"]}
    assert shapes == {(4096, 4096): 4 * 32, (4096, 11008): 2 * 32, (11008, 4096): 32}
    # overhead = qzeros (I32, in/128 x out/8) + scales (F16, in/128 x out) per linear
    expected = sum(n * ((i // 128) * (o // 8) * 4 + (i // 128) * o * 2) for (i, o), n in shapes.items())
    assert q["overhead_bytes"] == expected == 126_484_480


def test_fp8_block_scales_are_overhead():
    p = report("Qwen/Qwen3-8B-FP8").parameters
    q = p.quantization.to_dict()
    assert q["weight_block_size"] == [128, 128] and q["formats"] == {"fp8_e4m3": q["quantized_parameters"]}
    # one weight_scale_inv [ceil(out/128), ceil(in/128)] per Linear: stored elements minus logical = scale elements
    inv = load_inventory("Qwen/Qwen3-8B-FP8")["tensors"]
    scales = [(s, d) for n, d, s, _ in inv if n.endswith("weight_scale_inv")]
    assert p.stored_elements - p.total == sum(_numel(s) for s, _ in scales) == 8_191_159_296 - 8_190_735_360
    assert q["overhead_bytes"] == sum(_numel(s) * DTYPE_BITS[d] // 8 for s, d in scales)
    assert q["scales"] == {"block 128x128": len(scales)}


def test_fp8_block_size_disagreement_warns():
    r = analyze_files(_files_with("Qwen/Qwen3-8B-FP8", lambda c: c["quantization_config"].update(weight_block_size=[64, 64])))
    assert any("weight_block_size [64, 64] but weight scales are block ~128x128" in w for w in r.warnings), r.warnings
    assert report("Qwen/Qwen3-8B-FP8").warnings == []


def test_deepseek_v3_fp8_counts_and_mtp():
    p = report("deepseek-ai/DeepSeek-V3").parameters
    assert p.total == 684_489_845_504 and p.inference_loaded == 671_026_419_200  # 671,026,419,200 + an MTP layer
    assert p.quantization.method == "fp8" and set(p.quantization.formats) == {"fp8_e4m3"}


def test_mxfp4_gpt_oss_20b():
    p = report("openai/gpt-oss-20b").parameters
    q = p.quantization.to_dict()
    assert (q["method"], q["bits"], q["group_size"]) == ("mxfp4", 4, 32)
    assert q["formats"] == {"mxfp4": 19_110_297_600}
    # scales: one U8 per 32 values
    assert q["overhead_bytes"] == 19_110_297_600 // 32


def test_mxfp8_minimax_m3_experts_from_config():
    r = report("MiniMaxAI/MiniMax-M3-MXFP8")
    p, cfg = r.parameters, load_config("MiniMaxAI/MiniMax-M3-MXFP8")["text_config"]
    q = p.quantization.to_dict()
    assert (q["method"], q["bits"], q["group_size"]) == ("mxfp8", 8, 32)
    assert set(q["formats"]) == {"mxfp8"}
    per_layer = cfg["num_local_experts"] * 3 * cfg["intermediate_size"] * cfg["hidden_size"]
    assert p.by_component["moe_experts"] == 57 * per_layer  # 3 dense layers + 57 MoE layers stored
    assert q["overhead_bytes"] == q["quantized_parameters"] // 32  # one U8 scale per 32 FP8 values
    assert not any("quantization" in w for w in r.warnings)


def test_deepseek_v4_mixed_fp8_and_fp4_experts():
    r = report("deepseek-ai/DeepSeek-V4-Flash")
    p, cfg = r.parameters, load_config("deepseek-ai/DeepSeek-V4-Flash")
    h, inter, experts, layers = cfg["hidden_size"], cfg["moe_intermediate_size"], cfg["n_routed_experts"], cfg["num_hidden_layers"]
    # routed experts are I8 holding two FP4 values per byte (scale per 32 values covers twice the stored width)
    assert p.by_component["moe_experts"] == layers * experts * 3 * inter * h
    assert set(p.quantization.formats) == {"fp8_e4m3", "mxfp4"}
    assert any("says fp8" in w and "mxfp4" in w for w in r.warnings)  # config only says fp8: cross-check warns
    assert round(p.inference_loaded / 1e9) == 284  # DeepSeek's announced 284B total
    assert p.buffers == 3 * 129280 * 6  # the hash-routing tid2eid tables are I64 lookup tables, not parameters


def test_compressed_tensors_float_quantized_glm45():
    r = report("zai-org/GLM-4.5-FP8")
    p = r.parameters
    q = p.quantization.to_dict()
    assert q["method"] == "compressed-tensors" and q["format"] == "float-quantized" and q["bits"] == 8
    inv = load_inventory("zai-org/GLM-4.5-FP8")["tensors"]
    aux = sum(_numel(s) for n, _, s, _ in inv if n.endswith(("weight_scale", "input_scale")))
    assert p.stored_elements - p.total == aux  # channel scales are bookkeeping, weights 1:1
    ignored = set(load_config("zai-org/GLM-4.5-FP8")["quantization_config"]["ignore"])
    unq = sum(_numel(s) for n, d, s, _ in inv if d in ("BF16", "F32") and not n.endswith(("_scale",)))
    assert q["unquantized_parameters"] == unq
    assert all(d != "F8_E4M3" for n, d, _, _ in inv if n.rsplit(".", 1)[0] in ignored)
    assert not [w for w in r.warnings if "quantiz" in w]


def _kimi_layers(repo: str, keep: int) -> int:
    """Language-model parameters of layers < keep, embeddings, norm and head (vision tower and projector left out)."""
    r = analyze_files(model_files(repo, tensors=[t for t in load_inventory(repo)["tensors"] if _keep(t[0], keep)]))
    return r.parameters.by_part["language_model"], r


def _keep(name: str, keep: int) -> bool:
    m = re.search(r"(?:^|\.)layers\.(\d+)\.", name)
    return m is None or int(m.group(1)) < keep


def test_compressed_tensors_pack_quantized_kimi_k25_matches_k2_fp8():
    # Kimi-K2.5 (INT4 pack-quantized experts, I32 containers) and Kimi-K2 (FP8) share the language model.
    k25, r25 = _kimi_layers("moonshotai/Kimi-K2.5", 3)
    k2, _ = _kimi_layers("moonshotai/Kimi-K2-Instruct", 3)
    assert k25 == k2
    q = r25.parameters.quantization.to_dict()
    assert (q["method"], q["bits"], q["group_size"], q["format"]) == ("compressed-tensors", 4, 32, "pack-quantized")
    assert q["formats"] == {"int4": r25.parameters.by_component["moe_experts"]}  # only routed experts are packed
    assert not [w for w in r25.warnings if "weight_packed" in w or "ignore" in w]


def test_compressed_tensors_mxfp4_pack_kimi_k3_experts_from_config():
    r = report("moonshotai/Kimi-K3")  # inventory truncated to layers 0-2 (layer 0 dense)
    cfg = load_config("moonshotai/Kimi-K3")["text_config"]
    per_layer = cfg["num_experts"] * 3 * cfg["moe_intermediate_size"] * cfg["routed_expert_hidden_size"]
    q = r.parameters.quantization.to_dict()
    assert q["formats"] == {"mxfp4": 2 * per_layer}
    assert r.parameters.by_component["moe_experts"] == 2 * per_layer


# ---------------------------------------------------------------------------------------------------------------
# Generated stubs (GPTQ/AWQ formulas; bitsandbytes' real CPU serialisation)

GPTQ = ["tiny-llama-gptq-4bit-g32", "tiny-llama-gptq-4bit-g-1", "tiny-llama-gptq-3bit-g32", "tiny-llama-gptq-2bit-g64",
        "tiny-llama-gptq-8bit-g32", "tiny-llama-awq-4bit-g32"]
BNB = ["tiny-llama-bnb-nf4-dq-u8", "tiny-llama-bnb-fp4-u8", "tiny-llama-bnb-nf4-dq-bf16", "tiny-llama-bnb-int8"]
TINY_LINEARS = {(128, 128): 4, (128, 64): 4, (128, 352): 4, (352, 128): 2}  # q,o / k,v / gate,up / down, 2 layers


@pytest.mark.parametrize("name", GPTQ)
def test_gptq_awq_stubs_exact(name):
    r = report(f"{STUBS}/{name}")
    q = r.parameters.quantization.to_dict()
    assert r.parameters.total == stub_truth(name) == report(f"{STUBS}/tiny-llama").parameters.total
    bits, group = (int(x) for x in re.match(r".*-(\d)bit-g(-?\d+)", name).groups())
    layout = "awq" if "awq" in name else "gptq"
    assert (q["bits"], q["bits_from_shapes"], q["group_size_from_shapes"]) == (bits, bits, group)
    assert q["layout"].startswith(layout)
    assert {(m["in_features"], m["out_features"]): m["count"] for m in q["linears"]} == TINY_LINEARS
    assert r.warnings == []


@pytest.mark.parametrize("name", BNB)
def test_bitsandbytes_stubs_exact(name):
    r = report(f"{STUBS}/{name}")
    q = r.parameters.quantization.to_dict()
    assert r.parameters.total == stub_truth(name)
    assert q["quantized_parameters"] == sum(i * o * n for (i, o), n in TINY_LINEARS.items())
    if "int8" in name:
        assert q["method"] == "bitsandbytes-8bit"
    else:
        assert q["method"] == "bitsandbytes-4bit" and q["blocksize_from_shapes"] == 64
        assert q["quant_type_from_tensors"] == name.split("-")[3]
    assert r.warnings == []


def test_bitsandbytes_live_quantization_matches_stub():
    """When bitsandbytes is importable, quantize a Linear now and compare with what the stub layout assumes."""
    torch = pytest.importorskip("torch")
    bnb = pytest.importorskip("bitsandbytes")
    lin = bnb.nn.Linear4bit(100, 40, compress_statistics=True, quant_type="nf4", quant_storage=torch.uint8)
    lin.load_state_dict(torch.nn.Linear(100, 40).state_dict())
    sd = lin.to("cpu").state_dict()
    entries = [TensorEntry(k, {torch.uint8: "U8", torch.float32: "F32"}[v.dtype], tuple(v.shape), v.numel(),
                           v.numel() * v.element_size(), "m") for k, v in sd.items()]
    config = {"quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": True,
                                      "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True}}
    counted, scheme, _ = count_tensors([FileHeader("m", tuple(entries), {})], config, 1)
    assert summarize(counted, scheme, []).total == 100 * 40 + 40


def test_mlx_and_mixed_compressed_tensors_groups():
    """Two layouts written from their documented formats onto the tiny Llama (see quant.py for the sources)."""
    base = load_inventory(f"{STUBS}/tiny-llama")["tensors"]
    truth = stub_truth("tiny-llama")
    mlx, ct = [], []
    for name, dtype, shape, f in base:
        stem = name[: -len(".weight")]
        if len(shape) == 2 and name.endswith(".weight"):
            o, i = shape
            mlx += [[name, "U32", [o, i * 4 // 32], f], [stem + ".scales", "BF16", [o, i // 32], f],
                    [stem + ".biases", "BF16", [o, i // 32], f]]
        else:
            mlx.append([name, dtype, shape, f])
        if len(shape) == 2 and name.endswith("proj.weight"):
            o, i = shape
            bits = 8 if "self_attn" in name else 4
            ct += [[stem + ".weight_packed", "I32", [o, i * bits // 32], f], [stem + ".weight_scale", "BF16", [o, i // 32], f],
                   [stem + ".weight_shape", "I64", [2], f]]
        else:
            ct.append([name, dtype, shape, f])
    cfg = load_config(f"{STUBS}/tiny-llama")
    r = analyze_files(model_files(f"{STUBS}/tiny-llama", cfg | {"quantization": {"bits": 4, "group_size": 32}}, mlx))
    assert r.parameters.total == truth and r.parameters.quantization.method == "mlx" and r.warnings == []
    groups = {
        "attn": {"targets": ["re:.*self_attn\\..*"], "weights": {"num_bits": 8, "group_size": 32, "type": "int", "strategy": "group"}},
        "rest": {"targets": ["Linear"], "weights": {"num_bits": 4, "group_size": 32, "type": "int", "strategy": "group"}},
    }
    qc = {"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": groups, "ignore": ["lm_head"]}
    r = analyze_files(model_files(f"{STUBS}/tiny-llama", cfg | {"quantization_config": qc}, ct))
    q = r.parameters.quantization.to_dict()
    assert r.parameters.total == truth and q["bits"] is None  # mixed 8/4-bit groups
    assert q["formats"] == {"int8": 2 * 2 * (128 * 128 + 128 * 64), "int4": 2 * 3 * 128 * 352}
    assert r.warnings == []


# ---------------------------------------------------------------------------------------------------------------
# Cross-checks: config vs tensors


def _files_with(repo: str, edit) -> object:
    cfg = copy.deepcopy(load_config(repo))
    edit(cfg)
    return model_files(repo, cfg)


def test_no_quantization_config_detected_from_tensors_and_still_exact():
    for name in ("tiny-llama-awq-4bit-g32", "tiny-llama-gptq-3bit-g32"):
        r = analyze_files(_files_with(f"{STUBS}/{name}", lambda c: c.pop("quantization_config")))
        assert r.parameters.total == stub_truth(name)  # bits recovered from qweight vs scales / g_idx shapes
        q = r.parameters.quantization.to_dict()
        assert (q["source"], q["method"], q["bits"]) == ("tensors", name.split("-")[2], int(name.split("-")[3][0]))
        assert any("no quantization_config" in w for w in r.warnings)


@pytest.mark.parametrize("edit,needle", [
    (lambda q: q.update(quant_method="awq"), "packed the gptq"),
    (lambda q: q.update(bits=8), "shapes give [4]-bit"),
    (lambda q: q.update(group_size=128), "group_size 128"),
])
def test_gptq_config_disagreements_warn(edit, needle):
    r = analyze_files(_files_with(f"{STUBS}/tiny-llama-gptq-4bit-g32", lambda c: edit(c["quantization_config"])))
    assert any(needle in w for w in r.warnings), r.warnings
    assert r.parameters.total == stub_truth("tiny-llama-gptq-4bit-g32")  # shapes win: g_idx fixes the bits


def test_bnb_config_disagreements_warn():
    def edit(c):
        c["quantization_config"].update(bnb_4bit_quant_type="fp4", bnb_4bit_use_double_quant=False)

    r = analyze_files(_files_with(f"{STUBS}/tiny-llama-bnb-nf4-dq-u8", edit))
    assert any("bnb_4bit_quant_type fp4 but tensors hold nf4" in w for w in r.warnings)
    assert any("double_quant is False" in w for w in r.warnings)


def test_declared_but_not_stored_quantization_warns():
    cfg = load_config(f"{STUBS}/tiny-llama") | {"quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": True}}
    r = analyze_files(model_files(f"{STUBS}/tiny-llama", cfg))
    assert r.parameters.total == stub_truth("tiny-llama") and r.parameters.quantization.quantized_parameters == 0
    assert any("stored unquantized" in w for w in r.warnings)


def test_packed_geometry_both_layouts():
    def t(name, dtype, shape):
        return TensorEntry(name, dtype, shape, _numel(shape), _numel(shape) * 4, "f")

    # GPTQ 4-bit, in 4096, out 11008, g 128; AWQ the same linear
    gptq = packed_linear_geometry(t("q", "I32", (512, 11008)), t("s", "F16", (32, 11008)), t("z", "I32", (32, 1376)),
                                  t("g", "I32", (4096,)), None, None)
    awq = packed_linear_geometry(t("q", "I32", (4096, 1376)), t("s", "F16", (32, 11008)), t("z", "I32", (32, 1376)),
                                 None, None, None)
    assert (gptq.layout, gptq.bits, gptq.in_features, gptq.out_features, gptq.group_size) == ("gptq", 4, 4096, 11008, 128)
    assert (awq.layout, awq.bits, awq.in_features, awq.out_features, awq.group_size) == ("awq", 4, 4096, 11008, 128)


def test_json_contract_keys(stub_repo):
    from click.testing import CliRunner

    from hfmem.cli import main

    out = CliRunner().invoke(main, [str(stub_repo(f"{STUBS}/tiny-llama-awq-4bit-g32")), "--format", "json"])
    assert out.exit_code == 0, out.output
    p = json.loads(out.output)["parameters"]
    assert set(p["quantization"]) >= {"method", "bits", "group_size", "overhead_bytes", "quantized_parameters",
                                      "unquantized_parameters"}
    assert p["total"] == p["active"] == p["inference_loaded"] == stub_truth("tiny-llama-awq-4bit-g32")


def test_linear_time_on_100k_tensors():
    """A synthetic 100k-tensor FP8 MoE inventory: time grows linearly (a per-tensor scan of all names would not)."""
    def inventory(n_experts):
        out = []
        for e in range(n_experts):
            for p in ("gate_proj", "up_proj", "down_proj"):
                stem = f"model.layers.{e // 1000}.mlp.experts.{e % 1000}.{p}"
                out += [TensorEntry(stem + ".weight", "F8_E4M3", (64, 64), 4096, 4096, "f"),
                        TensorEntry(stem + ".weight_scale_inv", "F32", (1, 1), 1, 4, "f")]
        return [FileHeader("f", tuple(out), {})]

    cfg = {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}

    def run(h):
        start = time.perf_counter()
        counted, scheme, notes = count_tensors(h, cfg, 100)
        assert summarize(counted, scheme, notes).total == len(h[0].tensors) // 2 * 4096
        return time.perf_counter() - start

    small, big = inventory(16_667 // 4), inventory(16_667)  # 25k and 100k tensors
    t_small = min(run(small) for _ in range(3))
    t_big = min(run(big) for _ in range(2))
    assert t_big < 30 and t_big / t_small < 8  # linear: ~4x; quadratic (a scan of all names per tensor): ~16x


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
