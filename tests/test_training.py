"""Training memory: published numbers (ZeRO paper, QLoRA paper, independent config arithmetic), options, CLI.

The measured-truth checks (torch/peft on CPU) are in tests/test_training_truth.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from stubs import header_bytes

import hfmem
from hfmem.cli import main
from hfmem.errors import UsageError
from hfmem.memory.training import TrainingSettings, estimate_all, estimate_training, nf4_bytes, optimizer_state_bytes

GB = 10**9
STATE_KEYS = ("weights", "master_weights", "gradients", "optimizer_states")


def _write(folder: Path, config: dict, tensors: list[tuple[str, str, list[int]]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "model.safetensors").write_bytes(header_bytes(tensors, {"format": "pt"}))
    return folder


def _llama_stub(folder: Path, h: int, layers: int, heads: int, kv: int, inter: int, vocab: int, tied: bool = False) -> Path:
    """A header-only Llama checkpoint with the tensors transformers' LlamaForCausalLM has."""
    d = h // heads
    t = [("model.embed_tokens.weight", "BF16", [vocab, h])]
    for i in range(layers):
        p = f"model.layers.{i}."
        t += [
            (p + "input_layernorm.weight", "BF16", [h]),
            (p + "self_attn.q_proj.weight", "BF16", [heads * d, h]),
            (p + "self_attn.k_proj.weight", "BF16", [kv * d, h]),
            (p + "self_attn.v_proj.weight", "BF16", [kv * d, h]),
            (p + "self_attn.o_proj.weight", "BF16", [h, heads * d]),
            (p + "post_attention_layernorm.weight", "BF16", [h]),
            (p + "mlp.gate_proj.weight", "BF16", [inter, h]),
            (p + "mlp.up_proj.weight", "BF16", [inter, h]),
            (p + "mlp.down_proj.weight", "BF16", [h, inter]),
        ]
    t.append(("model.norm.weight", "BF16", [h]))
    if not tied:
        t.append(("lm_head.weight", "BF16", [vocab, h]))
    cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": h, "num_hidden_layers": layers,
           "num_attention_heads": heads, "num_key_value_heads": kv, "intermediate_size": inter, "vocab_size": vocab,
           "tie_word_embeddings": tied, "torch_dtype": "bfloat16", "max_position_embeddings": 4096}
    return _write(folder, cfg, t)


# ---------------------------------------------------------------------------------------------------- published


@pytest.fixture(scope="module")
def zero_7_5b(tmp_path_factory) -> hfmem.Report:
    """A model of exactly 7.5e9 parameters (the ZeRO paper's Figure 1 example)."""
    folder = _llama_stub(tmp_path_factory.mktemp("z") / "m", 4096, 32, 32, 32, 11008, 32000)
    report = hfmem.analyze(str(folder))
    missing = 7_500_000_000 - report.parameters.total
    assert 0 < missing < 10**9
    extra = [("model.layers.0.mlp.extra.weight", "BF16", [missing])]
    cfg = json.loads((folder / "config.json").read_text())
    tensors = [(c.entry.name, c.entry.dtype, list(c.entry.shape)) for c in report.tensors] + extra
    report = hfmem.analyze(str(_write(folder, cfg, tensors)))
    assert report.parameters.total == 7_500_000_000
    return report


def _states(est) -> int:
    states = dict(est.components, gradients=est.gradient_bytes) if "gradients" in est.components else est.components
    return sum(states.get(k, 0) for k in STATE_KEYS) + est.host_bytes * 0


@pytest.mark.parametrize("zero, expected_gb", [(0, 120.0), (1, 31.4), (2, 16.6), (3, 1.9)])
def test_zero_paper_figure_1(zero_7_5b, zero, expected_gb):
    """ZeRO (arXiv:1910.02054) Figure 1: 7.5B params, mixed-precision Adam, N=64: 120 / 31.4 / 16.6 / 1.9 GB."""
    s = TrainingSettings(gpus=64 if zero else 1, zero=zero, precision="mixed-bf16", optimizer="adamw")
    est = estimate_training(zero_7_5b, "full", s)
    assert round(_states(est) / GB, 1) == expected_gb
    if zero == 0:
        assert _states(est) == 16 * 7_500_000_000  # exactly 16 B/param


