"""Partial offload of a GGUF model with llama.cpp on one GPU: what ``-ngl L`` puts in GPU memory, what stays in RAM,
the largest ``L`` that fits, and the ``llama-server`` command that runs it.

Placement (llama.cpp ``src/llama-model.cpp``, ``llama_model::load_tensors``): the input layer (``token_embd``) always
stays on the CPU ("very little benefit to offloading the input layer"); layers are numbered 0..n_layer, where
n_layer is the output layer (``output_norm``, ``output``; a tied model loads a duplicate of ``token_embd`` there,
``TENSOR_DUPLICATED``), and ``get_layer_buft_list`` puts layer ``il`` on the GPU when
``il >= i_gpu_start = max(n_layer + 1 - n_gpu_layers, 0)``: ``-ngl 1`` offloads the output layer, each further one
the next repeating layer from the last. (Builds before this counted the output last: ``i_gpu_start = n_layer -
n_gpu_layers``, the output on the GPU only with ``-ngl > n_layer``; :func:`placement` takes either.) Each layer's KV
cache (and recurrent state) lives on its layer's device (``llama_kv_cache``: ``dev_layer``, ``offload_kqv`` on).

The GPU compute buffer is what ``ggml_gallocr`` reserves for the worst-case graph (``llama_context::graph_reserve``
with ``n_ubatch`` tokens, all of them outputs). hfmem estimates it as the largest set of tensors alive at once in
that graph (:func:`compute_buffer`), without simulating the allocator's placement; see docs/gguf.md for the rows
it was checked against.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hfmem.gguf.ggml import block_of

if TYPE_CHECKING:
    from hfmem.gguf.reader import GGUFHeader
    from hfmem.memory.gpus import GPU
    from hfmem.memory.serve import ServeCommand

MiB = 2**20
F32 = 4
# llama-server fits its parameters to leave this much free per device (common/common.h common_params
# fit_params_target; its log: "will leave N >= 1024 MiB of free device memory"): the CUDA context, cuBLAS
# workspaces and the CUDA pool are outside llama.cpp's buffers. hfmem plans the same margin.
FIT_TARGET = 1024 * MiB
# ggml-cuda's offload_op: an op on a CPU-resident weight runs on the GPU (its weight copied into the compute buffer)
# when the batch has at least this many tokens (ggml/src/ggml-cuda/ggml-cuda.cu ggml_backend_cuda_device_offload_op).
OP_OFFLOAD_MIN_BATCH = 32
_BLK = re.compile(r"^blk\.(\d+)\.")
_INPUT = ("token_embd.", "token_types.", "position_embd.")


@dataclass
class LayerBytes:
    """The GGUF's stored bytes by where llama.cpp places them."""

    n_layer: int
    layers: list[int]  # blk.N.* bytes per repeating layer
    largest: list[int]  # the largest blk.N.* tensor per layer (a CPU layer's weight copied for op offload)
    input_bytes: int  # token_embd (always in RAM)
    output_bytes: int  # output_norm, output (or token_embd's duplicate when tied), other non-layer tensors
    output_weight_bytes: int  # the output matrix alone
    notes: list[str] = field(default_factory=list)


def layer_bytes(header: GGUFHeader, n_layer: int) -> LayerBytes:
    layers = [0] * n_layer
    largest = [0] * n_layer
    input_bytes = output_bytes = output_weight = 0
    other: list[str] = []
    other_bytes = 0
    embd = 0
    for t in header.tensors:
        m = _BLK.match(t.name)
        if m:
            i = int(m.group(1))
            if i < n_layer:
                layers[i] += t.nbytes
                largest[i] = max(largest[i], t.nbytes)
                continue
        if t.name.startswith(_INPUT):
            input_bytes += t.nbytes
            if t.name == "token_embd.weight":
                embd = t.nbytes
        elif t.name.startswith("output"):
            output_bytes += t.nbytes
            if t.name == "output.weight":
                output_weight = t.nbytes
        else:
            other.append(t.name)
            other_bytes += t.nbytes
    notes = []
    if not output_weight and embd:
        # load_arch_tensors: no output.weight -> create_tensor(token_embd, TENSOR_DUPLICATED) on the output's device
        output_weight = embd
        output_bytes += embd
        notes.append("tied output: llama.cpp loads a copy of token_embd as the output matrix on the output layer's device")
    if other:
        output_bytes += other_bytes
        notes.append(f"{len(other)} non-layer tensors ({other_bytes:,} bytes, e.g. {other[0]}) counted with the output layer")
    return LayerBytes(n_layer, layers, largest, input_bytes, output_bytes, output_weight, notes)


