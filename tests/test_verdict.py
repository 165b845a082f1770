"""The answer first: with --gpu the first lines say fits or not, the margin, the longest context, the concurrency and
the smallest setup; the default is short (<= 40 lines for a 7B at 32k on a 4090); -v shows everything the output
showed before the verdict existed (pinned copies of those outputs, tests/golden/verdict/); --brief is one line, the
verdict `hfmem check` prints. The README's first example is the real output. Through the installed entry point."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from entry import cli  # noqa: F401  (fixture)
from hub_server import RepoSpec

ROOT = Path(__file__).resolve().parent.parent
BEFORE = Path(__file__).parent / "golden" / "verdict"
QWEN = "Qwen/Qwen2-7B-Instruct"
LOCAL = "fixtures/models/Qwen/Qwen2-7B-Instruct"


def test_default_output_answers_first_and_is_short(cli):  # noqa: F811
    out = cli([LOCAL, "--ctx", "32k", "--gpu", "4090"], env={"PWD": str(ROOT)})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) <= 40
    assert lines[0].startswith(f"{LOCAL}: FITS on 1 x RTX 4090 24GB at 32,768 tokens x 1")
    keys = [line.split()[0] for line in lines[1:5]]
    assert keys == ["margin", "longest", "max", "smallest"]
    # the numbers of the JSON contract, in the verdict
    data = json.loads(cli([LOCAL, "--ctx", "32k", "--gpu", "4090", "--format", "json"]).stdout)["inference"]
    assert f"{data['margin_bytes'] / 2**30:.2f} GiB to spare" in lines[1]
    assert f"{data['max_context']:,}" in lines[2] and f"{data['concurrency']:.2f} sequences" in lines[3]
    assert "Weights by precision" not in out.stdout and "Catalog" not in out.stdout  # -v only


@pytest.mark.parametrize("name, args", [
    ("qwen2-7b-gpu", [QWEN, "--ctx", "32k", "--gpu", "4090"]),
    ("deepseek-v2-lite-tp", ["deepseek-ai/DeepSeek-V2-Lite-Chat", "--ctx", "32k", "--gpu", "h100", "--gpus", "2"]),
])
def test_verbose_shows_everything_shown_before(hub_env, stub_repo, cli, name, args):  # noqa: F811
    hub_env.add_repo(args[0], RepoSpec(root=stub_repo(args[0])))
    out = cli([*args, "-v"])
    assert out.returncode == 0, out.stderr
    before = (BEFORE / f"{name}-before-verdict.txt").read_text().splitlines()
    # the local-folder title of the pinned output is the repo id's "(hub)" title here
    before = [line.replace(f"{args[0]} (local)", f"{args[0]} @ ") for line in before]
    shown = out.stdout.splitlines()
    at = 0
    for line in before:
        if line.startswith(f"{args[0]} @ "):
            line = next(s for s in shown if s.startswith(f"{args[0]} @ "))
        while at < len(shown) and shown[at] != line:
            at += 1
        assert at < len(shown), f"-v lost the line {line!r}"
    assert shown[0].startswith(f"{args[0]}: FITS on ")


def test_brief_is_one_line_the_check_verdict(hub_env, stub_repo, cli):  # noqa: F811
    hub_env.add_repo(QWEN, RepoSpec(root=stub_repo(QWEN)))
    brief = cli([QWEN, "--ctx", "32k", "--gpu", "3060", "--brief"])
    check = cli(["check", QWEN, "--ctx", "32k", "--gpu", "3060"])
    assert brief.returncode == 0 and len(brief.stdout.splitlines()) == 1
    fit = re.sub(r"; download .*$", "", check.stdout.strip())  # check adds the disk after the GPU verdict
    assert brief.stdout.startswith(fit.split("; smallest setup")[0])
    assert brief.stdout.strip().endswith("smallest setup: 2 x RTX 3060 12GB (TP 2)")
    clash = cli([QWEN, "--brief", "--format", "json"])
    assert clash.returncode == 2 and "--brief" in clash.stderr


def _examples(path: Path) -> list[tuple[str, list[str]]]:
    """(command, the output lines shown) of each `$ hfmem fixtures/...` in a fenced block of a Markdown file."""
    found = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", path.read_text(), re.S):
        lines = block.splitlines()
        for i, line in enumerate(lines):
            if line.startswith("$ hfmem ") and "fixtures/" in line and "echo" not in line and "&&" not in line:
                shown = []
                for out in lines[i + 1:]:
                    if out.startswith("$ "):
                        break
                    shown.append(out)
                found.append((line[2:], shown))
    return found


@pytest.mark.parametrize("doc", ["README.md", "docs/planner.md", "docs/cards.md"])
def test_doc_examples_are_real_output(cli, doc):  # noqa: F811
    """Each shown line is the real output's, in order ("..." stands for lines left out, "(...)" for a cut tail)."""
    examples = _examples(ROOT / doc)
    assert len(examples) >= 1
    for command, shown in examples:
        real = cli(command.split()[1:]).stdout.splitlines()
        at = 0
        for line in shown:
            if line.strip() == "...":
                continue
            pattern = re.escape(line).replace(re.escape("(...)"), ".*").replace(re.escape("..."), ".*")
            while at < len(real) and not re.fullmatch(pattern, real[at]):
                at += 1
            assert at < len(real), f"{doc}: `{command}` does not print {line!r}"
            at += 1


