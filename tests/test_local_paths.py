"""Local folders and files keep their promises whatever is in them (docs/reliability.md, exit 16): regular files
only (a FIFO must not hang, /dev/zero must not be read), symlinks of files found in a folder stay inside it, and
whatever cannot be read is one line naming it. Safetensors folders and GGUF files/folders alike, through the
installed entry point."""

from __future__ import annotations

import os
import time

import pytest

from entry import cli  # noqa: F401  (fixture)
from stubs import gguf_bytes

SMALL = "Qwen/Qwen2-0.5B-Instruct"
LIMIT = 60  # a hang is what these tests catch: far above any honest run, far below forever


def _one_line(out, code: int, *needles: str) -> str:
    assert out.returncode == code, (out.returncode, out.stdout[-500:], out.stderr)
    assert out.stdout == "" and "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hfmem: error: "), out.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def test_minimal_gguf_is_read(tmp_path, cli):
    (tmp_path / "m-F32.gguf").write_bytes(gguf_bytes())
    out = cli([str(tmp_path), "--format", "json"], timeout=LIMIT)
    assert out.returncode == 0, out.stderr
    assert '"total": 128' in out.stdout


def test_gguf_fifo_in_a_folder_does_not_hang(tmp_path, cli):
    os.mkfifo(tmp_path / "m-Q4_K_M.gguf")
    started = time.monotonic()
    _one_line(cli([str(tmp_path)], timeout=LIMIT), 16, "'m-Q4_K_M.gguf' is a FIFO, not a regular file")
    _one_line(cli([str(tmp_path / "m-Q4_K_M.gguf")], timeout=LIMIT), 16, "is a FIFO")
    assert time.monotonic() - started < LIMIT


def test_gguf_symlink_out_of_the_folder_is_refused(tmp_path, cli):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "real.gguf").write_bytes(gguf_bytes())
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "m.gguf").symlink_to(outside / "real.gguf")
    _one_line(cli([str(folder)], timeout=LIMIT), 16, "'m.gguf' points outside the model folder")
    zero = tmp_path / "zero"
    zero.mkdir()
    (zero / "m.gguf").symlink_to("/dev/zero")
    _one_line(cli([str(zero)], timeout=LIMIT), 16, "points outside the model folder")
    # Named directly, a link is the user's choice; /dev/zero is still no regular file.
    _one_line(cli([str(zero / "m.gguf")], timeout=LIMIT), 16, "is a character device, not a regular file")
    assert cli([str(folder / "m.gguf"), "--format", "json"], timeout=LIMIT).returncode == 0
    # A link inside the folder is fine.
    inside = tmp_path / "inside"
    (inside / "blobs").mkdir(parents=True)
    (inside / "blobs" / "x").write_bytes(gguf_bytes())
    (inside / "m.gguf").symlink_to(inside / "blobs" / "x")
    assert cli([str(inside), "--format", "json"], timeout=LIMIT).returncode == 0


def test_gguf_directory_and_unreadable_are_exit_16(tmp_path, cli):
    folder = tmp_path / "model"
    (folder / "x.gguf").mkdir(parents=True)
    _one_line(cli([str(folder)], timeout=LIMIT), 16, "'x.gguf' is a directory, not a regular file")
    _one_line(cli([str(folder / "x.gguf")], timeout=LIMIT), 16, "a directory, not a GGUF file")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "m.gguf").symlink_to(broken / "gone.gguf")
    _one_line(cli([str(broken)], timeout=LIMIT), 16, "m.gguf")
    _one_line(cli([str(tmp_path / "nothing.gguf")], timeout=LIMIT), 16, "no such file or directory")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a mode-000 file anyway")
def test_gguf_unreadable_file_is_exit_16(tmp_path, cli):
    path = tmp_path / "m.gguf"
    path.write_bytes(gguf_bytes())
    path.chmod(0)
    try:
        _one_line(cli([str(tmp_path)], timeout=LIMIT), 16, "cannot read 'm.gguf' (Permission denied)")
    finally:
        path.chmod(0o600)


def test_safetensors_fifo_is_named_as_such_and_does_not_hang(stub_repo, tmp_path, cli):
    import shutil

    folder = tmp_path / "model"
    folder.mkdir()
    shutil.copy(stub_repo(SMALL) / "config.json", folder / "config.json")
    os.mkfifo(folder / "model.safetensors")
    _one_line(cli([str(folder)], timeout=LIMIT), 16, "'model.safetensors' is a FIFO, not a regular file")
    # A FIFO config.json or index is the same, not "no config.json" and not a hang.
    other = tmp_path / "other"
    other.mkdir()
    os.mkfifo(other / "config.json")
    _one_line(cli([str(other)], timeout=LIMIT), 16, "'config.json' is a FIFO")
    sharded = tmp_path / "sharded"
    shutil.copytree(stub_repo("Qwen/Qwen2-7B-Instruct"), sharded)
    (sharded / "model.safetensors.index.json").unlink()
    os.mkfifo(sharded / "model.safetensors.index.json")
    _one_line(cli([str(sharded)], timeout=LIMIT), 16, "'model.safetensors.index.json' is a FIFO")
    # A directory where a shard should be.
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors").mkdir()
    _one_line(cli([str(folder)], timeout=LIMIT), 16, "'model.safetensors' is a directory")
