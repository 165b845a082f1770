"""Memory against context as a plain SVG (no plotting library): one panel per precision, weights / KV cache /
activations + overhead stacked, each GPU's budget a dashed line. Text and axes follow the viewer's light or dark
scheme (prefers-color-scheme, which GitHub's image rendering honours); the fills are mid-tones readable on both.
Every marker on a total line carries its numbers (data-context, data-total-bytes), so tests can check the plot
against the JSON."""

from __future__ import annotations

import math
from html import escape

from hfmem.memory.curves import Curves

PANEL_W, PANEL_H = 300, 220
LEFT, TOP, BOTTOM, GAP = 56, 64, 44, 48
COLORS = {"weights": "#4C78A8", "kv": "#F58518", "runtime": "#54A24B", "budget": "#E45756"}
GiB = 2**30


def _nice(top: float) -> float:
    """A round axis maximum at or above ``top`` GiB: four steps of 1, 2, 2.5, 3, 4, 5, 6 or 8 x 10^k."""
    if top <= 0:
        return 4.0
    step = top / 4
    exp = 10.0 ** math.floor(math.log10(step))
    for m in (1.0, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0):
        if m * exp >= step:
            return 4 * m * exp
    return 40 * exp


def _ctx_label(c: int) -> str:
    return f"{c // 1048576}M" if c >= 1048576 and c % 1048576 == 0 else f"{c // 1024}k" if c >= 1024 and c % 1024 == 0 else f"{c:,}"


def axes(curves: Curves) -> tuple[float, int, int]:
    """(y maximum in GiB, first context, last context): the mapping tests use to read values back."""
    totals = [p.total_bytes for s in curves.series.values() for p in s] + [b for _, b in curves.budgets]
    contexts = [p.context for s in curves.series.values() for p in s]
    return _nice(max(totals) / GiB * 1.05), min(contexts), max(contexts)


def x_of(panel: int, context: int, lo: int, hi: int) -> float:
    x0 = LEFT + panel * (PANEL_W + GAP)
    span = math.log2(hi) - math.log2(lo) or 1.0
    return x0 + (math.log2(context) - math.log2(lo)) / span * PANEL_W


def y_of(value_bytes: float, ymax_gib: float) -> float:
    return TOP + PANEL_H - (value_bytes / GiB) / ymax_gib * PANEL_H


