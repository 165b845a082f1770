"""vLLM's KV cache for DeepSeek-V4 (hfmem/memory/kv/vllm_deepseek_v4.py): page sizes, the pool block, pages per
request, and the public start-up log of vllm-project/vllm#44376.

Rule (vllm-project/vllm): per-layer specs from model_executor/layers/deepseek_v4_attention.py
(DeepseekV4MLAAttention.get_kv_cache_spec, DeepseekV4IndexerCache.get_kv_cache_spec), v1/attention/backends/mla/
sparse_swa.py (DeepseekV4SWACache) and model_executor/layers/deepseek_compressor.py (CompressorStateCache); page
alignment in v1/kv_cache_interface.py (_apply_alignment_padding, 576 B); grouping and pool block in
v1/core/kv_cache_planning.py (_get_kv_cache_groups_uniform_groups, _get_kv_cache_config_deepseek_v4,
_pool_bytes_per_block, _max_memory_usage_bytes_from_groups, _estimate_max_model_len_from_groups)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from stubs import FIXTURES

import hfmem
from hfmem.cli import main
from hfmem.memory.gpus import GPU
from hfmem.memory.kv import cdiv, estimate_kv
from hfmem.memory.planner import Planner, cublas_workspace_bytes
from hfmem.model.architecture import build_architecture

GiB = 2**30
FLASH, PRO = "deepseek-ai/DeepSeek-V4-Flash", "deepseek-ai/DeepSeek-V4-Pro"


def arch_of(repo: str):
    return build_architecture(json.loads((FIXTURES / "configs" / repo / "config.json").read_text()))[0]


V022 = (0, 22)  # the release vllm#44376 ran


def _v4(repo: str, context: int, **kw):
    return estimate_kv(arch_of(repo), context, kv_dtype=kw.pop("kv_dtype", "fp8"), **kw)


def test_page_sizes_worked_by_hand():
    """fp8_ds_mla: 448 fp8 NoPE + 64 x 2 B RoPE + 448 // 64 scale bytes + 1 = 584 B per token. Real pages, then
    rounded up to 576 B: window 64 x 584 = 37,376 -> 37,440 (65 x 576); CSA compressed KV 256 / 4 x 584 = 37,376 ->
    37,440; indexer keys 64 x (128 + 4) = 8,448 -> 8,640 (15 x 576); HCA 256 / 128 x 584 = 1,168 -> 1,728 (3 x 576);
    CSA compressor state 4 tokens x 2 x 2 x 512 x 4 B = 32,768 -> 32,832 (57 x 576), padded to the 37,440 compressed
    page; indexer state 4 x 2 x 2 x 128 x 4 = 8,192 -> 8,640; HCA state 8 x 2 x 512 x 4 = 32,768 -> 37,440. That
    padding is vLLM 0.20-0.26's; from 0.27 the state pages keep their own 32,832 B."""
    by = _v4(FLASH, 32_768, vllm_release=(0, 22)).by_layer_type
    expect = {  # kind: (layers, tokens per page, real page, page vLLM uses after padding)
        "sliding_window": (43, 64, 37_376, 37_440),
        "csa_compressed_kv": (21, 256, 37_376, 37_440),
        "csa_indexer_keys": (21, 256, 8_448, 8_640),
        "csa_compressor_state": (21, 4, 32_768, 37_440),
        "csa_indexer_state": (21, 4, 8_192, 8_640),
        "hca_compressed_kv": (20, 256, 1_168, 1_728),
        "hca_compressor_state": (20, 8, 32_768, 37_440),
    }
    got = {k: (e["layers"], e["block_size"], e["page_bytes"], e["padded_page_bytes"]) for k, e in by.items()
           if k != "pool_padding"}
    assert got == expect
    assert 37_440 == 65 * 576 and 8_640 == 15 * 576 and 1_728 == 3 * 576 and 32_832 == 57 * 576
    assert 448 + 64 * 2 + 448 // 64 + 1 == 584
    newest = _v4(FLASH, 32_768).by_layer_type
    assert newest["csa_compressor_state"]["padded_page_bytes"] == newest["hca_compressor_state"]["padded_page_bytes"] == 32_832


