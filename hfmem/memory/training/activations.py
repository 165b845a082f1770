"""Activation memory of one training step: the tensors each decoder layer saves for backward, term by term, the
non-layer terms, the logits and loss, and the peak of forward + backward (see docs/training.md)."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from hfmem.memory.training.lora import CONV1D_TYPES, CROSS_KEYS, MLP_MID, Adapter, LinearModule, group_of, is_text_component, linear_modules
from hfmem.memory.training.settings import PrecisionBytes, TrainingSettings
from hfmem.memory.training.ssm import Mixer, find_mixer, mixer_backward, mixer_terms
from hfmem.units import cdiv

if TYPE_CHECKING:
    from hfmem.api import Report
    from hfmem.model.architecture import Architecture
    from hfmem.model.inventory import CountedTensor

# transformers 5.24 and 5.25 refuse SDPA for these (the model class sets ``_supports_sdpa = False``): HF training runs eager unless flash is chosen.
_NO_SDPA = {"gemma2"}
# Eager attention softmax in the model dtype (no fp32 upcast): models/t5/modeling_t5.py and
# models/whisper/modeling_whisper.py: eager_attention_forward.
_SOFTMAX_IN_DTYPE = {"t5", "mt5", "umt5", "whisper"}
# Seq2seq heads computing CrossEntropyLoss on the model-dtype logits (no fp32 upcast): T5ForConditionalGeneration,
# WhisperForConditionalGeneration.forward.
_CE_IN_DTYPE = {"t5", "mt5", "umt5", "whisper"}
# RMSNorms that multiply the fp32 weight by the fp32 normalised input (saved in fp32, as Gemma's (1 + w) * x):
# models/nemotron_h/modeling_nemotron_h.py: NemotronHRMSNorm.forward.
_FP32_NORM_OUT = {"nemotron_h"}
# Routers computed in fp32 (``F.linear(hidden.float(), weight.float())``, DeepSeek TopkRouter): +4h saved per token.
_FP32_ROUTER = {"deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "glm4_moe", "glm4_moe_lite", "glm_moe_dsa"}
# Activation functions: tensors of size I saved by the activation itself (native kernels save their input only).
# relu saves only its output, which the next Linear saves as its input anyway.
_ACT_SAVES = {"silu": 1, "swish": 1, "gelu": 1, "gelu_pytorch_tanh": 1, "relu": 0, "gelu_new": 4, "gelu_fast": 4,
              "quick_gelu": 2, "gelu_python": 2, "relu2": 2}


@dataclass
class _Dtypes:
    """Element bytes of the saved activations by kind, for one method and precision."""

    res: int  # residual stream / norm input
    lin: int  # outputs of Linear layers (MLP intermediates)
    sdpa: int  # q, k, v, out saved by the attention kernel
    adapter: int  # LoRA adapter weights
    autocast: bool  # HF Trainer bf16=True: matmul inputs cast to bf16 per call


@dataclass
class LayerFacts:
    """One decoder layer as the activation terms see it."""

    index: int
    attention: str  # "gqa" | "mla" | "none"
    sliding: bool
    hidden_norms: int
    qk_norm: bool
    mlp: str  # "gated" | "plain" | "moe" | "none"
    intermediate: int
    experts: int = 0
    top_k: int = 0
    expert_intermediate: int = 0
    shared_intermediate: int = 0
    shared_gate: bool = False
    expert_params: dict[str, int] = field(default_factory=dict)
    linear_params: int = 0
    groups: dict[str, list[LinearModule]] = field(default_factory=dict)  # activation group -> Linear modules
    cross: bool = False  # a decoder layer with cross-attention over the encoder output
    mixer: Mixer | None = None  # a state-space / linear-attention mixer (Mamba, Mamba-2, Gated DeltaNet)
    output_gate: bool = False  # q_proj also emits a per-head gate: out = attn * sigmoid(gate) (Qwen3-Next, Qwen3.5)


def stack_of(name: str) -> str | None:
    """Which stack of an encoder-decoder model a tensor belongs to ("encoder", "decoder"), from its name."""
    for stack in ("encoder", "decoder"):
        if name.startswith(stack + ".") or f".{stack}." in name:
            return stack
    return None


def is_cross_attention(name: str) -> bool:
    """Decoder cross-attention modules (T5 EncDecAttention, Whisper/BART encoder_attn, BERT-style crossattention)."""
    return any(k in name for k in CROSS_KEYS)


def layer_facts(report: Report, stack: str | None = None) -> list[LayerFacts]:
    """What each decoder layer is made of (attention kind, norms, MLP or MoE shapes, Linear modules by group).
    ``stack`` ("encoder" / "decoder"): the layers of one stack of an encoder-decoder model (both share layer
    indices in the checkpoint: encoder.block.0 and decoder.block.0)."""
    arch = report.architecture
    by_layer: dict[int, list[CountedTensor]] = defaultdict(list)
    for c in report.tensors:
        if c.layer is None or not is_text_component(c.component) or c.role not in ("param", "quantized"):
            continue
        if stack is not None and stack_of(c.entry.name) != stack:
            continue
        if stack is None and c.layer >= arch.num_layers:
            continue
        by_layer[c.layer].append(c)
    n_layers = (max(by_layer) + 1 if by_layer else 0) if stack is not None else arch.num_layers
    h = arch.hidden_size
    top_k = int((arch.moe.experts_per_token if arch.moe else 0) or 0)
    facts: list[LayerFacts] = []
    lt = arch.layer_type_list or []
    lin_by_layer: dict[int | None, list[LinearModule]] = defaultdict(list)
    for m in linear_modules(report):
        if is_text_component(m.component) and (stack is None or stack_of(m.name) == stack):
            lin_by_layer[m.layer].append(m)
    for i in range(n_layers):
        ts = by_layer.get(i, [])
        names = [c.entry.name for c in ts]
        kind = lt[i] if i < len(lt) else "full_attention"
        attn = "none"
        if kind in ("full_attention", "sliding_attention", "chunked_attention", "attention") or any(
            n.endswith(("q_proj.weight", "c_attn.weight", "qkv_proj.weight", "q_a_proj.weight", "query_key_value.weight", "SelfAttention.q.weight"))
            for n in names
        ):
            attn = "mla" if arch.mla else "gqa"
        if kind in ("mamba", "linear_attention", "mlp_only", "moe_only"):
            attn = "none"
        hidden_norms = sum(
            1 for c in ts if c.component == "norms" and c.entry.name.endswith("weight") and tuple(c.entry.shape) == (h,)
            and not re.search(r"(q_a_layernorm|kv_a_layernorm|q_norm|k_norm)\.weight$", c.entry.name)
            and not _is_cross_norm(c.entry.name, names)
        )
        qk_norm = any(n.endswith(("q_norm.weight", "k_norm.weight")) for n in names)
        f_cross = any(is_cross_attention(n) for n in names)
        experts = _expert_tensors_layer(ts)
        f = LayerFacts(i, attn, kind == "sliding_attention", hidden_norms or 2, qk_norm, "none", 0, cross=f_cross,
                       mixer=find_mixer(ts, arch.text_config or {}))
        q_rows = next((int(c.entry.shape[0]) for c in ts if c.entry.name.endswith("self_attn.q_proj.weight") and len(c.entry.shape) == 2), 0)
        f.output_gate = bool(arch.num_attention_heads and arch.head_dim) and q_rows == 2 * arch.num_attention_heads * arch.head_dim
        if f.mixer is not None and not any(
            n.endswith(("q_proj.weight", "qkv_proj.weight", "query_key_value.weight")) for n in names
        ):
            f.attention = "none"  # a Mamba layer of a hybrid whose config lists no layer types (Jamba)
        f.linear_params = sum(c.logical for c in ts)
        for m in lin_by_layer.get(i, []):
            f.groups.setdefault(group_of(m), []).append(m)
        if experts:
            f.mlp = "moe"
            f.experts = experts["count"]
            f.expert_intermediate = experts["intermediate"]
            f.top_k = top_k or 1
            f.expert_params = experts["params"]
            shared = [c for c in ts if c.component == "moe_shared_experts" and len(c.entry.shape) == 2 and _mid(c.entry.name)]
            if shared:
                f.shared_intermediate = sum(_in_dim(c, arch) for c in shared)
            f.shared_gate = any(c.entry.name.endswith("shared_expert_gate.weight") for c in ts)
        else:
            mids = [c for c in ts if c.component == "mlp" and len(c.entry.shape) == 2 and _mid(c.entry.name)]
            if mids:
                f.intermediate = _in_dim(mids[0], arch)
                gated = any(re.search(r"(gate_proj|gate_up_proj|w1|w3|up_proj|fc1_gate|wi_0)\.weight$", n) for n in names)
                f.mlp = "gated" if gated and not re.search(r"(c_fc|fc1)\.weight$", " ".join(names)) else "plain"
                if any(n.endswith("gate_up_proj.weight") for n in names):
                    f.mlp = "gated"
            elif arch.intermediate_size and attn != "none":
                f.mlp, f.intermediate = "gated", int(arch.intermediate_size)
        facts.append(f)
    return facts


def _is_cross_norm(name: str, names: list[str]) -> bool:
    """The norm in front of a cross-attention block: Whisper/BART encoder_attn_layer_norm, T5's layer.1.layer_norm
    of a decoder block whose layer.1 is EncDecAttention."""
    if "encoder_attn_layer_norm" in name or "crossattention" in name:
        return True
    m = re.search(r"^(.*\.layer\.\d+\.)layer_norm\.weight$", name)
    return m is not None and any(n.startswith(m.group(1) + "EncDecAttention.") for n in names)


def _mid(name: str) -> bool:
    leaf = name.rsplit(".", 2)[-2] if name.endswith(".weight") else ""
    return leaf in MLP_MID or leaf == "c_proj"


def _in_dim(c: CountedTensor, arch: Architecture) -> int:
    shape = c.entry.shape
    return int(shape[0] if arch.model_type in CONV1D_TYPES else shape[1])


def _expert_tensors_layer(ts: list[CountedTensor]) -> dict[str, Any] | None:
    exp = [c for c in ts if c.component == "moe_experts" and not c.entry.name.endswith(("_bias", ".bias", "_scales"))]
    if not exp:
        return None
    params: dict[str, int] = defaultdict(int)
    ids: set[str] = set()
    inter = 0
    for c in exp:
        m = re.search(r"experts\.(\d+)\.", c.entry.name)
        if m:
            ids.add(m.group(1))
        stem = c.entry.name[: -len(".weight")] if c.entry.name.endswith(".weight") else c.entry.name
        leaf = stem.rsplit(".", 1)[-1].replace("_blocks", "")
        params[leaf] += c.logical
        if leaf in ("w2", "down_proj"):
            shape = c.entry.shape
            inter = int(shape[-1]) if len(shape) == 2 else int(shape[-1])
    count = len(ids)
    if not count:
        fused = [c for c in exp if len(c.entry.shape) == 3]
        count = int(fused[0].entry.shape[0]) if fused else 1
        down = next((c for c in fused if "down" in c.entry.name), None)
        if down is not None:
            e, a, b = down.entry.shape  # [E, h, I] (or [E, I, h] for gpt-oss style storage)
            inter = int(min(a, b)) if inter == 0 else inter
    return {"count": count, "intermediate": inter, "params": dict(params)}


@dataclass
class _ActContext:
    """What every layer's terms depend on besides the layer itself."""

    method: str
    dt: _Dtypes
    seq: int
    attn: str
    adapters_by_layer: dict[int | None, list[Adapter]]
    norm_style: str  # "rms" | "gemma" | "layernorm"
    act_saves: int
    trainable_base: bool
    dora: bool
    attn_dropout: float
    resid_dropout: float
    softcap: bool
    softmax_in_dtype: bool = False  # eager softmax in the model dtype (T5, Whisper), not upcast to fp32
    mlp_dropout: float = 0.0  # dropout between the MLP activation and its down projection (T5, Whisper)
    enc_tokens: int = 0  # encoder tokens of the micro-batch (encoder-decoder models)
    enc_seq: int = 0  # encoder tokens per sequence
    ssm_path: str = "fused"  # "fused" | "torch": the code path of SSM / linear-attention mixers


