"""Command line: a thin layer over the Python API. Heavy imports happen inside commands, never at start-up."""

from __future__ import annotations

import sys
import traceback
from typing import Any, Callable

import click

from . import __version__
from .errors import HfmemError

FORMATS = ("table", "json", "markdown")


class DefaultGroup(click.Group):
    """`hfmem REPO` runs the default `analyze` command; `hfmem card REPO` etc. run sub-commands."""

    default_command = "analyze"

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h", "--version"):
            args = [self.default_command, *args]
        return super().parse_args(ctx, args)


def run_guarded(debug: bool, body: Callable[[], Any]) -> Any:
    """One clear line on stderr and a distinct exit code for every expected failure; tracebacks only with --debug."""
    try:
        return body()
    except HfmemError as exc:
        if debug:
            traceback.print_exc()
        click.echo(f"hfmem: error: {exc.message}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("hfmem: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:
        if debug:
            raise
        click.echo(f"hfmem: internal error: {type(exc).__name__}: {str(exc)[:200]} (run with --debug for details)", err=True)
        sys.exit(1)


def common_source_options(f: Callable) -> Callable:
    f = click.option("--revision", default=None, help="Branch, tag or commit (Hub repos).")(f)
    f = click.option("--token", default=None, help="Hub token (default: HF_TOKEN or `hf auth login`). Never printed.")(f)
    f = click.option("--timeout", type=click.FloatRange(min=0.1), default=None, help="Seconds per request (default HF_HUB_DOWNLOAD_TIMEOUT).")(f)
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


# --- planner (issue 4): weights per precision, fit, max context, max concurrency, `check` ----------------------

def planner_options(f: Callable) -> Callable:
    f = click.option("--dtype", "precision", default="auto", show_default=True,
                     help="Weight precision: auto (as stored), fp32, bf16, fp8, fp8-block, int8, int4 (AWQ), gptq, nf4, nf4-nodq, mxfp4, q8_0, q6_k, q5_k_m, q4_k_m.")(f)
    f = click.option("--gpu", default=None, help="A catalog GPU (4090, a100-80gb, h100...) or a size (24GB = 10^9 bytes, 80GiB = 2^30); with --device cpu, the RAM size.")(f)
    f = click.option("--gpus", type=click.IntRange(min=1), default=1, show_default=True, help="Tensor-parallel GPUs (weights and KV heads split N ways).")(f)
    f = click.option("--gpu-util", type=click.FloatRange(min=0.01, max=1.0), default=None, help="vLLM gpu_memory_utilization (default 0.9; newer vLLM uses 0.92).")(f)
    f = click.option("--overhead", default=None, help="Per-GPU runtime overhead, e.g. 0.35GiB (default: 0.5 GiB vllm, 0.75 GiB transformers, 0.5 GiB cpu).")(f)
    f = click.option("--max-batched-tokens", type=click.IntRange(min=1), default=None, help="Tokens in vLLM's profiling forward pass (default 8192).")(f)
    f = click.option("--device", type=click.Choice(["cuda", "cpu"]), default="cuda", show_default=True, help="cpu: RAM = weights + KV + activations + overhead.")(f)
    return f


# >>> TEMPORARY (planner branch): the KV-cache branch owns these options; the lead drops this block at merge. >>>
def planner_temporary_kv_options(f: Callable) -> Callable:
    f = click.option("--ctx", default=None, help="Context length(s): 4096, 32k, 1M, max (default: the model's maximum).")(f)
    f = click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True, help="Concurrent sequences.")(f)
    f = click.option("--kv-dtype", default="auto", show_default=True, help="KV cache dtype (auto = model dtype, fp8...).")(f)
    f = click.option("--engine", type=click.Choice(["vllm", "transformers"]), default="vllm", show_default=True)(f)
    f = click.option("--encoder-len", type=click.IntRange(min=1), default=None, help="Encoder tokens (encoder-decoder models).")(f)
    return f
# <<< TEMPORARY <<<


def _planner_kwargs(opts: dict[str, Any]) -> dict[str, Any]:
    from .gpus import parse_size

    kwargs: dict[str, Any] = {
        "engine": opts.get("engine") or "vllm",
        "device": opts.get("device") or "cuda",
        "tp": opts.get("gpus") or 1,
        "kv_dtype": opts.get("kv_dtype") or "auto",
        "max_batched_tokens": opts.get("max_batched_tokens"),
        "encoder_len": opts.get("encoder_len"),
    }
    if opts.get("gpu_util") is not None:
        kwargs["gpu_util"] = opts["gpu_util"]
    if opts.get("overhead") is not None:
        try:
            kwargs["overhead"] = parse_size(opts["overhead"]) if str(opts["overhead"]).strip() not in ("0", "0GB", "0GiB") else 0
        except HfmemError as exc:
            raise type(exc)(f"--overhead: {exc.message}") from None
    return kwargs


def _attach_planner(report: Any, opts: dict[str, Any]) -> Any:
    from .gpus import resolve_gpu
    from .planner import attach, contexts_from

    gpu = resolve_gpu(opts["gpu"]) if opts.get("gpu") else None
    contexts = contexts_from(opts.get("ctx"), report.architecture)
    return attach(report, precision=opts.get("precision") or "auto", context=max(contexts) if contexts else None,
                  batch=opts.get("batch") or 1, gpu=gpu, **_planner_kwargs(opts))


@main.command("analyze")
@click.argument("model")
@common_source_options
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@planner_options
@planner_temporary_kv_options
def analyze_cmd(model: str, revision: str | None, token: str | None, timeout: float | None, debug: bool, fmt: str, **opts: Any) -> None:
    """Architecture, exact parameters and stored bytes of MODEL (repo id or folder)."""

    def body() -> None:
        from .analysis import analyze
        from .render import to_json, to_text

        report = analyze(model, revision=revision, token=token, timeout=timeout)
        _attach_planner(report, opts)
        click.echo(to_json(report) if fmt == "json" else to_text(report, fmt))

    run_guarded(debug, body)


@main.command("check")
@click.argument("model")
@common_source_options
@planner_options
@planner_temporary_kv_options
def check_cmd(model: str, revision: str | None, token: str | None, timeout: float | None, debug: bool, **opts: Any) -> None:
    """Pre-download check for scripts and CI: exit 0 if MODEL fits --gpu at --ctx and its download fits the HF
    cache's disk, 1 if not; one line says why."""

    def body() -> None:
        from .analysis import analyze
        from .planner import cache_free_bytes, hub_download_bytes
        from .units import fmt_bytes

        if not opts.get("gpu"):
            from .errors import UsageError

            raise UsageError("check needs --gpu (a catalog name or a size such as 24GB)")
        report = analyze(model, revision=revision, token=token, timeout=timeout)
        plan = _attach_planner(report, opts)
        if report.source == "hub":
            download = hub_download_bytes(report.repo, report.revision or revision, token)
            path, free = cache_free_bytes()
            disk_ok = download <= free
            disk = f"download {fmt_bytes(download)}, {fmt_bytes(free)} free at {path}"
        else:
            disk_ok, disk = True, f"local folder, {fmt_bytes(report.extra.get('download_bytes'))} on disk"
        if not plan.fits:
            click.echo(f"{report.repo}: {plan.reason()}; {disk}")
            sys.exit(1)
        if not disk_ok:
            click.echo(f"{report.repo}: not enough disk: {disk}; {plan.reason()}")
            sys.exit(1)
        click.echo(f"{report.repo}: {plan.reason()}; {disk}")

    run_guarded(debug, body)


if __name__ == "__main__":  # pragma: no cover
    main()
