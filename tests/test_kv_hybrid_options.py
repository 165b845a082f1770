"""CLI/API options for hybrid and compressed-attention KV: --no-prefix-caching (vLLM's state pages per request),
the kv_cache section per GPU at tp = --gpus, and DeepSeek-V4 under vLLM (its pool-block layout)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from stubs import FIXTURES

from hfmem.cli import main
from hfmem.memory.kv import cdiv, estimate_kv
from hfmem.model.architecture import build_architecture


def arch_of(repo: str):
    return build_architecture(json.loads((FIXTURES / "configs" / repo / "config.json").read_text()))[0]


def _kv(stub_repo, repo: str, *args: str) -> dict:
    result = CliRunner().invoke(main, [str(stub_repo(repo)), *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["kv_cache"]


def test_no_prefix_caching_gives_one_state_page(stub_repo):
    """Qwen3-Next-80B at 64k: 36 GDN layers in 3 groups of 12; prefix caching reserves 2 state pages per group,
    --no-prefix-caching 1: at 0.32 the difference is 3 groups x 12 x one padded state page (block 544 x 2,048 B).
    From 0.33 on Hopper (the default without --gpu) FlashInfer's GDN prefill keeps a third, a checkpoint page, and
    makes the block a multiple of its 64-token checkpoint alignment: 576 (tests/test_vllm_planning_truth.py)."""
    page = 544 * 2 * 256 * 2 * 2
    on = _kv(stub_repo, "Qwen/Qwen3-Next-80B-A3B-Instruct", "--ctx", "64k", "--vllm-version", "0.32")
    off = _kv(stub_repo, "Qwen/Qwen3-Next-80B-A3B-Instruct", "--ctx", "64k", "--no-prefix-caching", "--vllm-version", "0.32")
    assert on["total_bytes"] - off["total_bytes"] == 3 * 12 * page
    assert on["blocks_per_request"] - off["blocks_per_request"] == 3
    assert any("two state pages" in a for a in on["assumptions"])
    assert any("prefix caching off" in a for a in off["assumptions"])
    on = _kv(stub_repo, "Qwen/Qwen3-Next-80B-A3B-Instruct", "--ctx", "64k", "--vllm-version", "0.33")
    off = _kv(stub_repo, "Qwen/Qwen3-Next-80B-A3B-Instruct", "--ctx", "64k", "--no-prefix-caching", "--vllm-version",
              "0.33")
    assert (on["block_size"], off["block_size"]) == (576, 544)
    assert on["total_bytes"] == 12 * (576 * 2 * 256 * 2 * 2) * (cdiv(65_536, 576) + 3 * 3)
    assert off["total_bytes"] == 12 * page * (cdiv(65_536, 544) + 3)
    # 0.34 (the default) aligns to its 64-token default block: 576 without prefix caching too
    on = _kv(stub_repo, "Qwen/Qwen3-Next-80B-A3B-Instruct", "--ctx", "64k")
    off = _kv(stub_repo, "Qwen/Qwen3-Next-80B-A3B-Instruct", "--ctx", "64k", "--no-prefix-caching")
    assert (on["block_size"], off["block_size"]) == (576, 576)
    assert any("three state pages" in a for a in on["assumptions"])


def test_prefix_caching_default_follows_the_release(stub_repo):
    """vLLM starts hybrid models with prefix caching only from 0.26 (config/model.py is_prefix_caching_supported):
    at 0.25 the default is --no-prefix-caching's one page, --prefix-caching asks for the two."""
    old = _kv(stub_repo, "Qwen/Qwen3-Next-80B-A3B-Instruct", "--ctx", "64k", "--vllm-version", "0.25")
    off = _kv(stub_repo, "Qwen/Qwen3-Next-80B-A3B-Instruct", "--ctx", "64k", "--vllm-version", "0.25",
              "--no-prefix-caching")
    on = _kv(stub_repo, "Qwen/Qwen3-Next-80B-A3B-Instruct", "--ctx", "64k", "--vllm-version", "0.25",
             "--prefix-caching")
    assert old["total_bytes"] == off["total_bytes"] < on["total_bytes"]
    assert any("vLLM's default for hybrid models before 0.26" in a for a in old["assumptions"])
    assert any("two state pages" in a and "not vLLM's default" in a for a in on["assumptions"])


