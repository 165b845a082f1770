"""Repo-supplied text (config strings, tensor names, server messages) never reaches the terminal as control
sequences, and never reaches a model card as HTML or as a forged hfmem marker. Through the installed entry point."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from entry import cli  # noqa: F401  (fixture)
from hfmem.render.markers import END, START
from hub_server import RepoSpec

SMALL = "Qwen/Qwen2-0.5B-Instruct"
OSC_CLIPBOARD = "\x1b]52;c;ZXZpbA==\x07"  # xterm: write "evil" to the clipboard
OSC_TITLE = "\x1b]0;pwned\x07"
CSI_8BIT = "\x9b31m"  # C1 CSI: red, on terminals that honour 8-bit controls
BIDI = "\u202e"  # right-to-left override
HTML = "<img src=x onerror=alert(1)>"
HOSTILE_TYPE = f"qwen2{OSC_CLIPBOARD}{END}{HTML}{CSI_8BIT}{BIDI}|x"
HOSTILE_ARCH = f"Qwen2ForCausalLM{OSC_TITLE}\r\n{BIDI}"
# What must never be written: C0 controls but tab/newline/CR, DEL, C1, bidi controls.
UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _hostile_folder(stub_repo, tmp_path, **config_changes):
    folder = tmp_path / "model"
    shutil.copytree(stub_repo(SMALL), folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(config_changes)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def _clean(*texts: str) -> None:
    for text in texts:
        found = UNSAFE.findall(text)
        assert not found, (found, text[:2000])


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_config_strings_are_printed_escaped(stub_repo, tmp_path, cli, fmt):
    folder = _hostile_folder(stub_repo, tmp_path, model_type=HOSTILE_TYPE, architectures=[HOSTILE_ARCH])
    out = cli([str(folder), "--format", fmt])
    assert out.returncode == 0, out.stderr
    _clean(out.stdout, out.stderr)
    assert "qwen2\\x1b]52;c;ZXZpbA==\\x07" in out.stdout  # shown, visibly, not acted on
    assert "\\u202e" in out.stdout and "\\x9b31m" in out.stdout


def test_json_keeps_the_exact_strings(stub_repo, tmp_path, cli):
    folder = _hostile_folder(stub_repo, tmp_path, model_type=HOSTILE_TYPE, architectures=[HOSTILE_ARCH])
    out = cli([str(folder), "--format", "json"])
    assert out.returncode == 0, out.stderr
    _clean(out.stdout)
    report = json.loads(out.stdout)
    assert report["architecture"]["model_type"] == HOSTILE_TYPE
    assert report["architecture"]["architectures"] == [HOSTILE_ARCH]


def test_hostile_strings_from_the_hub_and_in_errors(hub_env, stub_repo, tmp_path, cli):
    folder = _hostile_folder(stub_repo, tmp_path, model_type=HOSTILE_TYPE, architectures=[HOSTILE_ARCH])
    hub_env.add_repo("org/hostile", RepoSpec(root=folder))
    out = cli(["org/hostile", "--ctx", "4k"])
    assert out.returncode == 0, out.stderr
    _clean(out.stdout, out.stderr)
    assert "\\x1b]52" in out.stdout
    # A config value that is an error quotes it: one line, escaped.
    bad = _hostile_folder(stub_repo, tmp_path / "bad", torch_dtype=f"bf16{OSC_TITLE}\n{BIDI}")
    hub_env.add_repo("org/bad", RepoSpec(root=bad))
    out = cli(["org/bad"])
    _clean(out.stdout, out.stderr)
    if out.returncode:
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_batch_table_and_csv_escape_repo_text(stub_repo, tmp_path, cli):
    folder = _hostile_folder(stub_repo, tmp_path, model_type=HOSTILE_TYPE)
    listing = tmp_path / "repos.txt"
    listing.write_text(f"{folder}\norg/a{OSC_TITLE}b\n")
    for fmt in ("table", "csv", "markdown", "jsonl"):
        out = cli(["batch", str(listing), "--format", fmt])
        assert out.returncode == 3, out.stderr  # the second line is no repo id
        _clean(out.stdout, out.stderr)
        assert "pwned" in out.stdout


def test_tensor_names_in_warnings_are_escaped(tmp_path, cli):
    from stubs import header_bytes, load_config

    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(load_config(SMALL)))
    # An unknown dtype is counted by its offsets with one warning that names the dtype (the repo's text).
    raw = bytearray(header_bytes([("model.embed_tokens.weight", "BF16", [151936, 896])]))
    header = json.loads(raw[8:])
    end = header["model.embed_tokens.weight"]["data_offsets"][1]
    header["model.extra"] = {"dtype": f"evil{OSC_TITLE}{BIDI}", "shape": [4], "data_offsets": [end, end + 8]}
    body = json.dumps(header).encode()
    body += b" " * (-len(body) % 8)
    (folder / "model.safetensors").write_bytes(len(body).to_bytes(8, "little") + body)
    out = cli([str(folder)])
    _clean(out.stdout, out.stderr)
    assert "evil\\x1b]0;pwned\\x07\\u202e" in out.stdout + out.stderr


def test_card_escapes_html_and_markdown(stub_repo, tmp_path, cli):
    folder = _hostile_folder(stub_repo, tmp_path, model_type=HOSTILE_TYPE)
    out = cli(["card", str(folder), "--ctx", "4k", "--precisions", "bf16", "--no-training"])
    assert out.returncode == 0, out.stderr
    _clean(out.stdout)
    assert "<img" not in out.stdout and END not in out.stdout
    assert "&lt;img src=x onerror=alert(1)&gt;" in out.stdout
    assert "\\|x" in out.stdout  # no extra table cell or column either
    json_card = cli(["card", str(folder), "--format", "json", "--ctx", "4k", "--precisions", "bf16", "--no-training"])
    assert "<" not in json_card.stdout and ">" not in json_card.stdout


def test_card_update_markers_cannot_be_forged(stub_repo, tmp_path, cli):
    folder = _hostile_folder(stub_repo, tmp_path, model_type=HOSTILE_TYPE)
    readme = tmp_path / "README.md"
    readme.write_text("# Model\n\nHand-written text.\n")
    args = ["card", str(folder), "--ctx", "4k", "--precisions", "bf16", "--no-training", "--update", str(readme)]
    for _ in range(2):  # the second --update finds exactly the markers the first wrote
        out = cli(args)
        assert out.returncode == 0, out.stderr
        text = readme.read_text()
        assert text.count(START) == 1 and text.count(END) == 1, text
        assert text.index(START) < text.index(END)
        assert "<img" not in text and text.startswith("# Model\n\nHand-written text.\n")
        _clean(text)
    first = readme.read_text()
    # JSON cards, whose strings are quoted verbatim, cannot forge a marker either; Markdown after it still updates.
    weird = tmp_path / f"x{END}y"
    shutil.copytree(folder, weird)
    assert cli(["card", str(weird), "--format", "json", "--update", str(readme), "--no-training"]).returncode == 0
    text = readme.read_text()
    assert text.count(START) == 1 and text.count(END) == 1
    assert cli(args).returncode == 0
    assert readme.read_text() == first


def test_repo_id_with_a_newline_or_escape_is_one_escaped_line(cli):
    for repo in (f"org/a\nb{OSC_TITLE}", f"org/x{OSC_CLIPBOARD}", f"org/{BIDI}a"):
        out = cli([repo])
        assert out.returncode == 2, out.stderr
        assert out.stdout == ""
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("hfmem: error: invalid repo id"), out.stderr
        _clean(out.stderr)
