"""Command line: a thin layer over the Python API. Heavy imports happen inside commands, never at start-up."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from typing import Any

import click

from hfmem import __version__
from hfmem.batch import DEFAULT_JOBS, MAX_JOBS
from hfmem.errors import HfmemError, UsageError, redact
from hfmem.memory.gpus import DEVICES
from hfmem.memory.kv.llamacpp import DEFAULTS as LLAMACPP_DEFAULTS
from hfmem.memory.kv.options import ENGINES, KV_DTYPES, SPECULATIVE
from hfmem.memory.training import ATTENTION, FSDP, OFFLOAD, OPTIMIZERS, QLORA_EXPERTS, SSM_KERNELS
from hfmem.memory.training import METHODS as TRAINING_METHODS
from hfmem.memory.training import PRECISIONS as TRAINING_PRECISIONS
from hfmem.memory.vllm_versions import DEFAULT_VERSION as DEFAULT_VLLM_VERSION
from hfmem.memory.vllm_versions import ENCODER_TP_MODES
from hfmem.memory.vllm_versions import INTERCONNECTS as VLLM_INTERCONNECTS
from hfmem.memory.vllm_versions import NEWEST_RELEASE_READ as NEWEST_VLLM_RELEASE
from hfmem.memory.vllm_versions import RUNNERS as VLLM_RUNNERS
from hfmem.memory.vllm_versions import SAMPLERS as VLLM_SAMPLERS
from hfmem.memory.vllm_versions import VERSIONS as VLLM_VERSIONS
from hfmem.safe_text import one_line

FORMATS = ("table", "json", "markdown")
BATCH_FORMATS = ("jsonl", "csv", "markdown", "table", "json")
COMPARE_FORMATS = ("table", "markdown", "json", "csv")
CARD_FORMATS = ("markdown", "json")


class DefaultGroup(click.Group):
    """`hfmem REPO` runs the default `analyze` command; `hfmem card REPO` etc. run sub-commands."""

    default_command = "analyze"

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h", "--version"):
            args = [self.default_command, *args]
        return super().parse_args(ctx, args)

    def main(self, *args: Any, **kwargs: Any) -> Any:
        # Everything printed passes through SafeStream (hfmem.safe_text): click's echo and usage errors, library
        # warnings and log lines, so no repo- or server-supplied text reaches the terminal with control sequences.
        from hfmem.safe_text import SafeStream

        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = SafeStream(sys.stdout), SafeStream(sys.stderr)
        try:
            return super().main(*args, **kwargs)
        except Exception:  # --debug re-raises bugs: the traceback (which quotes repo text) goes through SafeStream too
            traceback.print_exc()
            sys.exit(1)
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            sys.stdout, sys.stderr = saved


def run_guarded(debug: bool, body: Callable[[], Any]) -> Any:
    """One clear line on stderr and a distinct exit code for every expected failure; tracebacks only with --debug."""
    if debug:  # show huggingface_hub's own retry warnings, which hfmem otherwise keeps off stderr
        from hfmem.hub import retry

        retry.show_client_logs = True
    try:
        return body()
    except HfmemError as exc:
        if debug:
            traceback.print_exc()
        click.echo(f"hfmem: error: {one_line(redact(exc.message))}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("hfmem: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:
        if debug:
            raise
        click.echo(f"hfmem: internal error: {type(exc).__name__}: {one_line(redact(str(exc))[:200])} (run with --debug for details)", err=True)
        sys.exit(1)


def _read_early(model: str, revision: str | None, token: str | None, timeout: float | None,
                more_requests: bool = False) -> None:
    """Start reading a Hub model before the command imports the analysis code (hfmem/hub/prefetch.py); the
    command's read takes the answer. ``more_requests``: the command asks the Hub more itself (check --disk), so the
    read shares this process's HTTP client instead of building one in a child."""
    from hfmem.hub import prefetch

    prefetch.start(model, revision, token, timeout, fork=not more_requests)