def render_svg(curves: Curves) -> str:
    ymax, lo, hi = axes(curves)
    n = max(1, len(curves.series))
    width = LEFT + n * PANEL_W + (n - 1) * GAP + 24
    height = TOP + PANEL_H + BOTTOM
    per = " per GPU" if curves.gpus > 1 else ""
    title = f"{curves.repo}: memory{per} against context ({curves.engine}, batch {curves.batch}" + (f", TP {curves.gpus})" if curves.gpus > 1 else ")")
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'font-family="-apple-system, Segoe UI, Helvetica, Arial, sans-serif" font-size="11">',
        "<style>.fg{fill:#24292f}.ax{stroke:#57606a}.grid{stroke:#d0d7de}"
        "@media (prefers-color-scheme: dark){.fg{fill:#c9d1d9}.ax{stroke:#8b949e}.grid{stroke:#30363d}}</style>",
        f'<text class="fg" x="{LEFT}" y="18" font-size="13" font-weight="600">{escape(title)}</text>',
    ]
    legend = [("weights", "weights"), ("kv", "KV cache"), ("runtime", "activations + overhead")]
    lx = float(LEFT)
    for key, label in legend:
        out.append(f'<rect x="{lx}" y="28" width="10" height="10" fill="{COLORS[key]}"/>'
                   f'<text class="fg" x="{lx + 14}" y="37">{label}</text>')
        lx += 24 + 6.5 * len(label)
    if curves.budgets:
        out.append(f'<line x1="{lx}" y1="33" x2="{lx + 16}" y2="33" stroke="{COLORS["budget"]}" stroke-width="2" '
                   f'stroke-dasharray="4 3"/><text class="fg" x="{lx + 20}" y="37">GPU budget{per}</text>')
    for i, (label, points) in enumerate(curves.series.items()):
        x0 = LEFT + i * (PANEL_W + GAP)
        out.append(f'<g data-precision="{escape(label)}">')
        out.append(f'<text class="fg" x="{x0 + PANEL_W / 2}" y="{TOP - 8}" text-anchor="middle" font-weight="600">{escape(label)}</text>')
        for k in range(5):  # y grid and labels
            v = ymax * k / 4
            y = TOP + PANEL_H - PANEL_H * k / 4
            out.append(f'<line class="grid" x1="{x0}" y1="{y:.2f}" x2="{x0 + PANEL_W}" y2="{y:.2f}" stroke-width="0.5"/>')
            out.append(f'<text class="fg" x="{x0 - 4}" y="{y + 4:.2f}" text-anchor="end">{v:g}</text>')
        lows: list[float] = [0.0] * len(points)
        for key, part in (("weights", lambda p: p.weights_bytes), ("kv", lambda p: p.kv_bytes),
                          ("runtime", lambda p: p.activation_bytes + p.overhead_bytes)):
            highs = [lo_ + part(p) for lo_, p in zip(lows, points)]
            top = [f"{x_of(i, p.context, lo, hi):.2f},{y_of(h, ymax):.2f}" for p, h in zip(points, highs)]
            bottom = [f"{x_of(i, p.context, lo, hi):.2f},{y_of(b, ymax):.2f}" for p, b in zip(reversed(points), reversed(lows))]
            out.append(f'<polygon data-part="{key}" points="{" ".join(top + bottom)}" fill="{COLORS[key]}" fill-opacity="0.85"/>')
            lows = highs
        for p in points:
            out.append(f'<circle class="pt" cx="{x_of(i, p.context, lo, hi):.2f}" cy="{y_of(p.total_bytes, ymax):.2f}" r="2" '
                       f'fill="{COLORS["runtime"]}" data-context="{p.context}" data-total-bytes="{p.total_bytes}"/>')
        for name, budget in curves.budgets:
            y = y_of(budget, ymax)
            out.append(f'<line class="budget" x1="{x0}" y1="{y:.2f}" x2="{x0 + PANEL_W}" y2="{y:.2f}" stroke="{COLORS["budget"]}" '
                       f'stroke-width="1.5" stroke-dasharray="4 3" data-gpu="{escape(name)}" data-budget-bytes="{budget}"/>')
            out.append(f'<text class="fg" x="{x0 + PANEL_W - 2}" y="{y - 3:.2f}" text-anchor="end">{escape(name)}</text>')
        out.append(f'<line class="ax" x1="{x0}" y1="{TOP + PANEL_H}" x2="{x0 + PANEL_W}" y2="{TOP + PANEL_H}"/>'
                   f'<line class="ax" x1="{x0}" y1="{TOP}" x2="{x0}" y2="{TOP + PANEL_H}"/>')
        for p in points:  # x ticks at the contexts
            x = x_of(i, p.context, lo, hi)
            out.append(f'<line class="ax" x1="{x:.2f}" y1="{TOP + PANEL_H}" x2="{x:.2f}" y2="{TOP + PANEL_H + 4}"/>')
        labelled = list(dict.fromkeys(points[:: max(1, len(points) // 5)] + points[-1:]))
        for p in labelled:
            x = x_of(i, p.context, lo, hi)
            out.append(f'<text class="fg" x="{x:.2f}" y="{TOP + PANEL_H + 16}" text-anchor="middle">{_ctx_label(p.context)}</text>')
        out.append(f'<text class="fg" x="{x0 + PANEL_W / 2}" y="{TOP + PANEL_H + 34}" text-anchor="middle">context (tokens)</text>')
        out.append("</g>")
    out.append(f'<text class="fg" transform="translate(14 {TOP + PANEL_H / 2}) rotate(-90)" text-anchor="middle">GiB{per}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