@pytest.mark.parametrize("repo, tuples, block", [(FLASH, 22, 1_051_776), (PRO, 31, 1_482_048)])
def test_pool_block(repo, tuples, block):
    """One pool block = one page of each compressed page size (37,440 + 8,640 + 1,728 = 47,808 B) per layer tuple.
    Tuple counts per bucket: Flash [MLA 21, window 43, C4 state 21, C128 state 20] -> _approximate_gcd (lower bound
    21) = 22; the window bucket then splits into 2 groups (22 + 21), the widest has 22 tuples. Pro [31, 61, 31, 30]
    -> 31 (vLLM 0.20-0.22's layout). Block size 256 whatever --block-size says (the FlashMLA-sparse kernel's only
    size)."""
    est = _v4(repo, 131_072, block_size=16, vllm_release=(0, 22))
    assert est.bytes_per_block == 47_808 * tuples == block
    assert est.block_size == 256
    assert any("block_size 256 only (in place of 16)" in a for a in est.assumptions)
    assert est.bytes_per_token == block // 256


@pytest.mark.parametrize("repo", [FLASH, PRO])
@pytest.mark.parametrize("context, mbt", [(32_768, 8192), (131_072, 8192), (1_048_576, 8192), (30_000, 16_384),
                                          (5_000, 8192), (1, 8192), (300, 8192)])
def test_pages_per_request_by_hand(repo, context, mbt):
    """Five groups: compressed KV cdiv(L, 256); two window groups (cdiv(min(127 + B, L), 64) + 1 each); the C4
    state group (cdiv(min(7 + B, L), 4) + 1); the C128 state group (cdiv(min(127 + B, L), 8) + 1), B the tokens in
    flight: max_num_batched_tokens up to 0.25, twice it from 0.26. total_bytes = batch x pages x bytes_per_block in
    0.20-0.22 and from 0.29 (in between the fit check charges the 0.20 block: tests/test_vllm_planning_truth.py)."""
    for release, b in (((0, 22), mbt), (None, 2 * mbt)):
        est = _v4(repo, context, batch=3, max_batched_tokens=mbt, vllm_release=release)
        window = cdiv(min(127 + b, context), 64) + 1
        pages = cdiv(context, 256) + 2 * window + cdiv(min(7 + b, context), 4) + 1 + cdiv(min(127 + b, context), 8) + 1
        assert est.blocks_per_request == pages
        assert est.total_bytes == 3 * pages * est.bytes_per_block
        assert est.constant_bytes == (pages - cdiv(context, 256)) * est.bytes_per_block
        assert sum(e["bytes"] for e in est.by_layer_type.values()) == est.total_bytes
        assert est.by_layer_type["pool_padding"]["bytes"] > 0


def test_flash_numbers():
    """Flash at B = 8192 (vllm serve's default): 3,482 / 3,866 / 7,450 blocks at 32k / 128k / 1M tokens up to vLLM
    0.25, 6,810 / 7,194 / 10,778 from 0.26 (the window and state caches admit two batches in flight)."""
    for context, old, new in ((32_768, 3_482, 6_810), (131_072, 3_866, 7_194), (1_048_576, 7_450, 10_778)):
        assert _v4(FLASH, context, vllm_release=(0, 22)).blocks_per_request == old
        assert _v4(FLASH, context).blocks_per_request == new
    assert round(_v4(FLASH, 1_048_576, vllm_release=(0, 22)).total_bytes / GiB, 2) == 7.30
    assert round(_v4(PRO, 1_048_576, vllm_release=(0, 22)).total_bytes / GiB, 2) == 10.28
    assert round(_v4(FLASH, 1_048_576).total_bytes / GiB, 2) == 10.06
    assert round(_v4(PRO, 1_048_576).total_bytes / GiB, 2) == 14.41


