"""Run the installed `hfmem` console script in a subprocess, on this checkout's sources, with the test's env."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent  # the checkout, whose hfmem/ is the package


def hfmem_exe() -> str:
    exe = shutil.which("hfmem", path=os.path.dirname(sys.executable)) or shutil.which("hfmem")
    assert exe, "the hfmem console script is installed with the package"
    return exe


def run_cli(args: list[str], env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    full_env = dict(os.environ)  # hub_env has set HF_ENDPOINT/HF_HOME/HF_HUB_CACHE here with monkeypatch.setenv
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), full_env.get("PYTHONPATH")]))
    full_env.update(env or {})
    return subprocess.run([hfmem_exe(), *args], capture_output=True, text=True, env=full_env, timeout=timeout)


@pytest.fixture
def cli():
    return run_cli
