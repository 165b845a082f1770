"""Measured truth for training memory: tiny transformers models on CPU, a live-tensor tracker, one training step.

Used by tests/test_training_truth.py and benchmarks/training_activations.py. Needs torch, transformers and peft.

The tracker is a TorchDispatchMode that records every storage an op creates (its bytes, and when the storage is
freed, through a weakref on the storage object). Parameters and buffers are excluded up front; parameter gradients
are identified after backward and removed from the timeline, so the peak is the activation peak of forward +
backward: saved tensors, logits/loss buffers and backward transients.
"""

from __future__ import annotations

import contextlib
import itertools
import warnings
import weakref
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class LiveTensorBytes(TorchDispatchMode):
    """Live bytes of the storages created by ops while active, as a timeline of (+bytes, -bytes) events."""

    def __init__(self, exclude: list[torch.Tensor] = ()):
        super().__init__()
        self.events: list[tuple[int, int]] = []
        self._refs: dict[int, Any] = {}
        self._by_ptr: dict[int, int] = {}
        self._ids = itertools.count()
        self._exclude = {t.untyped_storage().data_ptr() for t in exclude}
        self.kind: dict[int, tuple[tuple[int, ...], torch.dtype]] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.device.type != "meta":
                self._track(t)
        return out

    def _track(self, t: torch.Tensor) -> None:
        st = t.untyped_storage()
        ptr, n = st.data_ptr(), st.nbytes()
        if n == 0 or ptr in self._exclude or ptr in self._by_ptr:
            return
        uid = next(self._ids)
        self._by_ptr[ptr] = uid
        self.events.append((uid, n))
        self.kind[uid] = (tuple(t.shape), t.dtype)

        def freed(_ref, uid=uid, n=n, ptr=ptr):
            self.events.append((uid, -n))
            if self._by_ptr.get(ptr) == uid:
                del self._by_ptr[ptr]
            self._refs.pop(uid, None)

        self._refs[uid] = weakref.ref(st, freed)

    def uids_of(self, tensors: list[torch.Tensor]) -> set[int]:
        return {u for t in tensors if (u := self._by_ptr.get(t.untyped_storage().data_ptr())) is not None}

    def current(self, skip: set[int] = frozenset()) -> int:
        return sum(n for uid, n in self.events if uid not in skip)

    def peak(self, skip: set[int] = frozenset()) -> int:
        cur = best = 0
        for uid, n in self.events:
            if uid in skip:
                continue
            cur += n
            best = max(best, cur)
        return best


def quiet() -> None:
    warnings.simplefilter("ignore")
    import transformers

    transformers.logging.set_verbosity_error()


def build(model_type: str, config: dict[str, Any], dtype=torch.bfloat16, attn: str = "sdpa", seed: int = 0):
    from transformers import AutoConfig, AutoModelForCausalLM

    quiet()
    torch.manual_seed(seed)
    cfg = AutoConfig.for_model(model_type, **config)
    if model_type in ("mamba", "mamba2", "falcon_mamba"):
        attn = "eager"  # no attention layers; transformers refuses "sdpa" for these classes
    return AutoModelForCausalLM.from_config(cfg, dtype=dtype, attn_implementation=attn)


def build_seq2seq(model_type: str, config: dict[str, Any], dtype=torch.bfloat16, attn: str = "sdpa", seed: int = 0):
    """T5-style (AutoModelForSeq2SeqLM) or Whisper-style (AutoModelForSpeechSeq2Seq) encoder-decoder, random weights."""
    from transformers import AutoConfig, AutoModelForSeq2SeqLM, AutoModelForSpeechSeq2Seq

    quiet()
    torch.manual_seed(seed)
    cfg = AutoConfig.for_model(model_type, **config)
    auto = AutoModelForSpeechSeq2Seq if model_type == "whisper" else AutoModelForSeq2SeqLM
    return auto.from_config(cfg, dtype=dtype, attn_implementation=attn)


def seq2seq_activation_peak(model, enc: int, dec: int) -> int:
    """Peak live activation bytes of one encoder-decoder forward + backward with labels (only the loss kept).
    ``enc``: encoder tokens (Whisper: mel frames / 2, the encoder's positions)."""
    model.train()
    gen = torch.Generator().manual_seed(1)
    vocab = model.config.vocab_size
    labels = torch.randint(3, vocab, (1, dec), generator=gen)
    if model.config.model_type == "whisper":
        inputs = {"input_features": torch.randn(1, model.config.num_mel_bins, 2 * enc, generator=gen).to(model.dtype)}
    else:
        inputs = {"input_ids": torch.randint(3, vocab, (1, enc), generator=gen)}
    keep = list(model.parameters()) + list(model.buffers()) + [labels, *inputs.values()]
    with LiveTensorBytes(exclude=keep) as tracker:
        loss = model(**inputs, labels=labels).loss
        first_backward = len(tracker.events)
        loss.backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
    skip = tracker.uids_of(grads)
    trainable = {(tuple(p.shape), p.dtype) for p in model.parameters() if p.requires_grad}
    skip |= {uid for uid, n in tracker.events[first_backward:] if n > 0 and tracker.kind.get(uid) in trainable}
    return tracker.peak(skip)