def test_vllm_44376_log():
    """vllm-project/vllm#44376 (comment of 2026-06-03): DeepSeek-V4-Flash, 2 x GH200, LLM(...) offline, TP 2,
    kv_cache_dtype fp8, block_size 256, max_model_len 30000, no speculative decoding; max_num_batched_tokens not set,
    so the LLM class default on a GPU >= 70 GiB, 16384 (vllm/engine/arg_utils.py: EngineArgs.get_batch_defaults).
    The log: "6.66 GiB KV cache is needed" (kv_cache_planning.py: _check_enough_kv_cache_memory, from
    _max_memory_usage_bytes_from_groups) and "estimated maximum model length is 13528" with "5.44 GiB" available
    (_estimate_max_model_len_from_groups: the longest L whose pages x bytes_per_block fit). 5,554 pool blocks =
    5,841,563,904 B print as 5.44 GiB; with them 13,528 tokens fit and 13,529 do not. The issue is filed against
    vLLM 0.22, whose layout and window admission the estimate follows (0.20.2's own code gives the same 5,554 blocks and
    fit check: tests/test_vllm_planning_truth.py)."""
    est = _v4(FLASH, 30_000, tp=2, block_size=256, max_batched_tokens=16_384, vllm_release=V022)
    assert est.blocks_per_request == 118 + 259 + 259 + 4_099 + 2_065 == 6_800
    assert est.total_bytes == 6_800 * 1_051_776 == 7_152_076_800
    assert f"{est.total_bytes / GiB:.2f}" == "6.66"
    available = 5_554 * est.bytes_per_block
    assert available == 5_841_563_904 and f"{available / GiB:.2f}" == "5.44"
    fits = [_v4(FLASH, n, tp=2, max_batched_tokens=16_384, vllm_release=V022).total_bytes <= available for n in (13_528, 13_529)]
    assert fits == [True, False]
    # other budgets do not reproduce it: the default B = 8192 needs 3.40 GiB
    assert f"{_v4(FLASH, 30_000, tp=2, vllm_release=V022).total_bytes / GiB:.2f}" == "3.40"
    assert _v4(FLASH, 30_000, tp=2, max_batched_tokens=16_384, vllm_release=V022).total_bytes == _v4(
        FLASH, 30_000, max_batched_tokens=16_384, vllm_release=V022).total_bytes  # TP does not divide these caches


def test_planner_reproduces_44376(stub_repo):
    """The planner on the same case (vLLM 0.22): with exactly 5,554 blocks left for KV, kv_blocks = 5,554 (available //
    bytes_per_block), concurrency 5,554 over 0.22's divisor (get_max_concurrency_for_kv_cache_config: every group's
    pages at its own page bytes over the first group's, 6,035; 0.27 on sum the groups' 6,800), 30,000 tokens do not
    fit. vLLM's estimate, 13,528, keeps the profile of max_model_len 30,000
    (test_vllm_44376_log); hfmem's longest context is the max_model_len that fits when set, whose profile reserves a
    smaller prefill-gather workspace (cdiv(L, 4) rows of it): 16.8 MB less at 13,568 tokens, 16 blocks, 40 tokens."""
    report = hfmem.analyze(str(stub_repo(FLASH)))
    p = Planner(report, engine="vllm", tp=2, kv_dtype="fp8", block_size=256, max_batched_tokens=16_384,
                gpu_util=1.0, overhead=GiB, vllm_version="0.22")
    # the test GPU's compute capability is unknown: PyTorch's smaller cuBLAS workspaces, not the no-GPU H100 size
    act = p.activation(30_000, 1)[0] - cublas_workspace_bytes(None) + cublas_workspace_bytes(GPU("test", "test", 1))
    gpu = GPU("test", "test", p.weights_bytes + act + GiB + p.runner_state + p.cudagraph_memory + 5_554 * 1_051_776)
    plan = p.plan(30_000, 1, gpu)
    assert plan.kv_available_bytes == 5_554 * 1_051_776
    assert plan.kv_blocks == 5_554
    divisor = p.kv(30_000, 1).blocks_per_request_before_027
    assert p.kv(30_000, 1).blocks_per_request == 6_800 and divisor == 6_035
    assert plan.concurrency == round(5_554 / divisor, 4) and plan.max_concurrency == 0
    assert plan.kv_pool_tokens == int(5_554 / divisor * 30_000)
    assert plan.fits is False
    assert plan.max_context == 13_568 and not plan.max_context_capped


def test_mtp_adds_a_window_layer():
    """--speculative mtp: vLLM gives MTP layers compress ratio 1 (models/deepseek_v4.py: DeepseekV4Attention), so
    each adds one window cache; the window bucket has 44 layers, still 2 groups of <= 22: the same pool block."""
    one = _v4(FLASH, 65_536, mtp_layers=1, vllm_release=V022)
    none = _v4(FLASH, 65_536, vllm_release=V022)
    assert one.by_layer_type["mtp_sliding_window"]["layers"] == 1
    assert one.by_layer_type["sliding_window"]["layers"] == 43
    assert one.bytes_per_block == none.bytes_per_block and one.blocks_per_request == none.blocks_per_request
    assert one.by_layer_type["mtp_sliding_window"]["bytes"] == (cdiv(127 + 8192, 64) + 1) * 37_376
    # transformers is unchanged: no MTP cache
    t = estimate_kv(arch_of(FLASH), 65_536, engine="transformers", mtp_layers=1)
    assert t.total_bytes == estimate_kv(arch_of(FLASH), 65_536, engine="transformers").total_bytes