def _norm_bytes(n: int, ctx: _ActContext, trainable: bool) -> int:
    """Saved bytes per token of one norm over n features."""
    if ctx.norm_style == "layernorm":
        return ctx.dt.res * n + 8  # native_layer_norm saves its input + fp32 mean/rstd
    out = (4 if ctx.norm_style == "gemma" else ctx.dt.res) * n if trainable else 0
    return 4 * n + 4 + out  # fp32 copy of the input (or the fp32 input itself) + rstd + normalised output if w trains


def _layer_terms(f: LayerFacts, arch: Architecture, ctx: _ActContext, first: bool) -> tuple[dict[str, int], int, int]:
    """(saved bytes per token by term, token-independent saved bytes, bytes at the encoder tokens) for one layer."""
    dt = ctx.dt
    h = arch.hidden_size
    t: dict[str, int] = defaultdict(int)
    fixed = 0
    adapters = ctx.adapters_by_layer.get(f.index, [])
    adapted_groups: dict[str, list[Adapter]] = defaultdict(list)
    for a in adapters:
        adapted_groups[a.group].append(a)
    full = ctx.trainable_base
    encoder_side = [0]  # bytes that scale with the encoder tokens (cross-attention k/v), not with this stack's

    def linear_input(group: str, features: int, elem: int, already_saved: bool = False) -> None:
        """The input of the Linear layers in `group`, as saved for their weight gradients (deduplicated: q/k/v share
        one tensor), or the copies their LoRA adapters save."""
        if full:
            if dt.autocast and elem == 4:  # autocast casts the fp32 input per matmul call and saves each copy
                t["linear inputs (autocast bf16 copies)"] += 2 * features * max(1, len(f.groups.get(group, ())))
            elif not already_saved:
                t["linear inputs"] += elem * features
            return
        group_adapters = adapted_groups.get(group, [])
        for a in group_adapters:
            _adapter_terms(a, elem, t, ctx, features)
        shares = any(a.kind == "linear" and not dt.autocast and dt.adapter == elem for a in group_adapters)
        shares = shares or any(a.kind == "router" for a in group_adapters)  # ParamWrapper: W' needs grad -> input saved
        if shares and not already_saved:
            t["adapter inputs (shared)"] += elem * features

    # --- attention ---------------------------------------------------------------------------------------
    if f.attention != "none":
        nq, nkv, d = arch.num_attention_heads, arch.num_kv_heads, arch.head_dim
        if not (first and not full):
            # LoRA without checkpointing: the embedding output needs no gradient, so layer 0's input norm saves nothing
            t["norms"] += _norm_bytes(h, ctx, full)
        linear_input("attn_in", h, dt.res)
        if f.attention == "mla":
            m = arch.mla
            assert m is not None  # f.attention == "mla" only when the config has MLA
            rq = m.q_lora_rank
            rkv = m.kv_lora_rank
            dqk = m.qk_nope_head_dim + m.qk_rope_head_dim
            dv = m.v_head_dim
            if rq:
                t["norms"] += _norm_bytes(int(rq), ctx, full)
                linear_input("attn_mid:q_b_proj", int(rq), dt.lin)
            t["norms"] += _norm_bytes(rkv, ctx, full)
            linear_input("attn_mid:kv_b_proj", rkv, dt.lin)
            q_b, k_b, v_b = nq * dqk, nq * dqk, nq * (m.qk_nope_head_dim + dv)
            out_b = nq * dv
            d_v = dv
        else:
            dqk = dv = d
            if f.qk_norm:
                t["norms"] += _norm_bytes((nq + nkv) * d, ctx, full) + 4 * (nq + nkv) - 4
            kv_heads = nkv
            if f.sliding and ctx.attn == "sdpa" and arch.sliding_window and ctx.seq > arch.sliding_window:
                kv_heads = nq  # a sliding mask disables SDPA's GQA path: repeat_kv materialises K/V at n_q heads
            q_b, k_b, v_b = nq * d, kv_heads * d, kv_heads * d
            out_b = nq * d
            d_v = d
        if ctx.attn == "eager":
            s = ctx.seq
            t["attention q, k, v"] += dt.sdpa * (nq * dqk + nq * dqk + nq * d_v)
            t["attention scores (eager, s x s)"] += _eager_scores(nq, s, ctx)
            if ctx.softcap:
                t["attention scores (eager, s x s)"] += dt.sdpa * nq * s
            o_saved = False
        else:
            t["attention q, k, v"] += dt.sdpa * (q_b + k_b + v_b)
            t["attention output + logsumexp"] += dt.sdpa * out_b + 4 * nq
            o_saved = True
        if f.output_gate:
            # Qwen3NextAttention.forward: attn_output * torch.sigmoid(gate) saves the sigmoid output (and the
            # attention output, saved above); the product is o_proj's input, a tensor of its own (saved when o_proj
            # trains; eager counts it as o_proj's input below; LoRA adapters save their own copies)
            t["attention output gate"] += dt.lin * out_b + (dt.lin * out_b if full and ctx.attn != "eager" else 0)
            o_saved = True
        if ctx.attn == "eager":
            if full or adapted_groups.get("attn_out"):
                linear_input("attn_out", out_b, dt.sdpa)
        else:
            linear_input("attn_out", out_b, dt.sdpa, already_saved=o_saved)
        if ctx.resid_dropout:
            t["dropout masks"] += h
        if f.hidden_norms >= 4:  # Gemma 2/3: post_attention_layernorm on the attention output
            t["norms"] += _norm_bytes(h, ctx, full)
    if f.mixer is not None:
        # SSM / linear-attention mixer, term by term for the code path (hfmem/memory/training/ssm.py)
        if f.attention == "none":
            t["norms"] += _norm_bytes(h, ctx, full)
            linear_input("attn_in", h, dt.res)
        else:  # Falcon-H1: Mamba-2 beside attention on the same normed input, scaled for attention (a new tensor)
            t["linear inputs"] += dt.res * h
        terms, mfixed = mixer_terms(f.mixer, ctx.ssm_path, dt.lin, ctx.seq, dt.autocast)
        for term, v in terms.items():
            t[term] += math.ceil(v)
        fixed += mfixed
    # --- cross-attention (decoder layers of encoder-decoder models) ---------------------------------------
    if f.cross:
        encoder_side[0] = _cross_attention(f, arch, ctx, t, linear_input, adapted_groups)
    # --- MLP -------------------------------------------------------------------------------------------
    if f.mlp != "none":
        t["norms"] += _norm_bytes(h, ctx, full)  # post_attention_layernorm / pre_feedforward_layernorm / ln_2
        if f.hidden_norms >= 4:
            t["norms"] += _norm_bytes(h, ctx, full)  # post_feedforward_layernorm
        linear_input("mlp_in", h, dt.res)
        if f.mlp in ("gated", "plain"):
            inter = f.intermediate
            if f.mlp == "gated":
                t["MLP activation + gate product"] += dt.lin * inter * (ctx.act_saves + 2)
            else:
                t["MLP activation + gate product"] += dt.lin * inter * ctx.act_saves
            if ctx.mlp_dropout:  # bool mask + the dropped tensor, which the down projection saves instead
                t["dropout masks"] += inter
                t["MLP activation + gate product"] += dt.lin * inter
            linear_input("mlp_mid", inter, dt.lin)
        else:
            k, ie, e = f.top_k, f.expert_intermediate, f.experts
            # Router: logits -> softmax/sigmoid fp32 [E], top-k indices int64 and weights, renormalisation.
            t["MoE router"] += 4 * e + 12 * k + 4 + (4 * h if arch.model_type in _FP32_ROUTER else 0)
            # transformers 5, integrations/moe.py: grouped_mm_experts_forward, per routed pair:
            # gate_up output (2I), activation output (I), routing-weight product input (h) + weight, 3 int64 indices;
            # the gathered input (h) and the down input (I) are saved only when the expert weights need gradients.
            experts_trainable = full or any(a.kind == "experts" for a in adapters)
            per_pair = dt.lin * (3 * ie + h) + 4 + 24
            if experts_trainable:
                per_pair += dt.res * h + dt.lin * ie
            t["MoE experts (per token x top-k)"] += k * per_pair
            for a in adapters:
                if a.kind == "experts":
                    # PEFT ParamWrapper folds W + B@A into one tensor per forward (_LoraFactorsProxy / baddbmm) and
                    # grouped_mm saves it for backward: one full expert-weight copy per adapted tensor and layer, plus
                    # the copies of lora_B / lora_A cast to the weight dtype that baddbmm saves.
                    fixed += dt.lin * (a.base_params + a.params)
            if f.shared_intermediate:
                t["shared experts"] += dt.lin * f.shared_intermediate * (ctx.act_saves + 2)
                linear_input("shared_mid", f.shared_intermediate, dt.lin)
                if f.shared_gate:
                    t["shared experts"] += dt.lin * (h + 1)
        if ctx.resid_dropout:
            t["dropout masks"] += h
    # --- LoRA adapters' own token-independent terms --------------------------------------------------------
    for a in adapters:
        if a.kind == "linear" and dt.autocast and dt.adapter == 4:
            fixed += 2 * a.params  # autocast bf16 copies of the fp32 adapter weights, saved for backward
        if a.kind == "linear" and ctx.dora:
            fixed += 3 * dt.adapter * a.out_features  # weight_norm, magnitude/weight_norm, (scale - 1), fp32 vectors
    return dict(t), fixed, encoder_side[0]


def _eager_scores(heads: int, keys: int, ctx: _ActContext) -> int:
    """Saved bytes per query token of eager attention over ``keys`` keys: the softmax output (fp32 + its 16-bit
    copy where the model upcasts, the model dtype where it does not: T5, Whisper), and with attention dropout its
    mask and output."""
    dt = ctx.dt
    out = heads * keys * (dt.sdpa if ctx.softmax_in_dtype else 4 + (dt.sdpa if dt.sdpa < 4 else 0))
    if ctx.attn_dropout:
        out += heads * keys * (1 + dt.sdpa)
    return out


def _cross_attention(f: LayerFacts, arch: Architecture, ctx: _ActContext, t: dict[str, int], linear_input: Any,
                     adapted_groups: dict[str, list[Adapter]]) -> int:
    """A decoder layer's cross-attention (transformers, models/t5/modeling_t5.py: T5LayerCrossAttention,
    models/whisper/modeling_whisper.py: WhisperDecoderLayer encoder_attn): per decoder token the norm, q's input, q
    and the attention output (or the eager scores over the encoder tokens), o's input; per encoder token k and v
    (their common input, the encoder output, is saved once for all layers: ``encoder output``). Returns the bytes
    that scale with the encoder tokens."""
    dt = ctx.dt
    h, n, inner = arch.hidden_size, arch.num_attention_heads, arch.num_attention_heads * arch.head_dim
    t["norms"] += _norm_bytes(h, ctx, ctx.trainable_base)
    linear_input("cross_q", h, dt.res)
    t["attention q, k, v"] += dt.sdpa * inner
    if ctx.attn == "eager":
        t["attention scores (eager, s x s)"] += _eager_scores(n, ctx.enc_seq, ctx)
        linear_input("cross_out", inner, dt.sdpa)
    else:
        t["attention output + logsumexp"] += dt.sdpa * inner + 4 * n
        linear_input("cross_out", inner, dt.sdpa, already_saved=True)
    if ctx.resid_dropout:
        t["dropout masks"] += h
    enc: dict[str, int] = defaultdict(int)
    for a in adapted_groups.get("cross_kv", []):  # LoRA on k/v: their per-module input copies at the encoder tokens
        _adapter_terms(a, dt.res, enc, ctx, h)
    return (2 * dt.sdpa * inner + sum(enc.values())) * ctx.enc_tokens