def placement(n_layer: int, ngl: int, *, output_first: bool = True) -> tuple[int, bool]:
    """(repeating layers on the GPU, output layer on the GPU) for ``-ngl ngl``; ``output_first``: current llama.cpp
    (``i_gpu_start = max(n_layer + 1 - ngl, 0)``), else the older ``n_layer - ngl`` rule."""
    ngl = max(0, ngl)
    if output_first:
        return max(0, min(ngl, n_layer + 1) - 1), ngl >= 1
    return min(ngl, n_layer), ngl > n_layer


def _num(md: dict[str, Any], key: str) -> int:
    v = md.get(key)
    if isinstance(v, list):
        v = max((x for x in v if isinstance(x, int)), default=0)
    return int(v) if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0


def compute_buffer(arch: dict[str, Any], metadata: dict[str, Any], *, n_kv: int, n_ubatch: int, flash_attn: bool,
                   output_on_gpu: bool, output_weight_bytes: int, layers_on_gpu: int, cpu_copy_bytes: int,
                   op_offload: bool = True) -> dict[str, int]:
    """The GPU compute buffer, estimated as the largest set of f32 tensors alive at once in the graph llama.cpp
    reserves (``graph_reserve`` with ``n_ubatch`` tokens, every one an output), per phase:

    * the KQ mask ``n_kv x n_ubatch``, copied in as f32 (and cast to f16 with flash attention) before any layer runs,
      under every later phase (ggml_gallocr places the later, larger tensors above it);
    * output: the mask, logits ``n_ubatch x n_vocab`` and the normed input of the output matmul ``n_ubatch x n_embd``
      (and, the output matrix in RAM, its copy: op offload runs that matmul on the GPU);
    * attention: without flash attention the scores ``n_kv x n_ubatch x n_head`` (soft_max runs in place), the mask,
      Q and the residual stream; with flash attention the mask, Q, the residual and the attention output;
    * feed-forward: the residual, the normed input and the gate and up projections ``n_ubatch x n_ff`` (MoE:
      ``n_ff_exp x n_expert_used`` per token), plus the largest weight of a CPU layer copied for op offload.

    Inputs (token embeddings, positions, mask) are allocated in host memory and copied in; the CUDA pool (cuBLAS
    workspace, dequantization buffers) is outside this buffer (FIT_TARGET covers it)."""
    name = arch.get("architecture")
    ub = n_ubatch
    n_vocab = int(arch.get("vocab_size") or 0)
    n_embd = int(arch.get("hidden_size") or 0)
    heads = arch.get("num_attention_heads")
    n_head = max(heads) if isinstance(heads, list) and heads else int(heads or 0)
    k_len = int(arch.get("key_length") or 0)
    v_len = int(arch.get("value_length") or 0)
    n_ff = _num(metadata, f"{name}.feed_forward_length")
    moe = _num(metadata, f"{name}.expert_feed_forward_length") * _num(metadata, f"{name}.expert_used_count")
    ff = max(n_ff, moe)
    offloads = op_offload and ub >= OP_OFFLOAD_MIN_BATCH
    # The KQ mask: an f32 input copied to the GPU first (and cast to f16 for flash attention); these copies sit at
    # the bottom of the buffer, below everything the layers and the output allocate later.
    mask = n_kv * ub * (F32 + 2 if flash_attn else F32)
    out = 0
    if output_on_gpu or offloads:
        out = mask + ub * (n_vocab + n_embd) * F32 + (0 if output_on_gpu else output_weight_bytes)
    residual = ub * n_embd * F32
    q = ub * n_head * k_len * F32
    if not n_kv:
        attn = 0
    elif flash_attn:
        attn = mask + q + residual + ub * n_head * v_len * F32
    else:
        attn = n_kv * ub * n_head * F32 + mask + q + residual
    ffn = 2 * residual + 2 * ub * ff * F32
    layer = 0
    if layers_on_gpu or offloads:
        layer = max(attn, ffn) + (cpu_copy_bytes if offloads else 0)
    return {"output": out, "attention": attn if layer else 0, "feed_forward": ffn if layer else 0,
            "cpu_weight_copy": cpu_copy_bytes if layer and offloads else 0, "total": max(out, layer)}