def test_kv_section_per_gpu_at_gpus(stub_repo):
    """--gpus 4 on Qwen3-Next (2 KV heads): 1 KV head per GPU, tp 4 in the JSON; without --gpus tp 1."""
    one = _kv(stub_repo, "Qwen/Qwen3-Next-80B-A3B-Instruct", "--ctx", "4k")
    four = _kv(stub_repo, "Qwen/Qwen3-Next-80B-A3B-Instruct", "--ctx", "4k", "--gpus", "4")
    assert (one["tp"], one["per_gpu"]) == (1, False) and (four["tp"], four["per_gpu"]) == (4, True)
    assert four["bytes_per_token"] * 2 == one["bytes_per_token"]
    text = CliRunner().invoke(main, [str(stub_repo("Qwen/Qwen3-Next-80B-A3B-Instruct")), "--ctx", "4k", "--gpus", "4"])
    assert "per GPU" in text.output


def test_deepseek_v4_vllm_exact_no_warning():
    """vLLM's DeepSeek-V4 layout is modelled (vllm_deepseek_v4.py; tests/test_kv_deepseek_v4.py): no bounds, no
    warning, the 41 compressed layers not counted as full attention."""
    est = estimate_kv(arch_of("deepseek-ai/DeepSeek-V4-Flash"), 32_768)
    assert not est.warnings and est.bytes_per_block == 1_002_240  # the newest release's packed layout
    assert est.total_bytes == est.blocks_per_request * est.bytes_per_block
    assert "bounds" not in est.to_dict()


def test_deepseek_v4_pro_per_token_and_text(stub_repo):
    """DeepSeek-V4-Pro (61 layers: 30 CSA, 31 HCA, no pure sliding layer): 30 x 320 + 31 x 8 = 9,848 B/token under
    transformers; the Flash table output shows vLLM's pool blocks."""
    pro = arch_of("deepseek-ai/DeepSeek-V4-Pro")
    est = estimate_kv(pro, 65_536, engine="transformers")
    assert est.bytes_per_token == 30 * 320 + 31 * 8 == 9_848
    assert set(est.by_layer_type) == {"compressed_sparse_attention", "heavily_compressed_attention"}
    text = CliRunner().invoke(main, [str(stub_repo("deepseek-ai/DeepSeek-V4-Flash")), "--ctx", "32k"]).output
    assert "bounds" not in text and f"{6_810 * 1_002_240:,}" in text


def test_per_layer_notes_appear_once():
    """Qwen2-7B (4 KV heads) at TP 8: the replicated-heads note is one line, not one per layer."""
    est = estimate_kv(arch_of("Qwen/Qwen2-7B-Instruct"), 1024, tp=8)
    assert sum("KV heads are replicated" in a for a in est.assumptions) == 1


def test_planner_concurrency_in_whole_blocks_per_group(stub_repo):
    """Hybrid models: vLLM's concurrency = (available // one block across the groups) / blocks per request
    (kv_cache_utils.py: get_num_blocks, get_max_concurrency_for_kv_cache_config); two state pages per group with
    prefix caching (three from 0.33 on Hopper, the default, in blocks of 576), one without; before 0.26 vLLM's
    default is without."""
    import hfmem
    from hfmem.memory.planner import Planner

    report = hfmem.analyze(str(stub_repo("Qwen/Qwen3-Next-80B-A3B-Instruct")))
    budget = 200 * 2**30
    for pc, block, state_blocks, version in ((True, 544, 6, "0.32"), (None, 576, 9, None), (False, 576, 3, None),
                                             (False, 544, 3, "0.33"), (None, 544, 3, "0.25")):
        p = Planner(report, "int4", engine="vllm", prefix_caching=pc, vllm_version=version)
        conc, blocks, tokens, available = p.concurrency(budget, 32_768)
        one = p.kv(32_768, 1)
        assert one.block_size == block and one.blocks_per_request == cdiv(32_768, block) + state_blocks
        assert blocks == available // one.bytes_per_block
        assert conc == blocks / one.blocks_per_request and tokens == int(conc * 32_768)