def _adapter_terms(a: Adapter, elem: int, t: dict[str, int], ctx: _ActContext, features: int) -> None:
    """Per-token saved bytes of one LoRA adapter (peft, tuners/lora/layer.py: Linear.forward: the input is cast to
    the adapter dtype per module (_cast_input_dtype), lora_A saves that copy, lora_B saves lora_A's output)."""
    dt = ctx.dt
    if a.kind != "linear":
        return
    if dt.autocast:
        t["LoRA input copies"] += 2 * features  # autocast re-casts the fp32 copy to bf16 for lora_A and saves it
        t["LoRA A outputs"] += 2 * a.rank
    elif dt.adapter != elem:
        t["LoRA input copies"] += dt.adapter * features
        t["LoRA A outputs"] += dt.adapter * a.rank
    else:
        t["LoRA A outputs"] += dt.adapter * a.rank
    if ctx.dora:
        out_elem = 2 if dt.autocast else dt.adapter
        t["DoRA base/LoRA results"] += elem * a.out_features + out_elem * a.out_features


def _nonlayer_terms(arch: Architecture, ctx: _ActContext, lm_trainable: bool, rope: bool, embd_dropout: bool) -> dict[str, int]:
    h = arch.hidden_size
    t: dict[str, int] = {}
    if rope:
        t["RoPE cos/sin"] = 2 * ctx.dt.res * (arch.mla.qk_rope_head_dim if arch.mla else arch.head_dim)
    norm = _norm_bytes(h, ctx, lm_trainable)
    if ctx.dt.autocast and lm_trainable:
        norm += 2 * h  # lm_head input cast to bf16
    elif lm_trainable:
        norm += ctx.dt.res * h  # lm_head input
    t["final norm + lm_head input"] = norm
    if embd_dropout:
        t["embedding dropout mask"] = h
    return t