def test_the_plans_notes_are_in_the_text(cli):  # noqa: F811
    """The inference plan's notes (JSON ``inference.notes``) are printed, each once and in order, by -v and by the
    output without --gpu, and counted in the default view's hint: on ROCm, the note that the pool can be smaller."""
    rocm = [LOCAL, "--ctx", "32k", "--gpu", "mi300x", "--engine", "vllm"]
    for args, shown in ((rocm, [*rocm, "-v"]), ([LOCAL, "--ctx", "32k", "--engine", "vllm"],) * 2):
        notes = json.loads(cli([*args, "--format", "json"]).stdout)["inference"]["notes"]
        lines = cli(shown).stdout.splitlines()
        assert [line.removeprefix("note: ") for line in lines if line.startswith("note: ")] == notes
        assert len(notes) >= 3
    rocm_notes = json.loads(cli([*rocm, "--format", "json"]).stdout)["inference"]["notes"]
    assert sum(n.startswith("vLLM on ROCm") for n in rocm_notes) == 1
    short = cli(rocm).stdout
    assert "note: " not in short and short.rstrip().endswith(f"the plan's {len(rocm_notes)} notes)")


def test_pool_caveats_are_in_the_verdict(cli):  # noqa: F811
    """A note whose logs put vLLM's pool more than 2 % away (vllm_versions.POOL_CAVEATS: ROCm releases measuring
    loading as total - free) is part of the answer: a "caveat" row of the verdict in the default view and with -v,
    printed once, and not counted among the notes -v adds."""
    from hfmem.memory.vllm_versions import ROCM_NOTE

    args = [LOCAL, "--ctx", "32k", "--gpu", "mi300x", "--engine", "vllm", "--vllm-version", "0.18"]
    notes = json.loads(cli([*args, "--format", "json"]).stdout)["inference"]["notes"]
    assert ROCM_NOTE in notes
    short = cli(args).stdout.splitlines()
    verdict = short[: short.index("")]
    assert [line.split(None, 1)[1] for line in verdict if line.lstrip().startswith("caveat ")] == [ROCM_NOTE]
    rest = len(notes) - 1
    assert short[-1].endswith(f"the plan's {rest} note{'s' if rest != 1 else ''})")
    verbose = cli([*args, "-v"]).stdout
    assert verbose.count(ROCM_NOTE) == 1
    assert verbose.count("note: ") == len(notes) - 1
    default = json.loads(cli([LOCAL, "--ctx", "32k", "--gpu", "mi300x", "--engine", "vllm", "--format", "json"]).stdout)
    assert ROCM_NOTE not in default["inference"]["notes"]  # 0.34 measures loading as CUDA does: no caveat
