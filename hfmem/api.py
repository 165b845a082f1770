"""The typed Python API: ``analyze`` one model, ``check`` a fit, ``analyze_many`` models, ``compare`` them.

The CLI calls exactly these functions, so ``report.to_dict()`` is the CLI's ``--format json``."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from hfmem.errors import HfmemError, MalformedHeader, NoConfig, NoSafetensors, UsageError
from hfmem.gcpause import bulk
from hfmem.hub import prefetch
from hfmem.hub.files import ModelFiles
from hfmem.hub.local import looks_local, read_local
from hfmem.hub.ref import is_gguf_ref, resolve_ref
from hfmem.hub.timeout import check_timeout
from hfmem.model.architecture import build_architecture
from hfmem.model.inventory import count_tensors, summarize
from hfmem.model.moe import summarize_moe
from hfmem.model.validate import check_config
from hfmem.report import Report

if TYPE_CHECKING:
    from hfmem.gguf.model import GGUFReport
    from hfmem.memory.comparison import CompareError
    from hfmem.memory.curve import MemoryCurves
    from hfmem.memory.serve import ServeCommand
    from hfmem.memory.summary import ComparisonRow, ModelCard

R = TypeVar("R")

# Keyword options of the training section (``train=`` must be given for them to apply).
TRAINING_OPTIONS = ("seq", "micro_batch", "grad_checkpointing", "optimizer", "train_precision", "lora_rank", "lora_targets",
                    "dora", "zero", "fsdp", "offload", "attn", "chunked_loss", "qlora_upcast", "ssm_kernels", "qlora_experts")


def _attach_option_names() -> frozenset[str]:
    import inspect

    named = set(inspect.signature(attach_sections).parameters) - {"report", "training_options", "ctx", "precision", "dtype", "gpu"}
    return frozenset(named - {"train", *TRAINING_OPTIONS})  # compare's training columns are the card's


@bulk
def read_model(ref: str, revision: str | None = None, token: str | bool | None = None, timeout: float | None = None) -> ModelFiles:
    """Read config.json and safetensors headers for a Hub repo id (or its URL), a local folder or a cached snapshot."""
    ref, revision = resolve_ref(ref, revision)
    if timeout is not None:
        check_timeout(timeout)
    if looks_local(ref):
        return read_local(ref)
    started = prefetch.take(ref, revision, token, timeout)  # the CLI may have started this very read already
    if started is not None:
        return started.wait()
    from hfmem.hub.remote import read_hub  # the Hub client's machinery (thread pools, retries) only for Hub reads

    return read_hub(ref, revision=revision, token=token, timeout=timeout)


@bulk
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


def _import_analysis() -> None:
    """Import the modules analyze_files and attach_sections import on first use, and look up the installed
    transformers version the config table is checked against (importlib.metadata scans the environment: ~10 ms).
    Called while a Hub read's first requests are on the wire: the interpreter is otherwise idle then, and all of
    this would otherwise come after the answer."""
    import hfmem.memory.hardware  # noqa: F401
    import hfmem.memory.kv.vllm  # noqa: F401
    import hfmem.memory.parallel  # noqa: F401
    import hfmem.memory.planner  # noqa: F401
    import hfmem.memory.vllm_cudagraph  # noqa: F401
    import hfmem.memory.vllm_encoder  # noqa: F401
    import hfmem.memory.vllm_weights  # noqa: F401
    from hfmem.model import fast_config

    fast_config.table_applies()


def _report_of(files: ModelFiles, ref: str) -> Report:
    try:
        return analyze_files(files)
    except HfmemError as exc:
        raise _with_ref(exc, ref) from None


@bulk
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
    gpus: int | str = 1,
    gpus_per_node: int | None = None,
    gpu_util: float | None = None,
    overhead: str | int | None = None,
    max_batched_tokens: int | None = None,
    max_num_seqs: int | None = None,
    vllm_version: str | None = None,
    cudagraph: bool = True,
    cudagraph_memory: str | int | None = None,
    vllm_sampler: str | None = None,
    interconnect: str | None = None,
    vllm_runner: str | None = None,
    mm_encoder_tp_mode: str | None = None,
    device: str = "cuda",
    prefix_caching: bool | None = None,
    speculative: str | None = None,
    num_speculative_tokens: int | None = None,
    every_tp: bool = False,
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
    from hfmem.memory.kv.estimate import DOES_NOT_START, GPU_NOT_CHECKED
    from hfmem.memory.planner import DEFAULT_MAX_BATCHED_TOKENS, attach, gpu_sm, mtp_layer_count, profile_tokens, speculative_tokens
    from hfmem.memory.vllm_versions import release_of, resolve_version

    unknown = sorted(set(training_options) - set(TRAINING_OPTIONS))
    if unknown:
        import inspect

        named = [p for p in inspect.signature(attach_sections).parameters if p not in ("report", "training_options")]
        raise TypeError(f"unknown option(s) {', '.join(unknown)}; valid: {', '.join(named + list(TRAINING_OPTIONS))}")
    if dtype is not None:
        if precision not in ("auto", dtype):
            raise TypeError(f"dtype={dtype!r} and precision={precision!r}: they are the same option (--dtype); give one")
        precision = dtype
    gpu_spec = resolve_gpu(gpu) if gpu else None
    version = resolve_version(vllm_version)
    release = release_of(vllm_version) if vllm_version else None

    def mbt(context: int) -> int:
        # the planner's rule (vLLM's max_num_batched_tokens by version and GPU), so both KV figures agree
        if engine != "vllm" or device == "cpu":
            return max_batched_tokens or DEFAULT_MAX_BATCHED_TOKENS
        return profile_tokens(version, gpu_spec, context, max_batched_tokens, release)

    contexts = None
    if ctx is not None:
        contexts = list(ctx) if isinstance(ctx, (list, tuple)) else parse_context(ctx, report.architecture)
    planner_kwargs: dict[str, Any] = dict(
        engine=engine, device=device, kv_dtype=kv_dtype, max_batched_tokens=max_batched_tokens,
        encoder_len=encoder_len, speculative=speculative, prefix_caching=prefix_caching,
        max_num_seqs=max_num_seqs, vllm_version=vllm_version, cudagraph=cudagraph,
    )
    if cudagraph_memory is not None:
        planner_kwargs["cudagraph_memory"] = (cudagraph_memory if isinstance(cudagraph_memory, int)
                                              else parse_size(str(cudagraph_memory), allow_zero=True))
    if num_speculative_tokens is not None:
        planner_kwargs["num_speculative_tokens"] = num_speculative_tokens
    if vllm_sampler is not None:
        planner_kwargs["sampler"] = vllm_sampler
    if interconnect is not None:
        planner_kwargs["interconnect"] = interconnect
    if vllm_runner is not None:
        planner_kwargs["model_runner"] = vllm_runner
    if mm_encoder_tp_mode is not None:
        planner_kwargs["encoder_tp_mode"] = mm_encoder_tp_mode
    if gpu_util is not None:
        planner_kwargs["gpu_util"] = gpu_util
    if overhead is not None:
        planner_kwargs["overhead"] = overhead if isinstance(overhead, int) else parse_size(str(overhead), allow_zero=True)
    plan_context = max(contexts) if contexts else None
    gpus = _resolve_gpus(report, gpus, gpus_per_node, gpu_spec, precision, plan_context, batch, train, planner_kwargs)
    if contexts is not None:
        weights_dtype = stored_float_dtype(report.parameters.by_dtype)
        mtp_layers = mtp_layer_count(report) if speculative == "mtp" else 0
        drafts = speculative_tokens(report, speculative, num_speculative_tokens, mtp_layers)[0]
        # per GPU, split like the planner's: tensor parallel over ``gpus`` (one process on the CPU device)
        kv_tp = 1 if device == "cpu" else gpus
        report.kv_cache = [
            estimate_kv(report.architecture, c, batch=batch, kv_dtype=kv_dtype, engine=engine, encoder_len=encoder_len,
                        weights_dtype=weights_dtype, mtp_layers=mtp_layers, tp=kv_tp, prefix_caching=prefix_caching,
                        max_batched_tokens=mbt(c), vllm_release=release,
                        gpu_sm=gpu_sm(gpu_spec), speculative_tokens=drafts)
            for c in contexts
        ]
    plan = attach(report, precision=precision, context=plan_context, batch=batch, gpu=gpu_spec, tp=gpus, **planner_kwargs)
    lifted = (DOES_NOT_START, GPU_NOT_CHECKED)
    refusals = [w for est in report.kv_cache or [] for w in est.warnings if any(m in w for m in lifted)]
    refusals += [n for n in plan.notes if DOES_NOT_START in n]
    # shown beside the verdict; a previous attach_sections' refusals go (only this lifts such words into warnings)
    report.warnings = [w for w in report.warnings if not any(m in w for m in lifted)] + list(dict.fromkeys(refusals))
    runs = _hardware(report, plan, gpu_spec, engine) if device == "cuda" else True
    if not runs:
        report.setup, report.setups = None, []  # no number of GPUs of this type runs it
    if gpu_spec is not None and device == "cuda" and report.setups is None and not train:
        from hfmem.memory.parallel import from_plan

        if plan.fits and plan.gpus == 1:  # the asked setup is the smallest
            report.setup = from_plan(plan)
            report.setups = [report.setup]
        else:  # fewer GPUs may do, or more are needed
            _find_setup(report, gpus_per_node, gpu_spec, precision, plan.context, batch, planner_kwargs)
    if gpu_spec is not None and device == "cuda" and runs and plan.fits and not train:
        report.speed = _speed(report, precision, plan, batch, planner_kwargs)
    if gpu_spec is not None and device == "cuda" and engine == "vllm" and not train:
        report.serve = _serve(report, plan, planner_kwargs)
    if every_tp and gpu_spec is not None and device == "cuda" and runs and not train:
        from hfmem.memory.parallel import DEFAULT_GPUS_PER_NODE, every_tp_size
        from hfmem.memory.planner import Planner

        report.tp_sizes = every_tp_size(lambda tp: Planner(report, precision, tp=tp, **planner_kwargs), gpu_spec,
                                        plan.context, batch, gpus_per_node or DEFAULT_GPUS_PER_NODE)
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


def _speed(report: Report, precision: str, plan: Any, batch: int, planner_kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """The roofline at the plan's setup and its concurrency (the batch, or as many sequences as the KV pool holds)."""
    from hfmem.memory.planner import Planner
    from hfmem.memory.speed import plan_speed

    sequences = max(batch, int(plan.concurrency or 0))
    speed = plan_speed(report, Planner(report, precision, tp=plan.gpus, **planner_kwargs), plan.context, sequences)
    return speed.to_dict() if speed is not None else None