def test_zero3_and_fsdp_full_shard_agree_on_model_states(zero_7_5b):
    z3 = estimate_training(zero_7_5b, "full", TrainingSettings(gpus=64, zero=3))
    fs = estimate_training(zero_7_5b, "full", TrainingSettings(gpus=64, fsdp="full"))
    assert _states(z3) == _states(fs)
    assert "zero3_gathered_params" in z3.components and "fsdp_unit_buffers" in fs.components


def test_bytes_per_param_by_precision(zero_7_5b):
    """16 (ZeRO mixed) / 8 (pure bf16 torch AdamW) / 16 (fp32) / 16 + autocast copies (HF AMP on fp32: the trap's 18)."""
    psi = 7_500_000_000
    per = {p: _states(estimate_training(zero_7_5b, "full", TrainingSettings(precision=p))) / psi for p in ("mixed-bf16", "bf16", "fp32")}
    assert per == {"mixed-bf16": 16, "bf16": 8, "fp32": 16}
    amp = estimate_training(zero_7_5b, "full", TrainingSettings(precision="amp-bf16", seq=16))
    linear = sum(c.logical for c in zero_7_5b.tensors if c.entry.name.endswith("proj.weight") or c.component == "lm_head")
    assert amp.activation_terms["components"]["autocast_weight_copies"] == 2 * linear
    assert 17.5 < (_states(amp) + amp.activation_terms["components"]["autocast_weight_copies"]) / psi <= 18


@pytest.fixture(scope="module")
def llama_65b(tmp_path_factory) -> hfmem.Report:
    """LLaMA-65B shapes (Touvron et al. 2023, Table 2: dim 8192, 64 heads, 80 layers; FFN 22016; vocab 32000)."""
    return hfmem.analyze(str(_llama_stub(tmp_path_factory.mktemp("l65") / "m", 8192, 80, 64, 64, 22016, 32000)))


def test_qlora_paper_65b_on_one_48gb_gpu(llama_65b):
    """QLoRA (arXiv:2305.14314): 65B finetuning on a single 48 GB GPU, from >780 GB for 16-bit finetuning.
    Setup of the paper's Guanaco-65B runs: LoRA r=64 on all linear layers, bf16 adapters, non-4-bit modules kept
    16-bit (qlora.py recasts them), paged optimizer, gradient checkpointing, micro-batch 1, 512 tokens."""
    assert 65.2e9 < llama_65b.parameters.total < 65.3e9
    s = TrainingSettings(seq=512, lora_rank=64, precision="bf16", optimizer="paged-adamw-8bit", qlora_upcast=False, grad_checkpointing=True)
    q = estimate_training(llama_65b, "qlora", s)
    assert 34 * GB < q.total_bytes < 48 * GB
    assert "rtx6000ada" in q.fits_on and "rtx4090" not in q.fits_on
    # NF4 + double quant is 4.127 bits/param for the quantized Linear layers (paper §3)
    lin = sum(c.logical for c in llama_65b.tensors if c.entry.name.endswith("proj.weight"))
    assert abs(q.components["base_nf4"] * 8 / lin - 4.127) < 0.001
    full = estimate_training(llama_65b, "full", TrainingSettings(seq=512, grad_checkpointing=True))
    assert full.total_bytes > 780 * GB


def test_nf4_bits_per_param():
    """4 + 8/64 + 32/(64*256) = 4.127 bits for large matrices (QLoRA §3 double quantization)."""
    n = 14336 * 4096
    assert nf4_bytes(n) == n // 2 + n // 64 + 4 * (n // 64 // 256) + 16 * 4 + 256 * 4
    assert abs(nf4_bytes(n) * 8 / n - 4.127) < 0.0005
    assert abs(nf4_bytes(n, double_quant=False) * 8 / n - 4.5) < 0.001


