"""hfmem plot: memory against context per precision as a plain SVG. Through the installed entry point on the local
Hub: the plotted points and budget lines sit where the JSON's numbers put them on the drawn axes (read back from the
SVG's own tick labels), the JSON equals the planner's answers for the same options, and a real headless browser
(Debian's chromium) renders it, non-blank, with dark text on light and light text on dark."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib

import numpy as np
import pytest
from hub_server import RepoSpec

from entry import cli  # noqa: F401  (fixture)

QWEN = "Qwen/Qwen2-7B-Instruct"
NS = {"s": "http://www.w3.org/2000/svg"}
TOP, PANEL_H = 64, 220  # the plot area as documented in hfmem/render/svg.py


@pytest.fixture
def qwen(hub_env, stub_repo):
    hub_env.add_repo(QWEN, RepoSpec(root=stub_repo(QWEN)))
    return QWEN


def test_points_and_budgets_are_the_json_numbers(qwen, cli, tmp_path):  # noqa: F811
    svg_path = tmp_path / "memory.svg"
    out = cli(["plot", qwen, "--gpu", "4090,3060", "-o", str(svg_path)])
    assert out.returncode == 0 and f"wrote {svg_path}" in out.stderr
    data = json.loads(cli(["plot", qwen, "--gpu", "4090,3060", "--format", "json"]).stdout)
    assert list(data["series"]) == ["bf16", "fp8", "int4"] and [b["gpu"] for b in data["budgets"]] == ["RTX 4090 24GB", "RTX 3060 12GB"]
    root = ET.parse(svg_path).getroot()
    panels = root.findall("s:g", NS)
    assert [g.get("data-precision") for g in panels] == ["bf16", "fp8", "int4"]
    for panel in panels:
        ticks = sorted(float(t.text) for t in panel.findall("s:text", NS) if t.text and t.text.replace(".", "").isdigit()
                       and t.get("text-anchor") == "end")
        ymax = ticks[-1]  # the top y label, GiB
        series = data["series"][panel.get("data-precision")]
        points = panel.findall("s:circle", NS)
        assert [int(c.get("data-context")) for c in points] == [p["context"] for p in series]
        for c, p in zip(points, series):
            assert int(c.get("data-total-bytes")) == p["total_bytes"]
            assert float(c.get("cy")) == pytest.approx(TOP + PANEL_H - p["total_bytes"] / 2**30 / ymax * PANEL_H, abs=0.01)
        for line, budget in zip(panel.findall("s:line[@class='budget']", NS), data["budgets"]):
            assert int(line.get("data-budget-bytes")) == budget["budget_bytes"]
            assert float(line.get("y1")) == pytest.approx(TOP + PANEL_H - budget["budget_bytes"] / 2**30 / ymax * PANEL_H, abs=0.01)
    # the numbers are the planner's: hfmem MODEL at that context and precision
    for precision, ctx in (("bf16", 32768), ("int4", 4096)):
        plan = json.loads(cli([qwen, "--ctx", str(ctx), "--dtype", precision, "--gpu", "4090", "--format", "json"]).stdout)["inference"]
        point = next(p for p in data["series"][precision] if p["context"] == ctx)
        assert point["total_bytes"] == plan["total_bytes"] and point["kv_bytes"] == plan["kv_bytes"]
    assert data["budgets"][0]["budget_bytes"] == plan["budget_bytes"]


def _png_pixels(path) -> np.ndarray:
    """RGB(A) pixels of a non-interlaced 8-bit PNG (what chromium writes), decoded with zlib."""
    raw = path.read_bytes()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    at, idat, width = 8, b"", 0
    while at < len(raw):
        length, kind = struct.unpack(">I4s", raw[at:at + 8])
        body = raw[at + 8:at + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6)
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    data = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f, line = data[y * (stride + 1)], bytearray(data[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b, c = prev[i], prev[i - channels] if i >= channels else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(height, width, channels)[:, :, :3]


def _near(pixels: np.ndarray, rgb: tuple[int, int, int], tol: int = 12) -> int:
    return int((np.abs(pixels.astype(int) - np.array(rgb)).max(axis=2) <= tol).sum())


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium renders the SVG")
def test_a_real_browser_renders_it_in_light_and_dark(qwen, cli, tmp_path):  # noqa: F811
    svg = tmp_path / "memory.svg"
    assert cli(["plot", qwen, "--gpu", "4090", "-o", str(svg)]).returncode == 0
    shots = {}
    for scheme, flags in (("light", ["--blink-settings=preferredColorScheme=1"]), ("dark", ["--blink-settings=preferredColorScheme=0"])):
        png = tmp_path / f"{scheme}.png"
        subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", *flags, f"--screenshot={png}",
                        "--window-size=1100,340", svg.as_uri()], capture_output=True, timeout=120, check=True)
        shots[scheme] = _png_pixels(png)
    light, dark = shots["light"], shots["dark"]
    assert len(np.unique(light.reshape(-1, 3), axis=0)) > 50  # not blank
    assert _near(light, (0x4C, 0x78, 0xA8), 30) > 2000  # the weights area is drawn
    dark_text, light_text = (0x24, 0x29, 0x2F), (0xC9, 0xD1, 0xD9)
    # the text switches with the viewer's scheme: dark on light, light on dark (GitHub draws the dark background)
    assert _near(light, dark_text) > 200 and _near(light, dark_text) > 3 * _near(dark, dark_text)
    assert _near(dark, light_text) > 3 * _near(light, light_text)


def test_card_writes_the_picture_too(qwen, cli, tmp_path):  # noqa: F811
    svg = tmp_path / "card.svg"
    out = cli(["card", qwen, "--ctx", "4k", "--precisions", "bf16,int4", "--no-training", "--svg", str(svg)])
    assert out.returncode == 0, out.stderr
    root = ET.parse(svg).getroot()
    assert [g.get("data-precision") for g in root.findall("s:g", NS)] == ["bf16", "int4"]
