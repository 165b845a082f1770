"""The real huggingface_hub client against tests/hub_server.py (no mocks of the client)."""

from __future__ import annotations

import http.client
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

import huggingface_hub
from huggingface_hub import (
    HfApi,
    constants,
    get_safetensors_metadata,
    hf_hub_download,
)
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    OfflineModeIsEnabled,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

try:  # rootdir-relative import works with or without a tests/__init__.py
    from hub_server import LocalHub, RepoSpec, running_hub, write_json, write_safetensors_stub
except ImportError:  # pragma: no cover
    from tests.hub_server import LocalHub, RepoSpec, running_hub, write_json, write_safetensors_stub


# ------------------------------------------------------------------------------------------------------- helpers

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8, "num_hidden_layers": 1}


def single_file_repo(root: Path, tensors: dict[str, tuple[str, list[int]]] | None = None) -> Path:
    write_json(root / "config.json", CONFIG)
    write_safetensors_stub(
        root / "model.safetensors",
        tensors or {"a.weight": ("BF16", [4, 8]), "b.weight": ("F32", [8])},
        metadata={"format": "pt"},
    )
    return root


def sharded_repo(root: Path) -> Path:
    write_json(root / "config.json", CONFIG)
    shard1 = write_safetensors_stub(root / "model-00001-of-00002.safetensors", {"a.weight": ("BF16", [4, 8])})
    shard2 = write_safetensors_stub(
        root / "model-00002-of-00002.safetensors", {"b.weight": ("BF16", [8, 8]), "c.bias": ("F32", [8])}
    )
    weight_map = {name: "model-00001-of-00002.safetensors" for name in shard1}
    weight_map |= {name: "model-00002-of-00002.safetensors" for name in shard2}
    index = {"metadata": {"total_size": 64 + 128 + 32}, "weight_map": weight_map}
    write_json(root / "model.safetensors.index.json", index)
    return root


def raw_request(hub: LocalHub, method: str, path: str, headers: dict[str, str] | None = None, timeout: float = 5):
    """One request with http.client, to check the wire protocol without the client's retries."""
    conn = http.client.HTTPConnection("127.0.0.1", int(hub.url.rsplit(":", 1)[1]), timeout=timeout)
    try:
        conn.request(method, path, headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


# --------------------------------------------------------------------------------------------------- model info


def test_model_info_sha_siblings_and_safetensors_summary(hub_env: LocalHub, tmp_path: Path) -> None:
    spec = RepoSpec(root=single_file_repo(tmp_path / "repo"))
    hub_env.add_repo("org/model", spec)

    info = HfApi().model_info("org/model")
    assert info.id == "org/model"
    assert len(spec.sha) == 40 and info.sha == spec.sha
    assert sorted(s.rfilename for s in info.siblings) == ["config.json", "model.safetensors"]
    assert info.siblings[0].size is None  # sizes only with files_metadata
    assert info.safetensors is not None
    assert info.safetensors.parameters == {"BF16": 32, "F32": 8} and info.safetensors.total == 40
    assert info.config == {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}
    assert info.gated is False and info.private is False
    # The module-level functions use the patched endpoint too.
    assert huggingface_hub.model_info("org/model").sha == spec.sha

    only = HfApi().model_info("org/model", expand=["sha", "usedStorage"])
    assert only.sha == spec.sha and only.used_storage == sum(
        p.stat().st_size for p in spec.root.iterdir()
    )
    assert only.siblings is None and only.safetensors is None

    detailed = HfApi().model_info("org/model", files_metadata=True)
    by_name = {s.rfilename: s for s in detailed.siblings}
    assert by_name["config.json"].size == (spec.root / "config.json").stat().st_size
    assert by_name["config.json"].lfs is None
    assert by_name["model.safetensors"].lfs is not None and len(by_name["model.safetensors"].lfs.sha256) == 64

    with pytest.raises(HfHubHTTPError) as bad:
        HfApi().model_info("org/model", expand=["nonsense"])  # type: ignore[list-item]
    assert bad.value.response.status_code == 400


# ------------------------------------------------------------------------------------------------------ download


def test_hf_hub_download_config_and_request_log(hub_env: LocalHub, tmp_path: Path) -> None:
    spec = RepoSpec(root=single_file_repo(tmp_path / "repo"))
    hub_env.add_repo("org/model", spec)

    path = hf_hub_download("org/model", "config.json")
    assert json.loads(Path(path).read_text()) == CONFIG
    assert Path(constants.HF_HUB_CACHE) in Path(path).parents
    assert f"snapshots/{spec.sha}/config.json" in Path(path).as_posix()

    log = hub_env.requests
    assert [(r.method, r.path, r.status) for r in log] == [
        ("HEAD", "/org/model/resolve/main/config.json", 200),
        ("GET", "/org/model/resolve/main/config.json", 200),
    ]
    assert log[1].bytes_sent == (spec.root / "config.json").stat().st_size
    assert not any(r.has_auth for r in log)

    # A second call revalidates with one HEAD and serves the cached blob.
    hub_env.clear_log()
    assert hf_hub_download("org/model", "config.json") == path
    assert [r.method for r in hub_env.requests] == ["HEAD"]


def test_offline_mode_serves_from_cache(hub_env: LocalHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hub_env.add_repo("org/model", RepoSpec(root=single_file_repo(tmp_path / "repo")))
    path = hf_hub_download("org/model", "config.json")
    hub_env.clear_log()

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # what HF_HUB_OFFLINE=1 sets at import time
    assert hf_hub_download("org/model", "config.json") == path
    with pytest.raises(OfflineModeIsEnabled):
        HfApi().model_info("org/model")
    assert hub_env.requests == []


# ------------------------------------------------------------------------------------------------- safetensors


def test_get_sharded_safetensors_metadata_is_one_request(hub_env: LocalHub, tmp_path: Path) -> None:
    hub_env.add_repo("org/sharded", RepoSpec(root=sharded_repo(tmp_path / "repo")))

    meta = HfApi().get_sharded_safetensors_metadata("org/sharded")
    assert meta.sharded and meta.metadata == {"total_size": 224}
    assert set(meta.files_metadata) == {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}
    assert meta.weight_map == {
        "a.weight": "model-00001-of-00002.safetensors",
        "b.weight": "model-00002-of-00002.safetensors",
        "c.bias": "model-00002-of-00002.safetensors",
    }
    tensor = meta.files_metadata["model-00002-of-00002.safetensors"].tensors["b.weight"]
    assert (tensor.dtype, tensor.shape, tensor.data_offsets) == ("BF16", [8, 8], (0, 128))
    assert meta.parameter_count == {"BF16": 96, "F32": 8}
    assert [(r.method, r.path) for r in hub_env.requests] == [
        ("GET", "/api/models/org/sharded/safetensors-metadata/model.safetensors.index.json")
    ]

    with pytest.raises(RemoteEntryNotFoundError):
        HfApi().get_sharded_safetensors_metadata("org/sharded", filename="missing.index.json")


def test_sharded_endpoint_can_be_absent(hub_env: LocalHub, tmp_path: Path) -> None:
    hub_env.add_repo("org/old", RepoSpec(root=sharded_repo(tmp_path / "repo"), sharded_endpoint=False))
    with pytest.raises(HfHubHTTPError) as err:
        HfApi().get_sharded_safetensors_metadata("org/old")
    assert err.value.response.status_code == 404
    assert not isinstance(err.value, (EntryNotFoundError, RepositoryNotFoundError))
    # The per-shard fallback still works.
    assert get_safetensors_metadata("org/old").parameter_count == {"BF16": 96, "F32": 8}


def test_get_safetensors_metadata_single_file(hub_env: LocalHub, tmp_path: Path) -> None:
    hub_env.add_repo("org/model", RepoSpec(root=single_file_repo(tmp_path / "repo")))

    meta = HfApi().get_safetensors_metadata("org/model")
    assert not meta.sharded and meta.metadata is None
    assert meta.files_metadata["model.safetensors"].metadata == {"format": "pt"}
    assert meta.parameter_count == {"BF16": 32, "F32": 8}
    assert [(r.method, r.path.rsplit("/", 1)[1], r.range) for r in hub_env.requests] == [
        ("HEAD", "model.safetensors", None),
        ("GET", "model.safetensors", "bytes=0-100000"),
    ]
    assert hub_env.requests[1].status == 206


def test_get_safetensors_metadata_sharded(hub_env: LocalHub, tmp_path: Path) -> None:
    hub_env.add_repo("org/sharded", RepoSpec(root=sharded_repo(tmp_path / "repo")))

    meta = HfApi().get_safetensors_metadata("org/sharded")
    assert meta.sharded and meta.metadata == {"total_size": 224}
    assert meta.parameter_count == {"BF16": 96, "F32": 8}
    log = hub_env.requests
    assert log[0].method == "HEAD" and log[0].path.endswith("/model.safetensors") and log[0].status == 404
    shard_gets = [r for r in log if r.method == "GET" and "-of-" in r.path]
    assert len(shard_gets) == 2
    assert {r.range for r in shard_gets} == {"bytes=0-100000"} and {r.status for r in shard_gets} == {206}


def test_non_main_revisions(hub_env: LocalHub, tmp_path: Path) -> None:
    main = single_file_repo(tmp_path / "main")
    pr = single_file_repo(tmp_path / "pr", {"pr.weight": ("F16", [2, 2])})
    tag = single_file_repo(tmp_path / "tag", {"tag.weight": ("I8", [3])})
    pr_sha, tag_sha = "a" * 40, "b" * 40
    spec = RepoSpec(root=main, revisions={"refs/pr/4": (pr_sha, pr), "v1": (tag_sha, tag)})
    hub_env.add_repo("org/model", spec)
    api = HfApi()

    at_pr = api.parse_safetensors_file_metadata("org/model", "model.safetensors", revision="refs/pr/4")
    assert list(at_pr.tensors) == ["pr.weight"]
    assert hub_env.requests[-1].path == "/org/model/resolve/refs%2Fpr%2F4/model.safetensors"
    assert list(api.parse_safetensors_file_metadata("org/model", "model.safetensors", revision="v1").tensors) == [
        "tag.weight"
    ]
    by_sha = api.parse_safetensors_file_metadata("org/model", "model.safetensors", revision=tag_sha)
    assert list(by_sha.tensors) == ["tag.weight"]
    at_main = api.parse_safetensors_file_metadata("org/model", "model.safetensors")
    assert list(at_main.tensors) == ["a.weight", "b.weight"]

    assert api.model_info("org/model", revision="refs/pr/4").sha == pr_sha
    assert api.model_info("org/model", revision="refs/pr/4").safetensors.parameters == {"F16": 4}
    assert "/api/models/org/model/revision/refs%2Fpr%2F4" in hub_env.requests[-1].path
    assert f"snapshots/{pr_sha}/" in Path(hf_hub_download("org/model", "config.json", revision="refs/pr/4")).as_posix()
    pr_files = [f.path for f in api.list_repo_tree("org/model", revision="refs/pr/4")]
    assert pr_files == ["config.json", "model.safetensors"]


# ---------------------------------------------------------------------------------------------------------- tree


def test_list_repo_tree_paginates_and_lists_levels(hub_env: LocalHub, tmp_path: Path) -> None:
    root = single_file_repo(tmp_path / "repo")
    many = root / "data" / "many"
    many.mkdir(parents=True)
    for i in range(1100):
        (many / f"f{i:04d}.txt").write_text(str(i))
    write_safetensors_stub(root / "sub" / "inner" / "x.safetensors", {"x": ("F32", [1])})
    hub_env.add_repo("org/big", RepoSpec(root=root))
    api = HfApi()

    entries = list(api.list_repo_tree("org/big", recursive=True))
    files = [e.path for e in entries if isinstance(e, huggingface_hub.hf_api.RepoFile)]
    folders = [e.path for e in entries if isinstance(e, huggingface_hub.hf_api.RepoFolder)]
    assert len(files) == 1103
    assert set(folders) == {"data", "data/many", "sub", "sub/inner"}
    tree_gets = [r for r in hub_env.requests if "/tree/" in r.path]
    assert len(tree_gets) == 2 and "cursor=" in tree_gets[1].query and "recursive=true" in tree_gets[1].query

    x = next(e for e in entries if e.path == "sub/inner/x.safetensors")
    assert x.lfs is not None and x.lfs.size == x.size and len(x.lfs.sha256) == 64
    cfg = next(e for e in entries if e.path == "config.json")
    assert cfg.lfs is None and len(cfg.blob_id) == 40

    top = {e.path for e in api.list_repo_tree("org/big")}
    assert top == {"config.json", "model.safetensors", "data", "sub"}
    assert {e.path for e in api.list_repo_tree("org/big", path_in_repo="sub/inner")} == {"sub/inner/x.safetensors"}
    assert hub_env.requests[-1].path == "/api/models/org/big/tree/main/sub%2Finner"
    with pytest.raises(RemoteEntryNotFoundError):
        list(api.list_repo_tree("org/big", path_in_repo="nope"))

    # expand=true: 50 entries a page, as on the Hub, with last-commit details.
    hub_env.clear_log()
    expanded = list(api.list_repo_tree("org/big", path_in_repo="sub", recursive=True, expand=True))
    assert {e.path for e in expanded} == {"sub/inner", "sub/inner/x.safetensors"}
    assert all(e.last_commit is not None for e in expanded)


# -------------------------------------------------------------------------------------------------------- errors


def test_error_classes(hub_env: LocalHub, tmp_path: Path) -> None:
    spec = RepoSpec(root=single_file_repo(tmp_path / "repo"))
    hub_env.add_repo("org/model", spec)
    api = HfApi()

    for token in (None, "some-token"):
        with pytest.raises(RepositoryNotFoundError) as missing:
            api.model_info("org/missing", token=token)
        assert not isinstance(missing.value, GatedRepoError)
        assert missing.value.response.status_code == (401 if token is None else 404)
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download("org/missing", "config.json")

    with pytest.raises(RevisionNotFoundError):
        api.model_info("org/model", revision="nope")
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download("org/model", "config.json", revision="nope")

    with pytest.raises(EntryNotFoundError) as entry:
        hf_hub_download("org/model", "missing.json")
    assert isinstance(entry.value, RemoteEntryNotFoundError)
    # The miss is cached under the commit the server reported.
    no_exist = Path(constants.HF_HUB_CACHE) / "models--org--model" / ".no_exist" / spec.sha / "missing.json"
    assert no_exist.is_file()
    assert not api.file_exists("org/model", "missing.json")
    assert api.file_exists("org/model", "config.json")


def test_gated_repo(hub_env: LocalHub, tmp_path: Path) -> None:
    hub_env.add_repo("org/gated", RepoSpec(root=single_file_repo(tmp_path / "repo"), gated=True, allowed_tokens={"ok"}))
    api = HfApi()

    # Like the Hub, metadata is public; file contents are not.
    assert api.model_info("org/gated").gated == "auto"
    with pytest.raises(GatedRepoError) as anonymous:
        hf_hub_download("org/gated", "config.json")
    assert anonymous.value.response.status_code == 401
    with pytest.raises(GatedRepoError) as wrong:
        hf_hub_download("org/gated", "config.json", token="not-allowed")
    assert wrong.value.response.status_code == 403
    with pytest.raises(GatedRepoError):
        api.parse_safetensors_file_metadata("org/gated", "model.safetensors")
    with pytest.raises(GatedRepoError):
        api.get_sharded_safetensors_metadata("org/gated")

    assert json.loads(Path(hf_hub_download("org/gated", "config.json", token="ok")).read_text()) == CONFIG
    assert hub_env.requests[-1].has_auth


def test_private_repo(hub_env: LocalHub, tmp_path: Path) -> None:
    spec = RepoSpec(root=single_file_repo(tmp_path / "repo"), private=True, allowed_tokens={"ok"})
    hub_env.add_repo("org/private", spec)
    api = HfApi()

    with pytest.raises(RepositoryNotFoundError) as anonymous:
        api.model_info("org/private")
    assert anonymous.value.response.status_code == 401 and not isinstance(anonymous.value, GatedRepoError)
    with pytest.raises(RepositoryNotFoundError) as wrong:
        api.model_info("org/private", token="nope")
    assert wrong.value.response.status_code == 404
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download("org/private", "config.json")

    info = api.model_info("org/private", token="ok")
    assert info.private is True and info.sha == spec.sha
    assert HfApi(token="ok").get_safetensors_metadata("org/private").parameter_count == {"BF16": 32, "F32": 8}
    assert hub_env.requests[-1].has_auth
    assert all("ok" not in repr(r) for r in hub_env.requests)  # the token itself is never logged


# ---------------------------------------------------------------------------------------------- fault injection


def test_fail_rate_gives_500(hub_env: LocalHub, tmp_path: Path) -> None:
    hub_env.add_repo("org/model", RepoSpec(root=single_file_repo(tmp_path / "repo")))
    hub_env.fail_rate, hub_env.fail_kinds = 1.0, ("500",)
    with pytest.raises(HfHubHTTPError) as err:
        HfApi().model_info("org/model")  # model_info does not retry
    assert err.value.response.status_code == 500
    assert [(r.status, r.injected) for r in hub_env.requests] == [(500, "500")]

    hub_env.fail_kinds = ("drop",)
    with pytest.raises(httpx2.RemoteProtocolError):
        HfApi().model_info("org/model")
    assert hub_env.requests[-1].status == 0 and hub_env.requests[-1].injected == "drop"

    hub_env.fail_rate = 0.0
    assert HfApi().model_info("org/model").sha


def test_fail_rate_is_seeded(tmp_path: Path) -> None:
    def outcomes(seed: int) -> list[int]:
        with running_hub({"org/m": RepoSpec(root=single_file_repo(tmp_path / "repo"))}, seed=seed) as hub:
            hub.fail_rate, hub.fail_kinds = 0.5, ("500",)
            return [raw_request(hub, "GET", "/api/models/org/m")[0] for _ in range(20)]

    first = outcomes(1)
    assert first == outcomes(1) and {200, 500} == set(first)


def test_wire_protocol_and_other_faults(hub_env: LocalHub, tmp_path: Path) -> None:
    root = single_file_repo(tmp_path / "repo")
    hub_env.add_repo("org/model", RepoSpec(root=root))
    url = "/org/model/resolve/main/model.safetensors"
    size = (root / "model.safetensors").stat().st_size

    status, headers, body = raw_request(hub_env, "HEAD", url)
    assert status == 200 and body == b"" and int(headers["Content-Length"]) == size
    assert headers["X-Linked-Size"] == str(size) and headers["ETag"] == headers["X-Linked-Etag"]
    assert headers["Accept-Ranges"] == "bytes" and len(headers["X-Repo-Commit"]) == 40
    assert not any(h.lower().startswith("x-xet") for h in headers)

    status, headers, body = raw_request(hub_env, "GET", url, {"Range": "bytes=0-7"})
    assert status == 206 and headers["Content-Range"] == f"bytes 0-7/{size}" and len(body) == 8
    status, headers, body = raw_request(hub_env, "GET", url, {"Range": "bytes=8-"})
    assert status == 206 and len(body) == size - 8
    status, headers, _ = raw_request(hub_env, "GET", url, {"Range": f"bytes={size}-"})
    assert status == 416 and headers["Content-Range"] == f"bytes */{size}"

    status, headers, _ = raw_request(hub_env, "GET", "/org/model/resolve/main/nope.json")
    assert (status, headers["X-Error-Code"]) == (404, "EntryNotFound") and "X-Repo-Commit" in headers

    hub_env.rate_limit_once = {"config.json"}
    status, headers, _ = raw_request(hub_env, "GET", "/org/model/resolve/main/config.json")
    assert status == 429 and headers["Retry-After"] == "1"
    assert raw_request(hub_env, "GET", "/org/model/resolve/main/config.json")[0] == 200

    hub_env.truncate_paths = {"config.json"}
    with pytest.raises(http.client.IncompleteRead):
        raw_request(hub_env, "GET", "/org/model/resolve/main/config.json")
    assert hub_env.requests[-1].injected == "truncate"
    hub_env.truncate_paths = set()

    hub_env.stall_paths, hub_env.stall_s = {"config.json"}, 0.3
    t0 = time.monotonic()
    assert raw_request(hub_env, "GET", "/org/model/resolve/main/config.json")[0] == 200
    assert time.monotonic() - t0 >= 0.3
    hub_env.stall_paths, hub_env.stall_s = {"config.json"}, 30.0
    with pytest.raises(TimeoutError):
        raw_request(hub_env, "GET", "/org/model/resolve/main/config.json", timeout=0.3)
    hub_env.stall_paths = set()

    hub_env.latency_s = 0.2
    t0 = time.monotonic()
    assert raw_request(hub_env, "GET", "/api/models/org/model")[0] == 200
    assert time.monotonic() - t0 >= 0.2


def test_stop_is_clean_even_with_stalled_requests(tmp_path: Path) -> None:
    before = threading.active_count()
    root = single_file_repo(tmp_path / "repo")
    with LocalHub({"org/model": RepoSpec(root=root)}) as hub:
        hub.stall_paths = {"config.json"}  # hangs for 30 s unless stop() wakes it
        port = int(hub.url.rsplit(":", 1)[1])
        idle = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        idle.request("GET", "/api/models/org/model")
        idle.getresponse().read()  # a keep-alive connection left open
        stalled = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        stalled.request("GET", "/org/model/resolve/main/config.json")
        time.sleep(0.1)
        t0 = time.monotonic()
    assert time.monotonic() - t0 < 2
    idle.close()
    stalled.close()
    assert threading.active_count() == before
    assert os.environ.get("HF_ENDPOINT") != hub.url  # running without hub_env touches no environment
