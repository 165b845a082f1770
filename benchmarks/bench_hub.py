"""Side-by-side timing of hfmem and the peers a user would otherwise run, against the local test Hub.

Starts tests/hub_server.LocalHub with injected latency per request and serves header-only stubs of fixture repos;
`ORG/NAME@N` re-shards a fixture into N shards (layer order kept), e.g. `Qwen/Qwen3-32B@14` for a 14-shard dense
32B. Each tool runs as a fresh process, as a user would, and the tools are interleaved (run 1 of every tool, then
run 2, ...), so load on a shared machine hits them alike:

- hfmem: cold (fresh HF_HOME: no digest, no normalisation cache), cached (repeat, online) and cached offline
  (HF_HUB_OFFLINE=1);
- hf-mem (PyPI): it ignores HF_ENDPOINT, so it runs through benchmarks/hf_mem_shim.py, which rewrites its
  https://huggingface.co prefix to the local hub (nothing else changes); fresh HF_HOME every run (it has no cache);
- accelerate estimate-memory (PyPI, with --accelerate): honours HF_ENDPOINT; cold and warm (its HF cache kept).

Per tool and repo it prints the median wall time of --runs runs, the CPU time the process used (user + system, its
threads together: what a loaded machine cannot hide), the requests the hub saw and the body bytes it sent, and hf-mem's median as a multiple of the tool's (how many times faster than hf-mem); then start-up times.

    python benchmarks/bench_hub.py --latency 0.05 --runs 3 --markdown /tmp/bench.md

Peers are looked for in --peers-python (default: this interpreter; `pip install hf-mem` is pure Python);
--skip-peers times hfmem alone.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
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

DEFAULT_REPOS = ["Qwen/Qwen3-32B@14", "deepseek-ai/DeepSeek-V3"]
SHIM = Path(__file__).resolve().parent / "hf_mem_shim.py"


@dataclass
class Result:
    tool: str
    repo: str
    walls: list[float] = field(default_factory=list)
    requests: list[int] = field(default_factory=list)
    bytes: list[int] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)  # user + system CPU seconds of the process
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


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(hub: LocalHub, cmd: list[str], env: dict[str, str], timeout: float) -> tuple[float, int, int, int, str, float]:
    hub.clear_log()
    cpu0 = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)
    wall = time.perf_counter() - start
    cpu = _children_cpu() - cpu0
    log = hub.requests
    rc = proc.returncode
    if rc == 0 and not proc.stdout.strip():  # a command that ran nothing must not time as fast
        rc = -1
    return wall, len(log), sum(r.bytes_sent for r in log), rc, (proc.stderr or proc.stdout or "no output")[-400:], cpu


def prime(hub, make_cmd, env, timeout) -> str | None:
    """One unmeasured run (fills a cache); the error line if it failed."""
    _, _, _, rc, tail, _ = run_once(hub, make_cmd(), env, timeout)
    return None if rc == 0 else f"exit {rc}: {tail.strip().splitlines()[-1] if tail.strip() else ''}"


def measure_interleaved(hub, tools, runs, timeout) -> list[Result]:
    """`tools`: (result, make_cmd, make_env) triples; run i of every tool before run i + 1 of any."""
    for i in range(runs):
        for res, make_cmd, make_env in tools:
            if res.error:
                continue
            try:
                wall, nreq, nbytes, rc, tail, cpu = run_once(hub, make_cmd(), make_env(i), timeout)
            except subprocess.TimeoutExpired:
                res.error = f"timed out after {timeout:.0f} s"
                continue
            if rc != 0:
                res.error = f"exit {rc}: {tail.strip().splitlines()[-1] if tail.strip() else ''}"
                continue
            res.walls.append(wall)
            res.requests.append(nreq)
            res.bytes.append(nbytes)
            res.cpus.append(cpu)
    return [t[0] for t in tools]


def startup(cmd: list[str], env: dict[str, str], runs: int) -> float:
    walls = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, capture_output=True, env=env, timeout=300, cwd=ROOT)
        walls.append(time.perf_counter() - start)
    return statistics.median(walls)


def fmt_bytes(n: int) -> str:
    return f"{n / 1000:,.1f} kB" if n < 1_000_000 else f"{n / 1e6:,.2f} MB"


def reshard(inventory: dict, shards: int) -> dict:
    """The same tensors in `shards` files of about equal tensor count, in stored order (names as the HF writer)."""
    tensors = inventory["tensors"]
    per = -(-len(tensors) // shards)
    out = [[name, dtype, shape, f"model-{i // per + 1:05d}-of-{shards:05d}.safetensors"]
           for i, (name, dtype, shape, _) in enumerate(tensors)]
    return inventory | {"tensors": out}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.05, help="seconds added to every request (default 0.05)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--repos", nargs="+", default=DEFAULT_REPOS, help="fixture repo ids; ORG/NAME@N re-shards into N files")
    ap.add_argument("--python", default=sys.executable, help="interpreter with hfmem's dependencies")
    ap.add_argument("--peers-python", default=sys.executable)
    ap.add_argument("--skip-peers", action="store_true")
    ap.add_argument("--accelerate", action="store_true", help="also time accelerate estimate-memory (~5 s a run)")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--json", type=Path, help="write raw results here")
    ap.add_argument("--markdown", type=Path, help="write the result tables (and the command) here")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="hfmem-bench-"))
    # A pip install byte-compiles the package (pip's default); an editable checkout on a machine that sets
    # PYTHONDONTWRITEBYTECODE=1 would instead recompile every hfmem module from source on each run (~0.3 s here),
    # which no installed user pays and the peers, installed from PyPI, do not pay either.
    subprocess.run([args.python, "-m", "compileall", "-q", str(ROOT / "hfmem")], check=True)
    repos = {}
    served = {}  # spec -> the repo id the hub serves it as
    for spec in args.repos:
        repo, _, n = spec.partition("@")
        inventory = load_inventory(repo)
        if n:
            inventory = reshard(inventory, int(n))
        served[spec] = f"{repo}-{n}-shards" if n else repo
        repos[served[spec]] = RepoSpec(root=write_stub_repo(inventory, load_config(repo), work / "repos" / served[spec]))
    hub = LocalHub(repos)
    url = hub.start()
    hub.latency_s = args.latency
    env0 = base_env(url)
    hfmem_env = env0 | {"PYTHONPATH": str(ROOT)}
    peers = not args.skip_peers and subprocess.run([args.peers_python, "-c", "import hf_mem"], capture_output=True).returncode == 0

    homes = iter(range(10**9))

    def fresh(env):
        return lambda i: env | {"HF_HOME": str(work / f"home{next(homes)}")}

    def kept(env, name):
        return lambda i: env | {"HF_HOME": str(work / name)}

    results: list[Result] = []
    try:
        for spec in args.repos:
            rid = served[spec]
            hfmem_cmd = lambda rid=rid: [args.python, "-m", "hfmem", rid, "--format", "json"]  # noqa: E731
            keep = f"hfmem-{spec.replace('/', '--')}"
            tools = [(Result("hfmem (cold)", spec), hfmem_cmd, fresh(hfmem_env))]
            cached = Result("hfmem (cached)", spec)
            cached.error = prime(hub, hfmem_cmd, kept(hfmem_env, keep)(-1), args.timeout)
            tools.append((cached, hfmem_cmd, kept(hfmem_env, keep)))
            offline = Result("hfmem (cached, HF_HUB_OFFLINE=1)", spec)
            offline.error = cached.error
            tools.append((offline, hfmem_cmd, kept(hfmem_env | {"HF_HUB_OFFLINE": "1"}, keep)))
            if peers:
                hfm = lambda rid=rid: [args.peers_python, str(SHIM), "--model-id", rid, "--json-output"]  # noqa: E731
                tools.append((Result("hf-mem (via URL shim)", spec), hfm, fresh(env0)))
                if args.accelerate:
                    acc = lambda rid=rid: [args.peers_python, "-m", "accelerate.commands.accelerate_cli", "estimate-memory", rid,  # noqa: E731
                                   "--library_name", "transformers"]
                    tools.append((Result("accelerate estimate-memory (cold)", spec), acc, fresh(env0)))
                    keep_acc = f"acc-{spec.replace('/', '--')}"
                    warm = Result("accelerate estimate-memory (warm)", spec)
                    warm.error = prime(hub, acc, kept(env0, keep_acc)(-1), args.timeout)
                    tools.append((warm, acc, kept(env0, keep_acc)))
            for r in measure_interleaved(hub, tools, args.runs, args.timeout):
                results.append(r)
                print(f"  {spec:32s} {r.tool:36s} {f'{r.median:.3f} s' if r.median else r.error}", file=sys.stderr, flush=True)
    finally:
        hub.stop()

    # Start-up: no hub needed.
    n = max(5, args.runs)
    start_rows = [
        ("python -c 'import click, tabulate' (baseline)", startup([args.python, "-c", "import click, tabulate"], hfmem_env, n)),
        ("hfmem --help", startup([args.python, "-m", "hfmem", "--help"], hfmem_env, n)),
        ("hfmem --version", startup([args.python, "-m", "hfmem", "--version"], hfmem_env, n)),
        ("python -c 'from transformers import AutoConfig' (hfmem's analysis needs it)",
         startup([args.python, "-c", "from transformers import AutoConfig"], hfmem_env, n)),
        # The floor of any run that asks the Hub: the client every hfmem request goes through, imported and built
        # (headers, session) before the first request can leave; then comes the round trip.
        ("python -c 'huggingface_hub client: build_hf_headers(); get_session()' (before hfmem's first request)",
         startup([args.python, "-c", "from huggingface_hub.utils import build_hf_headers, get_session; "
                  "build_hf_headers(); get_session()"], hfmem_env, n)),
    ]
    if peers:
        start_rows.append(("hf-mem --help", startup([args.peers_python, "-c", "import sys; sys.argv=['hf-mem','--help']; from hf_mem.cli import main; main()"], env0, n)))
        if args.accelerate:
            start_rows.append(("accelerate estimate-memory --help", startup([args.peers_python, "-m", "accelerate.commands.accelerate_cli", "estimate-memory", "--help"], env0, n)))

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
        f"Command: `{cmd}` (median of {args.runs} runs per row; each run a fresh process; tools interleaved run by run).",
        f"Local test Hub (tests/hub_server.py) with {args.latency * 1000:.0f} ms injected per request; header-only stub repos.",
        f"Machine: {platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs (shared with other jobs: "
        "absolute times are noisy, request and byte counts are exact).",
        "",
    ]
    if not peers:
        out += ["Peers skipped (--skip-peers or no --peers-python).", ""]
    for repo in args.repos:
        rows = [r for r in results if r.repo == repo]
        ref = next((r.median for r in rows if r.tool.startswith("hf-mem") and r.median), None)
        out += [f"## {repo}", "", "| tool | wall (median) | walls | CPU (median) | requests | bytes received | × faster than hf-mem |",
                "|---|---:|---|---:|---:|---:|---:|"]
        for r in rows:
            if r.error:
                out.append(f"| {r.tool} | – ({r.error}) | – | – | – | – | – |")
                continue
            ratio = f"{ref / r.median:.2f}" if ref else "–"
            walls = ", ".join(f"{w:.2f}" for w in r.walls)
            out.append(f"| {r.tool} | {r.median:.3f} s | {walls} | {statistics.median(r.cpus):.3f} s | "
                       f"{statistics.median(r.requests):.0f} | {fmt_bytes(int(statistics.median(r.bytes)))} | {ratio} |")
        out.append("")
    base = start_rows[0][1]
    out += ["## Start-up", "", "| command | wall (median) | × `import click, tabulate` |", "|---|---:|---:|"]
    out += [f"| {name} | {t:.3f} s | {t / base:.2f} |" for name, t in start_rows]
    return out


if __name__ == "__main__":
    sys.exit(main())