def _logits_bytes_per_token(vocab: int, hidden: int, tokens: int, chunked: bool, dt: _Dtypes) -> tuple[int, str]:
    """(peak bytes per token, description). transformers, loss/loss_utils.py: ForCausalLMLoss: logits.float(),
    cross_entropy saves the fp32 log-softmax output (4V) and the int64 targets; at the start of backward the NLL
    gradient (4V) and the log-softmax gradient (4V) are alive together with it: 12 x V bytes per token at the peak
    (the 16-bit logits are freed before backward because the Trainer keeps only the loss)."""
    if not chunked:
        return 12 * vocab + 8, "not chunked: fp32 log-softmax + 2 gradients, 12 B x vocab per token"
    # liger-kernel, ops/fused_linear_cross_entropy.py (fused linear cross-entropy): chunks of next_pow2(cdiv(BT, cdiv(V, H)))
    # tokens; fp32 chunk logits/gradient plus the grad_input buffer. Estimate, not measured.
    chunk = 1 << max(0, math.ceil(math.log2(max(1, cdiv(tokens, cdiv(vocab, hidden))))))
    per_tok = cdiv(chunk * vocab * 4, tokens) + dt.res * hidden + 8
    return per_tok, f"chunked (fused linear cross-entropy, {chunk}-token chunks; estimate)"



def _dtypes(method: str, settings: TrainingSettings, prec: PrecisionBytes) -> _Dtypes:
    if method == "full":
        if prec.amp:
            return _Dtypes(res=4, lin=2, sdpa=2, adapter=4, autocast=True)
        return _Dtypes(prec.act, prec.act, prec.act, 4, False)
    if settings.precision == "bf16":
        return _Dtypes(2, 2, 2, 2, False)
    if settings.precision == "fp32":
        return _Dtypes(4, 4, 4, 4, False)
    autocast = True  # mixed / amp: fp32 adapters, HF Trainer bf16=True autocast
    if method == "qlora" and settings.qlora_upcast:
        # prepare_model_for_kbit_training: fp32 embeddings/norms -> fp32 residual stream; Linear4bit returns its
        # input dtype, so projections and MLP intermediates are fp32; autocast runs SDPA in bf16.
        return _Dtypes(res=4, lin=4, sdpa=2, adapter=4, autocast=True)
    if settings.precision == "amp-bf16":
        return _Dtypes(res=4, lin=2, sdpa=2, adapter=4, autocast=True)
    return _Dtypes(2, 2, 2, 4, autocast)


