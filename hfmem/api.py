"""The typed Python API: ``analyze`` one model, ``check`` a fit, ``analyze_many`` models, ``compare`` them.

The CLI calls exactly these functions, so ``report.to_dict()`` is the CLI's ``--format json``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hfmem.errors import HfmemError, MalformedHeader, NoConfig, NoSafetensors, UsageError
from hfmem.hub.files import ModelFiles
from hfmem.hub.local import looks_local, read_local
from hfmem.hub.ref import resolve_ref
from hfmem.hub.remote import read_hub
from hfmem.hub.timeout import check_timeout
from hfmem.model.architecture import build_architecture
from hfmem.model.inventory import count_tensors, summarize
from hfmem.model.moe import summarize_moe
from hfmem.model.validate import check_config
from hfmem.report import Report

if TYPE_CHECKING:
    from hfmem.gguf.model import GGUFReport
    from hfmem.memory.summary import ComparisonRow, ModelCard

# Keyword options of the training section (``train=`` must be given for them to apply).
TRAINING_OPTIONS = ("seq", "micro_batch", "grad_checkpointing", "optimizer", "train_precision", "lora_rank", "lora_targets",
                    "dora", "zero", "fsdp", "offload", "attn", "chunked_loss", "qlora_upcast", "ssm_kernels", "qlora_experts")


def read_model(ref: str, revision: str | None = None, token: str | bool | None = None, timeout: float | None = None) -> ModelFiles:
    """Read config.json and safetensors headers for a Hub repo id (or its URL), a local folder or a cached snapshot."""
    ref, revision = resolve_ref(ref, revision)
    if timeout is not None:
        check_timeout(timeout)
    if looks_local(ref):
        return read_local(ref)
    return read_hub(ref, revision=revision, token=token, timeout=timeout)


def analyze_files(files: ModelFiles) -> Report:
    """Model facts (architecture, exact parameters) from what :func:`read_model` read; no memory sections."""
    config_warnings = check_config(files.config)  # before transformers or hfmem trust any value
    entries = [t for h in files.headers for t in h.tensors]
    arch, arch_notes = build_architecture(files.config, entries)
    counted, scheme, tie_notes = count_tensors(files.headers, files.config, arch.num_layers, arch.tie_word_embeddings,
                                               arch.hidden_size, arch.vocab_size)
    params = summarize(counted, scheme, tie_notes)
    warnings = list(files.warnings) + config_warnings + [w for h in files.headers for w in h.warnings] + params.warnings
    warnings += arch.weight_overrides  # a config value the weights contradict: the weights' value is used
    notes = [n for n in arch_notes if n not in arch.weight_overrides] + params.notes
    moe = summarize_moe(counted, arch, params.inference_loaded if params.inference_loaded is not None else params.total, files.config)
    if moe is not None:
        params.active = moe.active
        params.moe = moe
        warnings.extend(moe.warnings)
    if params.by_component.get("mtp"):
        notes.append(
            f"{params.by_component['mtp']:,} parameters are multi-token-prediction layers: counted in total "
            f"(the Hub's convention) but not built by transformers for inference; inference_loaded = "
            f"{params.inference_loaded:,} (vLLM loads them only for MTP speculative decoding)"
        )
    return Report(
        repo=files.repo, revision=files.revision, source=files.source, architecture=arch, parameters=params,
        warnings=warnings, notes=notes, tensors=counted,
    )


def read_report(ref: str, revision: str | None = None, token: str | bool | None = None, timeout: float | None = None) -> Report:
    """:func:`analyze_files` of :func:`read_model`; an error names ``ref`` (batches and logs say which model)."""
    try:
        return analyze_files(read_model(ref, revision=revision, token=token, timeout=timeout))
    except HfmemError as exc:
        raise _with_ref(exc, ref) from None


def attach_sections(
    report: Report,
    *,
    ctx: str | int | list[int] | None = None,
    batch: int = 1,
    kv_dtype: str = "auto",
    engine: str = "vllm",
    encoder_len: int | None = None,
    precision: str = "auto",
    dtype: str | None = None,
    gpu: str | None = None,
    gpus: int = 1,
    gpu_util: float | None = None,
    overhead: str | int | None = None,
    max_batched_tokens: int | None = None,
    device: str = "cuda",
    prefix_caching: bool = True,
    speculative: str | None = None,
    train: str | None = None,
    train_precision: str = "mixed-bf16",
    **training_options: Any,
) -> Report:
    """Add the memory sections to a report: KV cache (when ``ctx`` is given), weights per precision, the inference
    plan (fit, longest context, concurrency) and download size; with ``train`` ("full", "lora", "qlora" or "all")
    the training budgets, configured by the fields of :class:`hfmem.memory.training.TrainingSettings` (``seq``,
    ``micro_batch``, ``optimizer``, ``lora_rank``, ``zero``, ...; ``train_precision`` is its ``precision``).
    ``dtype`` is the CLI's name (``--dtype``) for the weight ``precision``; give one of the two."""
    from hfmem.memory.gpus import parse_size, resolve_gpu
    from hfmem.memory.kv import estimate_kv, parse_context, stored_float_dtype
    from hfmem.memory.planner import DEFAULT_MAX_BATCHED_TOKENS, attach, mtp_layer_count

    unknown = sorted(set(training_options) - set(TRAINING_OPTIONS))
    if unknown:
        import inspect

        named = [p for p in inspect.signature(attach_sections).parameters if p not in ("report", "training_options")]
        raise TypeError(f"unknown option(s) {', '.join(unknown)}; valid: {', '.join(named + list(TRAINING_OPTIONS))}")
    if dtype is not None:
        if precision not in ("auto", dtype):
            raise TypeError(f"dtype={dtype!r} and precision={precision!r}: they are the same option (--dtype); give one")
        precision = dtype
    contexts = None
    if ctx is not None:
        contexts = list(ctx) if isinstance(ctx, (list, tuple)) else parse_context(ctx, report.architecture)
        weights_dtype = stored_float_dtype(report.parameters.by_dtype)
        mtp_layers = mtp_layer_count(report) if speculative == "mtp" else 0
        # per GPU, split like the planner's: tensor parallel over ``gpus`` (one process on the CPU device)
        kv_tp = 1 if device == "cpu" else gpus
        report.kv_cache = [
            estimate_kv(report.architecture, c, batch=batch, kv_dtype=kv_dtype, engine=engine, encoder_len=encoder_len,
                        weights_dtype=weights_dtype, mtp_layers=mtp_layers, tp=kv_tp, prefix_caching=prefix_caching,
                        max_batched_tokens=max_batched_tokens or DEFAULT_MAX_BATCHED_TOKENS)
            for c in contexts
        ]
    planner_kwargs: dict[str, Any] = dict(
        engine=engine, device=device, tp=gpus, kv_dtype=kv_dtype, max_batched_tokens=max_batched_tokens,
        encoder_len=encoder_len, speculative=speculative, prefix_caching=prefix_caching,
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
        if encoder_len is not None:
            training_options.setdefault("encoder_seq", encoder_len)
        settings = TrainingSettings(precision=train_precision, gpus=gpus, gpu=gpu, **training_options)
        report.training = estimate_all(report, settings, METHODS if train == "all" else (train,))
    elif training_options:
        raise TypeError(f"training options {sorted(training_options)} need train=...")
    return report


def _with_ref(exc: HfmemError, ref: str) -> HfmemError:
    """ "config.json: ..." says which file; say which model too (batches, logs)."""
    if ref not in exc.message and repr(ref) not in exc.message:
        exc.message = f"{ref}: {exc.message}"
        exc.args = (exc.message,)
    return exc


def is_gguf_ref(ref: str, gguf_file: str | None = None, quant: str | None = None) -> bool:
    """Whether ``ref`` names GGUF weights: a .gguf file, a folder of them without config.json, a ``*GGUF`` repo id,
    or a GGUF file/quant was asked for."""
    if gguf_file or quant or ref.lower().endswith(".gguf"):
        return True
    if os.path.isdir(ref):
        return not os.path.exists(os.path.join(ref, "config.json")) and any(name.endswith(".gguf") for name in os.listdir(ref))
    return ref.lower().endswith("gguf") and not os.path.exists(ref)


def analyze_gguf(
    ref: str,
    ctx: str | int | list[int] | None = None,
    batch: int = 1,
    revision: str | None = None,
    token: str | bool | None = None,
    timeout: float | None = None,
    *,
    gguf_file: str | None = None,
    quant: str | None = None,
    kv_dtype: str | None = None,
    llamacpp_defaults: str | None = None,
) -> GGUFReport:
    """A GGUF repo, folder or file: its GGUF files, the selected file's exact parameters and bytes, and llama.cpp's
    KV cache (and recurrent state) at each context (``kv_dtype``: llama.cpp's cache types f16 (= auto, fp16), bf16,
    f32 (= fp32), q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl; ``llamacpp_defaults``: whose context defaults,
    "llama-server" (the default: unified KV, window-sized SWA cache) or "llama-cpp-python")."""
    from hfmem.gguf.model import read_gguf_report
    from hfmem.memory.kv import parse_context
    from hfmem.memory.kv.llamacpp import DEFAULTS, LLAMA_CPP_CACHE_TYPES, gguf_kv

    ref, revision = resolve_ref(ref, revision)

    cache_type = LLAMA_CPP_CACHE_TYPES.get(kv_dtype or "auto")
    if cache_type is None:
        raise UsageError(f"--kv-dtype {kv_dtype}: llama.cpp caches support {', '.join(LLAMA_CPP_CACHE_TYPES)}")
    defaults = llamacpp_defaults or "llama-server"
    if defaults not in DEFAULTS:
        raise UsageError(f"--llamacpp-defaults must be one of {', '.join(DEFAULTS)}, got {defaults!r}")
    parts = [] if ctx is None else [str(c) for c in ctx] if isinstance(ctx, (list, tuple)) else str(ctx).split(",")
    contexts = [int(c) for part in parts if part.strip().lower() != "max" for c in parse_context(part)]
    report = read_gguf_report(ref, gguf_file=gguf_file, quant=quant, revision=revision, token=token, timeout=timeout,
                       contexts=contexts, batch=batch, cache_type=cache_type, defaults=defaults)
    limit = report.architecture.get("context_length")
    if any(part.strip().lower() == "max" for part in parts) and limit is not None:
        if not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0:
            raise MalformedHeader(f"{ref}: GGUF {report.architecture.get('architecture')}.context_length = {repr(limit)[:40]} "
                                  "is not a positive integer (needed for --ctx max)")
        report.kv_cache.append(gguf_kv(report.architecture, limit, batch, cache_type, defaults))
    return report


def analyze(
    ref: str,
    ctx: str | int | list[int] | None = None,
    batch: int = 1,
    revision: str | None = None,
    token: str | bool | None = None,
    timeout: float | None = None,
    *,
    gguf_file: str | None = None,
    quant: str | None = None,
    **options: Any,
) -> Report | GGUFReport:
    """Analyse a model without downloading its weights.

    ``ref`` is a Hub repo id, a local folder, a cached snapshot or a .gguf file; ``ctx`` (e.g. 32768, "32k",
    "4k,32k", "max") adds the KV cache; other keyword options are those of :func:`attach_sections` (kv_dtype,
    engine, precision, gpu, gpus, gpu_util, overhead, max_batched_tokens, device, prefix_caching, speculative, train
    and the training options; GGUF models also take ``llamacpp_defaults``: "llama-server" or "llama-cpp-python").
    The KV cache is per GPU at tensor parallel size ``gpus``; ``prefix_caching=False`` gives vLLM's one-state-page
    figure for hybrid linear-attention/mamba models (two pages with prefix caching on).
    Safetensors models give a :class:`Report`; GGUF weights (``.gguf`` files, GGUF-only repos, or ``gguf_file`` /
    ``quant`` given) a :class:`hfmem.gguf.model.GGUFReport`.

    >>> report = analyze("fixtures/models/Qwen/Qwen2-7B-Instruct", ctx="32k")  # doctest: +SKIP
    >>> report.parameters.total, report.kv_cache[0].total_bytes, report.inference.fits  # doctest: +SKIP
    (7615616512, 1879048192, None)
    """
    ref, revision = resolve_ref(ref, revision)
    gguf_kwargs: dict[str, Any] = dict(ctx=ctx, batch=batch, revision=revision, token=token, timeout=timeout,
                                       gguf_file=gguf_file, quant=quant, kv_dtype=options.get("kv_dtype"),
                                       llamacpp_defaults=options.pop("llamacpp_defaults", None))
    if is_gguf_ref(ref, gguf_file, quant):
        return analyze_gguf(ref, **gguf_kwargs)
    try:
        report = read_report(ref, revision, token, timeout)
    except (NoSafetensors, NoConfig) as exc:
        # GGUF-only repos usually have neither config.json nor safetensors: list their GGUF files instead.
        try:
            return analyze_gguf(ref, **gguf_kwargs)
        except NoSafetensors:  # no GGUF files either: the original error is the answer
            raise exc from None
    if gguf_kwargs["llamacpp_defaults"] is not None:
        raise UsageError(f"{ref}: --llamacpp-defaults is for GGUF models (llama.cpp's cache); this is a safetensors model")
    return attach_sections(report, ctx=ctx, batch=batch, **options)


def analyze_safetensors(
    ref: str,
    ctx: str | int | list[int] | None = None,
    batch: int = 1,
    revision: str | None = None,
    token: str | bool | None = None,
    timeout: float | None = None,
    **options: Any,
) -> Report:
    """:func:`analyze` for a safetensors model only (always a :class:`Report`; no GGUF routing)."""
    return attach_sections(read_report(ref, revision, token, timeout), ctx=ctx, batch=batch, **options)


@dataclass
class CheckResult:
    """``hfmem check``: whether the model fits the GPU (``fits``) and whether its download fits the disk of the HF
    cache (``disk_fits``; always true for local folders), with one line each saying why."""

    report: Report
    fits: bool
    disk_fits: bool
    download_bytes: int | None
    free_bytes: int | None
    cache_path: str | None

    @property
    def ok(self) -> bool:
        return self.fits and self.disk_fits


def check(
    ref: str,
    gpu: str,
    ctx: str | int | list[int] | None = None,
    batch: int = 1,
    revision: str | None = None,
    token: str | bool | None = None,
    timeout: float | None = None,
    **options: Any,
) -> CheckResult:
    """Pre-download check: does ``ref`` fit ``gpu`` (a catalog name or a size such as "24GB") at ``ctx``, and does
    its download fit the disk of the HF cache? Options as :func:`analyze`."""
    from hfmem.hub.disk import cache_free_bytes, hub_download_bytes

    if not gpu:
        raise UsageError("check needs --gpu (a catalog name or a size such as 24GB)")
    report = analyze_safetensors(ref, ctx=ctx, batch=batch, revision=revision, token=token, timeout=timeout, gpu=gpu, **options)
    assert report.inference is not None  # attach_sections always plans
    if report.source == "hub":
        download = hub_download_bytes(report.repo, report.revision or revision, token, timeout)
        path, free = cache_free_bytes()
        return CheckResult(report, bool(report.inference.fits), download <= free, download, free, path)
    return CheckResult(report, bool(report.inference.fits), True, report.download_bytes, None, None)


def analyze_many(
    refs: Sequence[str],
    jobs: int = 8,
    *,
    revision: str | None = None,
    token: str | bool | None = None,
    timeout: float | None = None,
    progress: bool = False,
    **options: Any,
) -> list[Report | GGUFReport | HfmemError]:
    """:func:`analyze` for each ref concurrently (at most ``jobs`` at once), in input order; a repo that fails gives
    its ``HfmemError`` in its place and never stops the others. ``progress`` shows a progress bar."""
    from hfmem.batch import run_many

    def one(ref: str, **source: Any) -> Report | GGUFReport:
        return analyze(ref, **source, **options)

    return run_many(refs, jobs, revision=revision, token=token, timeout=timeout, fn=one, progress=progress)


def compare(
    refs: Sequence[str],
    ctx: str | int = "32k",
    precision: str = "auto",
    engine: str = "vllm",
    revision: str | None = None,
    token: str | bool | None = None,
    timeout: float | None = None,
) -> tuple[int, list[ComparisonRow]]:
    """Models side by side at one context (the first model's reading of ``ctx``): parameters, KV per token,
    weights, inference and training totals. Returns (context, one row per model)."""
    from hfmem.memory.kv import parse_context
    from hfmem.memory.summary import compare_rows

    reports = [read_report(ref, revision, token, timeout) for ref in refs]
    context = parse_context(ctx, reports[0].architecture)[0]
    return context, compare_rows(reports, context, precision, engine)


def card(
    ref: str,
    ctx: str | int | list[int] = "4k,32k,128k",
    precisions: str | Sequence[str] = "bf16,fp8,int4",
    engine: str = "vllm",
    batch: int = 1,
    training: bool = True,
    revision: str | None = None,
    token: str | bool | None = None,
    timeout: float | None = None,
) -> ModelCard:
    """The numbers of a model card's memory section: inference (precision x context: weights + KV = total, the
    smallest common GPU that fits) and fine-tuning (full, LoRA, QLoRA; checkpointing on and off)."""
    from hfmem.memory.kv import parse_context
    from hfmem.memory.precision import resolve_precision
    from hfmem.memory.summary import build_card

    report = read_report(ref, revision, token, timeout)
    contexts = list(ctx) if isinstance(ctx, (list, tuple)) else parse_context(ctx, report.architecture)
    names = precisions.split(",") if isinstance(precisions, str) else list(precisions)
    chosen = [resolve_precision(p.strip()) for p in names if p.strip()]
    return build_card(report, contexts, chosen, engine=engine, batch=batch, training=training)
