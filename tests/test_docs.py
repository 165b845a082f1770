"""Every CLI command and every option is documented in README.md or docs/ (as sqlite-utils' tests/test_docs.py does).

The click command tree of `hfmem.cli.main` is walked (the group and every sub-command), so a new command or option
fails here until it is written up. A command counts as documented when `hfmem NAME` appears; an option when its
flag appears as a whole word (`--gpu` is not satisfied by `--gpu-util`), `--no-...` secondary flags included.
"""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from hfmem.cli import main

ROOT = Path(__file__).resolve().parent.parent


def docs_text() -> str:
    """README.md and every Markdown file under docs/, concatenated."""
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return "\n".join(p.read_text(encoding="utf-8") for p in paths)


def walk(command: click.Command, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    """(path, command) for the group and every sub-command, depth first, in name order."""
    found = [(path, command)]
    if isinstance(command, click.Group):
        for name in sorted(command.commands):
            found.extend(walk(command.commands[name], (*path, name)))
    return found


def long_flags(command: click.Command) -> list[str]:
    """Every `--flag` of a command, the `--no-...` halves of boolean switches included (short flags like -h are not)."""
    ctx = click.Context(command, info_name="hfmem")
    flags: list[str] = []
    for param in command.get_params(ctx):
        if isinstance(param, click.Option):
            flags.extend(f for f in (*param.opts, *param.secondary_opts) if f.startswith("--"))
    return flags


def flag_pattern(flag: str) -> re.Pattern[str]:
    # A whole flag: not preceded by a word character or '-', not followed by one (so '--gpu' != '--gpu-util').
    return re.compile(r"(?<![\w-])" + re.escape(flag) + r"(?![\w-])")


def missing_flags(flags: list[str], text: str) -> list[str]:
    return [flag for flag in flags if not flag_pattern(flag).search(text)]


def missing_commands(names: list[str], text: str) -> list[str]:
    return [name for name in names if not re.search(r"\bhfmem " + re.escape(name) + r"(?![\w-])", text)]


TREE = walk(main)
COMMANDS = [" ".join(path) for path, _ in TREE if path]
OPTIONS = sorted({(" ".join(path) or "hfmem", flag) for path, cmd in TREE for flag in long_flags(cmd)})


@pytest.fixture(scope="module")
def text() -> str:
    return docs_text()


def test_tree_is_walked():
    # The walk must reach every sub-command the CLI registers; an empty parametrisation would pass vacuously.
    assert set(COMMANDS) >= {"analyze", "check", "card", "compare", "batch"}
    assert ("analyze", "--kv-dtype") in OPTIONS and ("analyze", "--no-grad-checkpointing") in OPTIONS
    assert ("hfmem", "--version") in OPTIONS and ("card", "--no-training") in OPTIONS


@pytest.mark.parametrize("command", COMMANDS)
def test_command_is_documented(text, command):
    assert not missing_commands([command], text), f"`hfmem {command}` is not in README.md or docs/"


@pytest.mark.parametrize("command, flag", OPTIONS, ids=[f"{c}:{f}" for c, f in OPTIONS])
def test_option_is_documented(text, command, flag):
    assert not missing_flags([flag], text), f"{flag} (hfmem {command}) is not documented in README.md or docs/"


def test_helpers_report_what_is_missing(text):
    """The same helpers the tests use do fail: a made-up option and command are reported, a prefix does not count."""
    assert missing_flags(["--made-up-option-xyz"], text) == ["--made-up-option-xyz"]
    assert missing_commands(["made-up-command-xyz"], text) == ["made-up-command-xyz"]
    assert missing_flags(["--gpu"], "use --gpu-util 0.9") == ["--gpu"]
    assert missing_flags(["--no-training"], "`--no-training` leaves it out") == []
    assert missing_commands(["check"], "hfmem checker") == ["check"]