@dataclass
class ActivationMemory:
    """The activation components (bytes per GPU), the per-token terms behind them (``activation_terms`` in the JSON),
    how the loss is computed, and notes."""

    components: dict[str, int]
    terms: dict[str, Any]
    loss: str
    notes: list[str]


def _context(report: Report, method: str, settings: TrainingSettings, dt: _Dtypes, adapters: list[Adapter]) -> tuple[_ActContext, list[str], bool]:
    """(the facts every layer term needs, notes, whether the embeddings have dropout) from the config."""
    arch = report.architecture
    notes: list[str] = []
    cfg = arch.text_config or {}
    attn = settings.attn
    if attn == "sdpa" and arch.model_type in _NO_SDPA:
        attn = "eager"
        notes.append(f"transformers (5.24, 5.25) has no SDPA for {arch.model_type}: HF training uses eager attention (s x s scores) unless --attn flash")
    mt = arch.model_type
    norm_style = "layernorm" if mt in CONV1D_TYPES or any(
        c.component == "norms" and c.entry.name.endswith(".bias") for c in report.tensors if c.layer == 0
    ) else ("gemma" if mt.startswith("gemma") or mt in _FP32_NORM_OUT else "rms")
    act = str(cfg.get("hidden_act") or cfg.get("activation_function") or cfg.get("hidden_activation") or cfg.get("dense_act_fn")
              or str(cfg.get("feed_forward_proj") or "silu").removeprefix("gated-"))
    act_saves = _ACT_SAVES.get(act, 1)
    attn_drop = float(cfg.get("attention_dropout") or cfg.get("attn_pdrop") or 0.0)
    resid_drop = float(cfg.get("resid_pdrop") or cfg.get("hidden_dropout") or 0.0)
    embd_drop = float(cfg.get("embd_pdrop") or 0.0)
    mlp_drop = 0.0
    if arch.is_encoder_decoder:
        # T5 (models/t5/modeling_t5.py): one dropout_rate for the attention probabilities, the MLP's inner
        # activation, every residual branch and the embeddings; Whisper/BART: dropout, attention_dropout,
        # activation_dropout.
        drop = float(cfg.get("dropout_rate") or cfg.get("dropout") or 0.0)
        resid_drop = embd_drop = drop
        attn_drop = float(cfg.get("dropout_rate") or cfg.get("attention_dropout") or 0.0)
        mlp_drop = float(cfg.get("dropout_rate") or cfg.get("activation_dropout") or 0.0)
    if attn_drop and attn != "eager":
        notes.append("attention dropout inside SDPA/flash kernels keeps no mask (Philox RNG); CPU math fallbacks differ")
    softcap = bool(cfg.get("attn_logit_softcapping"))
    by_layer: dict[int | None, list[Adapter]] = defaultdict(list)
    for a in adapters:
        if is_text_component(a.component) or not a.component:  # tower adapters: text-only batches never run the tower
            by_layer[a.layer].append(a)
    ctx = _ActContext(method, dt, settings.seq, attn, by_layer, norm_style, act_saves, method == "full", settings.dora,
                      attn_drop, resid_drop, softcap, softmax_in_dtype=mt in _SOFTMAX_IN_DTYPE, mlp_dropout=mlp_drop,
                      ssm_path=settings.ssm_path()[0])
    return ctx, notes, bool(embd_drop)


def _loss_per_token(arch: Architecture, settings: TrainingSettings, tokens: int, dt: _Dtypes) -> tuple[int, str]:
    """(peak bytes per token of the logits and cross-entropy, description), with Gemma's final soft-capping."""
    cfg = arch.text_config or {}
    logits_tok, loss_desc = _logits_bytes_per_token(arch.vocab_size, arch.hidden_size, tokens, settings.chunked_loss, dt)
    if arch.model_type in _CE_IN_DTYPE and not settings.chunked_loss:
        # nn.CrossEntropyLoss on the model-dtype logits: its log-softmax output and, at the start of backward, the two
        # gradients, all in the model dtype
        logits_tok = 3 * dt.lin * arch.vocab_size + 8
        loss_desc = f"not chunked: CrossEntropyLoss on {dt.lin * 8}-bit logits (log-softmax + 2 gradients, {3 * dt.lin} B x vocab per token)"
    if cfg.get("final_logit_softcapping") and not settings.chunked_loss:
        logits_tok += dt.lin * arch.vocab_size  # tanh(logits / cap) output, saved until its backward
        loss_desc += " + final logit soft-capping (tanh output, 16-bit x vocab)"
    return logits_tok, loss_desc


def _backward_transient(f: LayerFacts, arch: Architecture, ctx: _ActContext, widest_adapter_input: int) -> int:
    """Bytes per token alive during one layer's backward: the incoming gradient (h) and the gradients of two MLP
    intermediates alive together while the layer's own saved tensors are released (measured: 2*I + h elements for a
    dense SwiGLU block)."""
    dt = ctx.dt
    inter = f.intermediate if f.mlp != "moe" else f.top_k * f.expert_intermediate + f.shared_intermediate
    tr = dt.lin * (2 * inter) + dt.res * arch.hidden_size
    if ctx.method != "full" and dt.adapter == 4:
        # the gradient of PEFT's fp32 input copy (4 x in) of the widest adapted module; under autocast also the
        # 16-bit gradient of the adapter branch before it is added to the base branch's
        widest = widest_adapter_input
        tr += 4 * widest + (dt.lin * widest if dt.autocast else 0)
    if f.mixer is not None:
        tr += math.ceil(mixer_backward(f.mixer, ctx.ssm_path, dt.lin, ctx.seq))
    if ctx.attn == "eager" and f.attention != "none":
        # the attention backward runs after the MLP's saved tensors are freed: the s x s gradients (bf16 probs
        # + fp32 softmax) only set the peak when they outgrow the MLP intermediates
        tr = max(tr, 6 * arch.num_attention_heads * ctx.seq - dt.lin * 3 * inter)
    return tr