@dataclass
class OffloadPlan:
    gpu: GPU
    context: int
    batch: int
    cache_type: str
    flash_attn: bool
    n_ubatch: int
    n_layer: int
    ngl: int  # the -ngl value
    layers_on_gpu: int
    output_on_gpu: bool
    budget_bytes: int  # GPU memory less FIT_TARGET
    gpu_model_bytes: int
    gpu_kv_bytes: int
    gpu_compute_bytes: int
    compute_terms: dict[str, int]
    ram_model_bytes: int
    ram_kv_bytes: int
    full_gpu_bytes: int  # everything offloaded (-ngl n_layer + 1)
    notes: list[str] = field(default_factory=list)
    serve: ServeCommand | None = None

    @property
    def gpu_total_bytes(self) -> int:
        return self.gpu_model_bytes + self.gpu_kv_bytes + self.gpu_compute_bytes

    @property
    def full_offload(self) -> bool:
        return self.layers_on_gpu == self.n_layer and self.output_on_gpu

    @property
    def fits(self) -> bool:
        return self.gpu_total_bytes <= self.budget_bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": "llama.cpp", "context": self.context, "batch": self.batch,
            "cache_type": self.cache_type, "flash_attn": self.flash_attn, "n_ubatch": self.n_ubatch,
            "n_layer": self.n_layer, "ngl": self.ngl, "layers_on_gpu": self.layers_on_gpu,
            "output_on_gpu": self.output_on_gpu, "full_offload": self.full_offload, "fits": self.fits,
            "headroom_bytes": FIT_TARGET, "budget_bytes": self.budget_bytes,
            "gpu": {**self.gpu.to_dict(), "model_bytes": self.gpu_model_bytes, "kv_bytes": self.gpu_kv_bytes,
                    "compute_bytes": self.gpu_compute_bytes, "compute_terms": dict(self.compute_terms),
                    "total_bytes": self.gpu_total_bytes},
            "ram": {"model_bytes": self.ram_model_bytes, "kv_bytes": self.ram_kv_bytes,
                    "total_bytes": self.ram_model_bytes + self.ram_kv_bytes},
            "full_offload_gpu_bytes": self.full_gpu_bytes, "notes": list(self.notes),
        }  # fmt: skip


def gpu_bytes_at(lb: LayerBytes, kv_per_layer: list[int], arch: dict[str, Any], metadata: dict[str, Any], *,
                 layers_on_gpu: int, output_on_gpu: bool, n_kv: int, n_ubatch: int, flash_attn: bool,
                 op_offload: bool = True) -> dict[str, Any]:
    """GPU and RAM bytes with the last ``layers_on_gpu`` repeating layers (and the output layer if
    ``output_on_gpu``) offloaded."""
    n = lb.n_layer
    start = n - layers_on_gpu
    kv = list(kv_per_layer) + [0] * (n - len(kv_per_layer))
    gpu_model = sum(lb.layers[start:]) + (lb.output_bytes if output_on_gpu else 0)
    ram_model = lb.input_bytes + sum(lb.layers[:start]) + (0 if output_on_gpu else lb.output_bytes)
    gpu_kv, ram_kv = sum(kv[start:n]), sum(kv[:start])
    cpu_copy = max(lb.largest[:start], default=0)
    terms = compute_buffer(arch, metadata, n_kv=n_kv, n_ubatch=n_ubatch, flash_attn=flash_attn,
                           output_on_gpu=output_on_gpu, output_weight_bytes=lb.output_weight_bytes,
                           layers_on_gpu=layers_on_gpu, cpu_copy_bytes=cpu_copy, op_offload=op_offload)
    return {"gpu_model": gpu_model, "gpu_kv": gpu_kv, "compute": terms, "ram_model": ram_model, "ram_kv": ram_kv}


