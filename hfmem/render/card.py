"""A model card's memory section as GitHub Markdown (repo-supplied text escaped)."""

from __future__ import annotations

from hfmem.memory.summary import CARD_TRAIN_SEQ, ModelCard
from hfmem.safe_text import markdown_inline as md
from hfmem.units import fmt_count


def _ctx_label(n: int) -> str:
    if n % (1 << 20) == 0:
        return f"{n >> 20}M"
    if n % 1024 == 0:
        return f"{n >> 10}k"
    return f"{n:,}"


def _gib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**30:.1f} GiB"


def card_markdown(card: ModelCard) -> str:
    r = card.report
    a, p = r.architecture, r.parameters
    # Repo-supplied text (model_type, layer type names; the repo name and revision too) goes through md(): a card is
    # pasted into a README, where HTML or a forged <!-- hfmem:end --> marker must not come from a config.
    rev = f" @ `{r.revision[:12]}`" if r.revision and r.revision.isalnum() else f" @ {md(r.revision)}" if r.revision else ""
    attn = f"{a.num_attention_heads} heads / {a.num_kv_heads} KV heads ({a.attention_kind.upper()})" if a.num_attention_heads else "attention-free"
    layer_types = ", ".join(f"{n} {md(t.replace('_attention', '').replace('_', ' '))}" for t, n in a.layer_types.items())
    lines = [
        "### Memory requirements",
        "",
        f"**{md(r.repo)}**{rev}: {p.total:,} parameters ({fmt_count(p.total).split('(')[-1].rstrip(')')})"
        + (f", {p.active:,} active per token" if p.active != p.total else "")
        + f". {md(a.model_type)}, {a.num_layers} layers ({layer_types}), hidden {a.hidden_size}, {attn}, head_dim {a.head_dim}, "
        f"vocab {a.vocab_size:,}" + (f", max context {a.max_position_embeddings:,}" if a.max_position_embeddings else "") + ".",
        "",
        f"#### Inference ({card.engine}, batch {card.batch})",
        "",
        "| precision | context | weights | KV cache | total | smallest GPU that fits |",
        "|---|---:|---:|---:|---:|---|",
    ]
    limit = a.max_position_embeddings
    beyond = False
    for c in card.inference:
        mark = ""
        if limit and c.context > limit:
            mark, beyond = " †", True
        lines.append(
            f"| {md(c.precision)} | {_ctx_label(c.context)}{mark} | {_gib(c.weights_bytes)} | {_gib(c.kv_bytes)} | "
            f"{_gib(c.total_bytes)} | {c.smallest_gpu or 'none single-GPU'} |"
        )
    if beyond:
        lines += ["", f"† beyond the model's max_position_embeddings ({limit:,}); needs RoPE scaling or is not supported."]
    if card.training:
        lines += [
            "",
            f"#### Fine-tuning (sequence {CARD_TRAIN_SEQ}, micro-batch 1, one GPU)",
            "",
            "| method | trainable parameters | gradient checkpointing on | off |",
            "|---|---:|---:|---:|",
        ]
        for row in card.training:
            lines.append(f"| {md(row.method)} | {row.trainable_parameters:,} | {_gib(row.total_bytes_checkpointing)} | {_gib(row.total_bytes_no_checkpointing)} |")
    lines += [
        "",
        f"<sub>Computed by hfmem {card.version} on {card.date} from config.json and the safetensors headers. "
        f"Total = weights + KV cache + activations of one {card.engine} forward pass + runtime overhead; "
        "GiB = 2^30 bytes; GPU memory as the driver reports it."
        + (" Training: AdamW, mixed bf16 for full fine-tuning; LoRA/QLoRA adapters on all linear layers." if card.training else "")
        + "</sub>",
    ]
    return "\n".join(lines) + "\n"