def _expert_weight_gradient(ctx: _ActContext) -> int:
    """grouped_mm's backward produces the gradient of the folded W + B@A expert tensor: down_proj's first (all saved
    tensors alive), then gate_up_proj's once the down copy is freed."""
    expert_grad = 0
    for ads in ctx.adapters_by_layer.values():
        sizes = {a.name.rsplit(".", 1)[-1]: ctx.dt.lin * a.base_params for a in ads if a.kind == "experts"}
        down, up = sizes.get("down_proj", 0), sizes.get("gate_up_proj", 0)
        expert_grad = max(expert_grad, down, up - down)
    return expert_grad


def activation_memory(
    report: Report, method: str, settings: TrainingSettings, prec: PrecisionBytes, ckpt: bool, adapters: list[Adapter]
) -> ActivationMemory:
    """Activations at the peak of forward + backward: the larger of the loss backward and the last layer's backward
    (with checkpointing: every layer's input plus one layer recomputed). Encoder-decoder models: the encoder layers
    at the encoder tokens, the decoder layers (self- and cross-attention) at the decoder tokens."""
    arch = report.architecture
    dt = _dtypes(method, settings, prec)
    ctx, notes, embd_dropout = _context(report, method, settings, dt, adapters)
    tokens = settings.seq * settings.micro_batch
    stacks: list[tuple[list[LayerFacts], _ActContext, int]]
    enc_other = 0
    if arch.is_encoder_decoder:
        enc_seq = encoder_tokens(report, settings)
        ctx = replace(ctx, enc_seq=enc_seq, enc_tokens=enc_seq * settings.micro_batch)
        stacks = []
        for stack, seq in (("encoder", enc_seq), ("decoder", settings.seq)):
            by_layer = {k: [a for a in ads if stack_of(a.name) == stack] for k, ads in ctx.adapters_by_layer.items()}
            stacks.append((layer_facts(report, stack), replace(ctx, seq=seq, adapters_by_layer=by_layer), seq * settings.micro_batch))
        enc_other, enc_notes = _encoder_decoder_other(report, ctx, settings)
        notes.extend(enc_notes)
    else:
        stacks = [(layer_facts(report), ctx, tokens)]
    layers: list[LayerFacts] = []
    per_layer_terms: list[dict[str, int]] = []
    fixed: list[int] = []
    layer_bytes: list[int] = []
    inputs: list[int] = []
    transients: list[int] = []
    widest = max((a.in_features for a in adapters if a.kind == "linear"), default=0)
    for facts, sctx, stoks in stacks:
        for i, f in enumerate(facts):
            terms, fx, enc_side = _layer_terms(f, arch, sctx, first=(i == 0 and not ckpt))
            layers.append(f)
            per_layer_terms.append(terms)
            fixed.append(fx)
            layer_bytes.append(sum(terms.values()) * stoks + fx + enc_side)
            inputs.append(dt.res * arch.hidden_size * stoks)
            transients.append(_backward_transient(f, arch, sctx, widest) * stoks)
    layer_tok = [sum(t.values()) for t in per_layer_terms]
    lm_trainable = method == "full"
    rope = (ctx.norm_style != "layernorm" and arch.attention_kind != "none" and not arch.is_encoder_decoder
            and not any(c.component == "embeddings" and "wpe" in c.entry.name for c in report.tensors))
    other = _nonlayer_terms(arch, ctx, lm_trainable, rope, embd_dropout)
    if arch.is_encoder_decoder and ctx.resid_dropout and arch.model_type in _CE_IN_DTYPE and "whisper" not in arch.model_type:
        other["final dropout mask"] = arch.hidden_size  # T5Stack: dropout after the final layer norm
    other_tok = sum(other.values())
    logits_tok, loss_desc = _loss_per_token(arch, settings, tokens, dt)
    max_transient = max(transients, default=0)
    expert_grad = _expert_weight_gradient(ctx)
    out: dict[str, int] = {}
    phase_loss = logits_tok * tokens
    layer_weights = sum(fixed)  # token-independent: weight copies autocast / PEFT's expert adapters save per layer
    if not ckpt:
        out["activations_layers"] = sum(layer_bytes) - layer_weights
        if layer_weights:
            out["activations_layer_weights"] = layer_weights
        phase_layers = max_transient + expert_grad
        out["activations_other"] = other_tok * tokens + enc_other
        if phase_loss >= phase_layers:
            out["logits_loss"] = phase_loss
        else:
            out["backward_transient"] = phase_layers
        peak_at = "loss backward" if phase_loss >= phase_layers else "layer backward"
    else:
        out["activations_layers"] = sum(inputs)
        out["activations_other"] = other_tok * tokens + enc_other
        # Peak A: loss backward with every layer input kept; peak B: the last layer recomputed + its backward.
        j = max(range(len(layers)), key=lambda i: layer_bytes[i]) if layers else 0
        recompute = layer_bytes[j] if layers else 0
        rope_tok = other.get("RoPE cos/sin", 0)
        freed = (other_tok - rope_tok) * tokens
        phase_layers = recompute + max_transient + expert_grad - freed
        if phase_loss >= phase_layers:
            out["logits_loss"] = phase_loss
            peak_at = "loss backward"
        else:
            out["activations_recompute"] = recompute
            out["backward_transient"] = max(0, max_transient + expert_grad - freed)
            peak_at = "recomputed layer backward"
        notes.append("gradient checkpointing (HF, use_reentrant=False): each decoder layer keeps only its input; one layer is recomputed during backward")
    if ctx.attn == "eager" and not arch.is_encoder_decoder:  # one [b, 1, s, s] additive mask per attention layer type (full / sliding), model dtype
        kinds = {f.sliding for f in layers if f.attention != "none"} or {False}
        out["activations_other"] = out.get("activations_other", 0) + len(kinds) * settings.micro_batch * settings.seq**2 * dt.sdpa
    act_terms: dict[str, Any] = {
        "per_token_per_layer": _merge(per_layer_terms),
        "per_token_per_layer_max": max(layer_tok, default=0),
        "layers": len(layers),
        "per_token_other": other,
        "logits_loss_per_token": logits_tok,
        "peak_at": peak_at,
        "tokens": tokens,
        "formula": "Korthikanti et al. 2022 (arXiv:2205.05198) section 4, adapted to HF transformers 5 blocks and PEFT adapters",
    }
    if arch.is_encoder_decoder:
        act_terms["encoder_tokens"] = ctx.enc_tokens
        act_terms["encoder_other_bytes"] = enc_other
    mixers = [f.mixer for f in layers if f.mixer is not None]
    if mixers:
        path, why = settings.ssm_path()
        act_terms["ssm_kernels"] = path
        mixer_kinds = ", ".join(sorted({m.kind for m in mixers}))
        notes.append(f"{len(mixers)} {mixer_kinds} layers on the {path} path ({why}); --ssm-kernels picks the other")
    unknown = [f.index for f in layers if f.attention == "none" and f.mixer is None and f.groups.get("attn_in")]
    if unknown:
        notes.append(f"{len(unknown)} layers have a token mixer hfmem does not model (neither attention nor Mamba / "
                     "Gated DeltaNet): only their norms, MLP and linear inputs are counted, so the estimate is low")
    return ActivationMemory(out, act_terms, loss_desc, notes)


