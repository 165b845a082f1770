"""hfmem check: the GPU fit and the disk are separate verdicts with separate exit codes (1 GPU, 4 disk, 5 both); the
disk is checked only with --disk; the download counted is what serving fetches (the safetensors and the files beside
them), not the other formats a repo also carries. Through the installed entry point on the local Hub, with real
file sizes from the served tree (sparse files)."""

from __future__ import annotations

import os
import shutil

from entry import cli  # noqa: F401  (fixture)
from hub_server import RepoSpec

from hfmem.hub.download import select
from hfmem.units import fmt_bytes

QWEN = "Qwen/Qwen2-7B-Instruct"


def _repo_with_other_formats(stub_repo, tmp_path):
    root = tmp_path / "repo"
    shutil.copytree(stub_repo(QWEN), root)
    (root / "original").mkdir()
    for path, size in (("pytorch_model-00001-of-00001.bin", 48 * 2**20), ("original/consolidated.00.pth", 32 * 2**20),
                       ("model-q4.gguf", 16 * 2**20)):
        with open(root / path, "wb") as f:
            f.truncate(size)  # sparse: the tree lists its size, no disk is used
    return root


def test_disk_is_opt_in_and_separate(hub_env, stub_repo, tmp_path, cli):  # noqa: F811
    root = _repo_with_other_formats(stub_repo, tmp_path)
    hub_env.add_repo(QWEN, RepoSpec(root=root))
    gpu_only = cli(["check", QWEN, "--gpu", "3060", "--ctx", "32k"])
    assert gpu_only.returncode == 1 and len(gpu_only.stdout.splitlines()) == 1 and "disk" not in gpu_only.stdout
    assert not any("/tree/" in r.path for r in hub_env.requests)  # no listing without --disk
    fits = cli(["check", QWEN, "--gpu", "h100", "--ctx", "32k", "--disk", str(tmp_path)])
    assert fits.returncode == 0, fits.stderr
    gpu, disk = fits.stdout.splitlines()
    assert ": fits:" in gpu and ": disk: fits: download " in disk and f"free at {tmp_path}" in disk
    # the download is the safetensors and small files, exactly; the 96 MiB of other formats are named, not counted
    sizes = {os.path.relpath(os.path.join(d, f), root): os.path.getsize(os.path.join(d, f))
             for d, _, files in os.walk(root) for f in files}
    needed = sum(s for p, s in sizes.items() if not p.endswith((".bin", ".pth", ".gguf")))
    shown = f"download {fmt_bytes(needed)};"
    assert shown in disk and "a full snapshot adds 96.00 MiB in 3 files of other formats" in disk


def test_exit_codes_say_which_failed(hub_env, stub_repo, tmp_path, cli):  # noqa: F811
    hub_env.add_repo(QWEN, RepoSpec(root=_repo_with_other_formats(stub_repo, tmp_path)))
    tiny = tmp_path / "tiny"
    tiny.mkdir()
    quantized = cli(["check", QWEN, "--gpu", "3060", "--ctx", "32k", "--dtype", "int4", "--disk", str(tiny)])
    assert quantized.returncode == 0, quantized.stdout + quantized.stderr
    assert "the stored BF16 weights: --dtype int4 quantizes them at load" in quantized.stdout
    neither = cli(["check", QWEN, "--gpu", "3060", "--ctx", "32k", "--disk", str(tiny)])
    assert neither.returncode == 1  # the disk has room: only the GPU fails


def test_selection_rules():
    files = [("model-00001-of-00002.safetensors", 5 * 2**30), ("model.safetensors.index.json", 30_000),
             ("pytorch_model.bin", 10 * 2**30), ("original/consolidated.00.pth", 16 * 2**30), ("tokenizer.json", 9_000_000),
             ("onnx/model.onnx_data", 2**30), ("README.md", 4000)]
    plan = select(files)
    assert plan.needed == ["model-00001-of-00002.safetensors", "model.safetensors.index.json", "tokenizer.json", "README.md"]
    assert plan.skipped_bytes == 27 * 2**30
    # a repo with only .bin weights needs them
    assert select([("pytorch_model.bin", 2**30), ("config.json", 700)]).needed_bytes == 2**30 + 700