def test_llama_3_1_8b_lora_and_qlora_from_config_arithmetic(stub_repo):
    """Independent arithmetic from the config: r=16 all-linear = 16 x 32 x sum(in+out)
    = 41,943,040; NF4 base 6,979,321,856 params -> 3.60 GB, 16-bit embed+lm_head+norms 2.10 GB, fp32 after
    prepare_model_for_kbit_training 4.20 GB."""
    report = hfmem.analyze(str(stub_repo("meta-llama/Llama-3.1-8B-Instruct")))
    per_layer = (4096 + 4096) + 2 * (4096 + 1024) + (4096 + 4096) + 3 * (4096 + 14336)
    est = estimate_training(report, "qlora", TrainingSettings(qlora_upcast=False))
    assert est.trainable_parameters == 16 * 32 * per_layer == 41_943_040
    assert round(est.components["base_nf4"] / GB, 2) == 3.60
    assert round(est.components["base_unquantized"] / GB, 2) == 2.10
    up = estimate_training(report, "qlora", TrainingSettings(qlora_upcast=True))
    assert round(up.components["base_unquantized"] / GB, 2) == 4.20
    lora = estimate_training(report, "lora", TrainingSettings())
    assert lora.components["base_weights"] == 2 * 8_030_261_248
    assert lora.components["adapter_optimizer_states"] == 8 * 41_943_040  # fp32 AdamW m + v


def test_logits_term_is_12_bytes_per_vocab_per_token(stub_repo):
    report = hfmem.analyze(str(stub_repo("meta-llama/Llama-3.1-8B-Instruct")))
    est = estimate_training(report, "lora", TrainingSettings(seq=8192, grad_checkpointing=True))
    assert est.activation_terms["components"]["logits_loss"] == (12 * 128256 + 8) * 8192
    assert est.activation_terms["components"]["logits_loss"] > est.activation_terms["components"]["activations_layers"]  # the largest single term
    chunked = estimate_training(report, "lora", TrainingSettings(seq=8192, grad_checkpointing=True, chunked_loss=True))
    assert chunked.activation_terms["logits_loss_per_token"] * 8192 < est.activation_terms["components"]["logits_loss"] / 10
    assert chunked.total_bytes < est.total_bytes
    assert "chunked" in chunked.settings["loss"] and "not chunked" in est.settings["loss"]


def test_lora_and_qlora_on_packed_checkpoints_match_the_unquantized_twin(stub_repo):
    """AWQ qweight [in, out/8] unpacks to the same Linear layers as the bf16 checkpoint:
    r=16 x 32 layers x (4 x (4096+4096) + 3 x (4096+11008)) = 39,976,960 adapter parameters."""
    bf16 = hfmem.analyze(str(stub_repo("meta-llama/Llama-2-7b-hf")))
    awq = hfmem.analyze(str(stub_repo("TheBloke/Llama-2-7B-AWQ")))
    for method in ("lora", "qlora"):
        a, b = (estimate_training(r, method, TrainingSettings()) for r in (bf16, awq))
        assert a.trainable_parameters == b.trainable_parameters == 16 * 32 * (4 * 8192 + 3 * (4096 + 11008))
    qa, qb = (estimate_training(r, "qlora", TrainingSettings()) for r in (bf16, awq))
    assert qa.components["base_nf4"] == qb.components["base_nf4"] and qa.components["base_unquantized"] == qb.components["base_unquantized"]
    la = estimate_training(awq, "lora", TrainingSettings())
    assert la.components["base_weights"] == awq.parameters.stored_bytes  # frozen base stays in its AWQ storage


# ---------------------------------------------------------------------------------------------------- options


@pytest.fixture(scope="module")
def qwen(fixtures_dir) -> hfmem.Report:
    return hfmem.analyze(str(fixtures_dir / "models/Qwen/Qwen2-7B-Instruct"))


def test_optimizers(qwen):
    psi = qwen.parameters.total
    opt = {o: estimate_training(qwen, "full", TrainingSettings(optimizer=o)) for o in ("adamw", "adamw-8bit", "paged-adamw-8bit", "adafactor", "sgd", "sgd-momentum", "lion")}
    states = {o: e.components["optimizer_states"] for o, e in opt.items()}
    assert states["adamw"] == 8 * psi and states["sgd"] == 0
    assert states["sgd-momentum"] == states["lion"] == 4 * psi
    # 8-bit: fp32 states for the embedding (V x h) and for tensors < 4096 elements; 2 B + absmax elsewhere
    embed = 152064 * 3584
    assert states["adamw-8bit"] > 8 * embed + 2 * (psi - embed)
    assert states["adamw-8bit"] < 8 * embed + 2.1 * (psi - embed)
    assert opt["paged-adamw-8bit"].pageable_bytes > 0
    assert states["paged-adamw-8bit"] + opt["paged-adamw-8bit"].pageable_bytes == states["adamw-8bit"]
    assert states["adafactor"] < psi * 0.01