def test_kv_dtype_auto_uses_fp8():
    """vLLM asserts fp8 KV for DeepSeek-V4 (DeepseekV4MLAAttention): auto/bf16 give the fp8 figure, with a note."""
    auto = estimate_kv(arch_of(FLASH), 32_768)
    fp8 = _v4(FLASH, 32_768)
    assert auto.dtype == "fp8" and auto.total_bytes == fp8.total_bytes
    assert any("only with fp8 KV" in a for a in auto.assumptions)
    assert not any("only with fp8 KV" in a for a in fp8.assumptions)
    assert not auto.warnings and "bounds" not in auto.to_dict()


def test_cli_json_and_table(stub_repo):
    """The CLI: kv_cache per GPU at --gpus 2, with bytes_per_block and blocks_per_request, by --vllm-version (#44376's
    0.22, and the newest read by default); the table shows the pool."""
    args = [str(stub_repo(FLASH)), "--ctx", "30000", "--gpus", "2", "--kv-dtype", "fp8", "--max-batched-tokens", "16384",
            "--format", "json"]
    for version, expect in (("0.22", (1_051_776, 6_800, 7_152_076_800, 6_035)),
                            (None, (1_002_240, 12_310, 12_337_574_400, None))):
        out = CliRunner().invoke(main, args + (["--vllm-version", version] if version else []))
        assert out.exit_code == 0, out.output
        kv = json.loads(out.output)["kv_cache"]
        assert (kv["bytes_per_block"], kv["blocks_per_request"], kv["total_bytes"],
                kv.get("blocks_per_request_before_027")) == expect
        assert kv["block_size"] == 256 and "bounds" not in kv
    text = CliRunner().invoke(main, [str(stub_repo(FLASH)), "--ctx", "32k"]).output
    assert "pool_padding" in text and "1,002,240" in text


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([FLASH, PRO]), st.integers(1, 1 << 20), st.integers(1, 1 << 20), st.integers(1, 64),
       st.integers(1, 40_000), st.integers(0, 2))
def test_vllm_properties(repo, c1, c2, batch, mbt, mtp):
    """vLLM engine (the transformers figure is not monotone for DeepSeek-V4: window buffers are released when a
    window closes): monotone in context, linear in batch, parts add up, whole pool blocks, constant block size."""
    lo, hi = sorted((c1, c2))
    a, b = (_v4(repo, c, batch=batch, max_batched_tokens=mbt, mtp_layers=mtp) for c in (lo, hi))
    one = _v4(repo, lo, max_batched_tokens=mbt, mtp_layers=mtp)
    assert a.total_bytes <= b.total_bytes and a.bytes_per_block == b.bytes_per_block
    assert a.total_bytes == batch * one.total_bytes == batch * a.blocks_per_request * a.bytes_per_block
    assert sum(e["bytes"] for e in a.by_layer_type.values()) == a.total_bytes
    assert a.by_layer_type["pool_padding"]["bytes"] >= 0
    assert a.total_bytes >= batch * (a.bytes_per_token * lo + a.constant_bytes)


def test_approximate_gcd_ties_to_the_larger():
    """kv_cache_planning.py: _approximate_gcd: least total round-up padding, ties to the larger divisor (Flash's
    [21, 43, 21, 20] from 21: 22 pads 5 layers, 21 pads 21)."""
    from hfmem.memory.kv.vllm_deepseek_v4 import _approximate_gcd

    assert _approximate_gcd([2, 4], 1) == 2
    assert _approximate_gcd([21, 43, 21, 20], 21) == 22
    assert _approximate_gcd([31, 61, 31, 30], 31) == 31


