"""Saved activations of state-space (Mamba, Mamba-2) and linear-attention (Gated DeltaNet) mixers, term by term, for
the two code paths a training step can take:

* ``torch``: the pure-PyTorch fallbacks transformers runs when the kernels are not installed (always on CPU):
  models/mamba/modeling_mamba.py: MambaMixer.forward + mamba_selective_scan (the sequential scan; Jamba's
  JambaMambaMixer is the same path with dt/B/C RMSNorms), models/mamba2/modeling_mamba2.py: Mamba2Mixer.forward +
  mamba2_chunk_scan + MambaRMSNormGated (FalconH1Mixer and NemotronHMamba2Mixer run the same chunk scan),
  models/qwen3_next/modeling_qwen3_next.py: Qwen3NextGatedDeltaNet.forward + torch_chunk_gated_delta_rule
  (Qwen3.5 the same). Every term below is a tensor those functions save for backward, read from the code and
  checked tensor by tensor with a saved-tensor hook (tests/test_training_ssm_truth.py).
* ``fused``: the kernels a GPU user with mamba-ssm / causal-conv1d / flash-linear-attention installed runs; their
  autograd Functions save only what ``ctx.save_for_backward`` lists and recompute the rest in backward:
  mamba_ssm/ops/selective_scan_interface.py: MambaInnerFn.forward (xz, x_dbl, B and C copies, the scan output
  ``out``, the fp32 states at 2048-token chunk boundaries; conv output, delta and out_z recomputed),
  mamba_ssm/ops/triton/ssd_combined.py: MambaSplitConv1dScanCombinedFn.forward (zxbcdt, out_x, rstd; the conv
  output, dt, chunk states and the normed out_proj input recomputed), fla/ops/gated_delta_rule/chunk.py:
  ChunkGatedDeltaRuleFunction.forward (q, k, v, q/k rstd, g (fp32 cumsum), beta and the solved per-chunk block A
  in k's dtype). Read from that source, not measured (no CUDA here).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hfmem.model.inventory import CountedTensor

SSM_KERNELS = ("auto", "fused", "torch")
# transformers' torch fallbacks: mamba2_chunk_scan pads the sequence to a multiple of the config's chunk size
# (default 256 in Mamba2Config); torch_chunk_gated_delta_rule chunks at 64 (its default, which the GDN layers use).
GDN_CHUNK = 64


@dataclass(frozen=True)
class Mixer:
    """One SSM / linear-attention mixer as the activation terms see it (shapes from the checkpoint, the rest from
    the config)."""

    kind: str  # "mamba" | "mamba2" | "gated_deltanet"
    inner: int  # d_inner (Mamba: intermediate; GDN: value heads x value dim)
    state: int = 0  # N (Mamba / Mamba-2)
    heads: int = 0  # Mamba-2 heads / GDN value heads
    groups: int = 1  # Mamba-2 B/C groups
    dt_rank: int = 0  # Mamba-1 delta rank
    conv_dim: int = 0  # channels of the depthwise conv
    in_proj: int = 0  # width of the input projection(s) output
    chunk: int = 256
    key_heads: int = 0  # GDN
    key_dim: int = 0  # GDN per-head key dim
    value_dim: int = 0  # GDN per-head value dim
    bcdt_norms: bool = False  # Jamba: RMSNorms on dt, B, C
    gated_norm: bool = True  # Mamba-2: MambaRMSNormGated (Falcon-H1 with mamba_rms_norm=False: y * silu(z))


def find_mixer(ts: list[CountedTensor], cfg: dict[str, Any]) -> Mixer | None:
    """The layer's mixer from its tensors: Mamba-1 has a 2-D A_log [d_inner, N] and x_proj; Mamba-2 a 1-D A_log
    [heads] and a mixer norm; Gated DeltaNet in_proj_qkv(z) / in_proj_ba (or a/b) beside A_log and dt_bias."""
    by_leaf: dict[str, CountedTensor] = {}
    for c in ts:
        parts = c.entry.name.split(".")
        leaf = parts[-2] + "." + parts[-1] if len(parts) > 1 and parts[-1] in ("weight", "bias") else parts[-1]
        by_leaf.setdefault(leaf, c)
    a_log = by_leaf.get("A_log")
    if a_log is None:
        return None
    conv = by_leaf.get("conv1d.weight")
    conv_dim = int(conv.entry.shape[0]) if conv is not None else 0

    def width(leaf: str, dim: int = 0) -> int:
        c = by_leaf.get(leaf)
        return int(c.entry.shape[dim]) if c is not None else 0

    if len(a_log.entry.shape) == 2:
        inner, state = (int(x) for x in a_log.entry.shape)
        return Mixer("mamba", inner, state=state, dt_rank=width("dt_proj.weight", 1), conv_dim=conv_dim or inner,
                     in_proj=width("in_proj.weight"), bcdt_norms="dt_layernorm.weight" in by_leaf)
    heads = int(a_log.entry.shape[0])
    if any(k in by_leaf for k in ("in_proj_qkvz.weight", "in_proj_qkv.weight")):
        kh = int(cfg.get("linear_num_key_heads") or 0)
        kd = int(cfg.get("linear_key_head_dim") or 0)
        vd = int(cfg.get("linear_value_head_dim") or 0)
        if not (kh and kd and vd):
            return None
        proj = sum(width(k) for k in ("in_proj_qkvz.weight", "in_proj_ba.weight", "in_proj_qkv.weight", "in_proj_z.weight",
                                      "in_proj_b.weight", "in_proj_a.weight"))
        return Mixer("gated_deltanet", heads * vd, heads=heads, conv_dim=conv_dim, in_proj=proj, chunk=GDN_CHUNK,
                     key_heads=kh, key_dim=kd, value_dim=vd)
    inner = width("out_proj.weight", 1)
    groups = int(cfg.get("n_groups") or cfg.get("mamba_n_groups") or 1)
    if not inner or not conv_dim or (conv_dim - inner) % (2 * groups):
        return None
    chunk = int(cfg.get("chunk_size") or cfg.get("mamba_chunk_size") or 256)
    gated = cfg.get("mamba_rms_norm", True) is not False
    return Mixer("mamba2", inner, state=(conv_dim - inner) // (2 * groups), heads=heads, groups=groups,
                 conv_dim=conv_dim, in_proj=width("in_proj.weight"), chunk=chunk, gated_norm=gated)


def padded(seq: int, chunk: int) -> int:
    return math.ceil(seq / chunk) * chunk


def mixer_terms(m: Mixer, path: str, e: int, seq: int, autocast: bool = False,
                release: str | None = None) -> tuple[dict[str, float], int]:
    """(saved bytes per token by term, token-independent bytes) of one mixer at ``seq`` tokens per sequence. ``e``:
    the model dtype's bytes; fp32 copies (``.float()``) exist only when e < 4 (on fp32 tensors they are no-ops and
    alias the original). Terms over the padded length (chunked scans) are scaled by padded / seq. Under autocast
    (HF Trainer bf16=True) the chunked scans' einsums / matmuls run in bf16: their outputs and the operand copies
    they save are 2 B, the elementwise exp / mul / solve results stay fp32. ``release``: the transformers release
    whose torch path is modelled (default: the installed one; hfmem.model.release)."""
    cp = 4 if e < 4 else 0
    mm = 2 if autocast else 4
    t: dict[str, float] = {}
    fixed = 0
    if m.kind == "mamba":
        i, n, r = m.inner, m.state, m.dt_rank
        if path == "torch":
            t["SSM projections (in_proj out, conv out + act, x_proj out, dt)"] = e * (2 * i + i + i + (r + 2 * n) + 2 * i)
            # mamba_selective_scan: exp(A*dt) [I,N] and dt*B [I,N] per token in fp32, kept whole by the per-step
            # slices; per step the fp32 state (saved by the next step's multiply) and its copy in the model dtype
            # (saved by the matmul with C)
            t["SSM scan (discretised A, B, per-step states)"] = 4 * i * n * 3 + (e * i * n if e < 4 else 0)
            t["SSM scan inputs/outputs (fp32 x, B, y; gate)"] = cp * (i + n) + 4 * i + e * i + (e * i if e < 4 else 0)
            fixed += 8 * i * n + e * i * n  # A = -exp(A_log) and its broadcast product, the zero initial state
        else:
            # MambaInnerFn (out_proj inside the Function, checkpoint_lvl 1): xz (the in_proj output), x_dbl (dt, B,
            # C), contiguous copies of B and C, the scan output ``out``; the conv output and delta are recomputed in
            # backward, out_z too; scan_intermediates: the fp32 [I, 2N] state at each 2048-token chunk boundary
            t["SSM projections (in_proj out, conv out + act, x_proj out, dt)"] = e * (2 * i + (r + 2 * n) + 2 * n)
            t["SSM scan (discretised A, B, per-step states)"] = 4 * i * 2 * n * math.ceil(seq / 2048) / seq
            t["SSM scan inputs/outputs (fp32 x, B, y; gate)"] = e * i
            if m.bcdt_norms:
                # Jamba (JambaMambaMixer.forward) calls the kernels one by one: causal_conv1d_fn (its input),
                # x_proj's input (the conv output), delta (dt_proj's output), SelectiveScanFn (u, delta, B, C, z,
                # out) and out_proj's input (out_z)
                t["SSM projections (in_proj out, conv out + act, x_proj out, dt)"] = e * (2 * i + i + (r + 2 * n) + i)
                t["SSM scan inputs/outputs (fp32 x, B, y; gate)"] = e * (i + i)
        if m.bcdt_norms:  # Jamba: dt_layernorm / b_layernorm / c_layernorm (fp32 input, rstd, 16-bit output)
            t["SSM dt/B/C norms"] = (4 + e) * (r + 2 * n) + 12
        return t, fixed
    if m.kind == "mamba2":
        i, h, n, c, g = m.inner, m.heads, m.state, m.chunk, m.groups
        pad = padded(seq, c) / seq
        t["SSM projections (in_proj out, conv out + act, x_proj out, dt)"] = e * (m.in_proj + (m.conv_dim if path == "torch" else 0))
        if path == "torch":
            # mamba2_chunk_scan, per token: dt (softplus in, clamp in, fp32 copies), x in fp32 (x * dt);
            # per padded token: x padded for D, the per-chunk L = exp(segsum), G = C.B^T, M = G * L and the copy of
            # M einsum saves, the B, C chunk copies (repeated per head), B*decay, C.states, Y_off's input, the
            # decays, the chunk states; with more than one chunk the einsums over permuted chunks save contiguous
            # copies of B*decay, x and C as well
            copies = autocast or padded(seq, c) > c
            t["SSM scan (discretised A, B, per-step states)"] = 16 * h + cp * i + pad * (
                (4 + 2 * mm) * h * c + (2 * mm + 4) * h * n + (2 * mm + 4) * i + 3 * 4 * h + 3 * mm * i * n / c
                + (2 * mm * h * n + mm * i if copies else 0))
            fixed += 2 * 2 * c * c  # segment_sum's two bool masks, twice
            # The scan output (fp32) is the norm's input. 5.24's mixers keep a view of the chunk scan's padded
            # output; 5.25's mamba2_scan_forward (models/mamba2/modeling_mamba2.py, and its copies in bamba,
            # falcon_h1, granitemoehybrid, nemotron_h, zamba2) returns torch.cat(all_outputs), an unpadded copy,
            # and the padded storage is freed.
            from hfmem.model.release import at_least

            out_fp32 = 4 * i if at_least(5, 25, release) else 4 * pad * i
        else:
            # MambaSplitConv1dScanCombinedFn (norm and out_proj inside the Function): zxbcdt (the in_proj output),
            # out_x (the scan output, model dtype) and rstd per group; the conv output, dt, the chunk states, the
            # normed output are recomputed in backward
            t["SSM scan (discretised A, B, per-step states)"] = 4 * g
            out_fp32 = e * i
        if m.gated_norm and path == "torch":
            # MambaRMSNormGated: fp32 gate copy, silu(gate) out, the product, rstd per group, the normed output
            t["SSM scan inputs/outputs (fp32 x, B, y; gate)"] = out_fp32 + cp * i + 4 * i + 4 * i + 4 * g + 4 * i + e * i
        elif path == "torch":  # Falcon-H1 mamba_rms_norm=False: y * silu(z)
            t["SSM scan inputs/outputs (fp32 x, B, y; gate)"] = out_fp32 + e * i + e * i
        else:
            t["SSM scan inputs/outputs (fp32 x, B, y; gate)"] = out_fp32
        return t, fixed
    # Gated DeltaNet
    hv, kd, vd, c = m.heads, m.key_dim, m.value_dim, m.chunk
    key, value = hv * kd, hv * vd  # q/k repeated to the value heads
    pad = padded(seq, c) / seq
    # g = -exp(A_log) * softplus(a.float() + dt_bias) (fp32 input and output), beta = sigmoid(b) (output)
    t["SSM projections (in_proj out, conv out + act, x_proj out, dt)"] = e * (m.conv_dim + m.conv_dim) + 8 * hv + e * hv
    if path == "torch":
        # torch_chunk_gated_delta_rule: l2norm'd q, k (fp32, per token); per padded token the chunk-pair
        # matrices (decay, k.k^T, the UT system, q.k^T, the masked attention: 5 x [heads, c]), k_beta, the k/q
        # copies the matmuls save, k_cumdecay, the decayed q and k, v_beta, the solved values, v_new, and the
        # recurrent state per chunk
        t["SSM scan (discretised A, B, per-step states)"] = 2 * 4 * key + 8 * hv + pad * (
            (8 + 3 * mm) * hv * c + (8 + 4 * mm) * key + (8 + mm) * value + mm * hv * kd * vd / c + 16 * hv)
        # Qwen3NextRMSNormGated: fp32 input, fp32 gate copy, silu out, rstd, normed output, output * gate
        t["SSM scan inputs/outputs (fp32 x, B, y; gate)"] = 4 * value + cp * value + 4 * value + 4 * hv + e * value + e * value
    else:
        # causal_conv1d_fn (silu fused) saves its input, the in_proj output (z, b, a views included); fla
        # ChunkGatedDeltaRuleFunction saves q, k, v (the conv output, key heads not repeated), q_rstd and k_rstd
        # (use_qk_l2norm_in_kernel), g (fp32 chunk cumsum), beta and A (the solved [T, 64] block per head, in
        # k's dtype: solve_tril(output_dtype=k.dtype)); fla FusedRMSNormGated saves o and rstd (z is the in_proj
        # output's view)
        t["SSM projections (in_proj out, conv out + act, x_proj out, dt)"] = e * (m.in_proj + m.conv_dim) + 8 * hv + e * hv
        t["SSM scan (discretised A, B, per-step states)"] = 4 * 2 * m.key_heads + 4 * hv + e * hv * c
        t["SSM scan inputs/outputs (fp32 x, B, y; gate)"] = e * value + 4 * hv
    t["SSM projections (in_proj out, conv out + act, x_proj out, dt)"] += e * value  # out_proj input
    return t, fixed


def mixer_backward(m: Mixer, path: str, e: int, seq: int) -> float:
    """Bytes per token alive during the mixer's backward beyond its saved tensors (torch paths; the fused kernels
    recompute inside their backward kernels, in on-chip memory):
    * Mamba-1 (mamba_selective_scan's loop): autograd builds the gradients of exp(A*dt) and dt*B*x from per-step
      slices: select_backward materialises a full [I, N] x tokens zero tensor per step, which is added to the
      running gradient (the sum is a new tensor before the old one is freed), for both tensors: 4 x 4 I N.
    * Mamba-2 (mamba2_chunk_scan) and Gated DeltaNet (torch_chunk_gated_delta_rule): the backward of the masked
      chunk-pair product (M = G * L; q.k^T * decay) holds the gradient of the product and of both factors at once,
      after the matmul that consumed the product freed its saved copy: 2 x 4 x heads x chunk per padded token."""
    if path != "torch":
        return 0.0
    if m.kind == "mamba":
        return 4 * 4 * m.inner * m.state
    return 2 * 4 * m.heads * m.chunk * padded(seq, m.chunk) / seq
