from __future__ import annotations

import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))

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


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES
