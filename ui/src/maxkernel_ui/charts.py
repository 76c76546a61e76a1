"""The bench page's figures, those of the HTML report made interactive: the speedup per task (one bar per
task with a correct kernel, sorted, log2 axis), the speedup distribution (from ``MIN_FOR_HISTOGRAM`` tasks)
and the roofline fraction against arithmetic intensity. Every bar or point names its task(s) on hover and
links to the task's run. Estimated and measured figures are separate charts, never pooled."""

from __future__ import annotations

import html
import math
from typing import Any

BAR, GAP, LEFT, RIGHT, TOP = 16, 4, 190, 40, 30
WIDTH = 760
COLOURS = {"estimated": "#4c72b0", "measured": "#55a868"}
MIN_FOR_HISTOGRAM = 8
PLOT_H = 220


def _x(value: float, lo: int, hi: int) -> float:
    span = WIDTH - LEFT - RIGHT
    return LEFT + span * (math.log2(value) - lo) / (hi - lo)


def _chart(kind: str, rows: list[dict[str, Any]]) -> str:
    rows = sorted(rows, key=lambda r: r["speedup"])
    logs = [math.log2(r["speedup"]) for r in rows]
    lo, hi = math.floor(min([*logs, 0.0])), math.ceil(max([*logs, 0.0]))
    lo, hi = (lo - 1, hi + 1) if lo == hi else (lo, hi)
    height = TOP + len(rows) * (BAR + GAP) + 30
    one = _x(1.0, lo, hi)
    e = html.escape
    parts = [f'<svg class="bench-chart" data-kind="{e(kind)}" width="{WIDTH}" height="{height}" role="img" '
             f'aria-label="speedup per task, {e(kind)}"><text x="{LEFT}" y="16" font-size="12">speedup vs XLA, '
             f'{e(kind)} (log scale; right of 1x: faster); click a bar for its run</text>']
    for k in range(lo, hi + 1):
        x = _x(2.0 ** k, lo, hi)
        parts.append(f'<line x1="{x:.1f}" y1="{TOP - 4}" x2="{x:.1f}" y2="{height - 26}" stroke="#eee"/>'
                     f'<text x="{x:.1f}" y="{height - 12}" font-size="10" text-anchor="middle">{2.0 ** k:g}x</text>')
    for i, r in enumerate(rows):
        y = TOP + i * (BAR + GAP)
        x = _x(r["speedup"], lo, hi)
        left, width = min(x, one), max(abs(x - one), 1.0)
        label = f'{r["task"]}: {r["speedup"]:.2f}x ({kind})'
        bar = (f'<rect x="{left:.1f}" y="{y}" width="{width:.1f}" height="{BAR}" fill="{COLOURS.get(kind, "#888")}">'
               f'<title>{e(label)}</title></rect>')
        link = f'<a href="/runs/{e(r["run"])}">{bar}</a>' if r.get("run") else bar
        parts.append(f'<g class="bar" data-task="{e(r["task"])}">{link}<text x="{LEFT - 6}" y="{y + 12}" '
                     f'font-size="10" text-anchor="end">{e(r["task"][:30])}</text></g>')
    parts.append(f'<line x1="{one:.1f}" y1="{TOP - 4}" x2="{one:.1f}" y2="{height - 26}" stroke="#000"/></svg>')
    return "".join(parts)


def _histogram(kind: str, rows: list[dict[str, Any]]) -> str:
    """Tasks per half-octave of speedup; a bin names its tasks on hover."""
    e = html.escape
    bins: dict[int, list[str]] = {}
    for r in rows:
        bins.setdefault(math.floor(math.log2(r["speedup"]) * 2), []).append(r["task"])
    lo, hi = min(min(bins), -1), max(max(bins), 1)
    width = (WIDTH - LEFT - RIGHT) / (hi - lo + 1)
    top = max(len(v) for v in bins.values())
    parts = [f'<svg class="bench-hist" data-kind="{e(kind)}" width="{WIDTH}" height="{PLOT_H + 50}" role="img" '
             f'aria-label="speedup distribution"><text x="{LEFT}" y="16" font-size="12">speedup distribution, '
             f'{e(kind)}: tasks per half-octave (hover: which)</text>']
    for b in range(lo, hi + 1):
        x = LEFT + (b - lo) * width
        names = bins.get(b, [])
        h = PLOT_H * len(names) / top
        parts.append(f'<rect x="{x:.1f}" y="{TOP + PLOT_H - h:.1f}" width="{width - 2:.1f}" height="{h:.1f}" '
                     f'fill="{COLOURS.get(kind, "#888")}"><title>{e(", ".join(names) or "none")}</title></rect>')
        if b % 2 == 0:
            parts.append(f'<text x="{x:.1f}" y="{TOP + PLOT_H + 14}" font-size="10">{2.0 ** (b / 2):g}x</text>')
    parts.append("</svg>")
    return "".join(parts)


def _roofline(kind: str, rows: list[dict[str, Any]]) -> str:
    """Fraction of the roofline reached against arithmetic intensity (log); a point links to its run."""
    e = html.escape
    logs = [math.log10(r["intensity"]) for r in rows]
    lo, hi = math.floor(min(logs)), math.ceil(max(logs))
    hi = max(hi, lo + 1)
    span = WIDTH - LEFT - RIGHT
    parts = [f'<svg class="bench-roofline" data-kind="{e(kind)}" width="{WIDTH}" height="{PLOT_H + 50}" role="img" '
             f'aria-label="roofline fraction"><text x="{LEFT}" y="16" font-size="12">fraction of the roofline, '
             f'{e(kind)}, against arithmetic intensity (FLOP/byte, log)</text>'
             f'<line x1="{LEFT}" y1="{TOP + PLOT_H}" x2="{WIDTH - RIGHT}" y2="{TOP + PLOT_H}" stroke="#999"/>']
    for k in range(lo, hi + 1):
        x = LEFT + span * (k - lo) / (hi - lo)
        parts.append(f'<text x="{x:.1f}" y="{TOP + PLOT_H + 14}" font-size="10" text-anchor="middle">{10.0 ** k:g}</text>')
    for r, v in zip(rows, logs, strict=True):
        x, y = LEFT + span * (v - lo) / (hi - lo), TOP + PLOT_H * (1 - min(r["roofline"], 1.0))
        dot = (f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{COLOURS.get(kind, "#888")}"><title>'
               f'{e(r["task"])}: {r["roofline"]:.0%} of roofline at {r["intensity"]:.3g} FLOP/byte</title></circle>')
        parts.append(f'<g class="point" data-task="{e(r["task"])}">'
                     + (f'<a href="/runs/{e(r["run"])}">{dot}</a>' if r.get("run") else dot) + "</g>")
    parts.append("</svg>")
    return "".join(parts)


def speedup_bars(tasks: list[dict[str, Any]]) -> list[str]:
    """Per kind of figure ("estimated", "measured") over the tasks with a correct kernel: the bars, the
    distribution (from MIN_FOR_HISTOGRAM tasks) and the roofline scatter (where the model gave one)."""
    charts = []
    for kind in ("estimated", "measured"):
        rows = [t for t in tasks if t["correct"] and t["speedup"] and (t["kind"] or "estimated") == kind]
        if rows:
            charts.append(_chart(kind, rows))
        if len(rows) >= MIN_FOR_HISTOGRAM:
            charts.append(_histogram(kind, rows))
        roof = [t for t in rows if t.get("roofline") is not None and t.get("intensity")]
        if roof:
            charts.append(_roofline(kind, roof))
    return charts
