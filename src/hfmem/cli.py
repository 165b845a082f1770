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


@main.command("analyze")
@click.argument("model")
@common_source_options
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("--gguf-file", default=None, help="GGUF repos: the .gguf file to analyse (first shard for split files).")
@click.option("--quant", default=None, help="GGUF repos: pick the file by quant type, e.g. Q4_K_M.")
def analyze_cmd(
    model: str, revision: str | None, token: str | None, timeout: float | None, debug: bool, fmt: str,
    gguf_file: str | None, quant: str | None,
) -> None:  # fmt: skip
    """Architecture, exact parameters and stored bytes of MODEL (repo id, folder, or .gguf file)."""

    def body() -> None:
        import json

        from .analysis import analyze
        from .errors import NoSafetensors
        from .render import to_json, to_text

        if _wants_gguf(model, gguf_file, quant):
            report = _analyze_gguf(model, gguf_file, quant, revision, token, timeout)
            click.echo(json.dumps(report.to_dict(), indent=2) if fmt == "json" else report.to_text(fmt))
            return
        try:
            report = analyze(model, revision=revision, token=token, timeout=timeout)
        except NoSafetensors as exc:
            if "GGUF" not in exc.message:
                raise
            report = _analyze_gguf(model, gguf_file, quant, revision, token, timeout)
            click.echo(json.dumps(report.to_dict(), indent=2) if fmt == "json" else report.to_text(fmt))
            return
        click.echo(to_json(report) if fmt == "json" else to_text(report, fmt))

    run_guarded(debug, body)


def _wants_gguf(model: str, gguf_file: str | None, quant: str | None) -> bool:
    import os

    if gguf_file or quant or model.lower().endswith(".gguf"):
        return True
    if os.path.isdir(model):
        return not os.path.exists(os.path.join(model, "config.json")) and any(
            name.endswith(".gguf") for name in os.listdir(model)
        )
    return model.lower().endswith("gguf") and not os.path.exists(model)


def _analyze_gguf(model: str, gguf_file: str | None, quant: str | None, revision: str | None, token: str | None, timeout: float | None):
    from .gguf_model import analyze_gguf

    return analyze_gguf(model, gguf_file=gguf_file, quant=quant, revision=revision, token=token, timeout=timeout)


if __name__ == "__main__":  # pragma: no cover
    main()
