"""Side-by-side timing of hfmem and the peers a user would otherwise run, against the local test Hub.

Starts tests/hub_server.LocalHub with injected latency per request, serves header-only stubs of a few fixture
repos (single file, 4 shards, a 61-shard MoE), and runs each tool as a fresh process, as a user would:

- hfmem: cold (empty caches), cached (repeat, online) and cached offline (HF_HUB_OFFLINE=1);
- hf-mem (PyPI): it ignores HF_ENDPOINT, so it runs through benchmarks/hf_mem_shim.py, which rewrites its
  https://huggingface.co prefix to the local hub (nothing else changes);
- accelerate estimate-memory (PyPI): honours HF_ENDPOINT; cold and warm (its HF cache kept).

Per tool and repo it prints the median wall time of --runs runs, the requests the hub saw and the body bytes it
sent, and the tool's time as a multiple of hfmem's; then start-up times (--help / --version).

    /work/venv/bin/python benchmarks/bench_hub.py --latency 0.05 --runs 5 --markdown benchmarks/RESULTS.md

Peers are looked for in --peers-python (a separate venv: `python -m venv /work/peers-venv &&
/work/peers-venv/bin/pip install hf-mem accelerate`); --skip-peers times hfmem alone.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from hub_server import LocalHub, RepoSpec  # noqa: E402
from stubs import load_config, load_inventory, write_stub_repo  # noqa: E402

DEFAULT_REPOS = ["Qwen/Qwen2-0.5B-Instruct", "Qwen/Qwen2-7B-Instruct", "moonshotai/Kimi-K2-Instruct"]
SHIM = Path(__file__).resolve().parent / "hf_mem_shim.py"


@dataclass
class Result:
    tool: str
    repo: str
    walls: list[float] = field(default_factory=list)
    requests: list[int] = field(default_factory=list)
    bytes: list[int] = field(default_factory=list)
    error: str | None = None

    @property
    def median(self) -> float | None:
        return statistics.median(self.walls) if self.walls else None


def base_env(url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING", "PYTHONPATH", "TRANSFORMERS_"))}
    env.update(
        HF_ENDPOINT=url,
        HF_HUB_DISABLE_TELEMETRY="1",  # else the first request of a process is GET /api/agent-harnesses
        HF_HUB_DISABLE_XET="1",
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        TOKENIZERS_PARALLELISM="false",
    )
    return env


def run_once(hub: LocalHub, cmd: list[str], env: dict[str, str], timeout: float) -> tuple[float, int, int, int, str]:
    hub.clear_log()
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)
    wall = time.perf_counter() - start
    log = hub.requests
    return wall, len(log), sum(r.bytes_sent for r in log), proc.returncode, (proc.stderr or proc.stdout)[-400:]


def measure(hub, tool, repo, make_cmd, make_env, runs, timeout, prime=False) -> Result:
    """`make_env(i)` gives the environment of run i (a fresh or a kept HF_HOME); `prime`: one unmeasured run first."""
    res = Result(tool, repo)
    if prime:
        _, _, _, rc, tail = run_once(hub, make_cmd(), make_env(-1), timeout)
        if rc != 0:
            res.error = f"exit {rc}: {tail.strip().splitlines()[-1] if tail.strip() else ''}"
            return res
    for i in range(runs):
        try:
            wall, nreq, nbytes, rc, tail = run_once(hub, make_cmd(), make_env(i), timeout)
        except subprocess.TimeoutExpired:
            res.error = f"timed out after {timeout:.0f} s"
            return res
        if rc != 0:
            res.error = f"exit {rc}: {tail.strip().splitlines()[-1] if tail.strip() else ''}"
            return res
        res.walls.append(wall)
        res.requests.append(nreq)
        res.bytes.append(nbytes)
    return res


def startup(cmd: list[str], env: dict[str, str], runs: int) -> float:
    walls = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, capture_output=True, env=env, timeout=300, cwd=ROOT)
        walls.append(time.perf_counter() - start)
    return statistics.median(walls)


def fmt_bytes(n: int) -> str:
    return f"{n / 1000:,.1f} kB" if n < 1_000_000 else f"{n / 1e6:,.2f} MB"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.05, help="seconds added to every request (default 0.05)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--repos", nargs="+", default=DEFAULT_REPOS)
    ap.add_argument("--python", default=sys.executable, help="interpreter with hfmem's dependencies")
    ap.add_argument("--peers-python", default="/work/peers-venv/bin/python")
    ap.add_argument("--skip-peers", action="store_true")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--json", type=Path, help="write raw results here")
    ap.add_argument("--markdown", type=Path, help="write the result tables (and the command) here")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="hfmem-bench-"))
    repos = {}
    for repo in args.repos:
        repos[repo] = RepoSpec(root=write_stub_repo(load_inventory(repo), load_config(repo), work / "repos" / repo))
    hub = LocalHub(repos)
    url = hub.start()
    hub.latency_s = args.latency
    env0 = base_env(url)
    hfmem_env = env0 | {"PYTHONPATH": str(ROOT / "src")}
    peers = not args.skip_peers and Path(args.peers_python).exists()

    homes = iter(range(10**9))

    def fresh(env):
        return lambda i: env | {"HF_HOME": str(work / f"home{next(homes)}")}

    def kept(env, name):
        return lambda i: env | {"HF_HOME": str(work / name)}

    results: list[Result] = []
    try:
        for repo in args.repos:
            hfmem_cmd = lambda: [args.python, "-m", "hfmem.cli", repo, "--format", "json"]  # noqa: E731
            results.append(measure(hub, "hfmem (cold)", repo, hfmem_cmd, fresh(hfmem_env), args.runs, args.timeout))
            keep = f"hfmem-{repo.replace('/', '--')}"
            results.append(measure(hub, "hfmem (cached)", repo, hfmem_cmd, kept(hfmem_env, keep), args.runs, args.timeout, prime=True))
            results.append(measure(hub, "hfmem (cached, HF_HUB_OFFLINE=1)", repo, hfmem_cmd,
                                   kept(hfmem_env | {"HF_HUB_OFFLINE": "1"}, keep), args.runs, args.timeout))
            if peers:
                hfm = lambda: [args.peers_python, str(SHIM), "--model-id", repo, "--json-output"]  # noqa: E731
                results.append(measure(hub, "hf-mem (via URL shim)", repo, hfm, fresh(env0), args.runs, args.timeout))
                acc = lambda: [args.peers_python, "-m", "accelerate.commands.accelerate_cli", "estimate-memory", repo,  # noqa: E731
                               "--library_name", "transformers"]
                results.append(measure(hub, "accelerate estimate-memory (cold)", repo, acc, fresh(env0), args.runs, args.timeout))
                keep_acc = f"acc-{repo.replace('/', '--')}"
                results.append(measure(hub, "accelerate estimate-memory (warm)", repo, acc, kept(env0, keep_acc), args.runs, args.timeout, prime=True))
            for r in results[-6:]:
                if r.repo == repo:
                    print(f"  {repo:32s} {r.tool:36s} {('%.3f s' % r.median) if r.median else r.error}", file=sys.stderr, flush=True)
    finally:
        hub.stop()

    # Start-up: no hub needed.
    n = max(5, args.runs)
    start_rows = [
        ("python -c 'import click, tabulate' (baseline)", startup([args.python, "-c", "import click, tabulate"], hfmem_env, n)),
        ("hfmem --help", startup([args.python, "-m", "hfmem.cli", "--help"], hfmem_env, n)),
        ("hfmem --version", startup([args.python, "-m", "hfmem.cli", "--version"], hfmem_env, n)),
        ("python -c 'from transformers import AutoConfig' (hfmem's analysis needs it)",
         startup([args.python, "-c", "from transformers import AutoConfig"], hfmem_env, n)),
    ]
    if peers:
        start_rows += [
            ("hf-mem --help", startup([args.peers_python, "-c", "import sys; sys.argv=['hf-mem','--help']; from hf_mem.cli import main; main()"], env0, n)),
            ("accelerate estimate-memory --help", startup([args.peers_python, "-m", "accelerate.commands.accelerate_cli", "estimate-memory", "--help"], env0, n)),
        ]

    lines = render(results, start_rows, args, peers)
    print("\n".join(lines))
    if args.markdown:
        args.markdown.write_text("\n".join(lines) + "\n")
    if args.json:
        args.json.write_text(json.dumps({"results": [r.__dict__ for r in results], "startup": start_rows}, indent=1))
    shutil.rmtree(work, ignore_errors=True)
    return 0


def render(results: list[Result], start_rows, args, peers: bool) -> list[str]:
    cmd = "python benchmarks/bench_hub.py " + " ".join(sys.argv[1:])
    out = [
        "# hfmem speed benchmark",
        "",
        f"Command: `{cmd}` (median of {args.runs} runs per row; each run a fresh process).",
        f"Local test Hub (tests/hub_server.py) with {args.latency * 1000:.0f} ms injected per request; header-only stub repos.",
        f"Machine: {platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs (shared with other jobs: "
        "absolute times are noisy, request and byte counts are exact).",
        "",
    ]
    if not peers:
        out += ["Peers skipped (--skip-peers or no --peers-python).", ""]
    for repo in args.repos:
        rows = [r for r in results if r.repo == repo]
        ref = next((r.median for r in rows if r.tool == "hfmem (cold)" and r.median), None)
        out += [f"## {repo}", "", "| tool | wall (median) | requests | bytes received | × hfmem cold |", "|---|---:|---:|---:|---:|"]
        for r in rows:
            if r.error:
                out.append(f"| {r.tool} | – ({r.error}) | – | – | – |")
                continue
            ratio = f"{r.median / ref:.2f}" if ref else "–"
            out.append(f"| {r.tool} | {r.median:.3f} s | {statistics.median(r.requests):.0f} | {fmt_bytes(int(statistics.median(r.bytes)))} | {ratio} |")
        out.append("")
    base = start_rows[0][1]
    out += ["## Start-up", "", "| command | wall (median) | × `import click, tabulate` |", "|---|---:|---:|"]
    out += [f"| {name} | {t:.3f} s | {t / base:.2f} |" for name, t in start_rows]
    return out


if __name__ == "__main__":
    sys.exit(main())