def _serve(report: Report, plan: Any, planner_kwargs: dict[str, Any]) -> ServeCommand:
    """The `vllm serve` command of the plan, or of the smallest setup that fits when the asked one does not."""
    from hfmem.memory.serve import ServeCommand, vllm_serve

    if plan.fits:
        tp, pp, concurrency = plan.gpus, 1, plan.concurrency
    elif report.setup is not None and report.setup.fits:
        tp, pp, concurrency = report.setup.tp, report.setup.pp, report.setup.concurrency
    else:
        return ServeCommand(None, ["no setup of this GPU fits, so there is no command to run"])
    return vllm_serve(report, plan, tp=tp, pp=pp, concurrency=concurrency,
                      max_batched_tokens=planner_kwargs.get("max_batched_tokens"),
                      cudagraph=planner_kwargs.get("cudagraph") is not False,
                      revision=report.revision if report.source == "hub" else None)


def _hardware(report: Report, plan: Any, gpu: Any, engine: str) -> bool:
    """``report.hardware`` for --gpu (capabilities; whether it runs the weight precision); without --gpu, the lazy
    catalog marks GPUs that cannot run the precision as not fitting. Returns whether the asked GPU runs it."""
    from hfmem.memory.hardware import can_run, hardware_of, precision_key

    key = precision_key(report, plan.precision)
    if gpu is None:
        inner = plan._catalog
        if inner is not None:
            def catalog() -> Any:
                rows = inner()
                refused = []
                for row in rows:
                    ok, why = can_run(row.gpu, key, engine)
                    if not ok and row.fits:
                        row.fits = False
                        refused.append(row.gpu.key)
                if refused:
                    plan.notes.append(f"fits_on: {', '.join(refused)} hold the bytes but cannot run {key} weights (marked as not fitting)")
                return rows

            plan._catalog = catalog
        return True
    ok, why = can_run(gpu, key, engine)
    hw = hardware_of(gpu)
    report.hardware = {"gpu": gpu.key, **(hw.to_dict() if hw else {}), "weight_precision": key, "runs": ok, "note": why or None}
    return ok


def _find_setup(report: Report, gpus_per_node: int | None, gpu: Any, precision: str, context: int, batch: int,
                planner_kwargs: dict[str, Any]) -> None:
    """``report.setup``: the fewest GPUs of type ``gpu`` that fit at ``context`` x ``batch`` (valid TP sizes, then
    pipeline stages over nodes); ``report.setups``: every layout tried."""
    from hfmem.memory.parallel import DEFAULT_GPUS_PER_NODE, smallest_setup
    from hfmem.memory.planner import Planner

    def make(tp: int) -> Planner:
        return Planner(report, precision, tp=tp, **planner_kwargs)

    report.setup, report.setups = smallest_setup(make, gpu, context, batch, gpus_per_node or DEFAULT_GPUS_PER_NODE)


def _resolve_gpus(report: Report, gpus: int | str, gpus_per_node: int | None, gpu: Any, precision: str,
                  context: int | None, batch: int, train: str | None, planner_kwargs: dict[str, Any]) -> int:
    """The tensor-parallel size to plan at: ``gpus`` checked as vLLM checks it (a usage error naming the valid sizes),
    or for ``gpus="auto"`` that of the smallest setup that fits (the largest valid size when pipeline stages are needed
    or nothing fits)."""
    from hfmem.memory.parallel import DEFAULT_GPUS_PER_NODE, check_tp, valid_tp_sizes

    per_node = gpus_per_node or DEFAULT_GPUS_PER_NODE
    if per_node < 1:
        raise UsageError("--gpus-per-node must be at least 1")
    if isinstance(gpus, str) and gpus.strip().lower() != "auto":
        try:
            gpus = int(gpus)
        except ValueError:
            raise UsageError(f"--gpus {gpus!r}: a number of GPUs or auto") from None
    if isinstance(gpus, int):
        if gpus < 1:
            raise UsageError("--gpus must be at least 1")
        if train is None and planner_kwargs["device"] == "cuda":  # with --train, --gpus counts data-parallel GPUs
            check_tp(report.architecture, gpus)
        return gpus
    if train is not None:
        raise UsageError("--gpus auto plans inference; with --train give the number of data-parallel GPUs")
    if gpu is None or planner_kwargs["device"] != "cuda":
        raise UsageError("--gpus auto needs --gpu (the GPU type to count) and the cuda device")
    ctx = context or report.architecture.max_position_embeddings or 4096
    report.gpus_auto = True
    _find_setup(report, per_node, gpu, precision, ctx, batch, planner_kwargs)
    if report.setup is not None:
        return report.setup.tp
    return valid_tp_sizes(report.architecture, per_node)[-1]


def _with_ref(exc: HfmemError, ref: str) -> HfmemError:
    """ "config.json: ..." says which file; say which model too (batches, logs)."""
    if ref not in exc.message and repr(ref) not in exc.message:
        exc.message = f"{ref}: {exc.message}"
        exc.args = (exc.message,)
    return exc


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
    gpu: str | None = None,
    gpus: int | str | None = None,
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
    if gpu is not None:
        _gguf_offload(report, gpu, gpus, batch, cache_type, defaults)
    return report


def _gguf_offload(report: GGUFReport, gpu: str, gpus: int | str | None, batch: int, cache_type: str, defaults: str) -> None:
    """--gpu on a GGUF file: llama.cpp's partial offload (-ngl) on one GPU and the llama-server command."""
    from hfmem.gguf.offload import llama_server, plan_offload
    from hfmem.memory.gpus import resolve_gpu

    if gpus not in (None, 1, "1"):
        raise UsageError(f"--gpus {gpus}: hfmem plans llama.cpp's offload on one GPU (GGUF); give --gpus 1")
    if report.header is None or report.selected is None:
        raise UsageError(f"{report.repo}: --gpu needs one GGUF file: pick one with --quant or --gguf-file")
    if not report.kv_cache:
        raise UsageError("--gpu on a GGUF model needs --ctx (the context llama-server is started with)")
    context = report.kv_cache[0].context
    plan = plan_offload(report.header, report.architecture, resolve_gpu(gpu), context=context, batch=batch,
                        cache_type=cache_type, defaults=defaults)
    file = report.selected.name  # a Hub repo's file: its path in the repo, as downloaded
    if report.source == "local":
        file = os.path.join(report.repo, file) if os.path.isdir(report.repo) else report.repo
    plan.serve = llama_server(file, plan)
    if report.source == "hub":
        files = " ".join(report.selected.shards)
        plan.serve.why.append(f"download the file first: hf download {report.repo} {files}"
                              + (f" --revision {report.revision}" if report.revision else ""))
    report.offload, report.serve = plan, plan.serve


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
    engine, precision, gpu, gpus, gpu_util, overhead, max_batched_tokens, max_num_seqs, vllm_version, cudagraph, cudagraph_memory,
    vllm_sampler, interconnect, vllm_runner, mm_encoder_tp_mode, device,
    prefix_caching, speculative, num_speculative_tokens, train
    and the training options; GGUF models also take ``llamacpp_defaults``: "llama-server" or "llama-cpp-python", and
    with ``gpu`` get llama.cpp's partial-offload plan as ``report.offload`` and its llama-server command as ``report.serve``).
    The KV cache is per GPU at tensor parallel size ``gpus``; ``prefix_caching`` (None: the vLLM release's default,
    on for hybrid models from 0.26) decides the state pages of hybrid linear-attention/mamba models: one page
    without it, two with it (a page per block of context for the Mamba/Mamba2 families up to 0.27).
    Safetensors models give a :class:`Report`; GGUF weights (``.gguf`` files, GGUF-only repos, or ``gguf_file`` /
    ``quant`` given) a :class:`hfmem.gguf.model.GGUFReport`.

    >>> report = analyze("fixtures/models/Qwen/Qwen2-7B-Instruct", ctx="32k")  # doctest: +SKIP
    >>> report.parameters.total, report.kv_cache[0].total_bytes, report.inference.fits  # doctest: +SKIP
    (7615616512, 1879048192, None)
    """
    ref, revision = resolve_ref(ref, revision)
    gguf_kwargs: dict[str, Any] = dict(ctx=ctx, batch=batch, revision=revision, token=token, timeout=timeout,
                                       gguf_file=gguf_file, quant=quant, kv_dtype=options.get("kv_dtype"),
                                       llamacpp_defaults=options.pop("llamacpp_defaults", None),
                                       gpu=options.get("gpu"), gpus=options.get("gpus"))
    if is_gguf_ref(ref, gguf_file, quant):
        return analyze_gguf(ref, **gguf_kwargs)

    def sections(report: Report) -> Report:
        if gguf_kwargs["llamacpp_defaults"] is not None:
            raise UsageError(f"{ref}: --llamacpp-defaults is for GGUF models (llama.cpp's cache); this is a safetensors model")
        return attach_sections(report, ctx=ctx, batch=batch, **options)

    try:
        return _read_then(ref, revision, token, timeout, sections)
    except (NoSafetensors, NoConfig) as exc:  # reading's errors (sections raises neither)
        # GGUF-only repos usually have neither config.json nor safetensors: list their GGUF files instead.
        try:
            return analyze_gguf(ref, **gguf_kwargs)
        except NoSafetensors:  # no GGUF files either: the original error is the answer
            raise exc from None


def _read_then(ref: str, revision: str | None, token: str | bool | None, timeout: float | None,
               finish: Callable[[Report], R]) -> R:
    """finish(read_report(ref, revision, token, timeout)), errors naming ``ref``.

    When the CLI has started this read (hfmem/hub/prefetch.py) and it found the digest entry of the commit the
    revision named last time, finish runs on that entry while the request re-resolving the revision is in flight;
    its result (or error) stands if the read returns that very entry (the commit is unchanged), else finish runs
    again on what the read returned. A read that fails is that failure, whatever the entry gave."""
    started = None if looks_local(ref) else prefetch.take(ref, revision, token, timeout)
    if started is None:
        return finish(read_report(ref, revision, token, timeout))
    _import_analysis()  # while the read is in flight (these imports would otherwise follow it)
    preloaded = started.wait_preloaded()
    early: R | HfmemError | None = None
    if preloaded is not None:
        try:
            early = finish(_report_of(preloaded, ref))
        except HfmemError as exc:
            early = _with_ref(exc, ref)
    try:
        files = started.wait()
    except HfmemError as exc:  # the read's own failure
        raise _with_ref(exc, ref) from None
    if preloaded is not None and files is preloaded:
        if isinstance(early, HfmemError):
            raise early
        return early  # type: ignore[return-value]
    return finish(_report_of(files, ref))


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
    return _read_then(ref, revision, token, timeout, lambda report: attach_sections(report, ctx=ctx, batch=batch, **options))


@dataclass
class CheckResult:
    """``hfmem check``: two separate verdicts. ``fits``: the model fits the GPU (always checked). ``disk_fits``: the
    download fits the free space of the disk checked (``disk_path``), or None when the disk was not asked for
    (``disk=``). ``download_bytes`` is what a download for serving fetches (the safetensors weights and the small
    files beside them, hfmem.hub.download), ``snapshot_bytes`` every file of the repo."""

    report: Report
    fits: bool
    disk_fits: bool | None = None
    download_bytes: int | None = None
    free_bytes: int | None = None
    cache_path: str | None = None
    snapshot_bytes: int | None = None
    skipped_files: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.fits and self.disk_fits is not False

    @property
    def exit_code(self) -> int:
        """0 both fine; 1 the GPU does not fit; 4 the disk is too small; 5 both."""
        return (0 if self.fits else 1) + (4 if self.disk_fits is False else 0)


def check(
    ref: str,
    gpu: str,
    ctx: str | int | list[int] | None = None,
    batch: int = 1,
    revision: str | None = None,
    token: str | bool | None = None,
    timeout: float | None = None,
    disk: str | bool | None = None,
    **options: Any,
) -> CheckResult:
    """Pre-download check: does ``ref`` fit ``gpu`` (a catalog name or a size such as "24GB") at ``ctx``? With
    ``disk`` (True: the HF cache's disk; a path: that disk), does its download also fit the free space there (a
    separate verdict)? Options as :func:`analyze`."""
    if not gpu:
        raise UsageError("check needs --gpu (a catalog name or a size such as 24GB)")
    report = analyze_safetensors(ref, ctx=ctx, batch=batch, revision=revision, token=token, timeout=timeout, gpu=gpu, **options)
    assert report.inference is not None  # attach_sections always plans
    fits = bool(report.inference.fits) and (report.hardware or {}).get("runs", True)
    if report.gpus_auto and report.setup is not None:
        fits = report.setup.fits  # pipeline stages: the smallest setup's verdict
    result = CheckResult(report, fits)
    if disk is None or disk is False:
        return result
    from hfmem.hub.disk import cache_free_bytes, hub_files
    from hfmem.hub.download import select

    if report.source != "hub":  # a local folder or cached snapshot: nothing to download
        result.disk_fits, result.download_bytes, result.snapshot_bytes = True, 0, report.download_bytes
        return result
    plan = select(hub_files(report.repo, report.revision or revision, token, timeout))
    path, free = cache_free_bytes(disk if isinstance(disk, str) and disk else None)
    result.download_bytes, result.snapshot_bytes, result.skipped_files = plan.needed_bytes, plan.snapshot_bytes, plan.skipped
    result.free_bytes, result.cache_path = free, path
    result.disk_fits = plan.needed_bytes <= free
    return result


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
    *,
    dtype: str | None = None,
    gpu: str | None = None,
    jobs: int = 8,
    **options: Any,
) -> tuple[int, list[ComparisonRow | CompareError]]:
    """Models side by side at one context (the first readable model's reading of ``ctx``): parameters, KV per token,
    weights, inference and training totals, with every option of :func:`attach_sections` (kv_dtype, batch, gpus,
    gpu_util, ...). ``dtype``/``precision`` and ``gpu`` may list several, comma-separated: one row per model and
    precision, one verdict per GPU in the row's ``fits``. A repo that cannot be read is a
    :class:`hfmem.memory.comparison.CompareError` in its place. Returns (context, rows)."""
    from hfmem.batch import run_many
    from hfmem.memory.comparison import CompareError, model_rows, split
    from hfmem.memory.kv import parse_context

    if dtype is not None:
        if precision not in ("auto", dtype):
            raise TypeError(f"dtype={dtype!r} and precision={precision!r}: they are the same option (--dtype); give one")
        precision = dtype
    unknown = sorted(set(options) - _ATTACH_OPTIONS)
    if unknown:
        raise TypeError(f"unknown option(s) {', '.join(unknown)}; valid: {', '.join(sorted(_ATTACH_OPTIONS | {'dtype', 'gpu', 'jobs'}))}")
    results = run_many(refs, jobs, revision=revision, token=token, timeout=timeout, fn=read_report)
    first = next((r for r in results if isinstance(r, Report)), None)
    if first is not None:
        context = parse_context(ctx, first.architecture)[0]
    else:
        context = 0 if str(ctx).strip().lower() == "max" else parse_context(ctx)[0]
    precisions = split(precision) or ["auto"]
    gpus = split(gpu)
    rows: list[ComparisonRow | CompareError] = []
    for ref, result in zip(refs, results):
        if isinstance(result, HfmemError):
            rows.append(CompareError(ref, result))
            continue
        try:
            rows.extend(model_rows(result, context, precisions, gpus, dict(options, engine=engine)).rows)
        except HfmemError as exc:
            if isinstance(exc, UsageError):
                raise  # a bad option is the same for every model: a usage error, not a row
            rows.append(CompareError(ref, _with_ref(exc, ref)))
    return context, rows


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


def memory_curves(
    ref: str,
    gpu: str | Sequence[str] | None = None,
    precisions: str | Sequence[str] = "bf16,fp8,int4",
    ctx: str | int | list[int] | None = None,
    engine: str = "vllm",
    batch: int = 1,
    kv_dtype: str = "auto",
    gpus: int = 1,
    device: str = "cuda",
    gpu_util: float | None = None,
    revision: str | None = None,
    token: str | bool | None = None,
    timeout: float | None = None,
) -> MemoryCurves:
    """Memory against context (what ``hfmem plot`` draws): per precision, the inference plan's weights, KV cache,
    activations and overhead per GPU at each context (default: powers of two from 1k to the model's limit), and the
    budget of each GPU (default: RTX 4090, L40S, H100). Every point is the plan ``analyze(ref, ctx=C, dtype=P)`` makes."""
    from hfmem.memory.curve import DEFAULT_PLOT_GPUS, build_curves, default_contexts
    from hfmem.memory.gpus import resolve_gpu
    from hfmem.memory.kv import parse_context
    from hfmem.memory.precision import resolve_precision

    names = precisions.split(",") if isinstance(precisions, str) else list(precisions)
    chosen = [resolve_precision(p.strip()) for p in names if p.strip()]
    gpu_names = (gpu.split(",") if isinstance(gpu, str) else list(gpu)) if gpu else list(DEFAULT_PLOT_GPUS)
    resolved = [resolve_gpu(g.strip()) for g in gpu_names if g.strip()]
    if not chosen:
        raise UsageError("no precision to plot")
    report = read_report(ref, revision, token, timeout)
    arch = report.architecture
    if ctx is None:
        contexts = default_contexts(arch.max_position_embeddings)
    else:
        contexts = sorted(set(list(ctx) if isinstance(ctx, (list, tuple)) else parse_context(ctx, arch)))
    options: dict[str, Any] = dict(device=device, tp=gpus, kv_dtype=kv_dtype)
    if gpu_util is not None:
        options["gpu_util"] = gpu_util
    return build_curves(report, chosen, contexts, resolved, engine=engine, batch=batch, **options)


_ATTACH_OPTIONS = _attach_option_names()
