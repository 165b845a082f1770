"""The model's trainable structure from its headers: parameters, nn.Linear / Conv1D modules and MoE expert tensors,
and the LoRA adapters PEFT puts on them (PEFT 0.21 semantics on transformers 5)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hfmem.errors import UsageError

if TYPE_CHECKING:
    from hfmem.api import Report
    from hfmem.model.architecture import Architecture
    from hfmem.model.inventory import CountedTensor

# Model types whose MoE experts PEFT 0.21 retargets as fused parameters under transformers 5 (PEFT's copy of
# transformers, conversion_mapping.py: _MODEL_TO_CONVERSION_PATTERN, plus "mixtral"; version-sensitive, checked
# against the installed peft by tests/test_training_truth.py). Value: the base pattern.
PEFT_MOE_CONVERSION: dict[str, str] = {
    "mixtral": "mixtral", "minimax": "mixtral", "minimax_m2": "mixtral",
    **{t: "qwen2_moe" for t in (
        "Dots3NoteTextModel", "afmoe", "deepseek_v2", "deepseek_v3", "deepseek_v32", "dots1", "ernie4_5_moe",
        "glm4_moe", "glm4_moe_lite", "glm_moe_dsa", "glm4v_moe", "longcat_flash", "solar_open", "mellum", "qwen3_moe",
        "beam", "qwen3_omni_moe", "qwen3_omni_moe_thinker", "qwen3_omni_moe_text", "qwen3_next", "hunyuan_v1_moe",
        "flex_olmo", "olmoe", "sarvam_mla", "exaone_moe", "cohere2_moe", "UnlimitedOcrTextModel",
    )},
}
# pre-fusion module name -> fused target (peft, utils/transformers_weight_conversion.py: _MOE_TARGET_MODULE_MAPPING);
# fused pairs get rank r * 2.
_MOE_NAME_MAP = {
    "mixtral": {"gate": "gate.weight", "w1": "gate_up_proj", "w3": "gate_up_proj", "w2": "down_proj"},
    "qwen2_moe": {"gate": "gate.weight", "gate_proj": "gate_up_proj", "up_proj": "gate_up_proj", "down_proj": "down_proj"},
}
_MOE_FUSED_PAIR = {"mixtral": ("w1", "w3"), "qwen2_moe": ("gate_proj", "up_proj")}

# PEFT refuses LoRA on these module names of Mamba-based models (peft 0.21, tuners/tuners_utils.py:
# _check_lora_target_modules_mamba: "Module 'out_proj' is incompatible with Mamba-based models"), also when they come
# from all-linear: there a user must list the other modules, which is what hfmem's all-linear estimate adapts.
PEFT_MAMBA_TYPES = {"falcon_h1", "mamba", "mamba2", "falcon_mamba", "nemotron_h"}
PEFT_MAMBA_INCOMPATIBLE = ("out_proj", "conv1d")

# Models whose Linear layers are GPT-2 style Conv1D ([in, out] weights).
CONV1D_TYPES = {"gpt2", "openai-gpt", "imagegpt", "decision_transformer"}

# Linear leaf names by the activation they read: attention inputs, MLA's inner projections, MLP down projections.
ATTN_IN = {"q_proj", "k_proj", "v_proj", "qkv_proj", "query_key_value", "c_attn", "q_a_proj", "kv_a_proj_with_mqa",
           "wqkv", "Wqkv", "query", "key", "value", "in_proj", "q", "k", "v"}
ATTN_MID = {"q_b_proj", "kv_b_proj"}
MLP_MID = {"down_proj", "w2", "fc2", "dense_4h_to_h", "wo"}
# Module path parts of decoder cross-attention (T5 EncDecAttention, Whisper/BART encoder_attn, BERT crossattention).
CROSS_KEYS = ("EncDecAttention.", "encoder_attn.", "crossattention.", "cross_attn.")


@dataclass(frozen=True)
class LinearModule:
    """One nn.Linear / Conv1D module from a 2-D ``*.weight`` tensor; for explicit LoRA targets also the other modules
    PEFT wraps (kind "conv": nn.Conv1d/2d/3d from a 3-5-D weight; "embedding": nn.Embedding; "lm_head": the output
    Linear, which all-linear leaves out)."""

    name: str  # module path (tensor name without ".weight")
    leaf: str
    in_features: int  # Embedding: num_embeddings; Conv: in_channels
    out_features: int  # Embedding: embedding_dim; Conv: out_channels
    layer: int | None
    component: str
    tensor: str = ""  # the stored weight tensor's name
    kind: str = "linear"
    kernel: int = 1  # Conv: product of the kernel dimensions
    groups: int = 1  # Conv: groups (depthwise convolutions: in_channels)

    @property
    def params(self) -> int:
        return self.in_features * self.out_features * self.kernel // self.groups


@dataclass(frozen=True)
class Adapter:
    """One PEFT LoRA adapter: on a Linear module, or (PEFT ParamWrapper) on a fused expert / router tensor."""

    name: str
    kind: str  # "linear" | "experts" | "router"
    in_features: int
    out_features: int
    rank: int
    experts: int = 1
    layer: int | None = None
    group: str = "other"  # which activation the adapter reads (attn_in, attn_out, attn_mid:<leaf>, mlp_in, mlp_mid)
    base_params: int = 0  # parameters of the adapted tensor
    component: str = ""  # the adapted module's component (vision/audio tower adapters save no text activations)
    kernel: int = 1  # kind "conv": lora_A is a conv with the base kernel, lora_B a 1x1 conv with the base groups
    groups: int = 1

    @property
    def shapes(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """(lora_A, lora_B) as 2-D element counts (peft, tuners/lora/layer.py: Linear/Embedding/_ConvNd.update_layer;
        Embedding's lora_embedding_A is [r, num_embeddings], lora_embedding_B [embedding_dim, r])."""
        r = self.rank * self.experts
        return (r, self.in_features * self.kernel), (self.out_features, r // self.groups)

    @property
    def params(self) -> int:
        (a0, a1), (b0, b1) = self.shapes
        return a0 * a1 + b0 * b1


def is_text_component(component: str) -> bool:
    """Whether a component belongs to the language model's decoder stack (not a vision/audio tower or MTP layer)."""
    return component not in ("vision", "audio", "projector", "mtp")


def trainable_tensors(report: Report) -> list[CountedTensor]:
    """Parameters transformers builds: no MTP layers, no registered buffers stored in the checkpoint (DeepSeek's
    e_score_correction_bias is a buffer)."""
    return [
        c for c in report.tensors
        if c.role in ("param", "quantized") and c.component != "mtp" and not c.entry.name.endswith("e_score_correction_bias")
    ]


def linear_modules(report: Report) -> list[LinearModule]:
    """nn.Linear / Conv1D modules as transformers 5 builds them: 2-D ``*.weight`` parameters outside embeddings,
    norms and the output head; per-expert checkpoint matrices are fused into 3-D parameters at load (not Linear) and
    MoE routers are custom modules (TopKRouter), so neither is listed. Packed quantized weights (GPTQ/AWQ ``qweight``,
    compressed-tensors ``weight_packed``, bitsandbytes U8) are Linear layers of their logical [out, in] shape.
    Embedding tables inside towers and stacks (a vision position table) are nn.Embedding, not Linear."""
    arch = report.architecture
    conv1d = arch.model_type in CONV1D_TYPES
    method = str(report.parameters.quantization.method if report.parameters.quantization else "")
    out: list[LinearModule] = []
    for c in report.tensors:
        e = c.entry
        suffix = next((x for x in (".weight", ".qweight", ".weight_packed") if e.name.endswith(x)), None)
        if c.role not in ("param", "quantized") or suffix is None:
            continue
        if c.component in ("embeddings", "norms", "lm_head", "mtp", "moe_experts", "moe_router"):
            continue
        name = e.name[: -len(suffix)]
        leaf = name.rsplit(".", 1)[-1]
        if is_embedding_leaf(leaf):
            continue
        dims = _logical_dims(c, suffix, method, leaf, arch)
        if dims is None:
            continue
        fout, fin = dims
        if conv1d and suffix == ".weight" and c.role == "param":
            fin, fout = fout, fin  # Conv1D stores [in, out]
        out.append(LinearModule(name, leaf, fin, fout, c.layer, c.component, e.name))
    return out


# Leaf names of nn.Embedding modules (Qwen3-VL visual.pos_embed, SigLIP position_embedding, Whisper embed_positions,
# GPT-2 wte/wpe, T5 shared and relative_attention_bias); "embedding_projection" (Gemma) is a Linear.
_EMBEDDING_LEAVES = {"wte", "wpe", "shared", "relative_attention_bias"}


def is_embedding_leaf(leaf: str) -> bool:
    """Whether a module leaf name denotes an nn.Embedding table rather than a Linear."""
    low = leaf.lower()
    return low in _EMBEDDING_LEAVES or ("emb" in low and not any(k in low for k in ("proj", "linear", "fc", "mlp")))


def peft_modules(report: Report) -> list[LinearModule]:
    """Every module an explicit ``target_modules`` entry can adapt (peft, tuners/lora/layer.py: dispatch_default wraps
    nn.Embedding, nn.Conv1d/2d/3d, nn.Linear and Conv1D): the Linear layers, the output head, embedding tables and
    convolutions (a Conv3d patch embedding, Whisper's input convolutions, a depthwise causal conv1d). A depthwise
    convolution (3-D weight [channels, 1, kernel]) has groups = in_channels = channels."""
    out = list(linear_modules(report))
    for c in report.tensors:
        e = c.entry
        if c.role != "param" or not e.name.endswith(".weight") or c.component in ("mtp", "moe_experts", "moe_router"):
            continue
        name = e.name[: -len(".weight")]
        leaf = name.rsplit(".", 1)[-1]
        shape = tuple(int(x) for x in e.shape)
        if len(shape) == 2 and c.component == "lm_head":
            out.append(LinearModule(name, leaf, shape[1], shape[0], c.layer, c.component, e.name, kind="lm_head"))
        elif len(shape) == 2 and (c.component == "embeddings" or is_embedding_leaf(leaf)):
            out.append(LinearModule(name, leaf, shape[0], shape[1], c.layer, c.component, e.name, kind="embedding"))
        elif 3 <= len(shape) <= 5 and "pos" not in leaf.lower():  # a 3-D learnable position grid is a Parameter
            kernel = 1
            for k in shape[2:]:
                kernel *= k
            depthwise = len(shape) == 3 and shape[1] == 1 and shape[0] > 1
            fin, groups = (shape[0], shape[0]) if depthwise else (shape[1], 1)
            out.append(LinearModule(name, leaf, fin, shape[0], c.layer, c.component, e.name, kind="conv", kernel=kernel, groups=groups))
    arch = report.architecture
    if arch.tie_word_embeddings and arch.vocab_size and not any(m.kind == "lm_head" for m in out):
        # a tied output layer is not stored, but transformers builds it as an nn.Linear sharing the embedding's weight
        out.append(LinearModule("lm_head", "lm_head", arch.hidden_size, arch.vocab_size, None, "lm_head", kind="lm_head"))
    return out


def _logical_dims(c: CountedTensor, suffix: str, method: str, leaf: str, arch: Architecture) -> tuple[int, int] | None:
    """(out, in) of a Linear weight tensor, unpacking quantized storage (layouts in hfmem/model/quant.py's docstring)."""
    shape = tuple(int(x) for x in c.entry.shape)
    if len(shape) != 2:
        return None
    n = c.logical
    if c.role != "quantized" or n == shape[0] * shape[1]:
        return shape[0], shape[1]
    if suffix == ".qweight":  # GPTQ [in*bits/32, out]; AWQ [in, out*bits/32]
        if method.startswith("awq"):
            return (n // shape[0], shape[0]) if n % shape[0] == 0 else None
        return (shape[1], n // shape[1]) if n % shape[1] == 0 else None
    if suffix == ".weight_packed":  # compressed-tensors: packed along the input dimension
        return (shape[0], n // shape[0]) if n % shape[0] == 0 else None
    # bitsandbytes 4-bit keeps a flat [n/2, 1] code buffer: the input width follows from the module's role
    h = arch.hidden_size
    fin = {"o_proj": arch.num_attention_heads * arch.head_dim, "down_proj": n // h, "w2": n // h}.get(leaf, h)
    return (n // fin, fin) if fin and n % fin == 0 else None


def _expert_tensors(report: Report) -> dict[int | None, dict[str, list[CountedTensor]]]:
    """MoE expert weights per layer, keyed by projection leaf name (w1/w2/w3, gate_proj/up_proj/down_proj, or the
    fused gate_up_proj/down_proj of checkpoints stored fused)."""
    out: dict[int | None, dict[str, list[CountedTensor]]] = defaultdict(lambda: defaultdict(list))
    for c in report.tensors:
        if c.component != "moe_experts" or c.role not in ("param", "quantized"):
            continue
        name = c.entry.name
        if name.endswith(("_bias", ".bias", "_scales")):
            continue
        stem = name[: -len(".weight")] if name.endswith(".weight") else name
        leaf = stem.rsplit(".", 1)[-1].replace("_blocks", "")
        out[c.layer][leaf].append(c)
    return out


def group_of(m: LinearModule) -> str:
    """The activation a Linear module reads (see ``Adapter.group``)."""
    leaf = m.leaf
    if any(k in m.name for k in CROSS_KEYS):  # decoder cross-attention: q reads the decoder, k/v the encoder output
        return "cross_q" if leaf in ("q", "q_proj", "query") else "cross_kv" if leaf in ATTN_IN else "cross_out"
    if m.component == "attention" or leaf in ATTN_IN | ATTN_MID or leaf in ("o_proj", "out_proj", "dense"):
        if leaf in ATTN_IN:
            return "attn_in"
        if leaf in ATTN_MID:
            return f"attn_mid:{leaf}"
        return "attn_out"
    if leaf in MLP_MID or (leaf == "c_proj" and m.component != "attention"):
        prefix = "shared_mid" if m.component == "moe_shared_experts" else "mlp_mid"
        return prefix
    return "mlp_in"


def resolve_lora_targets(report: Report, targets: str, rank: int, dora: bool = False) -> tuple[list[Adapter], list[str], list[str]]:
    """(adapters, target names as PEFT resolves them, notes). Follows peft, tuners/tuners_utils.py:
    _maybe_include_all_linear_layers (every nn.Linear/Conv1D but the output embedding) and
    utils/transformers_weight_conversion.py (MoE expert names remapped to the fused 3-D expert tensors)."""
    arch = report.architecture
    notes: list[str] = []
    all_linear = targets.strip().lower() == "all-linear"
    linears = linear_modules(report) if all_linear else peft_modules(report)
    pattern = PEFT_MOE_CONVERSION.get(arch.model_type)
    experts = _expert_tensors(report)
    has_experts = any(experts.values())
    if pattern is not None and not has_experts:
        pattern = None
    mapping = _MOE_NAME_MAP.get(pattern or "", {})
    mamba = arch.model_type in PEFT_MAMBA_TYPES
    if all_linear:
        wanted = {m.leaf for m in linears}
        if pattern is not None:
            wanted |= set(mapping)
        refused = sorted(wanted & set(PEFT_MAMBA_INCOMPATIBLE)) if mamba else []
        if refused:
            wanted -= set(refused)
            kept = ",".join(sorted(wanted))
            notes.append(
                f"PEFT refuses {', '.join(refused)} on Mamba-based models ({arch.model_type}) and so raises on all-linear "
                f"(peft 0.21 tuners/tuners_utils.py: _check_lora_target_modules_mamba); estimated for the modules it "
                f"allows: target_modules={kept}"
            )
    else:
        wanted = {t.strip() for t in targets.split(",") if t.strip()}
        if not wanted:
            raise UsageError("--lora-targets is empty")
        refused = sorted({t.rsplit(".", 1)[-1] for t in wanted} & set(PEFT_MAMBA_INCOMPATIBLE)) if mamba else []
        if refused:
            raise UsageError(
                f"LoRA target {', '.join(refused)} is incompatible with Mamba-based models (model_type={arch.model_type!r}): "
                "PEFT raises on it (tuners/tuners_utils.py: _check_lora_target_modules_mamba); leave it out of --lora-targets"
            )
    module_targets = set(wanted)
    param_targets: set[str] = set()
    fused_rank: dict[str, int] = {}
    if pattern is not None:
        module_targets = {t for t in wanted if t.rsplit(".", 1)[-1] not in mapping}
        present = {t.rsplit(".", 1)[-1] for t in wanted if t.rsplit(".", 1)[-1] in mapping}
        param_targets = {mapping[t] for t in present}
        pair = _MOE_FUSED_PAIR[pattern]
        got = [p for p in pair if p in present]
        if 0 < len(got) < len(pair):
            raise UsageError(
                f"LoRA target {', '.join(got)} cannot be used without {', '.join(p for p in pair if p not in got)}: "
                "they are fused into one gate_up_proj tensor in transformers 5 (PEFT raises the same error)"
            )
        if len(got) == len(pair):
            fused_rank["gate_up_proj"] = rank * len(pair)
        lost = sorted({m.leaf for m in linears if m.leaf in present})
        if lost:
            notes.append(
                f"PEFT remaps {', '.join(lost)} to the fused expert tensors of this MoE model, so the same-named dense "
                "and shared-expert Linear layers get no adapter (peft 0.21 utils/transformers_weight_conversion.py)"
            )

    def matches(name: str, leaf: str) -> bool:
        return any(name == t or name.endswith("." + t) for t in module_targets) or leaf in module_targets and all_linear

    adapters: list[Adapter] = []
    for m in linears:
        if matches(m.name, m.leaf):
            kind = "linear" if m.kind in ("linear", "lm_head") else m.kind
            group = group_of(m) if m.kind == "linear" else m.kind
            if m.kind == "conv" and rank % m.groups:
                raise UsageError(
                    f"LoRA target {m.name} is a convolution with groups={m.groups} (depthwise) and rank {rank}: PEFT "
                    "raises unless the rank is divisible by groups (peft tuners/lora/layer.py: _ConvNd.__init__); leave "
                    "it out of --lora-targets"
                )
            adapters.append(Adapter(m.name, kind, m.in_features, m.out_features, rank, 1, m.layer, group, m.params,
                                    m.component, m.kernel, m.groups))
    if not all_linear:
        _refuse_unsupported(report, module_targets, {m.name for m in linears})
    _tower_notes(adapters, all_linear, notes)
    if pattern is not None and param_targets:  # parameter targets exist only for a fused-MoE pattern
        for layer, projs in sorted(experts.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
            adapters.extend(_expert_adapters(layer, projs, param_targets, rank, fused_rank, pattern))
        if "gate.weight" in param_targets:
            for c in report.tensors:
                if c.component == "moe_router" and c.entry.name.endswith("gate.weight") and len(c.entry.shape) == 2:
                    out_f, in_f = c.entry.shape
                    adapters.append(Adapter(c.entry.name, "router", in_f, out_f, rank, 1, c.layer, "mlp_in", out_f * in_f))
    if not adapters:
        raise UsageError(f"--lora-targets {targets!r} matches no Linear layer of this model")
    if dora and any(a.kind in ("experts", "router") for a in adapters):
        raise UsageError(
            "DoRA cannot adapt fused MoE expert tensors (PEFT: 'lora.ParamWrapper does not work with use_dora=True'); "
            "choose --lora-targets without the expert/router names"
        )
    if dora:
        notes.append("DoRA adds one magnitude vector (out_features) per adapted Linear")
    names = sorted(module_targets | param_targets) if not all_linear or pattern or mamba else ["all-linear"]
    return adapters, names, notes


def _refuse_unsupported(report: Report, targets: set[str], supported: set[str]) -> None:
    """PEFT raises when an explicit target names a module it cannot wrap, e.g. a norm (peft tuners/lora/model.py:
    _create_new_module: "Target module ... is not supported")."""
    for c in report.tensors:
        name = c.entry.name
        if not name.endswith(".weight") or c.role != "param" or len(c.entry.shape) != 1:
            continue
        module = name[: -len(".weight")]
        if module not in supported and any(module == t or module.endswith("." + t) for t in targets):
            raise UsageError(
                f"LoRA target {module} is not a Linear, Embedding or Conv layer (a norm): PEFT raises 'Target module "
                "... is not supported' (peft tuners/lora/model.py: _create_new_module); leave it out of --lora-targets"
            )


def _tower_notes(adapters: list[Adapter], all_linear: bool, notes: list[str]) -> None:
    """Say what beyond the language model's Linear layers gets an adapter."""
    tower = [a for a in adapters if not is_text_component(a.component)]
    if tower:
        parts = sorted({a.component for a in tower})
        how = "all-linear matches every nn.Linear but the output layer, towers included" if all_linear else "as named"
        notes.append(
            f"{len(tower)} adapters on the {'/'.join(parts)} modules ({how}; peft tuners/tuners_utils.py: "
            "_maybe_include_all_linear_layers); their activations are not counted (text-only batches)"
        )
    kinds = {k: sum(1 for a in adapters if a.kind == k) for k in ("conv", "embedding")}
    if any(kinds.values()):
        notes.append(
            "PEFT wraps " + ", ".join(f"{n} {k} module{'s' if n > 1 else ''}" for k, n in kinds.items() if n)
            + " named in --lora-targets (peft tuners/lora/layer.py: dispatch_default: lora.Conv1d/2d/3d, lora.Embedding)"
        )


def _expert_adapters(
    layer: int | None, projs: dict[str, list[CountedTensor]], targets: set[str], rank: int, fused_rank: dict[str, int], pattern: str
) -> list[Adapter]:
    """ParamWrapper adapters on the fused 3-D expert tensors [E, out, in]: lora_A [r*E, in], lora_B [out, r*E]."""
    out: list[Adapter] = []
    pair = _MOE_FUSED_PAIR[pattern]
    down_name = "w2" if pattern == "mixtral" else "down_proj"

    def dims(items: list[CountedTensor]) -> tuple[int, int, int]:
        if len(items) == 1 and len(items[0].entry.shape) == 3:  # stored fused [E, out, in]
            e, a, b = items[0].entry.shape
            return e, a, b
        a, b = items[0].entry.shape
        return len(items), a, b

    if "gate_up_proj" in targets:
        if "gate_up_proj" in projs:
            e, a, b = dims(projs["gate_up_proj"])
        elif all(p in projs for p in pair):
            e, a0, b = dims(projs[pair[0]])
            _, a1, _ = dims(projs[pair[1]])
            a = a0 + a1
        else:
            e = 0
        if e:
            r = fused_rank.get("gate_up_proj", rank)
            out.append(Adapter(f"layers.{layer}.experts.gate_up_proj", "experts", b, a, r, e, layer, "experts_in", e * a * b))
    if "down_proj" in targets:
        key = "down_proj" if "down_proj" in projs else down_name
        if key in projs:
            e, a, b = dims(projs[key])
            out.append(Adapter(f"layers.{layer}.experts.down_proj", "experts", b, a, rank, e, layer, "experts_mid", e * a * b))
    return out
