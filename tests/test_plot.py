"""`hfmem plot` / `card --svg`: the plotted values are the analysis JSON's, read back from the SVG's geometry, and
the picture renders in a real headless browser (Debian's chromium) in light and dark mode, not blank."""

from __future__ import annotations

import collections
import json
import math
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from entry import cli  # noqa: F401  (fixture)
from hub_server import RepoSpec
from png import pixels

SVG = "{http://www.w3.org/2000/svg}"
REPO = "Qwen/Qwen2-7B-Instruct"
TERMS = ("weights_bytes", "kv_bytes", "activation_bytes", "overhead_bytes")


@pytest.fixture
def qwen_on_hub(hub_env, stub_repo):
    hub_env.add_repo(REPO, RepoSpec(root=stub_repo(REPO)))
    return REPO


def _json(cli, args):
    r = cli(args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_plotted_numbers_are_the_analysis_numbers(cli, qwen_on_hub):
    curves = _json(cli, ["plot", REPO, "--gpu", "3060,4090", "--dtype", "auto,int4", "--format", "json"])
    assert curves["contexts"] == [1024, 2048, 4096, 8192, 16384, 32768]  # powers of two up to the model's 32,768
    for curve in curves["curves"]:
        for point in curve["points"][::2] + curve["points"][-1:]:
            plan = _json(cli, [REPO, "--ctx", str(point["context"]), "--dtype", curve["precision"], "--format", "json"])
            inference = plan["inference"]
            assert inference["precision"] == curve["label"]
            for key in (*TERMS, "total_bytes"):
                assert point[key] == inference[key], (curve["precision"], point["context"], key)
    for budget in curves["budgets"]:
        plan = _json(cli, [REPO, "--ctx", "4k", "--gpu", budget["key"], "--format", "json"])
        assert budget["budget_bytes"] == plan["inference"]["budget_bytes"]


def _read_back(svg_text: str) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """precision -> term -> [(context, cumulative bytes at the area's top edge)], inverted from pixel coordinates."""
    root = ET.fromstring(svg_text)
    out: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for panel in root.iter(f"{SVG}g"):
        if panel.get("class") != "panel":
            continue
        a = {k: float(panel.get(k)) for k in ("data-x-left", "data-x-right", "data-log2-min", "data-log2-max",
                                              "data-y-top", "data-y-bottom", "data-ymax-bytes")}
        areas: dict[str, list[tuple[int, float]]] = {}
        for poly in panel.iter(f"{SVG}polygon"):
            coords = [tuple(map(float, p.split(","))) for p in poly.get("points").split()]
            top_edge = coords[: len(coords) // 2]
            read = []
            for x, y in top_edge:
                log2 = a["data-log2-min"] + (x - a["data-x-left"]) / (a["data-x-right"] - a["data-x-left"]) * (
                    a["data-log2-max"] - a["data-log2-min"])
                value = (a["data-y-bottom"] - y) / (a["data-y-bottom"] - a["data-y-top"]) * a["data-ymax-bytes"]
                read.append((round(2**log2), value))
            areas[poly.get("data-term")] = read
        out[panel.get("data-precision")] = areas
    return out


def test_svg_geometry_reads_back_as_the_json(cli, qwen_on_hub, tmp_path):
    out = tmp_path / "memory.svg"
    r = cli(["plot", REPO, "--gpu", "4090", "-o", str(out)])
    assert r.returncode == 0, r.stderr
    curves = _json(cli, ["plot", REPO, "--gpu", "4090", "--format", "json"])
    text = out.read_text()
    read = _read_back(text)
    assert set(read) == {"bf16", "fp8", "int4"}
    for curve in curves["curves"]:
        areas = read[curve["precision"]]
        panel_px = 260 - 34 - 46  # svg.PANEL_H - MARGIN_T - MARGIN_B
        root = ET.fromstring(text)
        ymax = next(float(g.get("data-ymax-bytes")) for g in root.iter(f"{SVG}g") if g.get("data-precision") == curve["precision"])
        tolerance = ymax / panel_px * 0.011  # coordinates are written to 0.01 px
        below = [0] * len(curve["points"])
        for term in TERMS:
            upper = [b + p[term] for b, p in zip(below, curve["points"])]
            assert [c for c, _ in areas[term]] == [p["context"] for p in curve["points"]]
            for (_, value), expected in zip(areas[term], upper):
                assert math.isclose(value, expected, abs_tol=tolerance), (curve["precision"], term, value, expected)
            below = upper
    budget = next(e for e in ET.fromstring(text).iter(f"{SVG}line") if e.get("class") == "budget")
    assert int(budget.get("data-budget-bytes")) == curves["budgets"][0]["budget_bytes"]


def test_card_svg_and_hostile_repo_text_is_escaped(cli, hub_env, stub_repo, tmp_path):
    from stubs import load_config, load_inventory, write_stub_repo

    config = load_config(REPO)
    config["model_type"] = "qwen2"
    hostile = "org/x<script>alert(1)</script>"
    root = write_stub_repo(load_inventory(REPO), config, tmp_path / "x")
    out = tmp_path / "card.svg"
    r = cli(["card", str(root), "--no-training", "--svg", str(out)])
    assert r.returncode == 0, r.stderr
    ET.fromstring(out.read_text())  # well-formed XML
    from hfmem.memory.curve import MemoryCurves
    from hfmem.render.svg import curves_svg

    curves = MemoryCurves(hostile, None, "vllm", "cuda", 1, 1, [1024, 2048], [], [])
    text = curves_svg(curves)
    assert "<script>" not in text and "&lt;script&gt;" in text
    ET.fromstring(text)


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("HFMEM_REQUIRE_BROWSER"):
            pytest.fail("HFMEM_REQUIRE_BROWSER is set and no chromium is installed")
        pytest.skip("no chromium (CI installs it and sets HFMEM_REQUIRE_BROWSER=1)")
    return exe


def _screenshot(exe: str, url: str, png: Path, dark: bool) -> list[tuple[int, int, int]]:
    args = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--screenshot={png}",
            "--window-size=1140,380", url]
    if dark:
        args.insert(1, "--blink-settings=preferredColorScheme=0")  # blink's PreferredColorScheme: 0 = dark
    subprocess.run(args, capture_output=True, timeout=120, check=False)
    assert png.exists(), "chromium wrote no screenshot"
    return pixels(png.read_bytes())


def _near(p: tuple[int, int, int], q: tuple[float, float, float], tol: int = 6) -> bool:
    return all(abs(a - b) <= tol for a, b in zip(p, q))


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_svg_renders_in_a_real_browser(cli, qwen_on_hub, tmp_path, dark):
    exe = _chromium()
    svg = tmp_path / "memory.svg"
    r = cli(["plot", REPO, "--gpu", "3060,4090,h100", "-o", str(svg)])
    assert r.returncode == 0, r.stderr
    background = (13, 17, 23) if dark else (255, 255, 255)  # GitHub's dark page; a plain white page
    page = tmp_path / "page.html"
    page.write_text(f'<html><body style="margin:0;background:rgb{background}"><img src="memory.svg"></body></html>')
    shot = _screenshot(exe, page.as_uri(), tmp_path / "shot.png", dark)
    counts = collections.Counter(shot)
    assert counts.most_common(1)[0][1] < 0.9 * len(shot), "blank screenshot"
    from hfmem.render.svg import TERMS as FILLS

    curves = _json(cli, ["plot", REPO, "--gpu", "3060,4090,h100", "--format", "json"])
    ymax = float(next(g.get("data-ymax-bytes") for g in ET.fromstring(svg.read_text()).iter(f"{SVG}g")
                      if g.get("class") == "panel"))
    checked = 0
    for term, _, fill in FILLS:  # each stacked term tall enough to see is on screen: its fill at 0.9 opacity
        tallest = max(p[term] for c in curves["curves"] for p in c["points"]) / ymax * (260 - 34 - 46)
        if tallest < 3:  # a band under 3 px is anti-aliased into its neighbours
            continue
        checked += 1
        rgb = tuple(int(fill[i : i + 2], 16) for i in (1, 3, 5))
        blended = tuple(0.9 * c + 0.1 * b for c, b in zip(rgb, background))
        seen = sum(n for p, n in counts.items() if _near(p, blended))
        assert seen >= 50, (term, seen)
    assert checked >= 3
    text = (230, 237, 243) if dark else (31, 35, 40)  # the stylesheet's text colour for the scheme
    assert sum(n for p, n in counts.items() if _near(p, text, 10)) >= 100, "no legible text in this colour scheme"