def test_kimi_k3_reads_its_kimi_linear_text_config():
    """Kimi-K3's config.json wraps a kimi_linear text_config in a model_type transformers does not know (kimi_k3): the
    text config is still read with kimi_linear's rules, so its 1-indexed linear_attn_config lists give 69 KDA layers
    and 24 MLA layers (before, all 93 were taken as MLA). Under vLLM 0.29 on, with prefix caching, its KDA layers keep
    a third state page, a prefill checkpoint, where vLLM runs FlashKDA's prefill (SM 9x/10x/12x: bf16, 128-wide heads,
    a bounded gate): counted on those GPUs (tests/test_vllm_planning_truth.py holds the bytes to vLLM's code), said
    once with its bound when the GPU is not known."""
    k3 = arch_of("moonshotai/Kimi-K3")
    assert k3.layer_types == {"linear_attention": 69, "full_attention": 24}
    est = estimate_kv(k3, 32_768)
    assert est.by_layer_type["linear_attention"]["layers"] == 69 and est.by_layer_type["mla"]["layers"] == 24
    assert not est.warnings and any("three state pages" in a and "FlashKDA" in a for a in est.assumptions)
    two = [estimate_kv(k3, 32_768, vllm_release=(0, 28)), estimate_kv(k3, 32_768, gpu_sm=89),
           estimate_kv(k3, 32_768, gpu_sm=None)]
    assert all(e.total_bytes < est.total_bytes and any("two state pages" in a for a in e.assumptions) for e in two)
    assert [len([w for w in e.warnings if "FlashKDA" in w]) for e in two] == [0, 0, 1]
    assert not [w for w in estimate_kv(k3, 32_768, prefix_caching=False, gpu_sm=None).warnings if "FlashKDA" in w]
    linear = estimate_kv(arch_of("moonshotai/Kimi-Linear-48B-A3B-Instruct"), 32_768)  # no gate bound: Triton
    assert any("two state pages" in a for a in linear.assumptions)


def test_mamba2_families_reserve_a_state_page_per_block_up_to_027():
    """Nemotron-H with prefix caching up to vLLM 0.27 runs mamba_cache_mode 'all' (its vLLM class declares
    SupportsMambaPrefixCaching): every group, attention or state, takes a page per 4,224-token block of context (the
    block a multiple of its Mamba2 chunk of 128), so nothing is constant; from 0.28 'align': 4,128-token blocks and a
    fixed two (0.32 on: three) state pages. The bytes are vLLM's own (tests/test_vllm_planning_truth.py)."""
    n = arch_of("nvidia/Nemotron-H-56B-Base-8K")
    for ctx in (8_192, 32_768):
        e = estimate_kv(n, ctx, vllm_release=(0, 27))
        assert e.block_size == 4_224 and e.constant_bytes == 0
        assert e.total_bytes == e.kv_groups * e.bytes_per_block * cdiv(ctx, 4_224)
        assert any("mamba_cache_mode 'all'" in a for a in e.assumptions)
    later = estimate_kv(n, 32_768, vllm_release=(0, 28))
    assert later.block_size == 4_128 and later.constant_bytes > 0
    assert estimate_kv(n, 32_768, vllm_release=(0, 27), prefix_caching=False).block_size == 4_128


def test_prefix_caching_on_a_state_only_model_is_said_not_dropped():
    """vLLM leaves prefix caching off for attention-free models (config/model.py is_prefix_caching_supported); asked
    for anyway, hfmem says once that it does not model it, and keeps the one-page figure."""
    mamba = arch_of("state-spaces/mamba-2.8b-hf")
    asked = estimate_kv(mamba, 4_096, prefix_caching=True)
    default = estimate_kv(mamba, 4_096)
    assert asked.total_bytes == default.total_bytes
    assert len([w for w in asked.warnings if "state-only" in w]) == 1 and not default.warnings


