from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))

from hub_server import LocalHub  # noqa: E402
from stubs import FIXTURES, load_config, load_inventory, write_stub_repo  # noqa: E402


@pytest.fixture(scope="session")
def stub_repo(tmp_path_factory):
    """Factory: materialise a fixture inventory as a header-only model folder (cached per session)."""
    root = tmp_path_factory.mktemp("stub_repos")
    made: dict[str, Path] = {}

    def make(repo_id: str) -> Path:
        if repo_id not in made:
            made[repo_id] = write_stub_repo(load_inventory(repo_id), load_config(repo_id), root / repo_id)
        return made[repo_id]

    return make


@pytest.fixture(autouse=True)
def _private_hfmem_cache(tmp_path_factory, monkeypatch):
    """hfmem's digest/normalisation cache (hfmem.hub.cachedir) per test, never the user's ~/.cache (subprocesses too)."""
    monkeypatch.setenv("HFMEM_CACHE", str(tmp_path_factory.mktemp("hfmem_cache")))


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture
def hub_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalHub]:
    """A started, empty LocalHub with huggingface_hub pointed at it and a private cache; add repos with add_repo.

    Env vars are set for subprocesses (e.g. the CLI); the client's import-time constants are patched for this one.
    The cache is tmp_path/"hf_home"/"hub". No token is found unless a test passes one.
    """
    from huggingface_hub import constants, hf_api
    from huggingface_hub.utils import _cache_assets, _cache_manager, close_session

    hub = LocalHub()
    url = hub.start()
    hf_home = tmp_path / "hf_home"
    cache = hf_home / "hub"
    cache.mkdir(parents=True)

    for name in (
        "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_OIDC_RESOURCE", "HF_OIDC_ID_TOKEN",
        "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HUGGINGFACE_CO_STAGING", "HUGGINGFACE_HUB_CACHE",
        "HF_ASSETS_CACHE", "HF_XET_CACHE", "HF_HUB_ETAG_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT",
    ):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    env = {
        "HF_ENDPOINT": url,
        "HF_HOME": str(hf_home),
        "HF_HUB_CACHE": str(cache),
        "HF_HUB_DISABLE_TELEMETRY": "1",  # else the first request of a process is GET /api/agent-harnesses
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    # Read once at import time by the client, so the env vars above alone would not reach this process.
    patched = {
        "ENDPOINT": url,
        "HUGGINGFACE_CO_URL_TEMPLATE": url + "/{repo_id}/resolve/{revision}/{filename}",
        "HF_HUB_OFFLINE": False,
        "HF_HOME": str(hf_home),
        "HF_HUB_CACHE": str(cache),
        "HUGGINGFACE_HUB_CACHE": str(cache),
        "HF_ASSETS_CACHE": str(hf_home / "assets"),
        "HUGGINGFACE_ASSETS_CACHE": str(hf_home / "assets"),
        "HF_XET_CACHE": str(hf_home / "xet"),
        "HF_TOKEN_PATH": str(hf_home / "token"),
        "HF_STORED_TOKENS_PATH": str(hf_home / "stored_tokens"),
        "AGENT_HARNESSES_PATH": str(hf_home / ".agent_harnesses.json"),
        "HF_HUB_DISABLE_TELEMETRY": True,
        "HF_HUB_DISABLE_XET": True,
        "HF_HUB_ETAG_TIMEOUT": constants.DEFAULT_ETAG_TIMEOUT,
        "HF_HUB_DOWNLOAD_TIMEOUT": constants.DEFAULT_DOWNLOAD_TIMEOUT,
    }
    for name, value in patched.items():
        monkeypatch.setattr(constants, name, value)
    # Copies taken at import time by other modules.
    monkeypatch.setattr(hf_api.api, "endpoint", url)  # the HfApi behind huggingface_hub.model_info & co.
    monkeypatch.setattr(_cache_manager, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(_cache_assets, "HF_ASSETS_CACHE", str(hf_home / "assets"))
    # utils._http._HUB_ORIGINS is also frozen at import, but only matters for redirects, which LocalHub never sends.

    close_session()  # no pooled connection to an earlier server
    try:
        yield hub
    finally:
        close_session()
        hub.stop()