def _check_timeout(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """--timeout, or HF_HUB_DOWNLOAD_TIMEOUT when it is not given: a usage error (exit 2) unless a finite number of
    seconds (inf, nan and 1e308 would overflow the waits; huggingface_hub cannot even be imported with "abc")."""
    from hfmem.hub.timeout import check_timeout, env_timeout

    try:
        return env_timeout() if value is None else check_timeout(value)
    except HfmemError as exc:
        raise click.BadParameter(exc.message.removeprefix("--timeout: ")) from None


def common_source_options(f: Callable) -> Callable:
    f = click.option("--revision", default=None, help="Branch, tag or commit (Hub repos).")(f)
    f = click.option("--token", default=None, help="Hub token (default: HF_TOKEN or `hf auth login`). Never printed.")(f)
    f = click.option("--timeout", type=float, default=None, callback=_check_timeout, help="Seconds of wall-clock any Hub request may take, retries included (default HF_HUB_DOWNLOAD_TIMEOUT, else 10).")(f)
    f = click.option("--debug", is_flag=True, help="Show tracebacks.")(f)
    return f


@click.group(cls=DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hfmem")
def main() -> None:
    """hfmem: how much memory a Hugging Face model needs, exactly, before you download it.

    \b
    hfmem Qwen/Qwen2-7B                 # a Hub repo id
    hfmem ./path/to/model               # a local folder with config.json + *.safetensors
    hfmem Qwen/Qwen2-7B --format json   # the stable JSON contract
    """


def _check_ctx(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Syntax check of --ctx before anything is fetched ('max' is resolved once the config is read)."""
    if value is None:
        return None
    from hfmem.memory.kv.context import parse_context

    for part in value.split(","):
        if part.strip().lower() != "max":
            try:
                parse_context(part)
            except HfmemError as exc:
                raise click.BadParameter(exc.message.removeprefix("--ctx: ")) from None
    return value


def _check_gpus(ctx: click.Context, param: click.Parameter, value: str | None) -> int | str | None:
    """--gpus N (a positive integer) or auto; whether vLLM accepts N for the model is checked once it is read."""
    if value is None or value.strip().lower() == "auto":
        return value and "auto"
    try:
        n = int(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a number of GPUs or auto") from None
    if n < 1:
        raise click.BadParameter("must be at least 1")
    return n


def kv_options(f: Callable) -> Callable:
    f = click.option("--encoder-len", "--encoder-seq", "encoder_len", type=click.IntRange(min=1), default=None,
                     help="Encoder-decoder models: encoder tokens for the cross-attention cache (default: the model's max source length) "
                          "and, with --train, per training sequence (default: --seq).")(f)
    f = click.option("--engine", type=click.Choice(ENGINES), default=None,
                     help="Whose KV cache: vLLM's paged blocks or transformers' DynamicCache (default vllm).")(f)
    f = click.option("--kv-dtype", type=click.Choice(KV_DTYPES), default=None,
                     help="KV cache dtype (default auto: the model's activation dtype).")(f)
    f = click.option("--batch", type=click.IntRange(min=1), default=None, help="Sequences (default 1).")(f)
    f = click.option("--ctx", default=None, callback=_check_ctx,
                     help="Context tokens for the KV cache: 32768, 32k, 1M, max; several: 4k,32k,128k.")(f)
    return f


def planner_options(f: Callable) -> Callable:
    f = click.option("--dtype", "precision", default="auto", show_default=True,
                     help="Weight precision: auto (as stored), fp32, bf16, fp8, fp8-block, int8, int4 (AWQ), gptq, nf4, nf4-nodq, mxfp4, q8_0, q6_k, q5_k_m, q4_k_m.")(f)
    f = click.option("--gpu", default=None, help="A catalog GPU (4090, a100-80gb, h100...) or a size, binary as VRAM is sold (24GB = 24GiB = 24 x 2^30 bytes; 24e9B for decimal); with --device cpu, the RAM size. A GGUF file: llama.cpp's -ngl that fits this one GPU.")(f)
    f = click.option("--gpus", default="1", show_default=True, callback=_check_gpus,
                     help="Tensor-parallel GPUs (weights and KV heads split N ways; N must be a size vLLM accepts for the model), "
                          "or auto: the fewest GPUs of --gpu's type that fit (pipeline stages across nodes beyond --gpus-per-node).")(f)
    f = click.option("--gpus-per-node", type=click.IntRange(min=1), default=None, help="GPUs per node for --gpus auto (default 8).")(f)
    f = click.option("--gpu-util", type=click.FloatRange(min=0.01, max=1.0), default=None,
                     help="vLLM gpu_memory_utilization (default: the --vllm-version's, 0.9 up to 0.19, 0.92 from 0.20).")(f)
    f = click.option("--overhead", default=None,
                     help="Per-GPU memory outside torch tensors, e.g. 0.35GiB (default: vLLM's non-torch increase by version and TP, "
                          "0.75 GiB transformers, 0.5 GiB cpu).")(f)
    f = click.option("--max-batched-tokens", type=click.IntRange(min=1), default=None,
                     help="vLLM max_num_batched_tokens: tokens of the profiling forward (default by version and GPU: 8192 on >= 70 GiB "
                          "GPUs but A100, else 2048, from 0.28 16384 on >= 160 GiB; V0: max_model_len).")(f)
    f = click.option("--max-num-seqs", type=click.IntRange(min=1), default=None,
                     help="vLLM max_num_seqs: rows of the profiling sampler run (default 1024 on >= 70 GiB GPUs but A100, else 256).")(f)
    f = click.option("--vllm-version", default=None,
                     help=f"vLLM release whose defaults and memory terms to follow: {', '.join(VLLM_VERSIONS)} (default: the newest "
                          f"release read, {NEWEST_VLLM_RELEASE}, family {DEFAULT_VLLM_VERSION}; "
                          "a later X.Y uses the newest family at or below it).")(f)
    f = click.option("--cudagraph-memory", default=None,
                     help="vLLM >= 0.20: the CUDA-graph estimate it deducts from the KV budget, e.g. 0.58GiB (its log: "
                          "'Estimated CUDA graph memory'); default: hfmem's estimate from vLLM's capture sizes (a note gives its range).")(f)
    f = click.option("--vllm-sampler", type=click.Choice(VLLM_SAMPLERS), default=None,
                     help="vLLM V1 top-k/top-p path of the profiling sampler run (default: the --vllm-version's); flashinfer "
                          "where the log says 'Using FlashInfer for top-p & top-k sampling.' (no sort: a smaller torch peak).")(f)
    f = click.option("--vllm-runner", type=click.Choice(VLLM_RUNNERS), default=None,
                     help="vLLM's GPU model runner whose profile to plan (default: the one --vllm-version picks for the model, "
                          "V2 for every model from 0.29); v1 = VLLM_USE_V2_MODEL_RUNNER=0 (up to 0.33), v2 = =1 (from 0.22).")(f)
    f = click.option("--mm-encoder-tp-mode", type=click.Choice(ENCODER_TP_MODES), default=None,
                     help="vLLM's multimodal encoder at TP >= 2: weights (its default: sharded like the model) or data "
                          "(data-parallel: the encoder's weights whole on every GPU).")(f)
    f = click.option("--interconnect", type=click.Choice(VLLM_INTERCONNECTS), default=None,
                     help="Link between tensor-parallel GPUs, for vLLM's non-torch memory at TP >= 2 (default: nvlink on "
                          "A100/H100/H200/B200, pcie else); pcie also where the log says custom all-reduce is disabled "
                          "(no P2P, across nodes).")(f)
    f = click.option("--cudagraph/--enforce-eager", "cudagraph", default=None,
                     help="vLLM CUDA graphs (default on); --enforce-eager: none captured, nothing deducted for them.")(f)
    f = click.option("--speculative", type=click.Choice([s for s in SPECULATIVE if s]), default=None,
                     help="Speculative decoding: mtp loads the checkpoint's multi-token-prediction layers (weights + KV), as vLLM does.")(f)
    f = click.option("--num-speculative-tokens", type=click.IntRange(min=1), default=None,
                     help="vLLM's num_speculative_tokens (default: the checkpoint's MTP layers); hybrid mamba/linear-attention "
                          "models keep one more state page per draft token per request.")(f)
    f = click.option("--device", type=click.Choice(DEVICES), default="cuda", show_default=True, help="cpu: RAM = weights + KV + activations + overhead.")(f)
    f = click.option("--prefix-caching/--no-prefix-caching", "prefix_caching", default=None,
                     help="vLLM's automatic prefix caching (default: the release's, on for hybrid models from 0.26). Hybrid mamba/linear-attention models reserve one state page per request per group without it, two with it (up to 0.27 the Mamba2 families a page per block of context), and it sets their block size (docs/kv.md).")(f)
    return f


def _require_ctx(opts: dict[str, Any]) -> None:
    if opts.get("ctx") is None:
        # --encoder-len also sizes the encoder of a training step, so --train is enough for it
        for name in ("batch", "kv_dtype", "engine", *(() if opts.get("train") else ("encoder_len",)), "llamacpp_defaults"):
            if opts.get(name) is not None:
                raise click.BadParameter("needs --ctx (the context length to size the KV cache for)", param_hint="--" + name.replace("_", "-"))


def _options(opts: dict[str, Any]) -> dict[str, Any]:
    """CLI values -> keyword arguments of hfmem.analyze (None means: the API's default). Training options
    only travel with --train."""
    from hfmem.api import TRAINING_OPTIONS

    alias = opts.pop("train_precision_alias", None)
    if alias is not None:
        if opts.get("train_precision") not in (None, alias):
            raise click.BadParameter("--precision is the former name of --train-precision; give one", param_hint="--precision")
        opts["train_precision"] = alias
    return {k: v for k, v in opts.items() if v is not None and (opts.get("train") or k not in TRAINING_OPTIONS)}


def training_options(f: Callable) -> Callable:
    """Options of the training section (used with --train; see docs/training.md). --gpu/--gpus are shared with
    the planner: training shards over --gpus data-parallel GPUs (ZeRO/FSDP), inference splits over them (TP)."""
    opts = [
        click.option("--train", type=click.Choice([*TRAINING_METHODS, "all"]), is_flag=False, flag_value="all", default=None,
                     help="Add training memory per GPU: full, lora, qlora or all (the default when --train has no value)."),
        click.option("--seq", type=click.IntRange(min=1), default=2048, show_default=True, help="Training sequence length."),
        click.option("--micro-batch", type=click.IntRange(min=1), default=1, show_default=True, help="Sequences per GPU per step."),
        click.option("--grad-checkpointing/--no-grad-checkpointing", default=None, help="Default: off for full/lora, on for qlora."),
        click.option("--optimizer", type=click.Choice(OPTIMIZERS), default="adamw", show_default=True),
        click.option("--train-precision", "train_precision", type=click.Choice(TRAINING_PRECISIONS), default=None,
                     help="Training precision (default mixed-bf16): mixed = fp32 master + 16-bit compute (ZeRO); bf16 = "
                          "everything bf16; amp-bf16 = fp32 model under autocast."),
        # The former name; hidden because the API's precision= is the weight precision (--dtype).
        click.option("--precision", "train_precision_alias", type=click.Choice(TRAINING_PRECISIONS), default=None, hidden=True),
        click.option("--lora-rank", type=click.IntRange(min=1), default=16, show_default=True),
        click.option("--lora-targets", default="all-linear", show_default=True, help="all-linear or module names, e.g. q_proj,v_proj (PEFT semantics)."),
        click.option("--dora", is_flag=True, help="DoRA: adds a magnitude vector per adapted Linear."),
        click.option("--zero", type=click.Choice(["0", "1", "2", "3"]), default="0", show_default=True, help="DeepSpeed ZeRO stage."),
        click.option("--fsdp", type=click.Choice(FSDP), default=None, help="FSDP sharding (full ~ ZeRO-3, grad-op ~ ZeRO-2)."),
        click.option("--offload", type=click.Choice(OFFLOAD), default="none", show_default=True),
        click.option("--attn", type=click.Choice(ATTENTION), default="sdpa", show_default=True, help="Attention implementation."),
        click.option("--chunked-loss", is_flag=True, help="Fused/chunked cross-entropy (Liger-style) instead of HF's full fp32 logits."),
        click.option("--ssm-kernels", type=click.Choice(SSM_KERNELS), default="auto", show_default=True,
                     help="State-space / linear-attention layers: fused kernels (mamba-ssm, causal-conv1d, fla) or "
                          "transformers' torch fallback; auto = fused on CUDA, torch on Apple."),
        click.option("--qlora-experts", type=click.Choice(QLORA_EXPERTS), default="bf16", show_default=True,
                     help="QLoRA of MoE models: fused expert tensors left unquantized (transformers 5 + bitsandbytes "
                          "today; fp32 with --qlora-upcast) or NF4 like expert-quantizing stacks."),
        click.option("--qlora-upcast/--no-qlora-upcast", default=True, show_default=True,
                     help="prepare_model_for_kbit_training casts non-4-bit modules to fp32."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


@main.command("analyze")
@click.argument("model")
@common_source_options
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@kv_options
@planner_options
@training_options
@click.option("--gguf-file", default=None, help="GGUF repos: the .gguf file to analyse (first shard for split files).")
@click.option("--quant", default=None, help="GGUF repos: pick the file by quant type, e.g. Q4_K_M.")
@click.option("--llamacpp-defaults", type=click.Choice(list(LLAMACPP_DEFAULTS)), default=None,
              help="GGUF models: whose llama.cpp context defaults shape the cache (default llama-server: unified KV, "
                   "window-sized SWA; llama-cpp-python: a KV stream per sequence, full-size SWA).")
@click.option("-v", "--verbose", is_flag=True, help="With --gpu: every table after the verdict (every precision, term and catalog GPU).")
@click.option("--brief", is_flag=True, help="One line: the verdict (what `hfmem check` prints, without the disk).")
@click.option("--recommend", is_flag=True, help="With --gpu: print only the `vllm serve` command that runs the plan (or the smallest setup that fits), or for a GGUF file the `llama-server` command with the -ngl that fits; exit 1 when there is none.")
def analyze_cmd(
    model: str, revision: str | None, token: str | None, timeout: float | None, debug: bool, fmt: str,
    gguf_file: str | None, quant: str | None, verbose: bool, brief: bool, recommend: bool, **opts: Any,
) -> None:  # fmt: skip
    """Architecture, exact parameters, stored bytes, weights per precision and the inference plan of MODEL
    (repo id, folder, or .gguf file); KV cache with --ctx. With --gpu the answer comes first: fits or not, the
    margin, the longest context, the concurrency and the smallest setup that fits."""
    _require_ctx(opts)
    if brief and (verbose or fmt != "table"):
        raise click.BadParameter("is one line of text: not with -v or --format", param_hint="--brief")
    if recommend and (brief or verbose or fmt != "table" or not opts.get("gpu")):
        raise click.BadParameter("prints one command: needs --gpu, not with --brief, -v or --format", param_hint="--recommend")

    def body() -> None:
        if gguf_file is None and quant is None:
            _read_early(model, revision, token, timeout)
        from hfmem.api import analyze, is_gguf_ref
        from hfmem.render.text import render

        options = _options(opts)
        if verbose and not is_gguf_ref(model, gguf_file, quant):
            options["every_tp"] = True  # -v: the table per tensor-parallel size
        report = analyze(model, revision=revision, token=token, timeout=timeout, gguf_file=gguf_file, quant=quant, **options)
        if recommend:
            serve = report.serve
            if serve is None:
                raise UsageError("--recommend gives a vllm serve command (safetensors models with --engine vllm on "
                                 "--device cuda) or a llama-server command (a GGUF file with --ctx)")
            if serve.line is None:
                click.echo(f"hfmem: no command: {one_line('; '.join(serve.why))}", err=True)
                sys.exit(1)
            click.echo(one_line(serve.line))
            return
        if brief:
            from hfmem.report import Report

            if not isinstance(report, Report):
                from hfmem.render.gguf import gguf_verdict_lines

                lines = gguf_verdict_lines(report)
                if not lines:
                    raise UsageError("--brief on a GGUF model needs --gpu and --ctx (its llama.cpp offload plan)")
                click.echo(one_line(lines[0]))
                return
            from hfmem.render.verdict import brief_line

            click.echo(one_line(brief_line(report)))
            return
        click.echo(render(report, fmt, verbose))

    run_guarded(debug, body)


@main.command("check")
@click.argument("model")
@common_source_options
@kv_options
@planner_options
@training_options
@click.option("--disk", is_flag=False, flag_value="", default=None, metavar="[PATH]",
              help="Also check that the download fits the free space of PATH's disk (default: the HF cache's); a separate verdict and exit code.")
def check_cmd(model: str, revision: str | None, token: str | None, timeout: float | None, debug: bool,
              disk: str | None, **opts: Any) -> None:
    """Pre-download check for scripts and CI: exit 0 if MODEL fits --gpu at --ctx, 1 if not; with --disk, 4 if the
    download does not fit the disk, 5 if neither fits. One line per verdict says why."""
    _require_ctx(opts)

    def body() -> None:
        _read_early(model, revision, token, timeout, more_requests=disk is not None)
        from hfmem.api import check
        from hfmem.render.verdict import check_lines

        options = _options(opts)
        result = check(model, gpu=options.pop("gpu", None), revision=revision, token=token, timeout=timeout,
                       disk=disk if disk is None else (disk or True), **options)
        for line in check_lines(result):
            click.echo(one_line(line))
        if result.exit_code:
            sys.exit(result.exit_code)

    run_guarded(debug, body)


@main.command("card")
@click.argument("model")
@common_source_options
@click.option("--ctx", default="4k,32k,128k", show_default=True, help="Contexts for the inference table.")
@click.option("--precisions", default="bf16,fp8,int4", show_default=True, help="Weight precisions for the inference table.")
@click.option("--engine", type=click.Choice(ENGINES), default="vllm", show_default=True)
@click.option("--no-training", is_flag=True, help="Leave out the fine-tuning table.")
@click.option("--format", "fmt", type=click.Choice(CARD_FORMATS), default="markdown", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False, writable=True), default=None, help="Write the card to FILE.")
@click.option("--update", "update_path", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Replace the block between <!-- hfmem:start --> and <!-- hfmem:end --> in FILE (added if absent).")
@click.option("--svg", "svg_path", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Also write memory against context for the card's precisions to FILE (as `hfmem plot`).")
def card_cmd(model: str, revision: str | None, token: str | None, timeout: float | None, debug: bool, ctx: str,
             precisions: str, engine: str, no_training: bool, fmt: str, output: str | None, update_path: str | None,
             svg_path: str | None) -> None:
    """A memory table for MODEL's model card (GitHub Markdown, ready to paste)."""

    def body() -> None:
        import json
        from pathlib import Path

        _read_early(model, revision, token, timeout)
        from hfmem.api import card
        from hfmem.render.card import card_markdown
        from hfmem.render.markers import update_block

        model_card = card(model, ctx=ctx, precisions=precisions, engine=engine, training=not no_training,
                          revision=revision, token=token, timeout=timeout)
        if fmt == "json":
            # <, > and & as \u escapes (the same JSON): a card may go into a README, where no repo-supplied text may
            # open an HTML tag or forge an hfmem marker.
            text = json.dumps(model_card.to_dict(), indent=2).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026") + "\n"
        else:
            text = card_markdown(model_card)
        if svg_path:
            from hfmem.api import memory_curves
            from hfmem.render.svg import curves_svg

            curves = memory_curves(model, precisions=precisions, engine=engine, revision=revision, token=token, timeout=timeout)
            Path(svg_path).write_text(curves_svg(curves))
            click.echo(f"wrote {svg_path}", err=True)
        if update_path:
            path = Path(update_path)
            path.write_text(update_block(path.read_text(), text))
            click.echo(f"updated {update_path}", err=True)
        elif output:
            Path(output).write_text(text)
            click.echo(f"wrote {output}", err=True)
        else:
            click.echo(text, nl=False)

    run_guarded(debug, body)


@main.command("compare")
@click.argument("models", nargs=-1, required=True)
@common_source_options
@click.option("--ctx", default="32k", show_default=True, callback=_check_ctx, help="Context for KV and inference totals.")
@click.option("--engine", type=click.Choice(ENGINES), default="vllm", show_default=True)
@click.option("--kv-dtype", type=click.Choice(KV_DTYPES), default=None, help="KV cache dtype (default auto).")
@click.option("--batch", type=click.IntRange(min=1), default=None, help="Sequences (default 1).")
@click.option("--encoder-len", "--encoder-seq", "encoder_len", type=click.IntRange(min=1), default=None, help="Encoder tokens (encoder-decoder models).")
@planner_options
@click.option("--jobs", type=click.IntRange(1, MAX_JOBS), default=DEFAULT_JOBS, show_default=True, help="Repos read at once.")
@click.option("--format", "fmt", type=click.Choice(COMPARE_FORMATS), default="table", show_default=True)
def compare_cmd(models: tuple[str, ...], revision: str | None, token: str | None, timeout: float | None, debug: bool,
                ctx: str, precision: str, engine: str, gpu: str | None, jobs: int, fmt: str, **opts: Any) -> None:
    """MODELS side by side: parameters, active parameters, KV/token, weights, inference and training totals, with
    every planner option. --dtype and --gpu take comma-separated lists (a precision x GPU matrix). A repo that cannot
    be read is an error row; the exit code is then 3, as in batch."""

    def body() -> None:
        from hfmem.api import compare
        from hfmem.memory.comparison import CompareError
        from hfmem.render.compare import render_compare

        options = {k: v for k, v in opts.items() if v is not None}
        context, rows = compare(models, ctx=ctx, precision=precision, engine=engine, gpu=gpu, jobs=jobs, revision=revision,
                                token=token, timeout=timeout, **options)
        click.echo(render_compare(context, rows, fmt, engine, precision), nl=False)
        if any(isinstance(r, CompareError) for r in rows):
            sys.exit(3)

    run_guarded(debug, body)


@main.command("batch")
@click.argument("source", type=click.File("rb"))
@click.option("--jobs", type=click.IntRange(1, MAX_JOBS), default=DEFAULT_JOBS, show_default=True, help="Repos analysed at once.")
@click.option("--format", "fmt", type=click.Choice(BATCH_FORMATS), default="jsonl", show_default=True)
@click.option("--quiet", is_flag=True, help="No progress bar (it is off anyway when stderr is not a terminal).")
@common_source_options
@kv_options
@planner_options
def batch_cmd(source: Any, jobs: int, fmt: str, quiet: bool, revision: str | None, token: str | None,
              timeout: float | None, debug: bool, **opts: Any) -> None:
    """Analyse the repo ids in SOURCE (a file, or - for stdin; one per line, # comments) concurrently.

    One result per line in input order; a failing repo is reported with its error and does not stop the others.
    Exit code 0 when every repo succeeded, 3 when some failed."""
    _require_ctx(opts)

    def body() -> None:
        from hfmem.api import analyze_many
        from hfmem.batch import parse_repo_list
        from hfmem.render.batch import render_batch

        name = getattr(source, "name", None)
        refs = parse_repo_list(source.read(), name if isinstance(name, str) and name not in ("-", "<stdin>") else "stdin")
        show_progress = not quiet and sys.stderr.isatty()
        results = analyze_many(refs, jobs, revision=revision, token=token, timeout=timeout, progress=show_progress, **_options(opts))
        click.echo(render_batch(refs, results, fmt), nl=False)
        if any(isinstance(r, HfmemError) for r in results):
            sys.exit(3)

    run_guarded(debug, body)


@main.command("plot")
@click.argument("model")
@common_source_options
@click.option("--gpu", "gpu_names", multiple=True, help="GPU whose usable memory is drawn as a line (repeat or comma-separate; default: RTX 4090, L40S, H100).")
@click.option("--dtype", "precisions", default="bf16,fp8,int4", show_default=True, help="Weight precisions, one panel each (comma-separated; auto = as stored).")
@click.option("--ctx", default=None, help="Contexts to plot (comma-separated; default: powers of two from 1k to the model's limit).")
@click.option("--engine", type=click.Choice(ENGINES), default="vllm", show_default=True)
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True, help="Concurrent sequences.")
@click.option("--kv-dtype", type=click.Choice(KV_DTYPES), default="auto", show_default=True)
@click.option("--gpus", type=click.IntRange(min=1), default=1, show_default=True, help="Tensor-parallel GPUs: every term per GPU.")
@click.option("--device", type=click.Choice(DEVICES), default="cuda", show_default=True)
@click.option("--format", "fmt", type=click.Choice(("svg", "json")), default="svg", show_default=True,
              help="svg: the picture; json: the plotted numbers.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None, help="Write to FILE (default: stdout).")
def plot_cmd(model: str, revision: str | None, token: str | None, timeout: float | None, debug: bool,
             gpu_names: tuple[str, ...], precisions: str, ctx: str | None, engine: str, batch: int, kv_dtype: str,
             gpus: int, device: str, fmt: str, output: str | None) -> None:
    """MODEL's memory against context as an SVG: weights, KV cache, activations and overhead stacked per precision,
    each GPU's usable memory as a dashed line (plain SVG, readable in GitHub's light and dark modes)."""

    def body() -> None:
        import json

        _read_early(model, revision, token, timeout)
        from hfmem.api import memory_curves
        from hfmem.render.svg import curves_svg

        names = [n for g in gpu_names for n in g.split(",") if n.strip()] or None
        curves = memory_curves(model, gpu=names, precisions=precisions, ctx=ctx, engine=engine, batch=batch,
                               kv_dtype=kv_dtype, gpus=gpus, device=device, revision=revision, token=token, timeout=timeout)
        text = json.dumps(curves.to_dict(), indent=2) + "\n" if fmt == "json" else curves_svg(curves)
        _write_or_echo(text, output)

    run_guarded(debug, body)


def _write_or_echo(text: str, output: str | None) -> None:
    if output:
        from pathlib import Path

        Path(output).write_text(text)
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(text, nl=False)


def run() -> None:
    """The ``hfmem`` console script and ``python -m hfmem``: ``main``, then exit without tearing the heap down.

    A run ends with everything it read still alive (one object per tensor: 92k for DeepSeek-V3, 500k for Kimi-K3);
    the interpreter's normal exit frees them one by one and clears every module, ~0.05 s of a DeepSeek-V3 run. What
    must happen at exit still does: the atexit handlers (waiting for the digest write, logging's flush) run, and the
    output streams are flushed; then ``os._exit`` ends the process with main's exit code. Only for the process's
    own entry point: ``main`` called in-process (tests, other programs) exits as click does."""
    import atexit
    import os

    try:
        main(prog_name="hfmem")
        code: Any = 0
    except SystemExit as exc:
        code = exc.code
    if code is None:
        code = 0
    elif not isinstance(code, int):  # sys.exit("message"), as the interpreter would print it
        print(code, file=sys.stderr)
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
