"""Training memory per GPU: full fine-tuning, LoRA and QLoRA, every term visible.

Everything is computed from the headers' real tensor shapes (``Report.tensors``) and the normalised config; no
model is built. What each term follows (see MEMORY-FORMULAS.md §4-§6 for the numbers quoted):

* Model states: ZeRO paper (Rajbhandari et al. 2019, arXiv:1910.02054 §3.1, §5): mixed precision Adam keeps
  16-bit weights + 16-bit gradients + fp32 master weights + fp32 Adam m and v = 16 B/param; ZeRO-1/2/3 partition
  the optimizer states / + gradients / + parameters over the N data-parallel GPUs. torch.optim.AdamW keeps its states
  in the parameter dtype (``torch.zeros_like(param)``), so pure bf16 AdamW is 2 + 2 + 2 + 2 = 8 B/param.
  PyTorch AMP on an fp32 model (HF Trainer ``bf16=True`` on an fp32 load) is 4 + 4 + 8 = 16 B/param plus the
  autocast bf16 copy of every matmul weight kept for backward (+2 = 18).
* 8-bit optimizers: bitsandbytes ``optim/optimizer.py`` ``Optimizer2State.init_state``: uint8 states with one fp32
  absmax per 256-element block; tensors under ``min_8bit_size`` = 4096 elements keep fp32 states, and the HF Trainer
  registers every ``nn.Embedding`` weight for 32-bit states. Paged variants put states of >= 1e5 elements in CUDA
  unified memory (``get_state_buffer``) - shown separately, not in the per-GPU total.
* Adafactor: transformers ``optimization.Adafactor`` (beta1=None): factored fp32 row + column second moments for
  tensors with >= 2 dims, a full fp32 second moment otherwise.
* Activations: derived term by term from the block's autograd save rules - Korthikanti et al. 2022
  ("Reducing Activation Recomputation in Large Transformer Models", arXiv:2205.05198, §4), adapted to the modern
  HF decoder block (RMSNorm upcast, GQA, RoPE, SwiGLU, SDPA/flash/eager, grouped-mm MoE, MLA) and PEFT adapters,
  then checked against live-tensor measurements of tiny transformers 5.24 models (tests/test_training_truth.py,
  benchmarks/training_activations.py).
* LoRA targets: PEFT 0.21 (``tuners_utils._maybe_include_all_linear_layers``: every nn.Linear/Conv1D except the
  output embedding; ``utils/transformers_weight_conversion.py``: for MoE models whose transformers-5 checkpoints are
  fused at load, the per-expert names are remapped to ``target_parameters`` on the fused 3-D expert tensors, the
  fused gate_up pair gets rank 2r, and same-named dense/shared-expert Linears are then no longer targeted).
* QLoRA base: bitsandbytes NF4, blocksize 64, double quantization (``functional.quantize_4bit``): per quantized
  Linear ceil(n/2) + ceil(n/64) + 4*ceil(ceil(n/64)/256) bytes + code books; transformers only replaces nn.Linear and
  Conv1D (``integrations/bitsandbytes.py``), never the output embedding, norms, embeddings or fused expert tensors.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field, fields, replace
from typing import Any

from hfmem.errors import UsageError
from hfmem.units import fmt_bytes, fmt_count

METHODS = ("full", "lora", "qlora")
OPTIMIZERS = ("adamw", "adamw-8bit", "paged-adamw-8bit", "adafactor", "sgd", "sgd-momentum", "lion")
PRECISIONS = ("mixed-bf16", "mixed-fp16", "bf16", "fp32", "amp-bf16")
ATTENTION = ("sdpa", "eager", "flash")
OFFLOAD = ("none", "optimizer", "optimizer+params")
FSDP = ("full", "grad-op")

MiB = 2**20
# CUDA context (~0.5-0.8 GiB; 723 MiB measured after the first CUDA tensor, discuss.pytorch.org #73021) plus cuBLAS /
# cuBLASLt workspaces (32 MiB per handle on sm90, pytorch#120925). Not seen by torch.cuda.memory_allocated().
FRAMEWORK_OVERHEAD = 768 * MiB

# bitsandbytes constants (see module docstring).
NF4_BLOCK = 64
NF4_NESTED_BLOCK = 256
NF4_CODEBOOKS = 16 * 4 + 256 * 4  # NF4 code (16 x fp32) + nested dynamic map (256 x fp32) per quantized Linear
BNB_OPT_BLOCK = 256
BNB_MIN_8BIT = 4096
BNB_PAGED_MIN = 100_000

# Model types whose MoE experts PEFT 0.21 retargets as fused parameters under transformers 5 (PEFT's copy of
# transformers.conversion_mapping._MODEL_TO_CONVERSION_PATTERN plus "mixtral"; version-sensitive, checked against the
# installed peft by tests/test_training_truth.py). Value: the base pattern.
PEFT_MOE_CONVERSION: dict[str, str] = {
    "mixtral": "mixtral", "minimax": "mixtral", "minimax_m2": "mixtral",
    **{t: "qwen2_moe" for t in (
        "Dots3NoteTextModel", "afmoe", "deepseek_v2", "deepseek_v3", "deepseek_v32", "dots1", "ernie4_5_moe",
        "glm4_moe", "glm4_moe_lite", "glm_moe_dsa", "glm4v_moe", "longcat_flash", "solar_open", "mellum", "qwen3_moe",
        "beam", "qwen3_omni_moe", "qwen3_omni_moe_thinker", "qwen3_omni_moe_text", "qwen3_next", "hunyuan_v1_moe",
        "flex_olmo", "olmoe", "sarvam_mla", "exaone_moe", "cohere2_moe", "UnlimitedOcrTextModel",
    )},
}
# pre-fusion module name -> fused target (PEFT ``_MOE_TARGET_MODULE_MAPPING``); fused pairs get rank r * 2.
_MOE_NAME_MAP = {
    "mixtral": {"gate": "gate.weight", "w1": "gate_up_proj", "w3": "gate_up_proj", "w2": "down_proj"},
    "qwen2_moe": {"gate": "gate.weight", "gate_proj": "gate_up_proj", "up_proj": "gate_up_proj", "down_proj": "down_proj"},
}
_MOE_FUSED_PAIR = {"mixtral": ("w1", "w3"), "qwen2_moe": ("gate_proj", "up_proj")}

# Models whose Linear layers are GPT-2 style Conv1D ([in, out] weights).
_CONV1D_TYPES = {"gpt2", "openai-gpt", "imagegpt", "decision_transformer"}
# transformers 5.24 refuses SDPA for these (``_supports_sdpa = False``): HF training runs eager unless flash is chosen.
_NO_SDPA = {"gemma2"}
# Routers computed in fp32 (``F.linear(hidden.float(), weight.float())``, DeepSeek TopkRouter): +4h saved per token.
_FP32_ROUTER = {"deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "glm4_moe", "glm4_moe_lite", "glm_moe_dsa"}
# Activation functions: tensors of size I saved by the activation itself (native kernels save their input only).
_ACT_SAVES = {"silu": 1, "swish": 1, "gelu": 1, "gelu_pytorch_tanh": 1, "relu": 1, "gelu_new": 4, "gelu_fast": 4,
              "quick_gelu": 2, "gelu_python": 2, "relu2": 2}

_ATTN_IN = {"q_proj", "k_proj", "v_proj", "qkv_proj", "query_key_value", "c_attn", "q_a_proj", "kv_a_proj_with_mqa",
            "wqkv", "Wqkv", "query", "key", "value", "in_proj"}
_ATTN_MID = {"q_b_proj", "kv_b_proj"}
_MLP_MID = {"down_proj", "w2", "fc2", "dense_4h_to_h", "wo"}


# --------------------------------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class TrainingSettings:
    """Everything the user can set (CLI options of `hfmem REPO --train ...`)."""

    seq: int = 2048
    micro_batch: int = 1
    grad_checkpointing: bool | None = None  # None: off for full/lora, on for qlora (prepare_model_for_kbit_training)
    optimizer: str = "adamw"
    precision: str = "mixed-bf16"
    lora_rank: int = 16
    lora_targets: str = "all-linear"  # or "q_proj,v_proj,..."
    dora: bool = False
    gpus: int = 1
    zero: int = 0
    fsdp: str | None = None  # "full" | "grad-op"
    offload: str = "none"
    attn: str = "sdpa"
    chunked_loss: bool = False
    qlora_upcast: bool = True  # prepare_model_for_kbit_training casts non-4-bit params to fp32
    gpu: str | None = None  # a catalog name or size; default: the whole catalog
    overhead_bytes: int = FRAMEWORK_OVERHEAD

    def validate(self) -> TrainingSettings:
        def bad(msg: str) -> None:
            raise UsageError(msg)

        if self.seq < 1 or self.micro_batch < 1:
            bad("--seq and --micro-batch must be positive")
        if self.optimizer not in OPTIMIZERS:
            bad(f"unknown optimizer {self.optimizer!r} (one of {', '.join(OPTIMIZERS)})")
        if self.precision not in PRECISIONS:
            bad(f"unknown precision {self.precision!r} (one of {', '.join(PRECISIONS)})")
        if self.attn not in ATTENTION:
            bad(f"unknown attention implementation {self.attn!r} (one of {', '.join(ATTENTION)})")
        if self.offload not in OFFLOAD:
            bad(f"unknown offload {self.offload!r} (one of {', '.join(OFFLOAD)})")
        if self.fsdp is not None and self.fsdp not in FSDP:
            bad(f"unknown FSDP strategy {self.fsdp!r} (full or grad-op)")
        if self.zero not in (0, 1, 2, 3):
            bad("--zero must be 0, 1, 2 or 3")
        if self.fsdp is not None and self.zero:
            bad("--fsdp and --zero are alternatives; give one")
        if self.gpus < 1:
            bad("--gpus must be at least 1")
        if self.lora_rank < 1:
            bad("--lora-rank must be positive")
        if self.offload == "optimizer+params" and not (self.zero == 3 or self.fsdp == "full"):
            bad("--offload optimizer+params needs --zero 3 or --fsdp full (parameters are only offloadable when sharded)")
        if self.offload == "optimizer" and self.zero == 0 and self.fsdp is None:
            bad("--offload optimizer needs --zero 1/2/3 or --fsdp (ZeRO-Offload / FSDP CPU offload)")
        return self

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class _Precision:
    weight: int  # bytes per trainable weight as held for compute
    grad: int
    master: int  # fp32 master copy (0 when none)
    state: int  # bytes per element of Adam-style states
    act: int  # activation element bytes
    amp: bool  # fp32 params under autocast: a bf16 copy of every matmul weight is saved for backward


_PRECISION = {
    "mixed-bf16": _Precision(2, 2, 4, 4, 2, False),
    "mixed-fp16": _Precision(2, 2, 4, 4, 2, False),
    "bf16": _Precision(2, 2, 0, 2, 2, False),
    "fp32": _Precision(4, 4, 0, 4, 4, False),
    "amp-bf16": _Precision(4, 4, 0, 4, 2, True),
}


# --------------------------------------------------------------------------------------------------- structure


@dataclass(frozen=True)
class LinearModule:
    """One nn.Linear / Conv1D module from a 2-D ``*.weight`` tensor."""

    name: str  # module path (tensor name without ".weight")
    leaf: str
    in_features: int
    out_features: int
    layer: int | None
    component: str
    tensor: str = ""  # the stored weight tensor's name

    @property
    def params(self) -> int:
        return self.in_features * self.out_features


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

    @property
    def params(self) -> int:
        return self.rank * self.experts * (self.in_features + self.out_features)


def _is_text_layer_tensor(c: Any) -> bool:
    return c.component not in ("vision", "audio", "projector", "mtp")


def linear_modules(report: Any) -> list[LinearModule]:
    """nn.Linear / Conv1D modules as transformers 5 builds them: 2-D ``*.weight`` parameters outside embeddings,
    norms and the output head; per-expert checkpoint matrices are fused into 3-D parameters at load (not Linear) and
    MoE routers are custom modules (TopKRouter), so neither is listed. Packed quantized weights (GPTQ/AWQ ``qweight``,
    compressed-tensors ``weight_packed``, bitsandbytes U8) are Linear layers of their logical [out, in] shape."""
    arch = report.architecture
    conv1d = arch.model_type in _CONV1D_TYPES
    method = str((report.parameters.quantization or {}).get("method") or "")
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
        dims = _logical_dims(c, suffix, method, leaf, arch)
        if dims is None:
            continue
        fout, fin = dims
        if conv1d and suffix == ".weight" and c.role == "param":
            fin, fout = fout, fin  # Conv1D stores [in, out]
        out.append(LinearModule(name, leaf, fin, fout, c.layer, c.component, e.name))
    return out


def _logical_dims(c: Any, suffix: str, method: str, leaf: str, arch: Any) -> tuple[int, int] | None:
    """(out, in) of a Linear weight tensor, unpacking quantized storage (layouts in quant.py's docstring)."""
    shape = tuple(int(x) for x in c.entry.shape)
    if len(shape) != 2:
        return None
    n = c.logical
    if c.role != "quantized" or n == shape[0] * shape[1]:
        return shape
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


def _expert_tensors(report: Any) -> dict[int | None, dict[str, list[Any]]]:
    """MoE expert weights per layer, keyed by projection leaf name (w1/w2/w3, gate_proj/up_proj/down_proj, or the
    fused gate_up_proj/down_proj of checkpoints stored fused)."""
    out: dict[int | None, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
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


def _group_of(m: LinearModule) -> str:
    leaf = m.leaf
    if m.component == "attention" or leaf in _ATTN_IN | _ATTN_MID or leaf in ("o_proj", "out_proj", "dense"):
        if leaf in _ATTN_IN:
            return "attn_in"
        if leaf in _ATTN_MID:
            return f"attn_mid:{leaf}"
        return "attn_out"
    if leaf in _MLP_MID or (leaf == "c_proj" and m.component != "attention"):
        prefix = "shared_mid" if m.component == "moe_shared_experts" else "mlp_mid"
        return prefix
    return "mlp_in"


def resolve_lora_targets(report: Any, targets: str, rank: int, dora: bool = False) -> tuple[list[Adapter], list[str], list[str]]:
    """(adapters, target names as PEFT resolves them, notes) - PEFT 0.21 semantics on transformers 5."""
    arch = report.architecture
    notes: list[str] = []
    linears = linear_modules(report)
    pattern = PEFT_MOE_CONVERSION.get(arch.model_type)
    experts = _expert_tensors(report)
    has_experts = any(experts.values())
    if pattern is not None and not has_experts:
        pattern = None
    mapping = _MOE_NAME_MAP.get(pattern or "", {})
    all_linear = targets.strip().lower() == "all-linear"
    if all_linear:
        wanted = {m.leaf for m in linears}
        if pattern is not None:
            wanted |= set(mapping)
    else:
        wanted = {t.strip() for t in targets.split(",") if t.strip()}
        if not wanted:
            raise UsageError("--lora-targets is empty")
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
            adapters.append(Adapter(m.name, "linear", m.in_features, m.out_features, rank, 1, m.layer, _group_of(m), m.params))
    if param_targets:
        for layer, projs in sorted(experts.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
            adapters.extend(_expert_adapters(layer, projs, param_targets, rank, fused_rank, pattern))
        if "gate.weight" in param_targets:
            for c in report.tensors:
                if c.component == "moe_router" and c.entry.name.endswith("gate.weight") and len(c.entry.shape) == 2:
                    out_f, in_f = c.entry.shape
                    adapters.append(Adapter(c.entry.name, "router", in_f, out_f, rank, 1, c.layer, "mlp_in", out_f * in_f))
    if not adapters:
        raise UsageError(f"--lora-targets {targets!r} matches no Linear layer of this model")
    if dora and any(a.kind != "linear" for a in adapters):
        raise UsageError(
            "DoRA cannot adapt fused MoE expert tensors (PEFT: 'lora.ParamWrapper does not work with use_dora=True'); "
            "choose --lora-targets without the expert/router names"
        )
    if dora:
        notes.append("DoRA adds one magnitude vector (out_features) per adapted Linear")
    names = sorted(module_targets | param_targets) if not all_linear or pattern else ["all-linear"]
    return adapters, names, notes


def _expert_adapters(layer: int | None, projs: dict[str, list[Any]], targets: set[str], rank: int, fused_rank: dict[str, int], pattern: str) -> list[Adapter]:
    """ParamWrapper adapters on the fused 3-D expert tensors [E, out, in]: lora_A [r*E, in], lora_B [out, r*E]."""
    out: list[Adapter] = []
    pair = _MOE_FUSED_PAIR[pattern]
    down_name = "w2" if pattern == "mixtral" else "down_proj"

    def dims(items: list[Any]) -> tuple[int, int, int]:
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


# --------------------------------------------------------------------------------------------------- QLoRA NF4


def nf4_bytes(n: int, double_quant: bool = True, blocksize: int = NF4_BLOCK) -> int:
    """Bytes of one bitsandbytes NF4-quantized Linear with n weights (4-bit codes + absmax + code books)."""
    blocks = -(-n // blocksize)
    codes = -(-n // 2)
    if double_quant:
        return codes + blocks + 4 * -(-blocks // NF4_NESTED_BLOCK) + NF4_CODEBOOKS
    return codes + 4 * blocks + 16 * 4


# --------------------------------------------------------------------------------------------------- optimizer


def optimizer_state_bytes(shape: tuple[int, ...], optimizer: str, state_bytes: int, embedding: bool = False) -> tuple[int, int]:
    """(resident bytes, pageable bytes) of the optimizer state of one trainable tensor. Step counters (python ints or
    0-dim host tensors for torch AdamW without fused/capturable) are not GPU memory and are not counted."""
    n = math.prod(shape) if shape else 1
    if optimizer == "adamw":
        return 2 * n * state_bytes, 0
    if optimizer in ("adamw-8bit", "paged-adamw-8bit"):
        paged = optimizer.startswith("paged")
        if n < BNB_MIN_8BIT or embedding:
            states, absmax = 2 * n * 4, 0
        else:
            states, absmax = 2 * n, 2 * 4 * -(-n // BNB_OPT_BLOCK)
        if paged and n >= BNB_PAGED_MIN:
            return absmax, states
        return states + absmax, 0
    if optimizer == "adafactor":  # + the fp32 0-dim RMS tensor kept on the device
        if len(shape) >= 2:
            rows = math.prod(shape[:-1])
            cols = math.prod(shape[:-2]) * shape[-1]
            return 4 * (rows + cols) + 4, 0
        return 4 * n + 4, 0
    if optimizer == "sgd":
        return 0, 0
    if optimizer in ("sgd-momentum", "lion"):
        return n * state_bytes, 0
    raise UsageError(f"unknown optimizer {optimizer!r}")


def _optimizer_note(optimizer: str) -> str:
    return {
        "adamw": "AdamW: exp_avg + exp_avg_sq per trainable element (torch keeps them in the dtype of the parameter it updates)",
        "adamw-8bit": "bnb AdamW8bit: 2 x uint8 states + fp32 absmax per 256 elements; fp32 states for embeddings and tensors < 4096 elements",
        "paged-adamw-8bit": "bnb PagedAdamW8bit: states of tensors >= 1e5 elements live in CUDA unified memory (pageable, evicted to host under pressure)",
        "adafactor": "HF Adafactor (beta1=None): factored fp32 row/column second moments",
        "sgd": "SGD without momentum: no state",
        "sgd-momentum": "SGD momentum: one buffer per trainable element",
        "lion": "Lion: one momentum buffer per trainable element (lion-pytorch layout; not measured here)",
    }[optimizer]


# --------------------------------------------------------------------------------------------------- activations


@dataclass
class _Dtypes:
    res: int  # residual stream / norm input
    lin: int  # outputs of Linear layers (MLP intermediates)
    sdpa: int  # q, k, v, out saved by the attention kernel
    adapter: int  # LoRA adapter weights
    autocast: bool  # HF Trainer bf16=True: matmul inputs cast to bf16 per call


@dataclass
class _LayerFacts:
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


def _layers(report: Any) -> list[_LayerFacts]:
    arch = report.architecture
    by_layer: dict[int, list[Any]] = defaultdict(list)
    for c in report.tensors:
        if c.layer is None or not _is_text_layer_tensor(c) or c.role not in ("param", "quantized"):
            continue
        if c.layer >= arch.num_layers:
            continue
        by_layer[c.layer].append(c)
    h = arch.hidden_size
    top_k = int((arch.moe or {}).get("experts_per_token") or 0)
    facts: list[_LayerFacts] = []
    lt = arch.layer_type_list or []
    lin_by_layer: dict[int | None, list[LinearModule]] = defaultdict(list)
    for m in linear_modules(report):
        if _is_text_layer_tensor(m):
            lin_by_layer[m.layer].append(m)
    for i in range(arch.num_layers):
        ts = by_layer.get(i, [])
        names = [c.entry.name for c in ts]
        kind = lt[i] if i < len(lt) else "full_attention"
        attn = "none"
        if kind in ("full_attention", "sliding_attention", "chunked_attention", "attention") or any(
            n.endswith(("q_proj.weight", "c_attn.weight", "qkv_proj.weight", "q_a_proj.weight", "query_key_value.weight")) for n in names
        ):
            attn = "mla" if arch.mla else "gqa"
        if kind in ("mamba", "linear_attention", "mlp_only", "moe_only"):
            attn = "none"
        hidden_norms = sum(
            1 for c in ts if c.component == "norms" and c.entry.name.endswith("weight") and tuple(c.entry.shape) == (h,)
            and not re.search(r"(q_a_layernorm|kv_a_layernorm|q_norm|k_norm)\.weight$", c.entry.name)
        )
        qk_norm = any(n.endswith(("q_norm.weight", "k_norm.weight")) for n in names)
        experts = _expert_tensors_layer(ts)
        f = _LayerFacts(i, attn, kind == "sliding_attention", hidden_norms or 2, qk_norm, "none", 0)
        f.linear_params = sum(c.logical for c in ts)
        for m in lin_by_layer.get(i, []):
            f.groups.setdefault(_group_of(m), []).append(m)
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
                gated = any(re.search(r"(gate_proj|gate_up_proj|w1|w3|up_proj|fc1_gate)\.weight$", n) for n in names)
                f.mlp = "gated" if gated and not re.search(r"(c_fc|fc1)\.weight$", " ".join(names)) else "plain"
                if any(n.endswith("gate_up_proj.weight") for n in names):
                    f.mlp = "gated"
            elif arch.intermediate_size and attn != "none":
                f.mlp, f.intermediate = "gated", int(arch.intermediate_size)
        facts.append(f)
    return facts


def _mid(name: str) -> bool:
    leaf = name.rsplit(".", 2)[-2] if name.endswith(".weight") else ""
    return leaf in _MLP_MID or leaf == "c_proj"


def _in_dim(c: Any, arch: Any) -> int:
    shape = c.entry.shape
    return int(shape[0] if arch.model_type in _CONV1D_TYPES else shape[1])


def _expert_tensors_layer(ts: list[Any]) -> dict[str, Any] | None:
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


def _norm_bytes(n: int, ctx: _ActContext, trainable: bool) -> int:
    """Saved bytes per token of one norm over n features."""
    if ctx.norm_style == "layernorm":
        return ctx.dt.res * n + 8  # native_layer_norm saves its input + fp32 mean/rstd
    out = (4 if ctx.norm_style == "gemma" else ctx.dt.res) * n if trainable else 0
    return 4 * n + 4 + out  # fp32 copy of the input (or the fp32 input itself) + rstd + normalised output if w trains


def _layer_terms(f: _LayerFacts, arch: Any, ctx: _ActContext, first: bool) -> tuple[dict[str, int], int]:
    """(saved bytes per token by term, token-independent saved bytes) for one decoder layer."""
    dt = ctx.dt
    h = arch.hidden_size
    t: dict[str, int] = defaultdict(int)
    fixed = 0
    adapters = ctx.adapters_by_layer.get(f.index, [])
    adapted_groups: dict[str, list[Adapter]] = defaultdict(list)
    for a in adapters:
        adapted_groups[a.group].append(a)
    full = ctx.trainable_base

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
            rq = m.get("q_lora_rank")
            rkv = m["kv_lora_rank"]
            dqk = m["qk_nope_head_dim"] + m["qk_rope_head_dim"]
            dv = m["v_head_dim"]
            if rq:
                t["norms"] += _norm_bytes(int(rq), ctx, full)
                linear_input("attn_mid:q_b_proj", int(rq), dt.lin)
            t["norms"] += _norm_bytes(rkv, ctx, full)
            linear_input("attn_mid:kv_b_proj", rkv, dt.lin)
            q_b, k_b, v_b = nq * dqk, nq * dqk, nq * (m["qk_nope_head_dim"] + dv)
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
            t["attention scores (eager, s x s)"] += nq * s * (4 + (dt.sdpa if dt.sdpa < 4 else 0))
            if ctx.softcap:
                t["attention scores (eager, s x s)"] += dt.sdpa * nq * s
            if ctx.attn_dropout:
                t["attention scores (eager, s x s)"] += nq * s * (1 + dt.sdpa)
            o_saved = False
        else:
            t["attention q, k, v"] += dt.sdpa * (q_b + k_b + v_b)
            t["attention output + logsumexp"] += dt.sdpa * out_b + 4 * nq
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
    elif f.groups.get("attn_in"):
        # SSM / linear-attention mixer (Mamba, Gated DeltaNet): not derived term by term - estimate as its input
        # projections' outputs, its output projection's input and a norm, saved once each.
        widths = sum(m.out_features for m in f.groups["attn_in"]) + sum(m.in_features for m in f.groups.get("attn_out", []))
        t["mixer (SSM / linear attention, estimate)"] += dt.lin * 2 * widths + _norm_bytes(h, ctx, full)
        linear_input("attn_in", h, dt.res)
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
            linear_input("mlp_mid", inter, dt.lin)
        else:
            k, ie, e = f.top_k, f.expert_intermediate, f.experts
            # Router: logits -> softmax/sigmoid fp32 [E], top-k indices int64 and weights, renormalisation.
            t["MoE router"] += 4 * e + 12 * k + 4 + (4 * h if arch.model_type in _FP32_ROUTER else 0)
            # transformers 5 grouped_mm experts (integrations/moe.py grouped_mm_experts_forward), per routed pair:
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
    return dict(t), fixed


def _adapter_terms(a: Adapter, elem: int, t: dict[str, int], ctx: _ActContext, features: int) -> None:
    """Per-token saved bytes of one LoRA adapter (peft tuners/lora/layer.py Linear.forward: the input is cast to the
    adapter dtype per module (_cast_input_dtype), lora_A saves that copy, lora_B saves lora_A's output)."""
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


def _nonlayer_terms(arch: Any, ctx: _ActContext, lm_trainable: bool, rope: bool, embd_dropout: bool) -> dict[str, int]:
    h = arch.hidden_size
    t: dict[str, int] = {}
    if rope:
        t["RoPE cos/sin"] = 2 * ctx.dt.res * (arch.mla["qk_rope_head_dim"] if arch.mla else arch.head_dim)
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
    """(peak bytes per token, description). HF ForCausalLMLoss (transformers loss/loss_utils.py): logits.float(),
    cross_entropy saves the fp32 log-softmax output (4V) and the int64 targets; at the start of backward the NLL
    gradient (4V) and the log-softmax gradient (4V) are alive together with it: 12 x V bytes per token at the peak
    (the 16-bit logits are freed before backward because the Trainer keeps only the loss)."""
    if not chunked:
        return 12 * vocab + 8, "not chunked: fp32 log-softmax + 2 gradients, 12 B x vocab per token"
    # Liger fused linear cross-entropy (ops/fused_linear_cross_entropy.py): chunks of next_pow2(cdiv(BT, cdiv(V, H)))
    # tokens; fp32 chunk logits/gradient plus the grad_input buffer. Estimate, not measured.
    chunk = 1 << max(0, math.ceil(math.log2(max(1, -(-tokens // -(-vocab // hidden))))))
    per_tok = -(-(chunk * vocab * 4) // tokens) + dt.res * hidden + 8
    return per_tok, f"chunked (fused linear cross-entropy, {chunk}-token chunks; estimate)"


# --------------------------------------------------------------------------------------------------- estimate


@dataclass
class TrainingEstimate:
    method: str
    total_bytes: int
    trainable_parameters: int
    components: dict[str, int]
    settings: dict[str, Any]
    pageable_bytes: int = 0
    host_bytes: int = 0
    rank: int | None = None
    target_modules: list[str] | None = None
    activation_terms: dict[str, Any] = field(default_factory=dict)
    fits_on: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "total_bytes": self.total_bytes,
            "trainable_parameters": self.trainable_parameters,
            "components": dict(self.components),
            "settings": dict(self.settings),
            "pageable_bytes": self.pageable_bytes,
            "host_bytes": self.host_bytes,
            "activation_terms": self.activation_terms,
            "fits_on": list(self.fits_on),
            "notes": list(self.notes),
        }
        if self.method in ("lora", "qlora"):
            out["rank"] = self.rank
            out["target_modules"] = list(self.target_modules or [])
        return out

    def tables(self) -> list[tuple[str, list[str], list[list[Any]]]]:
        return TrainingReport({self.method: self}, self.settings.get("gpu")).tables()


@dataclass
class TrainingReport:
    estimates: dict[str, TrainingEstimate]
    gpu: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {m: e.to_dict() for m, e in self.estimates.items()}

    def tables(self) -> list[tuple[str, list[str], list[list[Any]]]]:
        methods = list(self.estimates)
        ests = [self.estimates[m] for m in methods]
        keys = [k for k in _LABELS if any(k in e.components for e in ests)]
        for e in ests:
            keys.extend(k for k in e.components if k not in keys)
        rows: list[list[Any]] = []
        def cell(e: TrainingEstimate, k: str) -> str:
            if k not in e.components:
                return "-"
            v = e.components[k]
            n = e.activation_terms.get("layers") or 0
            if k == "activations_layers" and n:
                return f"{fmt_bytes(v)} ({n} x {fmt_bytes(v / n)})"
            return fmt_bytes(v)

        for k in keys:
            rows.append([_LABELS.get(k, k)] + [cell(e, k) for e in ests])
        rows.append(["TOTAL per GPU"] + [f"{fmt_bytes(e.total_bytes)}" for e in ests])
        if any(e.pageable_bytes for e in ests):
            rows.append(["pageable optimizer states (not in total)"] + [fmt_bytes(e.pageable_bytes) for e in ests])
        if any(e.host_bytes for e in ests):
            rows.append(["host RAM for offloaded states"] + [fmt_bytes(e.host_bytes) for e in ests])
        rows.append(["trainable parameters"] + [fmt_count(e.trainable_parameters) for e in ests])
        rows.append(["fits on"] + [_fits_label(e.fits_on, self.gpu) for e in ests])
        s = ests[0].settings
        head = (
            f"Training memory per GPU (seq {s['seq']} x micro-batch {s['micro_batch']}, {s['precision']}, {s['optimizer']}, "
            f"{s['gpus']} GPU{'s' if s['gpus'] > 1 else ''}{_parallel_label(s)}, attention {s['attn']})"
        )
        tables = [(head, ["component"] + methods, rows)]
        detail = []
        for m, e in zip(methods, ests):
            st = e.settings
            line = [m, "on" if st["grad_checkpointing"] else "off", st["loss"]]
            if m != "full":
                line.append(f"r={e.rank} on {', '.join(e.target_modules or [])}")
            else:
                line.append("-")
            detail.append(line)
        tables.append(("Training settings", ["method", "grad checkpointing", "loss", "adapters"], detail))
        notes: dict[str, list[str]] = {}
        for m, e in zip(methods, ests):
            for n in e.notes:
                notes.setdefault(n, []).append(m)
        if notes:
            tables.append(("Training notes", ["methods", "note"], [[", ".join(ms), n] for n, ms in notes.items()]))
        return tables


def _fits_label(keys: list[str], gpu: str | None) -> str:
    if gpu:
        return "yes" if keys else "no"
    if not keys:
        return "none of the catalog"
    from hfmem.memory.gpus import CATALOG

    cuda = [g.key for g in CATALOG if g.key in keys and g.kind != "apple"]
    shown = cuda[:3] if cuda else keys[:3]
    more = len(keys) - len(shown)
    return ", ".join(shown) + (f" (+{more} more)" if more > 0 else "")


def _parallel_label(s: dict[str, Any]) -> str:
    parts = []
    if s.get("fsdp"):
        parts.append(f"FSDP {s['fsdp']}")
    elif s.get("zero"):
        parts.append(f"ZeRO-{s['zero']}")
    if s.get("offload") and s["offload"] != "none":
        parts.append(f"offload {s['offload']}")
    return (", " + ", ".join(parts)) if parts else ""


_LABELS = {
    "weights": "weights",
    "master_weights": "fp32 master weights",
    "gradients": "gradients",
    "optimizer_states": "optimizer states",
    "base_weights": "frozen base weights",
    "base_nf4": "NF4 base (quantized Linear layers)",
    "base_unquantized": "base modules kept unquantized",
    "adapter_weights": "LoRA adapter weights",
    "adapter_gradients": "LoRA adapter gradients",
    "adapter_optimizer_states": "LoRA optimizer states",
    "activations_layers": "activations: decoder layers",
    "activations_layer_weights": "activations: weight copies saved per layer",
    "activations_recompute": "activations: one layer recomputed (checkpointing)",
    "activations_other": "activations: embeddings/RoPE/final norm",
    "logits_loss": "logits + cross-entropy",
    "backward_transient": "backward transient",
    "autocast_weight_copies": "autocast bf16 weight copies",
    "ddp_gradient_buckets": "DDP gradient buckets",
    "zero3_gathered_params": "ZeRO-3 gathered layer (params + grads)",
    "fsdp_unit_buffers": "FSDP unsharded unit (params + grads)",
    "dequant_buffer": "4-bit dequantization buffer",
    "dora_buffer": "DoRA weight-norm buffer",
    "framework_overhead": "CUDA context + workspaces",
}


def _trainable_tensors(report: Any) -> list[Any]:
    """Parameters transformers builds: no MTP layers, no registered buffers stored in the checkpoint (DeepSeek's
    e_score_correction_bias is a buffer)."""
    return [
        c for c in report.tensors
        if c.role in ("param", "quantized") and c.component != "mtp" and not c.entry.name.endswith("e_score_correction_bias")
    ]


def estimate_training(report: Any, method: str, settings: TrainingSettings | None = None) -> TrainingEstimate:
    """Per-GPU training memory of one method ("full", "lora" or "qlora") with every term visible."""
    settings = (settings or TrainingSettings()).validate()
    if method not in METHODS:
        raise UsageError(f"unknown training method {method!r} (full, lora, qlora or all)")
    arch = report.architecture
    prec = _PRECISION[settings.precision]
    notes: list[str] = []
    ckpt = settings.grad_checkpointing if settings.grad_checkpointing is not None else (method == "qlora")
    tensors = _trainable_tensors(report)
    quant = report.parameters.quantization
    psi = sum(c.logical for c in tensors)
    comps: dict[str, int] = {}
    pageable = 0
    n = settings.gpus
    zero = settings.zero
    shard_states = n if (zero >= 1 or settings.fsdp) else 1
    shard_grads = n if (zero >= 2 or settings.fsdp) else 1
    shard_params = n if (zero == 3 or settings.fsdp == "full") else 1
    host = 0
    embed_names = {c.entry.name for c in tensors if c.component == "embeddings" or (arch.tie_word_embeddings and c.component == "lm_head")}
    adapters: list[Adapter] = []
    targets: list[str] | None = None
    if method == "full":
        if quant is not None:
            notes.append(f"full fine-tuning needs the dequantized model: {psi:,} logical parameters at {settings.precision}")
        trainable = psi
        weights = psi * prec.weight
        master = psi * prec.master
        grads = psi * prec.grad
        state_elem = 4 if prec.master else prec.state
        opt = 0
        for c in tensors:
            res, pg = optimizer_state_bytes(_shape(c), settings.optimizer, state_elem, c.entry.name in embed_names)
            opt += res
            pageable += pg
        comps["weights"] = _ceil_div(weights, shard_params)
        if master:
            comps["master_weights"] = _ceil_div(master, shard_states)
        comps["gradients"] = _ceil_div(grads, shard_grads)
        comps["optimizer_states"] = _ceil_div(opt, shard_states)
        pageable = _ceil_div(pageable, shard_states)
        if settings.offload != "none":
            host += comps.pop("optimizer_states") + comps.pop("master_weights", 0) + pageable
            pageable = 0
            if prec.master:
                host += _ceil_div(psi * 4, shard_grads)  # fp32 gradient copy the CPU Adam updates from
            if settings.offload == "optimizer+params":
                host += comps.pop("weights")
        if prec.amp:
            notes.append("amp: fp32 weights under autocast; the bf16 copy of each matmul weight is saved for backward (+2 B/param)")
    else:
        adapters, targets, lora_notes = resolve_lora_targets(report, settings.lora_targets, settings.lora_rank, settings.dora)
        notes.extend(lora_notes)
        trainable = sum(a.params for a in adapters) + (sum(a.out_features for a in adapters) if settings.dora else 0)
        ad_elem = 2 if settings.precision == "bf16" else 4
        if settings.precision == "bf16":
            notes.append("bf16: adapters kept in bf16 (PEFT autocast_adapter_dtype=False); PEFT's default upcasts them to fp32")
        if method == "lora":
            if quant is not None:
                base = sum(c.entry.nbytes for c in report.tensors if c.role in ("param", "quantized", "quant_overhead") and c.component != "mtp")
                notes.append(f"frozen base kept in its stored {quant.get('method')} format")
            else:
                base = psi * (4 if settings.precision in ("fp32", "amp-bf16") else 2)
            comps["base_weights"] = _ceil_div(base, shard_params)
        else:
            nf4, unq, qnotes, biggest = _qlora_base(report, settings, ad_elem)
            notes.extend(qnotes)
            comps["base_nf4"] = _ceil_div(nf4, shard_params)
            comps["base_unquantized"] = _ceil_div(unq, shard_params)
        comps["adapter_weights"] = _ceil_div(trainable * ad_elem, shard_params)
        comps["adapter_gradients"] = _ceil_div(trainable * ad_elem, shard_grads)
        opt = 0
        for a in adapters:
            for shape in ((a.rank * a.experts, a.in_features), (a.out_features, a.rank * a.experts)):
                res, pg = optimizer_state_bytes(shape, settings.optimizer, ad_elem)
                opt += res
                pageable += pg
            if settings.dora:
                res, pg = optimizer_state_bytes((a.out_features,), settings.optimizer, ad_elem)
                opt += res
        comps["adapter_optimizer_states"] = _ceil_div(opt, shard_states)
        pageable = _ceil_div(pageable, shard_states)
        if settings.offload != "none":
            host += comps.pop("adapter_optimizer_states") + pageable
            pageable = 0
            if settings.offload == "optimizer+params":
                key = "base_weights" if method == "lora" else "base_nf4"
                host += comps.pop(key)
    # --- activations ---
    act, act_terms, act_notes = _activations(report, method, settings, prec, ckpt, adapters)
    notes.extend(act_notes)
    comps.update(act)
    if prec.amp and method == "full":
        lin = sum(m.params for m in linear_modules(report)) + sum(c.logical for c in tensors if c.component == "lm_head")
        if arch.tie_word_embeddings and not any(c.component == "lm_head" for c in tensors):
            lin += arch.vocab_size * arch.hidden_size
        if ckpt:
            per_layer = max((sum(m.params for m in linear_modules(report) if m.layer == i) for i in range(arch.num_layers)), default=0)
            lin = lin - sum(m.params for m in linear_modules(report)) + per_layer
        comps["autocast_weight_copies"] = 2 * lin
    # --- data parallel buffers ---
    if n > 1 and zero == 0 and not settings.fsdp:
        g = comps.get("gradients", comps.get("adapter_gradients", 0))
        comps["ddp_gradient_buckets"] = g
        notes.append("DDP with gradient_as_bucket_view=False (default) keeps a flat copy of all gradients in its buckets")
    if zero == 3 or settings.fsdp == "full":
        largest = _largest_module_params(report, method)
        if settings.fsdp == "full":
            unit = max((f.linear_params for f in _layers(report)), default=0)
            if method == "full":  # current + prefetched unit in the compute dtype, and one unit's unsharded gradient
                comps["fsdp_unit_buffers"] = 2 * unit * prec.weight + unit * prec.grad
            else:
                comps["fsdp_unit_buffers"] = 2 * unit * 2
            notes.append("FSDP full shard: the current and the prefetched decoder layer are unsharded (plus one layer's gradient when the base trains)")
        else:
            comps["zero3_gathered_params"] = 4 * largest if method == "full" else 2 * largest
            notes.append("ZeRO-3: DeepSpeed's estimator adds the largest layer's gathered 16-bit params + grads (4 B x largest layer)")
    if method == "qlora":
        comps["dequant_buffer"] = 2 * _largest_quantized(report)
    if settings.dora:
        comps["dora_buffer"] = max((a.in_features * (a.in_features + 3 * a.out_features) for a in adapters if a.kind == "linear"), default=0) * (2 if settings.precision == "bf16" else 4)
    comps["framework_overhead"] = settings.overhead_bytes
    total = sum(comps.values())
    st = settings.to_dict() | {
        "method": method,
        "grad_checkpointing": ckpt,
        "loss": act_terms.pop("_loss"),
        "tokens_per_micro_batch": settings.seq * settings.micro_batch,
    }
    if method != "full":
        st["adapter_dtype"] = "bf16" if settings.precision == "bf16" else "fp32"
    est = TrainingEstimate(
        method=method,
        total_bytes=total,
        trainable_parameters=trainable,
        components=comps,
        settings=st,
        pageable_bytes=pageable,
        host_bytes=host,
        rank=settings.lora_rank if method != "full" else None,
        target_modules=targets,
        activation_terms=act_terms,
        notes=notes,
    )
    est.fits_on = _fits(total, settings.gpu)
    if zero or settings.fsdp:
        est.notes.append(_zero_note(report, method, settings, prec, psi))
    return est


def _shape(c: Any) -> tuple[int, ...]:
    shape = tuple(int(x) for x in c.entry.shape)
    if c.role == "quantized" and math.prod(shape or (1,)) != c.logical:
        return (c.logical,)
    return shape


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _largest_module_params(report: Any, method: str) -> int:
    return max((c.logical for c in _trainable_tensors(report) if len(c.entry.shape) >= 2), default=0)


def _largest_quantized(report: Any) -> int:
    lm = _quantizable(report)
    return max((m.params for m in lm), default=0)


def _quantizable(report: Any) -> list[LinearModule]:
    """Linear layers bitsandbytes replaces (transformers integrations/bitsandbytes.py): nn.Linear/Conv1D except the
    output embedding (get_keys_to_not_convert keeps lm_head / tied weights / the last module)."""
    return linear_modules(report)


def _qlora_base(report: Any, settings: TrainingSettings, ad_elem: int) -> tuple[int, int, list[str], int]:
    notes: list[str] = []
    quant = report.parameters.quantization
    tensors = _trainable_tensors(report)
    unq_elem = 4 if settings.qlora_upcast else 2
    if quant is not None and str(quant.get("method", "")).startswith("bitsandbytes-4bit"):
        nf4 = sum(c.entry.nbytes for c in report.tensors if c.role in ("quantized", "quant_overhead") and c.component != "mtp")
        unq = sum(c.logical for c in tensors if c.role == "param") * unq_elem
        notes.append("checkpoint is already bitsandbytes 4-bit: NF4 bytes are the stored bytes")
        return nf4, unq, notes, 0
    if quant is not None:
        notes.append(f"checkpoint is {quant.get('method')}: QLoRA re-quantizes the dequantized weights to NF4")
    lin = _quantizable(report)
    lin_names = {m.tensor for m in lin}
    nf4 = sum(nf4_bytes(m.params) for m in lin)
    q_params = sum(m.params for m in lin)
    unq_params = sum(c.logical for c in tensors if c.entry.name not in lin_names)
    unq = unq_params * unq_elem
    kept = sorted({c.component for c in tensors if c.entry.name not in lin_names and c.logical})
    notes.append(
        f"NF4 (double quant, blocksize 64): {len(lin):,} Linear layers, {q_params:,} params; kept "
        f"{'fp32 (prepare_model_for_kbit_training)' if settings.qlora_upcast else '16-bit'}: {', '.join(kept)} "
        f"({unq_params:,} params)"
    )
    if any(c.component == "moe_experts" for c in tensors):
        notes.append("fused MoE expert tensors are not nn.Linear in transformers 5, so bitsandbytes leaves them unquantized")
    return nf4, unq, notes, max((m.params for m in lin), default=0)


def _dtypes(method: str, settings: TrainingSettings, prec: _Precision) -> _Dtypes:
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


def _activations(report: Any, method: str, settings: TrainingSettings, prec: _Precision, ckpt: bool, adapters: list[Adapter]) -> tuple[dict[str, int], dict[str, Any], list[str]]:
    arch = report.architecture
    notes: list[str] = []
    dt = _dtypes(method, settings, prec)
    cfg = arch.text_config or {}
    attn = settings.attn
    if attn == "sdpa" and arch.model_type in _NO_SDPA:
        attn = "eager"
        notes.append(f"transformers 5.24 has no SDPA for {arch.model_type}: HF training uses eager attention (s x s scores) unless --attn flash")
    mt = arch.model_type
    norm_style = "layernorm" if mt in _CONV1D_TYPES or any(
        c.component == "norms" and c.entry.name.endswith(".bias") for c in report.tensors if c.layer == 0
    ) else ("gemma" if mt.startswith("gemma") else "rms")
    act = str(cfg.get("hidden_act") or cfg.get("activation_function") or cfg.get("hidden_activation") or "silu")
    act_saves = _ACT_SAVES.get(act, 1)
    attn_drop = float(cfg.get("attention_dropout") or cfg.get("attn_pdrop") or 0.0)
    resid_drop = float(cfg.get("resid_pdrop") or cfg.get("hidden_dropout") or 0.0)
    embd_drop = float(cfg.get("embd_pdrop") or 0.0)
    if attn_drop and attn != "eager":
        notes.append("attention dropout inside SDPA/flash kernels keeps no mask (Philox RNG); CPU math fallbacks differ")
    softcap = bool(cfg.get("attn_logit_softcapping"))
    by_layer: dict[int | None, list[Adapter]] = defaultdict(list)
    for a in adapters:
        by_layer[a.layer].append(a)
    ctx = _ActContext(method, dt, settings.seq, attn, by_layer, norm_style, act_saves, method == "full", settings.dora,
                      attn_drop, resid_drop, softcap)
    layers = _layers(report)
    tokens = settings.seq * settings.micro_batch
    per_layer_terms: list[dict[str, int]] = []
    fixed: list[int] = []
    for i, f in enumerate(layers):
        terms, fx = _layer_terms(f, arch, ctx, first=(i == 0 and not ckpt))
        per_layer_terms.append(terms)
        fixed.append(fx)
    layer_tok = [sum(t.values()) for t in per_layer_terms]
    lm_trainable = method == "full"
    rope = norm_style != "layernorm" and arch.attention_kind != "none" and not any(c.component == "embeddings" and "wpe" in c.entry.name for c in report.tensors)
    other = _nonlayer_terms(arch, ctx, lm_trainable, rope, bool(embd_drop))
    other_tok = sum(other.values())
    logits_tok, loss_desc = _logits_bytes_per_token(arch.vocab_size, arch.hidden_size, tokens, settings.chunked_loss, dt)
    if cfg.get("final_logit_softcapping") and not settings.chunked_loss:
        logits_tok += dt.lin * arch.vocab_size  # tanh(logits / cap) output, saved until its backward
        loss_desc += " + final logit soft-capping (tanh output, 16-bit x vocab)"
    # Backward transient of one layer: the incoming gradient (h) and the gradients of two MLP intermediates alive
    # together while the layer's own saved tensors are released (measured: 2*I + h elements for a dense SwiGLU block).
    def transient(f: _LayerFacts) -> int:
        inter = f.intermediate if f.mlp != "moe" else f.top_k * f.expert_intermediate + f.shared_intermediate
        tr = dt.lin * (2 * inter) + dt.res * arch.hidden_size
        if method != "full" and dt.adapter == 4:
            # the gradient of PEFT's fp32 input copy (4 x in) of the widest adapted module; under autocast also the
            # 16-bit gradient of the adapter branch before it is added to the base branch's
            widest = max((a.in_features for a in adapters if a.kind == "linear"), default=0)
            tr += 4 * widest + (dt.lin * widest if dt.autocast else 0)
        if attn == "eager" and f.attention != "none":
            # the attention backward runs after the MLP's saved tensors are freed: the s x s gradients (bf16 probs
            # + fp32 softmax) only set the peak when they outgrow the MLP intermediates
            tr = max(tr, 6 * arch.num_attention_heads * settings.seq - dt.lin * 3 * inter)
        return tr

    max_transient = max((transient(f) for f in layers), default=0)
    # grouped_mm's backward produces the gradient of the folded W + B@A expert tensor: down_proj's first (all saved
    # tensors alive), then gate_up_proj's once the down copy is freed.
    expert_grad = 0
    for ads in by_layer.values():
        sizes = {a.name.rsplit(".", 1)[-1]: dt.lin * a.base_params for a in ads if a.kind == "experts"}
        down, up = sizes.get("down_proj", 0), sizes.get("gate_up_proj", 0)
        expert_grad = max(expert_grad, down, up - down)
    out: dict[str, int] = {}
    if not ckpt:
        layers_bytes = sum(layer_tok) * tokens
        fixed_bytes = sum(fixed)
        phase_loss = logits_tok * tokens
        phase_layers = max_transient * tokens + expert_grad
        out["activations_layers"] = layers_bytes
        if fixed_bytes:
            out["activations_layer_weights"] = fixed_bytes
        out["activations_other"] = other_tok * tokens
        if phase_loss >= phase_layers:
            out["logits_loss"] = phase_loss
        else:
            out["backward_transient"] = phase_layers
        peak_at = "loss backward" if phase_loss >= phase_layers else "layer backward"
    else:
        inputs = dt.res * arch.hidden_size
        out["activations_layers"] = inputs * len(layers) * tokens
        out["activations_other"] = other_tok * tokens
        # Peak A: loss backward with every layer input kept; peak B: the last layer recomputed + its backward.
        j = max(range(len(layers)), key=lambda i: layer_tok[i] * tokens + fixed[i]) if layers else 0
        recompute = (layer_tok[j] * tokens + fixed[j]) if layers else 0
        phase_loss = logits_tok * tokens
        rope_tok = other.get("RoPE cos/sin", 0)
        phase_layers = recompute + max_transient * tokens + expert_grad - (other_tok - rope_tok) * tokens
        if phase_loss >= phase_layers:
            out["logits_loss"] = phase_loss
            peak_at = "loss backward"
        else:
            out["activations_recompute"] = recompute
            out["backward_transient"] = max(0, max_transient * tokens + expert_grad - (other_tok - rope_tok) * tokens)
            peak_at = "recomputed layer backward"
        notes.append("gradient checkpointing (HF, use_reentrant=False): each decoder layer keeps only its input; one layer is recomputed during backward")
    if attn == "eager":  # one [b, 1, s, s] additive mask per attention layer type (full / sliding), model dtype
        kinds = {f.sliding for f in layers if f.attention != "none"} or {False}
        out["activations_other"] = out.get("activations_other", 0) + len(kinds) * settings.micro_batch * settings.seq**2 * dt.sdpa
    terms = {
        "per_token_per_layer": {k: v for k, v in _merge(per_layer_terms).items()},
        "per_token_per_layer_max": max(layer_tok, default=0),
        "layers": len(layers),
        "per_token_other": other,
        "logits_loss_per_token": logits_tok,
        "peak_at": peak_at,
        "tokens": tokens,
        "_loss": loss_desc,
        "formula": "Korthikanti et al. 2022 (arXiv:2205.05198) section 4, adapted to HF transformers 5 blocks and PEFT adapters",
    }
    if any(f.attention == "none" for f in layers):
        notes.append("layers without attention (SSM / linear attention) are modelled by their MLP and norms only: activation estimate is low for them")
    if arch.is_encoder_decoder:
        notes.append("encoder-decoder models: activations are modelled for the decoder stack only (estimate)")
    return out, terms, notes


def _merge(per_layer: list[dict[str, int]]) -> dict[str, float]:
    if not per_layer:
        return {}
    keys: list[str] = []
    for t in per_layer:
        keys.extend(k for k in t if k not in keys)
    return {k: round(sum(t.get(k, 0) for t in per_layer) / len(per_layer), 1) for k in keys}


def _fits(total: int, gpu: str | None) -> list[str]:
    from hfmem.memory.gpus import CATALOG, resolve_gpu

    gpus = [resolve_gpu(gpu)] if gpu else list(CATALOG)
    out = []
    for g in gpus:
        usable = g.memory_bytes
        if g.kind == "apple":
            usable = g.memory_bytes * 3 // 4  # Metal's default working-set limit is ~75% of unified memory
        if total <= usable:
            out.append(g.key)
    return out


def _zero_note(report: Any, method: str, s: TrainingSettings, prec: _Precision, psi: int) -> str:
    n = s.gpus
    if method != "full":
        return f"{'FSDP ' + s.fsdp if s.fsdp else 'ZeRO-' + str(s.zero)} over {n} GPUs: adapter states and (stage 3 / full shard) the frozen base are partitioned"
    if s.fsdp:
        return f"FSDP {s.fsdp} over {n} GPUs (full shard ~ ZeRO-3, grad-op ~ ZeRO-2)"
    k = 12 if prec.master else 2 * prec.state
    paper = {1: 2 * psi + 2 * psi + k * psi / n, 2: 2 * psi + (2 + k) * psi / n, 3: (2 + 2 + k) * psi / n}[s.zero]
    ds = {1: None, 2: 2 * psi + 18 * psi / n, 3: 18 * psi / n + 4 * _largest_module_params(report, method)}[s.zero]
    text = f"ZeRO-{s.zero} over {n} GPUs: model states {paper / 1e9:.2f} GB per GPU by the ZeRO paper (16-bit params/grads + K={k} optimizer bytes)"
    if ds is not None and prec.master:
        text += f"; DeepSpeed's estimator (fp32 gradient partition included) gives {ds / 1e9:.2f} GB"
    return text


def estimate_all(report: Any, settings: TrainingSettings | None = None, methods: tuple[str, ...] = METHODS) -> TrainingReport:
    """`--train all`: full, LoRA and QLoRA side by side in one table."""
    settings = (settings or TrainingSettings()).validate()
    return TrainingReport({m: estimate_training(report, m, settings) for m in methods}, settings.gpu)


__all__ = [
    "TrainingSettings", "TrainingEstimate", "TrainingReport", "estimate_training", "estimate_all",
    "resolve_lora_targets", "linear_modules", "nf4_bytes", "optimizer_state_bytes", "METHODS", "OPTIMIZERS",
    "PRECISIONS", "replace",
]
