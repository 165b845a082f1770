"""Memory against context as a plain SVG (no plotting library): one panel per precision, the plan's terms stacked
(weights, KV cache, activations, runtime overhead) over a log2 context axis, each GPU's budget as a dashed line.

Readable on GitHub in light and dark mode: text, grid and budget colours follow ``prefers-color-scheme`` (which an
SVG shown through ``<img>`` still sees), the background is transparent, the fills are mid-tone. Every text that
came from a repo or a user is XML-escaped. Each panel carries its axis mapping (``data-*``) and each stacked area
its term, so a test can read the plotted values back from the geometry."""

from __future__ import annotations

import math
from xml.sax.saxutils import escape, quoteattr

from hfmem.memory.curve import CurvePoint, MemoryCurves

GiB = 2**30

# (term, legend label, fill): bottom to top of the stack.
TERMS = (
    ("weights_bytes", "weights", "#4c72b0"),
    ("kv_bytes", "KV cache", "#dd8452"),
    ("activation_bytes", "activations", "#55a868"),
    ("overhead_bytes", "runtime overhead", "#8172b3"),
)
PANEL_W, PANEL_H = 380, 260
MARGIN_L, MARGIN_R, MARGIN_T, MARGIN_B = 62, 16, 34, 46
PER_ROW = 3
HEADER_H, LEGEND_H = 44, 30

_STYLE = """
text { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; font-size: 12px; fill: #1f2328; }
.title { font-size: 15px; font-weight: 600; }
.sub { fill: #59636e; }
.axis { stroke: #59636e; stroke-width: 1; }
.grid { stroke: #d1d9e0; stroke-width: 1; }
.budget { stroke: #cf222e; stroke-width: 1.5; stroke-dasharray: 6 4; fill: none; }
.budget-label { fill: #cf222e; font-size: 11px; }
@media (prefers-color-scheme: dark) {
  text { fill: #e6edf3; }
  .sub { fill: #9198a1; }
  .axis { stroke: #9198a1; }
  .grid { stroke: #3d444d; }
  .budget { stroke: #ff7b72; }
  .budget-label { fill: #ff7b72; }
}
"""


def _nice_step(top: float) -> float:
    """A 1/2/5 x 10^k GiB step giving 4-8 gridlines up to ``top`` GiB."""
    raw = top / 6 if top > 0 else 1
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def _ctx_label(tokens: int) -> str:
    if tokens % (1024 * 1024) == 0:
        return f"{tokens // (1024 * 1024)}M"
    if tokens % 1024 == 0:
        return f"{tokens // 1024}k"
    return f"{tokens:,}"


def _gib(n: float) -> str:
    return f"{n:g}" if n >= 10 or n == int(n) else f"{n:.1f}"