def save(model, folder: Path) -> Path:
    """save_pretrained with safetensors, so hfmem reads the real header path."""
    model.save_pretrained(str(folder), safe_serialization=True)
    return folder


def wrap_lora(model, targets, rank: int = 8, dora: bool = False, adapter_fp32: bool = True):
    from peft import LoraConfig, get_peft_model

    quiet()
    return get_peft_model(model, LoraConfig(r=rank, target_modules=targets, use_dora=dora), autocast_adapter_dtype=adapter_fp32)


def activation_peak(model, seq: int, batch: int = 1, ckpt: bool = False, autocast: bool = False, lora: bool = False) -> dict[str, int]:
    """Peak live activation bytes of one forward + backward, HF-Trainer style (labels passed, only the loss kept)."""
    model.train()
    if ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if lora:
            model.enable_input_require_grads()
    vocab = model.config.vocab_size if hasattr(model.config, "vocab_size") else model.get_output_embeddings().weight.shape[0]
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (batch, seq), generator=gen)
    keep = list(model.parameters()) + list(model.buffers()) + [ids]
    ctx = torch.autocast("cpu", dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
    with LiveTensorBytes(exclude=keep) as tracker:
        with ctx:
            loss = model(input_ids=ids, labels=ids).loss
        after_forward = tracker.current()
        first_backward = len(tracker.events)
        loss.backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
    skip = tracker.uids_of(grads)
    # A tied weight (lm_head = embeddings) gets two gradient contributions; autograd holds the first (weight-shaped)
    # one in its input buffer until the second arrives. That is gradient memory, not activation: skip weight-shaped
    # tensors of trainable parameters created during backward.
    trainable = {(tuple(p.shape), p.dtype) for p in model.parameters() if p.requires_grad}
    skip |= {uid for uid, n in tracker.events[first_backward:] if n > 0 and tracker.kind.get(uid) in trainable}
    return {"peak": tracker.peak(skip), "after_forward": after_forward, "gradients": sum(g.nbytes for g in grads)}


# Shrunk real configs (hidden 128, 2-4 layers, vocab 1000): the structure of each family, tiny sizes.
TINY: dict[str, tuple[str, dict[str, Any]]] = {
    "llama": ("llama", dict(hidden_size=128, intermediate_size=352, num_hidden_layers=3, num_attention_heads=4,
                            num_key_value_heads=2, head_dim=32, vocab_size=1000, max_position_embeddings=1024)),
    "qwen2": ("qwen2", dict(hidden_size=128, intermediate_size=352, num_hidden_layers=3, num_attention_heads=4,
                            num_key_value_heads=2, vocab_size=1000, max_position_embeddings=1024)),
    "qwen3": ("qwen3", dict(hidden_size=128, intermediate_size=352, num_hidden_layers=3, num_attention_heads=4,
                            num_key_value_heads=2, head_dim=48, vocab_size=1000, max_position_embeddings=1024)),
    "gpt2": ("gpt2", dict(n_embd=128, n_layer=3, n_head=4, vocab_size=1000, n_positions=1024, attn_pdrop=0.0,
                          resid_pdrop=0.0, embd_pdrop=0.0)),
    "mixtral": ("mixtral", dict(hidden_size=128, intermediate_size=192, num_hidden_layers=3, num_attention_heads=4,
                                num_key_value_heads=2, vocab_size=1000, num_local_experts=4, num_experts_per_tok=2,
                                max_position_embeddings=1024)),
    "qwen3_moe": ("qwen3_moe", dict(hidden_size=128, intermediate_size=352, moe_intermediate_size=96, num_hidden_layers=3,
                                    num_attention_heads=4, num_key_value_heads=2, head_dim=32, vocab_size=1000,
                                    num_experts=4, num_experts_per_tok=2, max_position_embeddings=1024)),
    "deepseek_v3": ("deepseek_v3", dict(hidden_size=128, intermediate_size=352, moe_intermediate_size=64, num_hidden_layers=3,
                                        num_attention_heads=4, num_key_value_heads=4, vocab_size=1000, n_routed_experts=4,
                                        num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1,
                                        kv_lora_rank=64, q_lora_rank=96, qk_rope_head_dim=16, qk_nope_head_dim=32,
                                        v_head_dim=48, n_group=2, topk_group=1, max_position_embeddings=1024)),
    "gemma2": ("gemma2", dict(hidden_size=128, intermediate_size=352, num_hidden_layers=3, num_attention_heads=4,
                              num_key_value_heads=2, head_dim=32, vocab_size=1000, sliding_window=4096,
                              max_position_embeddings=1024)),
}


def step_peak(model, seq: int, steps: int = 2, foreach: bool = True) -> list[int]:
    """Peak live bytes of whole bf16 training steps (forward, backward, torch AdamW step, zero_grad(set_to_none)),
    everything counted: parameters, gradients, optimizer states, activations and step temporaries. One peak per step;
    step 1 creates the AdamW states after its backward, so from step 2 on the peak is the steady state.
    ``foreach=True`` is the torch AdamW path CUDA takes by default."""
    model.train()
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, model.config.vocab_size, (1, seq), generator=gen)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=foreach)
    resident = sum(p.untyped_storage().nbytes() for p in {p.untyped_storage().data_ptr(): p for p in model.parameters()}.values())
    peaks = []
    with LiveTensorBytes(exclude=list(model.parameters()) + list(model.buffers()) + [ids]) as tracker:
        for _ in range(steps):
            start = len(tracker.events)
            before = tracker.current()
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            del loss
            opt.step()
            opt.zero_grad(set_to_none=True)
            cur = best = before
            for _, n in tracker.events[start:]:
                cur += n
                best = max(best, cur)
            peaks.append(resident + best)
    return peaks


