"""Security: a token never appears in any output or cache file; repo code never runs; ids and revisions are
validated before use; local paths are never followed outside the folder named; declared sizes never allocate."""

from __future__ import annotations

import json
import os
import shutil
import tracemalloc
from pathlib import Path

import pytest

import hfmem
from entry import SRC, cli  # noqa: F401  (fixture)
from hfmem import errors
from hfmem.hub.remote import check_revision
from hub_server import RepoSpec
from stubs import header_bytes

QWEN = "Qwen/Qwen2-7B-Instruct"
SMALL = "Qwen/Qwen2-0.5B-Instruct"
SENTINEL = "hf_SENTINELtoken0123456789abcdefXYZ"


def _tree_contains(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and needle in p.read_bytes()]


def test_token_sentinel_never_in_any_output_or_cache(hub_env, stub_repo, cli, tmp_path):
    hub_env.add_repo(QWEN, RepoSpec(root=stub_repo(QWEN), gated=True, allowed_tokens={SENTINEL}))
    hub_env.add_repo("corp/private", RepoSpec(root=stub_repo(SMALL), private=True, allowed_tokens={"hf_other"}))
    runs = [
        ([QWEN, "--format", "json", "--debug"], {"HF_TOKEN": SENTINEL}, 0),  # a success is slow (imports): one
        (["corp/private", "--debug", "--token", SENTINEL], {}, 11),
    ]
    outputs = []
    for args, env, code in runs:
        out = cli(args, env=env)
        assert out.returncode == code, (args, out.stderr)
        outputs += [out.stdout, out.stderr]
    # Faults, so the retry and error paths print too.
    hub_env.fail_rate, hub_env.fail_kinds = 1.0, ("500", "drop")
    out = cli([QWEN, "--debug", "--timeout", "2", "--token", SENTINEL])
    assert out.returncode in (19, 21), out.stderr
    outputs += [out.stdout, out.stderr]
    hub_env.fail_rate = 0.0
    hub_env.stall_paths, hub_env.stall_s = {"/"}, 30
    out = cli([QWEN, "--debug", "--timeout", "1"], env={"HF_TOKEN": SENTINEL})
    assert out.returncode == 19, out.stderr
    outputs += [out.stdout, out.stderr]
    hub_env.stall_paths = set()

    assert any(r.has_auth for r in hub_env.requests), "the token was really sent"
    for text in outputs:
        assert SENTINEL not in text and "SENTINEL" not in text
    # Nothing hfmem or the client wrote to disk holds it (the cache and HF_HOME are the test's own).
    assert _tree_contains(Path(os.environ["HF_HOME"]), b"SENTINEL") == []
    # The Python API: reports and errors.
    report = hfmem.analyze(QWEN, token=SENTINEL)
    assert "SENTINEL" not in json.dumps(report.to_dict()) and "SENTINEL" not in repr(report)
    for ref, revision, error in (("corp/private", None, errors.RepoNotFound), ("nobody/nothing", None, errors.RepoNotFound),
                                 (QWEN, "nope", errors.RevisionNotFound)):  # fmt: skip
        with pytest.raises(error) as info:
            hfmem.analyze(ref, revision=revision, token=SENTINEL)
        assert "SENTINEL" not in str(info.value)


def test_redact_scrubs_token_shapes():
    from hfmem.errors import redact

    assert redact(f"boom {SENTINEL} x") == "boom *** x"
    assert redact("key=secret-value", "secret-value") == "key=***"


def test_repo_code_never_runs(tmp_path, stub_repo, cli):
    """A config with auto_map and custom code files: analysed from config and headers; the code is never imported."""
    marker = tmp_path / "PWNED"
    evil = f"import pathlib; pathlib.Path({str(marker)!r}).write_text('ran')\n"
    for model_type in ("qwen2", "totally_custom_arch"):
        folder = tmp_path / model_type
        shutil.copytree(stub_repo(SMALL), folder)
        config = json.loads((folder / "config.json").read_text())
        config.update(
            model_type=model_type,
            auto_map={"AutoConfig": "configuration_evil.EvilConfig", "AutoModelForCausalLM": "modeling_evil.EvilModel"},
        )
        (folder / "config.json").write_text(json.dumps(config))
        (folder / "configuration_evil.py").write_text(evil)
        (folder / "modeling_evil.py").write_text(evil)
        (folder / "__init__.py").write_text(evil)
        report = hfmem.analyze(str(folder))
        assert report.parameters.total == 494_032_768
        assert any("auto_map" in n and "not run" in n for n in report.notes)
    out = cli([str(folder), "--format", "json"])
    assert out.returncode == 0 and json.loads(out.stdout)["parameters"]["total"] == 494_032_768, out.stderr
    assert not marker.exists()