def test_speculative_tokens_add_state_pages_through_the_cli(stub_repo):
    """--speculative mtp on Qwen3-Next-80B at 64k, vLLM 0.32 (prefix caching on): the CLI's KV section is the KV
    estimate with the checkpoint's MTP layer and --num-speculative-tokens (default 1, said in a note: Qwen3-Next's
    config names no MTP layer count, so vLLM asks for it), whose arithmetic vLLM's own planning code checks
    (tests/test_vllm_planning_truth.py) as do real logs (tests/test_vllm_logs.py). The MTP layer joins the 12
    full-attention layers (13: three GDN groups of 13, one padding layer each); each draft token adds a state page per
    group slot; the conv rows it adds outgrow the 544-token block at 3 drafts (560)."""
    repo = "Qwen/Qwen3-Next-80B-A3B-Instruct"
    args = ("--ctx", "64k", "--vllm-version", "0.32")
    plain = _kv(stub_repo, repo, *args)
    one = _kv(stub_repo, repo, *args, "--speculative", "mtp")
    three = _kv(stub_repo, repo, *args, "--speculative", "mtp", "--num-speculative-tokens", "3")
    arch = arch_of(repo)
    for got, drafts in ((one, 1), (three, 3)):
        est = estimate_kv(arch, 65_536, prefix_caching=True, vllm_release=(0, 32), speculative_tokens=drafts,
                          mtp_layers=1, weights_dtype="BF16")
        assert (got["total_bytes"], got["blocks_per_request"], got["block_size"]) == (
            est.total_bytes, est.blocks_per_request, est.block_size)
    assert (plain["block_size"], one["block_size"], three["block_size"]) == (544, 544, 560)
    # one draft: 1 more state block per group (3) beside the same 121 attention blocks of 544 tokens
    assert one["blocks_per_request"] - plain["blocks_per_request"] == 3
    assert any("3 more for the 3 speculative token(s)" in a for a in three["assumptions"])
    result = CliRunner().invoke(main, [str(stub_repo(repo)), *args, "--speculative", "mtp", "--gpu", "h200",
                                       "--format", "json"])
    notes = json.loads(result.output)["inference"]["notes"]
    assert any("names no MTP layer count" in n for n in notes)
    assert any("drafter's share of vLLM's profile" in n for n in notes)


def test_num_speculative_tokens_needs_speculative(stub_repo):
    """Without --speculative the option means nothing: one line, the usage exit code, no traceback."""
    result = CliRunner().invoke(main, [str(stub_repo("Qwen/Qwen3-Next-80B-A3B-Instruct")), "--ctx", "4k",
                                       "--num-speculative-tokens", "2"])
    assert result.exit_code == 2 and "needs --speculative" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_speculative_tokens_follow_vllms_mtp_rules():
    """vLLM's MTP default is the config's layer count (Qwen3.5: mtp_num_hidden_layers); more tokens than layers must
    be a multiple of them (speculator_config.py resolve_num_speculative_tokens)."""
    import pytest
    from stubs import model_files

    from hfmem.api import analyze_files
    from hfmem.errors import UsageError
    from hfmem.memory.planner import mtp_layer_count, speculative_tokens

    report = analyze_files(model_files("Qwen/Qwen3.5-4B"))
    one = mtp_layer_count(report)
    assert one == 1
    assert speculative_tokens(report, "mtp", None, one) == (1, None)
    assert speculative_tokens(report, None, None, 0) == (0, None)
    assert speculative_tokens(report, "mtp", 4, one) == (4, None)
    config = json.loads((FIXTURES / "configs" / "Qwen" / "Qwen3.5-4B" / "config.json").read_text())
    config["text_config"]["mtp_num_hidden_layers"] = 2
    two = analyze_files(model_files("Qwen/Qwen3.5-4B", config=config))
    layers = mtp_layer_count(two)
    assert layers == 2
    assert speculative_tokens(two, "mtp", None, layers) == (2, None) and speculative_tokens(two, "mtp", 4, layers)[0] == 4
    with pytest.raises(UsageError, match="multiple"):
        speculative_tokens(two, "mtp", 3, layers)


def test_a_release_that_refuses_the_drafter_says_so_beside_the_verdict(stub_repo):
    """vLLM 0.16 with prefix caching asked on Qwen3-Next asserts that speculative decoding is off (its own hook raised
    in the recorded run, tests/test_vllm_planning_truth.py): the refusal is a report warning, printed with the fit
    verdict, not only a KV-section line; 0.17 starts it, and nothing is said."""
    repo = str(stub_repo("Qwen/Qwen3-Next-80B-A3B-Instruct"))
    base = [repo, "--ctx", "32k", "--prefix-caching", "--speculative", "mtp", "--gpu", "h200"]
    refused = CliRunner().invoke(main, [*base, "--vllm-version", "0.16"])
    assert refused.exit_code == 0 and "vLLM 0.16 does not start this" in refused.output
    started = CliRunner().invoke(main, [*base, "--vllm-version", "0.17"])
    assert started.exit_code == 0 and "does not start" not in started.output
    data = json.loads(CliRunner().invoke(main, [*base, "--vllm-version", "0.16", "--format", "json"]).output)
    assert sum("does not start" in w for w in data["warnings"]) == 1