def curves_svg(curves: MemoryCurves) -> str:
    n = len(curves.curves)
    cols = max(1, min(n, PER_ROW))
    rows = max(1, math.ceil(n / cols))
    width = cols * PANEL_W
    height = HEADER_H + LEGEND_H + rows * PANEL_H
    contexts = curves.contexts
    lo, hi = math.log2(contexts[0]), math.log2(contexts[-1])
    # The scale shows the data and the budgets up to the first one above the data; larger GPUs would flatten the
    # stack to a sliver, so they are named at the panel's top edge as off the scale.
    data_top = max([p.total_bytes for c in curves.curves for p in c.points] + [1])
    above = [b.budget_bytes for b in curves.budgets if b.budget_bytes >= data_top]
    top_bytes = max([data_top] + [b.budget_bytes for b in curves.budgets if b.budget_bytes < data_top]
                    + ([min(above)] if above else []))
    step = _nice_step(top_bytes * 1.05 / GiB)
    ymax_gib = step * math.ceil(top_bytes * 1.05 / GiB / step)
    ymax = ymax_gib * GiB

    per_gpu = f", per GPU of {curves.gpus}" if curves.gpus > 1 else ""
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label={quoteattr(f"Memory against context for {curves.repo}")}>',
        f"<style>{_STYLE}</style>",
        f'<text class="title" x="12" y="22">{escape(curves.repo)}: memory against context</text>',
        f'<text class="sub" x="12" y="38">{escape(curves.engine)} on {escape(curves.device)}, batch {curves.batch}{per_gpu}; '
        f"GiB (2^30 bytes); dashed: usable memory of each GPU</text>",
    ]
    x = 12
    for _, label, colour in TERMS:
        out.append(f'<rect x="{x}" y="{HEADER_H + 8}" width="12" height="12" fill="{colour}"/>')
        out.append(f'<text x="{x + 17}" y="{HEADER_H + 18}">{escape(label)}</text>')
        x += 30 + 7 * len(label)

    for i, curve in enumerate(curves.curves):
        ox = (i % cols) * PANEL_W
        oy = HEADER_H + LEGEND_H + (i // cols) * PANEL_H
        left, right = ox + MARGIN_L, ox + PANEL_W - MARGIN_R
        top, bottom = oy + MARGIN_T, oy + PANEL_H - MARGIN_B

        def px(tokens: int, left: float = left, right: float = right) -> float:
            frac = (math.log2(tokens) - lo) / (hi - lo) if hi > lo else 0.5
            return round(left + frac * (right - left), 2)

        def py(value: float, top: float = top, bottom: float = bottom) -> float:
            return round(bottom - value / ymax * (bottom - top), 2)

        out.append(
            f'<g class="panel" data-precision={quoteattr(curve.precision)} data-x-left="{left}" data-x-right="{right}" '
            f'data-log2-min="{lo}" data-log2-max="{hi}" data-y-top="{top}" data-y-bottom="{bottom}" data-ymax-bytes="{int(ymax)}">'
        )
        out.append(f'<text class="title" x="{left}" y="{oy + 20}">{escape(curve.label)}</text>')
        g = 0.0
        while g <= ymax_gib + 1e-9:
            y = py(g * GiB)
            out.append(f'<line class="grid" x1="{left}" y1="{y}" x2="{right}" y2="{y}"/>')
            out.append(f'<text class="sub" x="{left - 6}" y="{y + 4}" text-anchor="end">{_gib(g)}</text>')
            g += step
        below = [0] * len(curve.points)
        for term, label, colour in TERMS:
            values = [getattr(p, term) for p in curve.points]
            upper = [b + v for b, v in zip(below, values)]
            pts = [f"{px(p.context)},{py(u)}" for p, u in zip(curve.points, upper)]
            pts += [f"{px(p.context)},{py(b)}" for p, b in zip(reversed(curve.points), reversed(below))]
            out.append(f'<polygon data-term="{term}" fill="{colour}" fill-opacity="0.9" points="{" ".join(pts)}">'
                       f"<title>{escape(label)}</title></polygon>")
            below = upper
        for p in curve.points:
            out.append(_point(p, px(p.context), py(p.total_bytes)))
        out.append(f'<line class="axis" x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}"/>')
        out.append(f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{bottom}"/>')
        for c in _tick_contexts(contexts):
            out.append(f'<text class="sub" x="{px(c)}" y="{bottom + 16}" text-anchor="middle">{_ctx_label(c)}</text>')
        out.append(f'<text class="sub" x="{(left + right) / 2}" y="{bottom + 34}" text-anchor="middle">context (tokens)</text>')
        off_scale = [b for b in curves.budgets if b.budget_bytes > ymax]
        if off_scale:
            names = ", ".join(f"{b.name} ({b.budget_bytes / GiB:.1f})" for b in off_scale)
            out.append(f'<text class="budget-label" x="{right - 2}" y="{top - 4}" text-anchor="end">'
                       f"above: {escape(names)}</text>")
        for b in curves.budgets:
            if b.budget_bytes > ymax:
                continue
            y = py(b.budget_bytes)
            out.append(f'<line class="budget" data-gpu={quoteattr(b.key)} data-budget-bytes="{b.budget_bytes}" '
                       f'x1="{left}" y1="{y}" x2="{right}" y2="{y}"/>')
            out.append(f'<text class="budget-label" x="{right - 2}" y="{y - 4}" text-anchor="end">'
                       f"{escape(b.name)} ({b.budget_bytes / GiB:.1f})</text>")
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _point(p: CurvePoint, x: float, y: float) -> str:
    """An invisible hover target with the exact figures (browsers show <title> when the SVG is opened directly)."""
    detail = (f"{p.context:,} tokens: {p.total_bytes / GiB:.2f} GiB = weights {p.weights_bytes / GiB:.2f} + KV "
              f"{p.kv_bytes / GiB:.2f} + activations {p.activation_bytes / GiB:.2f} + overhead {p.overhead_bytes / GiB:.2f}")
    return (f'<circle class="point" cx="{x}" cy="{y}" r="4" fill="transparent" data-context="{p.context}" '
            f'data-total-bytes="{p.total_bytes}"><title>{escape(detail)}</title></circle>')


def _tick_contexts(contexts: list[int]) -> list[int]:
    """At most 7 context labels, the first and the last always."""
    if len(contexts) <= 7:
        return contexts
    every = math.ceil((len(contexts) - 1) / 6)
    picked = contexts[::every]
    return picked if picked[-1] == contexts[-1] else picked[:-1] + [contexts[-1]]
