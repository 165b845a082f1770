"""The CLI: JSON contract, formats, errors (one line, distinct exit codes), and the installed entry point."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from hfmem.cli import main

@pytest.fixture
def runner():
    return CliRunner()


def test_json_contract(runner, fixtures_dir):
    result = runner.invoke(main, [str(fixtures_dir / "models/Qwen/Qwen2-7B-Instruct"), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert set(data) >= {"repo", "revision", "source", "architecture", "parameters", "warnings"}
    assert data["source"] == "local" and data["revision"] is None
    arch = data["architecture"]
    assert {k: arch[k] for k in ("model_type", "num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim", "vocab_size", "max_position_embeddings", "tie_word_embeddings", "layer_types")} == {
        "model_type": "qwen2", "num_layers": 28, "hidden_size": 3584, "num_attention_heads": 28, "num_kv_heads": 4,
        "head_dim": 128, "vocab_size": 152064, "max_position_embeddings": 32768, "tie_word_embeddings": False,
        "layer_types": {"full_attention": 28},
    }
    params = data["parameters"]
    assert params["total"] == params["active"] == 7_615_616_512
    assert params["stored_bytes"] == 2 * 7_615_616_512
    assert params["by_dtype"] == {"BF16": 7_615_616_512}
    assert params["by_component"]["lm_head"] == 152064 * 3584
    assert data["warnings"] == []


def test_api_and_cli_json_identical(runner, fixtures_dir):
    import hfmem

    path = str(fixtures_dir / "models/Qwen/Qwen2-7B-Instruct")
    result = runner.invoke(main, [path, "--format", "json"])
    assert json.loads(result.output) == hfmem.analyze(path).to_dict()


@pytest.mark.parametrize("fmt, marker", [("table", "By component"), ("markdown", "| component")])
def test_text_formats(runner, fixtures_dir, fmt, marker):
    result = runner.invoke(main, [str(fixtures_dir / "models/Qwen/Qwen2-7B-Instruct"), "--format", fmt])
    assert result.exit_code == 0
    assert marker in result.output and "7,615,616,512" in result.output


def test_missing_local_path_is_one_line(runner, tmp_path):
    result = runner.invoke(main, [str(tmp_path / "nope")])
    assert result.exit_code == 16
    assert result.output.count("\n") == 1 and "no such file" in result.output


def test_folder_without_config(runner, tmp_path):
    result = runner.invoke(main, [str(tmp_path)])
    assert result.exit_code == 15 and "config.json" in result.output


def test_folder_without_safetensors(runner, tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "llama"}')
    (tmp_path / "pytorch_model.bin.index.json").write_text('{"metadata": {"total_size": 123456}, "weight_map": {}}')
    result = runner.invoke(main, [str(tmp_path)])
    assert result.exit_code == 14
    assert "123456" in result.output and "approximate" in result.output


def test_malformed_header_is_clear(runner, tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "llama"}')
    (tmp_path / "model.safetensors").write_bytes((10**12).to_bytes(8, "little") + b"{}")
    result = runner.invoke(main, [str(tmp_path)])
    assert result.exit_code == 17 and "model.safetensors" in result.output and "Traceback" not in result.output


def test_installed_entry_point(tmp_path, fixtures_dir):
    exe = shutil.which("hfmem", path=os.path.dirname(sys.executable)) or shutil.which("hfmem")
    assert exe, "the hfmem console script is installed with the package"
    ok = subprocess.run([exe, str(fixtures_dir / "models/Qwen/Qwen2-7B-Instruct"), "--format", "json"], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["parameters"]["total"] == 7_615_616_512
    bad = subprocess.run([exe, str(tmp_path / "missing")], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 16 and bad.stdout == "" and len(bad.stderr.strip().splitlines()) == 1


def test_help_does_not_import_heavy_modules():
    code = "import sys; from hfmem.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit: pass\nprint(sorted(m for m in ('torch', 'transformers', 'huggingface_hub') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_api_and_cli_json_identical_with_every_section(runner, fixtures_dir):
    import hfmem

    path = str(fixtures_dir / "models/Qwen/Qwen2-7B-Instruct")
    args = [path, "--ctx", "4k,32k", "--gpu", "4090", "--dtype", "int4", "--train", "lora", "--seq", "1024", "--format", "json"]
    cli = json.loads(runner.invoke(main, args).output)
    api = hfmem.analyze(path, ctx="4k,32k", gpu="4090", precision="int4", train="lora", seq=1024).to_dict()
    assert cli == api
    assert [k["total_bytes"] for k in cli["kv_cache"]] == [4096 * 57_344, 32_768 * 57_344]
    assert cli["inference"]["gpu"]["key"] == "rtx4090" and cli["inference"]["fits"] is True
    assert set(cli["training"]) == {"lora"} and cli["training"]["lora"]["trainable_parameters"] == 40_370_176
