"""The QLoRA base model: bitsandbytes NF4 bytes of the Linear layers transformers quantizes, and what stays
unquantized."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hfmem.memory.training.lora import LinearModule, linear_modules, trainable_tensors
from hfmem.memory.training.settings import TrainingSettings
from hfmem.units import cdiv

if TYPE_CHECKING:
    from hfmem.api import Report

# bitsandbytes, functional.py: quantize_4bit (NF4, blocksize 64) with double quantization of the absmax values.
NF4_BLOCK = 64
NF4_NESTED_BLOCK = 256
NF4_CODEBOOKS = 16 * 4 + 256 * 4  # NF4 code (16 x fp32) + nested dynamic map (256 x fp32) per quantized Linear


def nf4_bytes(n: int, double_quant: bool = True, blocksize: int = NF4_BLOCK) -> int:
    """Bytes of one bitsandbytes NF4-quantized Linear with n weights (4-bit codes + absmax + code books)."""
    blocks = cdiv(n, blocksize)
    codes = cdiv(n, 2)
    if double_quant:
        return codes + blocks + 4 * cdiv(blocks, NF4_NESTED_BLOCK) + NF4_CODEBOOKS
    return codes + 4 * blocks + 16 * 4


def quantizable(report: Report) -> list[LinearModule]:
    """Linear layers bitsandbytes replaces (transformers, integrations/bitsandbytes.py): nn.Linear/Conv1D except the
    output embedding (quantizers/base.py: get_keys_to_not_convert keeps lm_head / tied weights / the last module)."""
    return linear_modules(report)


def largest_quantized(report: Report, settings: TrainingSettings | None = None) -> int:
    """Parameters of the largest quantized Linear: the size of the dequantized weight during the 4-bit matmul. With
    NF4 experts, one whole fused expert tensor is dequantized for the grouped matmul over all experts."""
    largest = max((m.params for m in quantizable(report)), default=0)
    if settings is not None and settings.qlora_experts == "nf4":
        largest = max([largest, *(sum(p for _, p in names) for names in expert_tensors(report).values())])
    return largest


def qlora_base(report: Report, settings: TrainingSettings) -> tuple[int, int, list[str]]:
    """(NF4 bytes, bytes of the modules kept unquantized, notes) of the frozen QLoRA base."""
    notes: list[str] = []
    quant = report.parameters.quantization
    tensors = trainable_tensors(report)
    unq_elem = 4 if settings.qlora_upcast else 2
    if quant is not None and str(quant.method).startswith("bitsandbytes-4bit"):
        nf4 = sum(c.entry.nbytes for c in report.tensors if c.role in ("quantized", "quant_overhead") and c.component != "mtp")
        unq = sum(c.logical for c in tensors if c.role == "param") * unq_elem
        notes.append("checkpoint is already bitsandbytes 4-bit: NF4 bytes are the stored bytes")
        return nf4, unq, notes
    if quant is not None:
        notes.append(f"checkpoint is {quant.method}: QLoRA re-quantizes the dequantized weights to NF4")
    lin = quantizable(report)
    lin_names = {m.tensor for m in lin}
    nf4 = sum(nf4_bytes(m.params) for m in lin)
    q_params = sum(m.params for m in lin)
    fused = expert_tensors(report) if settings.qlora_experts == "nf4" else {}
    expert_names = {n for names in fused.values() for n, _ in names}
    for names in fused.values():
        nf4 += nf4_bytes(sum(p for _, p in names))
    unq_params = sum(c.logical for c in tensors if c.entry.name not in lin_names and c.entry.name not in expert_names)
    unq = unq_params * unq_elem
    kept = sorted({c.component for c in tensors if c.entry.name not in lin_names and c.entry.name not in expert_names and c.logical})
    notes.append(
        f"NF4 (double quant, blocksize 64): {len(lin):,} Linear layers, {q_params:,} params; kept "
        f"{'fp32 (prepare_model_for_kbit_training)' if settings.qlora_upcast else '16-bit'}: {', '.join(kept)} "
        f"({unq_params:,} params)"
    )
    if fused:
        e_params = sum(p for names in fused.values() for _, p in names)
        notes.append(
            f"--qlora-experts nf4: the {len(fused):,} fused expert tensors ({e_params:,} params) quantized to NF4 as "
            "expert-quantizing stacks do; transformers 5 + bitsandbytes alone leave them unquantized (--qlora-experts bf16)"
        )
    elif any(c.component == "moe_experts" for c in tensors):
        notes.append(
            "--qlora-experts bf16 (transformers 5 + bitsandbytes today): fused MoE expert tensors are 3-D parameters, "
            "not nn.Linear, and replace_with_bnb_linear (integrations/bitsandbytes.py) converts only nn.Linear / "
            f"Conv1D, so they stay {'fp32 after prepare_model_for_kbit_training' if settings.qlora_upcast else '16-bit'}; "
            "--qlora-experts nf4 models stacks that quantize them"
        )
    return nf4, unq, notes


def expert_tensors(report: Report) -> dict[tuple[int | None, str], list[tuple[str, int]]]:
    """The fused 3-D expert tensors transformers 5 builds per MoE layer (checkpoints storing one 2-D matrix per
    expert are concatenated on load: gate and up into gate_up_proj, down into down_proj), as the stored tensors that
    make up each: {(layer, fused name): [(stored tensor, params)]}."""
    out: dict[tuple[int | None, str], list[tuple[str, int]]] = {}
    for c in trainable_tensors(report):
        if c.component != "moe_experts" or not c.logical or c.entry.name.endswith(("bias", "_scales")):
            continue
        leaf = c.entry.name.rsplit(".", 2)[-2] if c.entry.name.endswith(".weight") else c.entry.name.rsplit(".", 1)[-1]
        fused = "down_proj" if leaf in ("down_proj", "w2", "down_proj_blocks") else "gate_up_proj"
        out.setdefault((c.layer, fused), []).append((c.entry.name, c.logical))
    return out