def encoder_tokens(report: Report, settings: TrainingSettings) -> int:
    """Encoder tokens per sequence: ``--encoder-len`` (default ``--seq``); Whisper's encoder always sees
    max_source_positions frames (WhisperEncoder.forward refuses any other mel length)."""
    arch = report.architecture
    cfg = arch.text_config or {}
    if arch.model_type == "whisper" and cfg.get("max_source_positions"):
        return int(cfg["max_source_positions"])
    return settings.encoder_seq or settings.seq


def _encoder_decoder_other(report: Report, ctx: _ActContext, settings: TrainingSettings) -> tuple[int, list[str]]:
    """Bytes of the encoder outside its layers and of the position biases: the input stem (Whisper's two
    convolutions + GELU), embedding dropout, the final norm and dropout, the encoder output (saved once as the input
    of every decoder layer's cross-attention k/v), and T5's relative attention bias (models/t5/modeling_t5.py:
    T5Attention.compute_bias: the int64 bucket indices its nn.Embedding saves, per stack; under SDPA the bias is the
    attention mask the kernel saves: once for the encoder, per layer for the causal decoder (torch.where with the
    causal mask, integrations/sdpa_attention.py: create_position_bias_mask), once for the cross-attention zeros)."""
    arch = report.architecture
    dt = ctx.dt
    h = arch.hidden_size
    notes: list[str] = []
    enc_tok, enc_seq, dec_seq = ctx.enc_tokens, ctx.enc_seq, settings.seq
    per_tok = _norm_bytes(h, ctx, ctx.trainable_base) + dt.res * h  # final norm + the encoder output
    if ctx.resid_dropout:
        per_tok += 2 * h  # embedding dropout mask + final dropout mask
    stem = [c for c in report.tensors if stack_of(c.entry.name) == "encoder" and re.search(r"conv\d\.weight$", c.entry.name)]
    if stem:  # WhisperEncoder: gelu(conv1(x)) at 2 frames per token, gelu(conv2(.)) at stride 2: 2h + 2h + h saved
        per_tok += dt.res * 5 * h
    total = per_tok * enc_tok
    if any(c.entry.name.endswith("relative_attention_bias.weight") for c in report.tensors):
        n = arch.num_attention_heads
        total += 8 * (enc_seq**2 + dec_seq**2)
        if ctx.attn != "eager":
            dec_layers = sum(1 for _ in layer_facts(report, "decoder"))
            total += dt.sdpa * n * (enc_seq**2 + dec_layers * dec_seq**2 + dec_seq * enc_seq)
            notes.append("T5 under SDPA: the relative position bias is an attention mask with a gradient, which the "
                         "CUDA memory-efficient kernel saves (once for the encoder, per decoder layer, once for the "
                         "cross-attention); CPU SDPA falls back to the math kernel")
    notes.append(f"encoder-decoder: encoder at {enc_seq:,} tokens, decoder at {dec_seq:,} tokens per sequence")
    return total, notes


def _merge(per_layer: list[dict[str, int]]) -> dict[str, float]:
    if not per_layer:
        return {}
    keys: list[str] = []
    for t in per_layer:
        keys.extend(k for k in t if k not in keys)
    return {k: round(sum(t.get(k, 0) for t in per_layer) / len(per_layer), 1) for k in keys}

