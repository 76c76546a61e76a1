"""The bench page's figure: one bar per task with a correct kernel, sorted, on a log2 speedup axis; each bar
links to the task's run and names it on hover. Estimated and measured speedups are separate charts, never
pooled (as in the HTML report)."""

from __future__ import annotations

import html
import math
from typing import Any

BAR, GAP, LEFT, RIGHT, TOP = 16, 4, 190, 40, 30
WIDTH = 760
COLOURS = {"estimated": "#4c72b0", "measured": "#55a868"}


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


def speedup_bars(tasks: list[dict[str, Any]]) -> list[str]:
    """One chart per kind of figure ("estimated", "measured") over the tasks with a correct kernel."""
    charts = []
    for kind in ("estimated", "measured"):
        rows = [t for t in tasks if t["correct"] and t["speedup"] and (t["kind"] or "estimated") == kind]
        if rows:
            charts.append(_chart(kind, rows))
    return charts
