"""Developer check over the team's model folder beside the checkout (never run by tests): analyse every model with
KV for both engines and report warnings printed twice, "counted as" fallbacks and failures.

    python scripts/sweep_shared.py [--ctx 32k] [MODELS_DIR]
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def model_files(folder: Path, repo: str):
    from hfmem.hub.files import ModelFiles
    from hfmem.hub.header import validate_header

    config = json.loads((folder / "config.json").read_text())
    header = folder / "header.json"
    inv = None
    if header.exists():
        inv = json.loads(header.read_text())
    elif (folder / "header.json.gz").exists():
        with gzip.open(folder / "header.json.gz", "rt") as fh:
            inv = json.load(fh)
    headers = []
    if inv:
        from hfmem.model.dtypes import DTYPE_BITS

        shards: dict[str, dict] = {}
        offsets: dict[str, int] = {}
        for name, t in inv.items():
            file = t.get("file") or "model.safetensors"
            numel = 1
            for d in t["shape"]:
                numel *= d
            size = numel * DTYPE_BITS[t["dtype"]] // 8
            start = offsets.get(file, 0)
            shards.setdefault(file, {})[name] = {"dtype": t["dtype"], "shape": t["shape"], "data_offsets": [start, start + size]}
            offsets[file] = start + size
        headers = [validate_header(obj, file) for file, obj in shards.items()]
    return ModelFiles(repo, None, "local", config, headers)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("models", nargs="?", default=str(ROOT.parent / "shared" / "models"))
    parser.add_argument("--ctx", default="32k")
    args = parser.parse_args()
    from hfmem.api import analyze_files, attach_sections
    from hfmem.memory.kv import estimate_kv, parse_context

    base = Path(args.models)
    bad = 0
    for cfg in sorted(base.glob("*/*/config.json")):
        folder = cfg.parent
        repo = str(folder.relative_to(base))
        problems = []
        try:
            files = model_files(folder, repo)
            outputs: list[list[str]] = []  # what one run prints: each list is one engine's view
            if files.headers:
                from hfmem.render.text import to_text

                for engine in ("vllm", "transformers"):
                    report = attach_sections(analyze_files(model_files(folder, repo)), ctx=args.ctx, engine=engine)
                    outputs.append([line for line in to_text(report).splitlines() if line.strip()
                                    and not line.startswith(("---", "=="))])
            else:
                from hfmem.model.architecture import build_architecture

                arch, arch_lines = build_architecture(files.config)
                context = parse_context(args.ctx, arch)[0]
                for engine in ("vllm", "transformers"):
                    est = estimate_kv(arch, context, engine=engine)
                    outputs.append(arch_lines + est.warnings + est.assumptions)
        except Exception as exc:  # a developer report: every failure is listed, none stops the sweep
            problems.append(f"FAILED {type(exc).__name__}: {str(exc)[:160]}")
            outputs = []
        lines = [line for out in outputs for line in out]
        twice = sorted({w for out in outputs for w, n in collections.Counter(
            x for x in out if "warning" in x or "note" in x or "counted as" in x or "not modelled" in x).items() if n > 1})
        problems += [f"twice: {w[:140]}" for w in twice]
        problems += [f"fallback: {w[:140]}" for w in lines if "counted as" in w]
        if problems:
            bad += 1
            print(repo)
            for p in problems:
                print("   ", p)
    print(f"{bad} model(s) with problems")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
