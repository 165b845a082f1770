"""The typed Python API: ``analyze(ref)`` reads a model's config and headers and returns a ``Report``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hfmem.hub.files import ModelFiles
from hfmem.hub.local import looks_local, read_local
from hfmem.hub.remote import read_hub
from hfmem.model.architecture import Architecture, build_architecture
from hfmem.model.inventory import CountedTensor, Parameters, count_tensors, summarize
from hfmem.model.moe import summarize_moe
from hfmem.model.validate import check_config


@dataclass
class Report:
    repo: str
    revision: str | None
    source: str
    architecture: Architecture
    parameters: Parameters
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tensors: list[CountedTensor] = field(default_factory=list, repr=False)
    extra: dict[str, Any] = field(default_factory=dict)  # sections later features add (kv_cache, weights, ...)

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract (see README): stable keys that scripts rely on."""
        out: dict[str, Any] = {
            "repo": self.repo,
            "revision": self.revision,
            "source": self.source,
            "architecture": self.architecture.to_dict(),
            "parameters": self.parameters.to_dict(),
        }
        for key, value in self.extra.items():
            out[key] = value.to_dict() if hasattr(value, "to_dict") else value
        out["notes"] = list(self.notes)
        out["warnings"] = list(self.warnings)
        return out


def read_model(ref: str, revision: str | None = None, token: str | bool | None = None, timeout: float | None = None) -> ModelFiles:
    """Read config.json and safetensors headers for a Hub repo id, a local folder or a cached snapshot."""
    if looks_local(ref):
        return read_local(ref)
    return read_hub(ref, revision=revision, token=token, timeout=timeout)


def analyze_files(files: ModelFiles) -> Report:
    config_warnings = check_config(files.config)  # before transformers or hfmem trust any value
    entries = [t for h in files.headers for t in h.tensors]
    arch, arch_notes = build_architecture(files.config, entries)
    counted, scheme, tie_notes = count_tensors(files.headers, files.config, arch.num_layers, arch.tie_word_embeddings)
    params = summarize(counted, scheme, tie_notes)
    warnings = list(files.warnings) + config_warnings + [w for h in files.headers for w in h.warnings] + params.warnings
    notes = list(arch_notes) + params.notes
    moe = summarize_moe(counted, arch, params.inference_loaded if params.inference_loaded is not None else params.total, files.config)
    if moe is not None:
        params.active = moe.active
        params.moe = moe.to_dict()
        warnings.extend(moe.warnings)
    if params.by_component.get("mtp"):
        notes.append(
            f"{params.by_component['mtp']:,} parameters are multi-token-prediction layers: counted in total "
            f"(the Hub's convention) but not built by transformers for inference; inference_loaded = "
            f"{params.inference_loaded:,} (vLLM loads them only for MTP speculative decoding)"
        )
    report = Report(
        repo=files.repo,
        revision=files.revision,
        source=files.source,
        architecture=arch,
        parameters=params,
        warnings=warnings,
        notes=notes,
        tensors=counted,
    )
    return report


def attach_sections(
    report: Report,
    *,
    ctx: str | int | list[int] | None = None,
    batch: int = 1,
    kv_dtype: str = "auto",
    engine: str = "vllm",
    encoder_len: int | None = None,
    precision: str = "auto",
    gpu: str | None = None,
    gpus: int = 1,
    gpu_util: float | None = None,
    overhead: str | int | None = None,
    max_batched_tokens: int | None = None,
    device: str = "cuda",
    train: str | None = None,
    train_precision: str = "mixed-bf16",
    **training_options: Any,
) -> Report:
    """Add the memory sections to a report: KV cache (when ``ctx`` is given), weights per precision, the inference
    plan (fit, longest context, concurrency) and download size; with ``train`` ("full", "lora", "qlora" or "all")
    the training budgets, configured by the fields of :class:`hfmem.memory.training.TrainingSettings` (``seq``,
    ``micro_batch``, ``optimizer``, ``lora_rank``, ``zero``, ...; ``train_precision`` is its ``precision``).
    The CLI calls exactly this, so its JSON is ``report.to_dict()``."""
    from hfmem.memory.gpus import parse_size, resolve_gpu
    from hfmem.memory.kv import kv_section, parse_context, stored_float_dtype
    from hfmem.memory.planner import attach

    contexts = None
    if ctx is not None:
        contexts = list(ctx) if isinstance(ctx, (list, tuple)) else parse_context(ctx, report.architecture)
        report.extra["kv_cache"] = kv_section(
            report.architecture, contexts, batch=batch, kv_dtype=kv_dtype, engine=engine, encoder_len=encoder_len,
            weights_dtype=stored_float_dtype(report.parameters.by_dtype),
        )
    planner_kwargs: dict[str, Any] = dict(
        engine=engine, device=device, tp=gpus, kv_dtype=kv_dtype, max_batched_tokens=max_batched_tokens,
        encoder_len=encoder_len,
    )
    if gpu_util is not None:
        planner_kwargs["gpu_util"] = gpu_util
    if overhead is not None:
        planner_kwargs["overhead"] = overhead if isinstance(overhead, int) else parse_size(str(overhead), allow_zero=True)
    attach(
        report, precision=precision, context=max(contexts) if contexts else None, batch=batch,
        gpu=resolve_gpu(gpu) if gpu else None, **planner_kwargs,
    )
    if train:
        from hfmem.memory.training import METHODS, TrainingSettings, estimate_all

        if "zero" in training_options:
            training_options["zero"] = int(training_options["zero"])
        settings = TrainingSettings(precision=train_precision, gpus=gpus, gpu=gpu, **training_options)
        report.extra["training"] = estimate_all(report, settings, METHODS if train == "all" else (train,))
    elif training_options:
        raise TypeError(f"training options {sorted(training_options)} need train=...")
    return report


def analyze(
    ref: str,
    ctx: str | int | list[int] | None = None,
    batch: int = 1,
    revision: str | None = None,
    token: str | bool | None = None,
    timeout: float | None = None,
    **options: Any,
) -> Report:
    """Analyse a model without downloading its weights.

    ``ref`` is a Hub repo id, a local folder or a cached snapshot; ``ctx`` (e.g. 32768, "32k", "4k,32k", "max")
    adds the KV cache; other keyword options are those of :func:`attach_sections` (kv_dtype, engine, precision,
    gpu, gpus, ...). ``report.to_dict()`` is exactly the CLI's ``--format json``.

    >>> report = analyze("fixtures/models/Qwen/Qwen2-7B-Instruct", ctx="32k")  # doctest: +SKIP
    >>> report.parameters.total, report.extra["kv_cache"].total_bytes          # doctest: +SKIP
    (7615616512, 1879048192)
    """
    from hfmem.errors import HfmemError

    try:
        report = analyze_files(read_model(ref, revision=revision, token=token, timeout=timeout))
    except HfmemError as exc:
        if ref not in exc.message:  # "config.json: ..." says which file; say which model too (batches, logs)
            exc.message = f"{ref}: {exc.message}"
            exc.args = (exc.message,)
        raise
    return attach_sections(report, ctx=ctx, batch=batch, **options)