def test_source_never_passes_trust_remote_code():
    sources = sorted((SRC / "hfmem").rglob("*.py"))
    assert len(sources) > 20, "the package's modules are found"
    for path in sources:
        text = path.read_text()
        assert "trust_remote_code=True" not in text.replace(" ", ""), path
        assert "trust_remote_code" not in text.replace("never `trust_remote_code`", ""), path


@pytest.mark.parametrize(
    "revision",
    ["../../../../tmp/x", "a/../b", "/abs", "main\n", "x\x00", "with space", "a:b", "a~1", "^", "refs/heads/", ""],
)
def test_hostile_revisions_are_refused_before_use(revision):
    with pytest.raises(errors.UsageError):
        check_revision(revision)


@pytest.mark.parametrize("revision", ["main", "v1.0", "refs/pr/4", "a" * 40, "release/2024-01", "feature_x"])
def test_ordinary_revisions_pass(revision):
    check_revision(revision)


@pytest.mark.parametrize("repo_id", ["../etc/passwd", "a/b/c/d", "org/name?x=1", "org/" + "n" * 200, "org/na me", "org//x"])
def test_hostile_repo_ids_are_refused_before_any_request(hub_env, repo_id):
    with pytest.raises(errors.HfmemError):
        hfmem.analyze(repo_id)
    assert hub_env.requests == []


def test_local_symlinks_outside_the_folder_are_not_followed(tmp_path, stub_repo):
    outside = tmp_path / "outside"
    outside.mkdir()
    secret_cfg = outside / "config.json"
    secret_cfg.write_text(json.dumps(json.loads((stub_repo(SMALL) / "config.json").read_text())))
    (outside / "model.safetensors").write_bytes((stub_repo(SMALL) / "model.safetensors").read_bytes())

    cfg_link = tmp_path / "cfg_link"
    shutil.copytree(stub_repo(SMALL), cfg_link)
    (cfg_link / "config.json").unlink()
    (cfg_link / "config.json").symlink_to(secret_cfg)
    with pytest.raises(errors.LocalPathError, match="outside"):
        hfmem.analyze(str(cfg_link))

    shard_link = tmp_path / "shard_link"
    shutil.copytree(stub_repo(SMALL), shard_link)
    (shard_link / "model.safetensors").unlink()
    (shard_link / "model.safetensors").symlink_to(outside / "model.safetensors")
    with pytest.raises(errors.LocalPathError, match="outside"):
        hfmem.analyze(str(shard_link))

    escape = tmp_path / "escape"
    shutil.copytree(stub_repo(SMALL), escape)
    (escape / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": "../outside/model.safetensors"}}))
    with pytest.raises(errors.MalformedHeader, match="leaves the model folder"):
        hfmem.analyze(str(escape))

    loop = tmp_path / "loop"
    shutil.copytree(stub_repo(SMALL), loop)
    (loop / "model.safetensors").unlink()
    (loop / "model.safetensors").symlink_to(loop / "model.safetensors")
    with pytest.raises(errors.HfmemError):
        hfmem.analyze(str(loop))


def test_hf_cache_snapshot_with_blob_symlinks_is_read(hub_env, stub_repo):
    from huggingface_hub import snapshot_download

    hub_env.add_repo(SMALL, RepoSpec(root=stub_repo(SMALL)))
    snapshot = Path(snapshot_download(SMALL))
    assert (snapshot / "model.safetensors").is_symlink()  # the cache's own layout: snapshots/<sha>/ -> ../../blobs/
    report = hfmem.analyze(str(snapshot))
    assert report.parameters.total == 494_032_768
    assert report.source == "cache" and report.repo == SMALL and report.revision == hub_env.repos[SMALL].sha


def test_declared_shapes_never_allocate(tmp_path):
    """A header declaring 2**42 elements (4 TiB; a file may claim up to 16 TiB): counted exactly, with memory
    independent of the declared size."""
    folder = tmp_path / "huge"
    folder.mkdir()
    (folder / "config.json").write_text(
        json.dumps({"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 64, "num_attention_heads": 4,
                    "vocab_size": 1000, "intermediate_size": 128, "architectures": ["LlamaForCausalLM"]})
    )  # fmt: skip
    tensors = [("model.layers.0.mlp.up_proj.weight", "I8", [2**21, 2**21]), ("model.embed_tokens.weight", "F32", [2**20, 2**20])]
    (folder / "model.safetensors").write_bytes(header_bytes(tensors))
    hfmem.analyze(str(folder))  # warm imports
    tracemalloc.start()
    report = hfmem.analyze(str(folder))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert report.parameters.total == 2**42 + 2**40
    assert report.parameters.stored_bytes == 2**42 + 2**42
    assert peak < 20 * 2**20, peak
