"""Command line: a thin layer over the Python API. Heavy imports happen inside commands, never at start-up."""

from __future__ import annotations

import sys
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
            raise
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


def training_options(f: Callable) -> Callable:
    """Options of the training section (used with --train; see docs/training.md)."""
    opts = [
        click.option("--train", type=click.Choice(["full", "lora", "qlora", "all"]), is_flag=False, flag_value="all", default=None,
                     help="Add training memory per GPU: full, lora, qlora or all (the default when --train has no value)."),
        click.option("--seq", type=click.IntRange(min=1), default=2048, show_default=True, help="Training sequence length."),
        click.option("--micro-batch", type=click.IntRange(min=1), default=1, show_default=True, help="Sequences per GPU per step."),
        click.option("--grad-checkpointing/--no-grad-checkpointing", default=None, help="Default: off for full/lora, on for qlora."),
        click.option("--optimizer", type=click.Choice(["adamw", "adamw-8bit", "paged-adamw-8bit", "adafactor", "sgd", "sgd-momentum", "lion"]), default="adamw", show_default=True),
        click.option("--precision", type=click.Choice(["mixed-bf16", "mixed-fp16", "bf16", "fp32", "amp-bf16"]), default="mixed-bf16", show_default=True,
                     help="mixed = fp32 master + 16-bit compute (ZeRO); bf16 = everything bf16; amp-bf16 = fp32 model under autocast."),
        click.option("--lora-rank", type=click.IntRange(min=1), default=16, show_default=True),
        click.option("--lora-targets", default="all-linear", show_default=True, help="all-linear or module names, e.g. q_proj,v_proj (PEFT semantics)."),
        click.option("--dora", is_flag=True, help="DoRA: adds a magnitude vector per adapted Linear."),
        click.option("--gpus", type=click.IntRange(min=1), default=1, show_default=True, help="Data-parallel GPUs."),
        click.option("--zero", type=click.Choice(["0", "1", "2", "3"]), default="0", show_default=True, help="DeepSpeed ZeRO stage."),
        click.option("--fsdp", type=click.Choice(["full", "grad-op"]), default=None, help="FSDP sharding (full ~ ZeRO-3, grad-op ~ ZeRO-2)."),
        click.option("--offload", type=click.Choice(["none", "optimizer", "optimizer+params"]), default="none", show_default=True),
        click.option("--attn", type=click.Choice(["sdpa", "eager", "flash"]), default="sdpa", show_default=True, help="Attention implementation."),
        click.option("--chunked-loss", is_flag=True, help="Fused/chunked cross-entropy (Liger-style) instead of HF's full fp32 logits."),
        click.option("--qlora-upcast/--no-qlora-upcast", default=True, show_default=True,
                     help="prepare_model_for_kbit_training casts non-4-bit modules to fp32."),
        click.option("--gpu", default=None, help="Fit against one GPU (catalog name or size like 24GB) instead of the catalog."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


@main.command("analyze")
@click.argument("model")
@common_source_options
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@training_options
def analyze_cmd(model: str, revision: str | None, token: str | None, timeout: float | None, debug: bool, fmt: str, train: str | None, **train_opts: Any) -> None:
    """Architecture, exact parameters and stored bytes of MODEL (repo id or folder)."""

    def body() -> None:
        from .analysis import analyze
        from .render import to_json, to_text

        report = analyze(model, revision=revision, token=token, timeout=timeout)
        if train:
            from .training import METHODS, TrainingSettings, estimate_all

            opts = dict(train_opts, zero=int(train_opts["zero"]))
            settings = TrainingSettings(**opts)
            methods = METHODS if train == "all" else (train,)
            report.extra["training"] = estimate_all(report, settings, methods)
        click.echo(to_json(report) if fmt == "json" else to_text(report, fmt))

    run_guarded(debug, body)


if __name__ == "__main__":  # pragma: no cover
    main()
