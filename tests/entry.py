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


def run_cli(args: list[str], env: dict[str, str] | None = None, timeout: float = 120,
            fork: bool = True) -> subprocess.CompletedProcess:
    """fork=False: the Hub read the CLI starts early runs in a thread, as where the platform cannot fork
    (hfmem/hub/prefetch.py), instead of the console script's forked child."""
    full_env = dict(os.environ)  # hub_env has set HF_ENDPOINT/HF_HOME/HF_HUB_CACHE here with monkeypatch.setenv
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), full_env.get("PYTHONPATH")]))
    full_env.update(env or {})
    command = [hfmem_exe()] if fork else [
        sys.executable, "-c", "import sys\nfrom hfmem.hub import prefetch\nprefetch.FORK = False\n"
        "from hfmem.cli import main\nmain(sys.argv[1:])"]
    return subprocess.run([*command, *args], capture_output=True, text=True, env=full_env, timeout=timeout)


@pytest.fixture
def cli():
    return run_cli