@pytest.mark.parametrize("repo, block", [(FLASH, 1_002_240), (PRO, 1_435_968)])
def test_packed_layout_by_hand(repo, block):
    """vLLM 0.29 on (_get_packed_kv_cache_groups, _get_kv_cache_bytes_per_block): no padding to compressed pages, one
    block = the widest group: the compressed-KV group, 21 x (37,440 + 8,640) + 20 x 1,728 on Flash (30 x 46,080 +
    31 x 1,728 on Pro). Same pages per request at the same admitted tokens; #44376's case would need 6.35 GiB, not the
    logged 6.66 GiB: that log ran 0.22's layout."""
    from hfmem.memory.kv.layers import describe_layers
    from hfmem.memory.kv.vllm_deepseek_v4 import deepseek_v4_vllm

    arch = arch_of(repo)
    packed = deepseek_v4_vllm(arch, describe_layers(arch, "vllm"), "fp8", 30_000, 1, 256, 16_384, layout="packed")
    assert packed.bytes_per_block == block
    assert packed.blocks_per_request == 6_800
    assert packed.constant_bytes == (6_800 - 118) * block
    if repo == FLASH:
        assert block == 21 * (37_440 + 8_640) + 20 * 1_728 and f"{packed.total_bytes / GiB:.2f}" == "6.35"
    else:
        assert block == 30 * (37_440 + 8_640) + 31 * 1_728
    assert sum(e["bytes"] for e in packed.by_layer_type.values()) == packed.total_bytes


@pytest.mark.parametrize("release, indices", [((0, 20), False), ((0, 26), False), ((0, 27), True), (None, True)])
def test_prefill_gather_workspace_by_hand(release, indices):
    """The profile's dummy run reserves [PREFILL_CHUNK_SIZE 4, M, head_dim 512] bf16 in vLLM's shared workspace, M =
    cdiv(max_model_len, 4) (the CSA layers' ratio, the smallest) + window 128 + max_num_batched_tokens; from 0.27 also
    int32 [T, round_up(1024 + 128, 128)] combined top-k indices and [T] lengths (deepseek_v4_attention.py in 0.20.2;
    models/deepseek_v4/nvidia/flashmla.py from 0.25). V4-Pro at 800k with 512 batched tokens: 0.77 GiB."""
    from hfmem.memory.planner import deepseek_v4_gather_workspace

    got = deepseek_v4_gather_workspace(arch_of(PRO), 800_000, 512, release)
    expect = 4 * (200_000 + 128 + 512) * 512 * 2 + (512 * (1152 + 1) * 4 if indices else 0)
    assert got == expect
    assert deepseek_v4_gather_workspace(arch_of("Qwen/Qwen3-8B"), 800_000, 512, release) == 0


def test_rotary_caches_one_per_theta_in_fp32():
    """DeepseekV4ScalingRotaryEmbedding keeps an fp32 cache over 65,536 x 16 positions and 64 rope dims per distinct
    theta: V4-Flash builds two (layers 0-1 slide only: rope_theta; the rest compress: compress_rope_theta), V4-Pro
    one (every main layer compresses), two with an MTP layer (ratio 1: rope_theta)."""
    from hfmem.memory.planner import _rope_caches

    cache = 65_536 * 16 * 64 * 4
    assert _rope_caches(arch_of(FLASH), 2) == [cache, cache]
    assert _rope_caches(arch_of(PRO), 2) == [cache]
    assert _rope_caches(arch_of(PRO), 2, mtp=True) == [cache, cache]


def test_0200_token_log_divides_by_groups(stub_repo):
    """vLLM 0.20.0 still logs "GPU KV cache size" as num_blocks // groups x the smallest group's block size
    (kv_cache_utils.py _report_kv_cache_config; the concurrency form from 0.20.1): for DeepSeek-V4 five groups and
    the ratio-4 state group's 4-token blocks, where 0.20.2 prints int(concurrency x max_model_len)."""
    report = hfmem.analyze(str(stub_repo(FLASH)))
    gpu = GPU("h200", "H200", int(139.8 * GiB))
    for version in ("0.20.0", "0.20.2"):
        plan = Planner(report, engine="vllm", tp=2, kv_dtype="fp8", vllm_version=version).plan(65_536, 1, gpu)
        one = Planner(report, engine="vllm", tp=2, kv_dtype="fp8", vllm_version=version).kv(65_536, 1)
        assert one.kv_groups == 5 and one.smallest_group_block == 4
        expect = (plan.kv_blocks // 5 * 4 if version == "0.20.0" else
                  int(plan.kv_blocks / one.blocks_per_request_before_027 * 65_536))
        assert plan.kv_pool_tokens == expect