def plan_offload(header: GGUFHeader, arch: dict[str, Any], gpu: GPU, *, context: int, batch: int = 1,
                 cache_type: str = "f16", defaults: str = "llama-server") -> OffloadPlan:
    """The largest ``-ngl`` whose GPU bytes (weights + KV + compute buffer) fit ``gpu`` less FIT_TARGET."""
    from hfmem.memory.kv.llamacpp import DEFAULTS, llamacpp_memory

    d = DEFAULTS[defaults]
    flash_attn = d.flash_attn or block_of(cache_type)[0] > 1  # a quantized V cache needs flash attention
    n_layer = int(arch.get("num_layers") or 0)
    lb = layer_bytes(header, n_layer)
    mem = llamacpp_memory(arch, context * batch, batch, cache_type, kv_unified=d.kv_unified, swa_full=d.swa_full,
                          flash_attn=flash_attn, n_ubatch=d.n_ubatch)
    n_kv = max((c["cells"] for c in mem["kv"].values()), default=0)
    budget = gpu.memory_bytes - FIT_TARGET

    def at(ngl: int) -> tuple[int, bool, dict[str, Any]]:
        on, out = placement(n_layer, ngl)
        return on, out, gpu_bytes_at(lb, mem["per_layer"], arch, header.metadata, layers_on_gpu=on, output_on_gpu=out,
                                     n_kv=n_kv, n_ubatch=d.n_ubatch, flash_attn=flash_attn)

    def total(b: dict[str, Any]) -> int:
        return int(b["gpu_model"] + b["gpu_kv"] + b["compute"]["total"])

    full = at(n_layer + 1)
    ngl = n_layer + 1
    while ngl > 0 and total(at(ngl)[2]) > budget:
        ngl -= 1
    on, out, b = at(ngl)
    notes = list(lb.notes)
    notes.append(f"GPU budget: {gpu.name} less the {FIT_TARGET // MiB} MiB llama-server's --fit leaves free "
                 "(CUDA context, cuBLAS workspace and pool are outside llama.cpp's buffers)")
    notes.append("compute buffer: an estimate of the largest tensors alive at once in llama.cpp's reserved graph "
                 f"(n_ubatch {d.n_ubatch}, flash attention {'on' if flash_attn else 'off'}); see docs/gguf.md")
    if mem.get("recurrent_unmodelled"):
        notes.append(f"{arch.get('architecture')}: recurrent state not modelled; not in the GPU bytes")
    from hfmem.memory.kv.llamacpp import recurrent_layers

    if gpu.kind in ("apple", "rocm"):
        notes.append(f"{gpu.name}: planned as a CUDA device; llama.cpp's {gpu.kind} backend buffers are not checked "
                     "against a log" + (" (Metal also caps the working set below the unified memory)" if gpu.kind == "apple" else ""))

    if any(recurrent_layers(arch)):
        notes.append("compute buffer: the recurrent layers' scan and convolution activations are not modelled (unverified)")
    if arch.get("is_mla") or arch.get("sliding_window"):
        notes.append("compute buffer: the attention term of MLA / sliding-window models is not checked against a log")
    if int(arch.get("expert_count") or 0):
        notes.append("MoE: the compute buffer counts the routed experts' gate/up activations only (routing tensors not modelled)")
    if ngl == 0 and total(b) > budget:
        notes.append("even -ngl 0 needs more than the budget: the compute buffer alone does not fit")
    plan = OffloadPlan(gpu, context, batch, cache_type, flash_attn, d.n_ubatch, n_layer, ngl, on, out, budget,
                       b["gpu_model"], b["gpu_kv"], b["compute"]["total"], b["compute"], b["ram_model"], b["ram_kv"],
                       total(full[2]), notes)
    return plan


def llama_server(file: str, plan: OffloadPlan) -> ServeCommand:
    """``llama-server`` flags (common/arg.cpp): ``-m``, ``-c`` (all sequences' cells), ``-ngl``, ``-np``,
    ``--cache-type-k`` / ``--cache-type-v``, ``-fa on`` (a quantized V cache needs flash attention)."""
    from hfmem.memory.serve import ServeCommand

    argv = ["llama-server", "-m", file, "-c", str(plan.context * plan.batch), "-ngl", str(plan.ngl)]
    why: list[str] = []
    if plan.batch > 1:
        argv += ["-np", str(plan.batch)]
    if plan.cache_type != "f16":
        argv += ["--cache-type-k", plan.cache_type, "--cache-type-v", plan.cache_type]
    if block_of(plan.cache_type)[0] > 1:
        argv += ["-fa", "on"]
    if not plan.fits:
        why.append("nothing fits the GPU budget: -ngl 0 runs on the CPU, the GPU still holds the compute buffer")
    elif not plan.full_offload:
        why.append(f"partial offload: {plan.layers_on_gpu} of {plan.n_layer} layers"
                   f"{' and the output layer' if plan.output_on_gpu else ''} on the GPU, the rest in RAM")
    return ServeCommand(argv, why)