# State-space and linear-attention families, shrunk from real configs (the ratios kept, sizes tiny): mamba from
# state-spaces/mamba-2.8b-hf (expand 2, state 16, conv 4, dt rank h/16), mamba2 from transformers' Mamba2Config
# defaults (Mamba-Codestral-7B: n_groups 8 -> 2, chunk 256), falcon_h1 from FalconH1Config (Falcon-H1: d_ssm, state,
# one group, chunk 256), jamba from JambaConfig (Jamba-v0.1: attention every 2nd layer here, MoE on odd layers),
# qwen3_next from Qwen/Qwen3-Next-80B-A3B-Instruct (3 Gated DeltaNet layers + 1 gated attention, 2:1 value:key
# heads, MoE + shared expert), qwen3_5 from Qwen/Qwen3.5-0.8B-Base's text config (dense SwiGLU, equal heads),
# nemotron_h from nvidia/Nemotron-H-56B-Base-8K (Mamba-2 / attention / relu2 MLP blocks, n_groups 8 -> 2).
TINY_SSM: dict[str, tuple[str, dict[str, Any]]] = {
    "mamba": ("mamba", dict(hidden_size=128, intermediate_size=256, state_size=16, conv_kernel=4, time_step_rank=8,
                            num_hidden_layers=2, vocab_size=1000, use_bias=False, use_conv_bias=True)),
    "mamba2": ("mamba2", dict(hidden_size=128, expand=2, num_heads=8, head_dim=32, state_size=32, n_groups=2,
                              chunk_size=256, conv_kernel=4, num_hidden_layers=2, vocab_size=1000)),
    "falcon_h1": ("falcon_h1", dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                                    num_key_value_heads=2, head_dim=32, mamba_d_ssm=192, mamba_n_heads=6, mamba_d_head=32,
                                    mamba_n_groups=1, mamba_d_state=32, mamba_chunk_size=256, vocab_size=1000,
                                    max_position_embeddings=1024)),
    "jamba": ("jamba", dict(hidden_size=128, intermediate_size=256, num_hidden_layers=4, num_attention_heads=4,
                            num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, attn_layer_period=2,
                            attn_layer_offset=1, expert_layer_period=2, expert_layer_offset=1, mamba_d_state=16,
                            mamba_d_conv=4, mamba_expand=2, mamba_dt_rank=8, vocab_size=1000, use_mamba_kernels=False)),
    "qwen3_next": ("qwen3_next", dict(hidden_size=128, intermediate_size=256, moe_intermediate_size=64,
                                      shared_expert_intermediate_size=64, num_hidden_layers=4, num_attention_heads=4,
                                      num_key_value_heads=2, head_dim=64, linear_num_key_heads=2, linear_num_value_heads=4,
                                      linear_key_head_dim=32, linear_value_head_dim=32, linear_conv_kernel_dim=4,
                                      num_experts=4, num_experts_per_tok=2, vocab_size=1000, max_position_embeddings=1024,
                                      layer_types=["linear_attention"] * 3 + ["full_attention"])),
    "qwen3_5": ("qwen3_5_text", dict(hidden_size=128, intermediate_size=448, num_hidden_layers=4, num_attention_heads=4,
                                     num_key_value_heads=2, head_dim=64, linear_num_key_heads=4, linear_num_value_heads=4,
                                     linear_key_head_dim=32, linear_value_head_dim=32, linear_conv_kernel_dim=4,
                                     vocab_size=1000, max_position_embeddings=1024,
                                     layer_types=["linear_attention"] * 3 + ["full_attention"])),
    "nemotron_h": ("nemotron_h", dict(hidden_size=128, intermediate_size=512, num_attention_heads=4, num_key_value_heads=2,
                                      head_dim=32, mamba_num_heads=8, mamba_head_dim=32, ssm_state_size=32, n_groups=2,
                                      chunk_size=128, conv_kernel=4, expand=2, vocab_size=1000, max_position_embeddings=1024,
                                      layers_block_type=["mamba", "mlp", "attention", "mlp"])),
}