def test_optimizer_state_rules():
    assert optimizer_state_bytes((4096, 4096), "adamw-8bit", 4) == (2 * 4096 * 4096 + 8 * 4096 * 4096 // 256, 0)
    assert optimizer_state_bytes((3584,), "adamw-8bit", 4) == (8 * 3584, 0)  # < 4096 elements: 32-bit
    assert optimizer_state_bytes((1000, 64), "adamw-8bit", 4, embedding=True) == (8 * 64000, 0)
    res, paged = optimizer_state_bytes((1000, 1000), "paged-adamw-8bit", 4)
    assert (res, paged) == (8 * -(-10**6 // 256), 2 * 10**6)
    assert optimizer_state_bytes((10, 20), "adafactor", 4) == (4 * 30 + 4, 0)
    assert optimizer_state_bytes((10, 20), "adamw", 2) == (800, 0)


def test_zero_stages_and_offload(qwen):
    base = estimate_training(qwen, "full", TrainingSettings(gpus=8))
    z = {k: estimate_training(qwen, "full", TrainingSettings(gpus=8, zero=k)) for k in (1, 2, 3)}
    assert "ddp_gradient_buckets" in base.components
    assert _states(base) > _states(z[1]) > _states(z[2]) > _states(z[3])
    assert z[3].components["weights"] == -(-2 * qwen.parameters.total // 8)
    off = estimate_training(qwen, "full", TrainingSettings(gpus=8, zero=2, offload="optimizer"))
    assert "optimizer_states" not in off.components and "master_weights" not in off.components
    assert off.host_bytes >= z[2].components["optimizer_states"] + z[2].components["master_weights"]
    full_off = estimate_training(qwen, "full", TrainingSettings(gpus=8, zero=3, offload="optimizer+params"))
    assert "weights" not in full_off.components and full_off.total_bytes < off.total_bytes


@pytest.mark.parametrize(
    "kwargs",
    [dict(offload="optimizer+params", zero=2), dict(offload="optimizer"), dict(fsdp="full", zero=3), dict(optimizer="adam"),
     dict(precision="fp8"), dict(attn="xformers"), dict(seq=0), dict(lora_targets="nonexistent_proj")],
)
def test_invalid_settings(qwen, kwargs):
    with pytest.raises(UsageError):
        estimate_training(qwen, "lora", TrainingSettings(**kwargs))


def test_checkpointing_attention_and_seq_scaling(qwen):
    s1 = estimate_training(qwen, "full", TrainingSettings(seq=1024))
    s2 = estimate_training(qwen, "full", TrainingSettings(seq=2048))
    assert s2.activation_terms["components"]["activations_layers"] == 2 * s1.activation_terms["components"]["activations_layers"]  # linear with SDPA
    ck = estimate_training(qwen, "full", TrainingSettings(seq=2048, grad_checkpointing=True))
    assert ck.activation_terms["components"]["activations_layers"] == 28 * 2 * 3584 * 2048  # layer inputs only
    e1 = estimate_training(qwen, "full", TrainingSettings(seq=1024, attn="eager"))
    e2 = estimate_training(qwen, "full", TrainingSettings(seq=2048, attn="eager"))
    d1 = e1.activation_terms["components"]["activations_layers"] - s1.activation_terms["components"]["activations_layers"]
    d2 = e2.activation_terms["components"]["activations_layers"] - s2.activation_terms["components"]["activations_layers"]
    assert d2 / d1 > 3.5  # eager keeps the s x s scores: quadratic (SDPA: linear)
    fl = estimate_training(qwen, "full", TrainingSettings(seq=2048, attn="flash"))
    assert fl.activation_terms["components"]["activations_layers"] == s2.activation_terms["components"]["activations_layers"]


def test_lora_targets_and_defaults(qwen):
    qv = estimate_training(qwen, "lora", TrainingSettings(lora_targets="q_proj,v_proj", lora_rank=8))
    assert qv.trainable_parameters == 8 * 28 * ((3584 + 3584) + (3584 + 512))
    assert qv.target_modules == ["q_proj", "v_proj"] and qv.rank == 8
    q = estimate_training(qwen, "qlora", TrainingSettings())
    assert q.settings["grad_checkpointing"] is True  # prepare_model_for_kbit_training's default
    assert estimate_training(qwen, "lora", TrainingSettings()).settings["grad_checkpointing"] is False
    dora = estimate_training(qwen, "lora", TrainingSettings(dora=True, lora_rank=8, lora_targets="q_proj,v_proj"))
    assert dora.trainable_parameters == qv.trainable_parameters + 28 * (3584 + 512)


def test_fits_on_uses_the_catalog(qwen):
    from hfmem.memory.gpus import CATALOG

    est = estimate_training(qwen, "qlora", TrainingSettings(seq=512))
    assert est.fits_on == [g.key for g in CATALOG if est.total_bytes <= (g.memory_bytes * 3 // 4 if g.kind == "apple" else g.memory_bytes)]
    one = estimate_training(qwen, "full", TrainingSettings(gpu="h100"))
    assert one.fits_on == []


def test_moe_and_mla_fixtures_estimate(stub_repo):
    """Real MoE/MLA inventories go through: experts stay 16-bit under bnb (not nn.Linear in transformers 5)."""
    for repo in ("deepseek-ai/DeepSeek-V3", "Qwen/Qwen3-Coder-30B-A3B-Instruct", "openai/gpt-oss-20b"):
        report = hfmem.analyze(str(stub_repo(repo)))
        out = estimate_all(report, TrainingSettings(seq=1024, gpus=8, zero=3)).to_dict()
        assert set(out) == {"full", "lora", "qlora"}
        assert all(v["total_bytes"] > 0 for v in out.values())
    dsv3 = hfmem.analyze(str(stub_repo("deepseek-ai/DeepSeek-V3")))
    q = estimate_training(dsv3, "qlora", TrainingSettings(seq=1024))
    assert any("not nn.Linear" in n for n in q.notes)
    assert q.components["base_unquantized"] > q.components["base_nf4"]  # the 16-bit experts dominate


# ---------------------------------------------------------------------------------------------------- CLI


@pytest.fixture
def runner():
    return CliRunner()


def test_cli_default_has_no_training(runner, fixtures_dir):
    r = runner.invoke(main, [str(fixtures_dir / "models/Qwen/Qwen2-7B-Instruct"), "--format", "json"])
    assert r.exit_code == 0 and "training" not in json.loads(r.output)


def test_cli_train_all_json(runner, fixtures_dir):
    r = runner.invoke(main, [str(fixtures_dir / "models/Qwen/Qwen2-7B-Instruct"), "--train", "--format", "json", "--seq", "1024"])
    assert r.exit_code == 0, r.output
    t = json.loads(r.output)["training"]
    assert set(t) == {"full", "lora", "qlora"}
    for m, v in t.items():
        assert {"total_bytes", "trainable_parameters", "components", "settings"} <= set(v)
        assert v["total_bytes"] == sum(v["components"].values())
        assert isinstance(v["total_bytes"], int) and v["settings"]["seq"] == 1024
    assert t["lora"]["rank"] == 16 and t["qlora"]["target_modules"] == ["all-linear"]
    assert "rank" not in t["full"]


def test_cli_train_lora_table(runner, fixtures_dir):
    r = runner.invoke(main, [str(fixtures_dir / "models/Qwen/Qwen2-7B-Instruct"), "--train", "lora", "--lora-targets", "q_proj,v_proj",
                             "--lora-rank", "8", "--optimizer", "adamw-8bit", "--gpu", "24GB"])
    assert r.exit_code == 0, r.output
    assert "TOTAL per GPU" in r.output and "LoRA adapter weights" in r.output and "fits on" in r.output
    assert "r=8 on q_proj, v_proj" in r.output


@pytest.mark.parametrize("args", [["--train", "lora", "--offload", "optimizer"], ["--train", "full", "--fsdp", "full", "--zero", "3"], ["--train", "lora", "--lora-targets", "nope"]])
def test_cli_bad_training_options_exit_2(runner, fixtures_dir, args):
    r = runner.invoke(main, [str(fixtures_dir / "models/Qwen/Qwen2-7B-Instruct"), *args])
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output


def test_qlora_moe_experts_bf16_default_and_nf4(stub_repo):
    """Qwen3-30B-A3B-style MoE (Qwen3-Coder-30B-A3B: 48 layers x 128 experts stored as 2-D matrices, fused on load
    into gate_up_proj [128, 1536, 2048] and down_proj [128, 2048, 768]). transformers 5's replace_with_bnb_linear
    converts only nn.Linear / Conv1D, so by default the experts stay unquantized (fp32 after
    prepare_model_for_kbit_training: 4 B/param); --qlora-experts nf4 quantizes each fused tensor as one bitsandbytes
    NF4 tensor: 4-bit codes, one uint8 absmax per 64 weights, one fp32 nested absmax per 256 blocks, code books."""
    from stubs import model_files

    from hfmem.api import analyze_files

    report = analyze_files(model_files("Qwen/Qwen3-Coder-30B-A3B-Instruct"))
    default = estimate_training(report, "qlora", TrainingSettings(seq=512))
    nf4 = estimate_training(report, "qlora", TrainingSettings(seq=512, qlora_experts="nf4"))
    assert default.settings["qlora_experts"] == "bf16" and nf4.settings["qlora_experts"] == "nf4"
    assert any("replace_with_bnb_linear" in n for n in default.notes)
    assert any("--qlora-experts nf4: the 96 fused expert tensors" in n for n in nf4.notes)
    # per-tensor bytes from the inventory's shapes, independently of hfmem's tables
    per_layer = {"gate_up_proj": 128 * (768 + 768) * 2048, "down_proj": 128 * 2048 * 768}
    experts = 48 * sum(per_layer.values())
    tensors = {(c.layer, c.entry.name) for c in report.tensors if c.component == "moe_experts"}
    assert len(tensors) == 48 * 128 * 3

    def bnb_nf4(n: int) -> int:
        blocks = -(-n // 64)
        return n // 2 + blocks + 4 * -(-blocks // 256) + 16 * 4 + 256 * 4

    expert_nf4 = 48 * sum(bnb_nf4(n) for n in per_layer.values())
    assert nf4.components["base_nf4"] - default.components["base_nf4"] == expert_nf4
    assert default.components["base_unquantized"] - nf4.components["base_unquantized"] == 4 * experts
    assert default.settings.get("qlora_experts") and "qlora_experts" not in estimate_training(report, "lora").settings
    assert nf4.components["dequant_buffer"] == 2 * per_layer["gate_up_proj"]  # one fused tensor dequantized
    assert default.total_bytes > 128 * 2**30 > 40 * 2**30 > nf4.total_bytes


def test_cli_ssm_kernels_stated_and_validated(runner, stub_repo):
    """Mamba-2.8B: --ssm-kernels auto is the fused path on a CUDA GPU, said in the JSON settings and a note; the
    torch fallback saves the per-token [d_inner, N] scan tensors (tests/test_training_ssm_truth.py measures them)."""
    repo = str(stub_repo("state-spaces/mamba-2.8b-hf"))
    out = {}
    for kernels in ("auto", "torch"):
        r = runner.invoke(main, [repo, "--train", "full", "--seq", "2048", "--ssm-kernels", kernels, "--format", "json"])
        assert r.exit_code == 0, r.output
        out[kernels] = json.loads(r.output)["training"]["full"]
    assert out["auto"]["settings"]["ssm_kernels"] == "fused" and out["torch"]["settings"]["ssm_kernels"] == "torch"
    assert any("64 mamba layers on the fused path" in n for n in out["auto"]["notes"])
    assert out["torch"]["activation_terms"]["ssm_kernels"] == "torch"
    assert out["torch"]["total_bytes"] > 3 * out["auto"]["total_bytes"]
    bad = runner.invoke(main, [repo, "--train", "full", "--ssm-kernels", "cuda"])
    assert bad.exit_code == 2 and "--ssm-kernels" in bad.output
    plain = json.loads(runner.invoke(main, [str(stub_repo("Qwen/Qwen3-8B")), "--train", "full", "--format", "json"]).output)
    assert "ssm_kernels" not in plain["training"]["full"]["settings"]  # only for models with SSM layers
