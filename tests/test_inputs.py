"""MODEL as users type it: a Hub URL pasted from the browser is the repo id (and the revision it names); the Python
API takes the CLI's option names and names a mistyped keyword. Through the installed entry point on the local Hub."""

from __future__ import annotations

import json

import pytest

import hfmem
from entry import cli  # noqa: F401  (fixture)
from hfmem.hub.ref import resolve_ref
from hub_server import RepoSpec

QWEN = "Qwen/Qwen2-7B-Instruct"


@pytest.mark.parametrize(
    "url, repo, revision",
    [
        (f"https://huggingface.co/{QWEN}", QWEN, None),
        (f"https://huggingface.co/{QWEN}/", QWEN, None),
        (f"hf.co/{QWEN}/tree/v1.0", QWEN, "v1.0"),
        (f"http://www.huggingface.co/models/{QWEN}", QWEN, None),
        (f"https://huggingface.co/{QWEN}/blob/{'a' * 40}/config.json", QWEN, "a" * 40),
        (f"https://huggingface.co/{QWEN}/tree/main/some/folder", QWEN, "main"),
        (f"https://huggingface.co/{QWEN}/tree/refs%2Fpr%2F4", QWEN, "refs/pr/4"),
        ("https://huggingface.co/gpt2", "gpt2", None),
        (QWEN, QWEN, None),
        ("./a/local/folder", "./a/local/folder", None),
    ],
)
def test_hub_urls_are_repo_ids(url, repo, revision):
    assert resolve_ref(url) == (repo, revision)


def test_url_through_the_cli_reads_the_named_revision(hub_env, stub_repo, cli):  # noqa: F811
    spec = RepoSpec(root=stub_repo(QWEN))
    hub_env.add_repo(QWEN, spec)
    spec.revisions["v1"] = ("b" * 40, spec.root)
    main = cli([f"https://huggingface.co/{QWEN}", "--format", "json"])
    assert main.returncode == 0, main.stderr
    out = json.loads(main.stdout)
    assert out["repo"] == QWEN and out["revision"] == spec.sha and out["parameters"]["total"] == 7_615_616_512
    tagged = cli([f"https://hf.co/{QWEN}/tree/v1", "--format", "json"])
    assert tagged.returncode == 0, tagged.stderr
    assert json.loads(tagged.stdout)["revision"] == "b" * 40
    clash = cli([f"https://hf.co/{QWEN}/tree/v1", "--revision", "main"])
    assert clash.returncode == 2 and "names revision 'v1'" in clash.stderr and not clash.stdout
    dataset = cli(["https://huggingface.co/datasets/org/data"])
    assert dataset.returncode == 2 and "dataset URL, not a model repo" in dataset.stderr


def test_api_takes_the_cli_name_dtype_and_names_a_typo(stub_repo):
    path = str(stub_repo(QWEN))
    by_cli_name = hfmem.analyze(path, dtype="int4")
    by_api_name = hfmem.analyze(path, precision="int4")
    assert isinstance(by_cli_name, hfmem.Report) and isinstance(by_api_name, hfmem.Report)
    assert by_cli_name.inference is not None and by_api_name.inference is not None
    assert by_cli_name.inference.weights_bytes == by_api_name.inference.weights_bytes
    assert by_cli_name.inference.precision == "int4"
    with pytest.raises(TypeError, match="kv_dtpye.*valid: .*kv_dtype"):
        hfmem.analyze(path, kv_dtpye="fp8")
    with pytest.raises(TypeError, match="same option"):
        hfmem.analyze(path, dtype="int4", precision="fp8")
