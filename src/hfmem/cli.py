"""Command line: a thin layer over the Python API. Heavy imports happen inside commands, never at start-up."""

from __future__ import annotations

import sys
import traceback
from typing import Any, Callable

import click

from . import __version__
from .errors import HfmemError, redact

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
    if debug:  # show huggingface_hub's own retry warnings, which hfmem otherwise keeps off stderr
        from . import retry

        retry.show_client_logs = True
    try:
        return body()
    except HfmemError as exc:
        if debug:
            traceback.print_exc()
        click.echo(f"hfmem: error: {redact(exc.message)}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("hfmem: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:
        if debug:
            raise
        click.echo(f"hfmem: internal error: {type(exc).__name__}: {redact(str(exc))[:200]} (run with --debug for details)", err=True)
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
def analyze_cmd(model: str, revision: str | None, token: str | None, timeout: float | None, debug: bool, fmt: str) -> None:
    """Architecture, exact parameters and stored bytes of MODEL (repo id or folder)."""

    def body() -> None:
        from .analysis import analyze
        from .render import to_json, to_text

        report = analyze(model, revision=revision, token=token, timeout=timeout)
        click.echo(to_json(report) if fmt == "json" else to_text(report, fmt))

    run_guarded(debug, body)


if __name__ == "__main__":  # pragma: no cover
    main()
