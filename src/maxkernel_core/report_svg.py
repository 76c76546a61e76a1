"""The run report's two figures, as inline SVG (no scripts, no network).

* Progress: each candidate's time against its evaluation number, the best
  verified time so far as a line. A candidate without a time (it failed) is a
  cross in its own strip under the axis, never a point at 0 us, where it would
  read as the fastest.
* The search tree, drawn by parent: each candidate one column right of the one
  it was made from, a subtree in one contiguous band of rows, so an edge joins a
  parent to its child and crosses no other box. The path to the best kernel is
  drawn bold.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

WIDTH, HEIGHT, PAD, STRIP = 760, 280, 56, 26
BOX_W, BOX_H, COL, ROW = 170, 34, 210, 44
COLOURS = {"ok": "#2a7", "incorrect": "#c33", "compile_error": "#d80", "rejected": "#a3a", "timeout": "#888",
           "crashed": "#555", "unverified": "#b9a000"}


def colour(status: str | None) -> str:
    return COLOURS.get(status or "", "#000")


def _ticks(top: float) -> list[float]:
    """Round tick values (us) from 0 to ``top``."""
    if top <= 0:
        return [0.0]
    step = 10 ** len(str(int(top / 4))) / 10 if top >= 4 else 1.0
    for mult in (1, 2, 2.5, 5, 10):
        if top / (step * mult) <= 5:
            step *= mult
            break
    return [i * step for i in range(int(top / step) + 1)]


def progress_svg(rows: list[dict[str, Any]]) -> str:
    timed = [r for r in rows if r["seconds"]]
    if not timed:
        return "<p>No candidate has a time to plot.</p>"
    kinds = {r["estimated"] for r in timed}
    label = ("estimated by the cost model" if kinds == {True} else "measured on the device" if kinds == {False}
             else "mixed: hollow points are estimates, filled ones measured")
    top_us = max(r["seconds"] for r in timed) * 1e6 * 1.1
    n = max(len(rows) - 1, 1)
    base = HEIGHT - PAD - STRIP  # the time axis; failures go in the strip below it

    def x_of(i: int) -> float:
        return PAD + (WIDTH - 2 * PAD) * i / n

    def y_of(us: float) -> float:
        return base - (base - PAD) * us / top_us

    parts = [f'<svg width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="progress" class="progress">',
             f'<text x="{PAD}" y="{PAD - 14}" font-size="12">time per call, us ({html.escape(label)})</text>',
             f'<line x1="{PAD}" y1="{base}" x2="{WIDTH - PAD}" y2="{base}" stroke="#999"/>',
             f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{base}" stroke="#999"/>',
             f'<text x="{PAD - 6}" y="{base + STRIP / 2 + 8}" font-size="10" text-anchor="end">failed</text>',
             f'<text x="{WIDTH - PAD}" y="{HEIGHT - 6}" font-size="12" text-anchor="end">evaluation</text>']
    for tick in _ticks(top_us / 1.1):
        y = y_of(tick)
        parts.append(f'<line x1="{PAD - 4}" y1="{y:.1f}" x2="{PAD}" y2="{y:.1f}" stroke="#999"/>'
                     f'<text x="{PAD - 6}" y="{y + 4:.1f}" font-size="10" text-anchor="end">{tick:,.0f}</text>')
    best, line = float("inf"), []
    for i, r in enumerate(rows):
        if r["seconds"] and r["status"] == "ok":
            best = min(best, r["seconds"] * 1e6)
        if best < float("inf"):
            line.append(f"{x_of(i):.1f},{y_of(best):.1f}")
    parts.append(f'<polyline points="{" ".join(line)}" fill="none" stroke="#26c" stroke-width="2"/>')
    for i, r in enumerate(rows):
        tip = f'<title>{html.escape(r["candidate"])}: {html.escape(r["status"])}</title>'
        if r["seconds"] and r["status"] == "ok":
            fill = "none" if r["estimated"] else colour(r["status"])
            parts.append(f'<circle class="point ok" cx="{x_of(i):.1f}" cy="{y_of(r["seconds"] * 1e6):.1f}" r="4" '
                         f'stroke="{colour(r["status"])}" fill="{fill}">{tip}</circle>')
        else:  # failed (even with an estimate): a cross in the strip, not a time
            x, y = x_of(i), base + STRIP / 2 + 4
            parts.append(f'<g class="point failed" stroke="{colour(r["status"])}" stroke-width="2">'
                         f'<line x1="{x - 4:.1f}" y1="{y - 4:.1f}" x2="{x + 4:.1f}" y2="{y + 4:.1f}"/>'
                         f'<line x1="{x - 4:.1f}" y1="{y + 4:.1f}" x2="{x + 4:.1f}" y2="{y - 4:.1f}"/>{tip}</g>')
    parts.append("</svg>")
    return "".join(parts)


def tree_layout(nodes: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """(column, row) of each node: column = depth below its root, rows in depth-first order, so every subtree
    is one contiguous band of rows and a parent sits on its first child's row."""
    ids = {n["id"] for n in nodes}
    children: dict[str | None, list[str]] = {}
    for n in nodes:
        parent = n["parent"] if n["parent"] in ids else None
        children.setdefault(parent, []).append(n["id"])
    where: dict[str, tuple[int, int]] = {}
    next_row = 0

    def place(node: str, depth: int) -> None:
        nonlocal next_row
        kids = children.get(node, [])
        where[node] = (depth, next_row)
        if not kids:
            next_row += 1
        for kid in kids:
            place(kid, depth + 1)

    for root in children.get(None, []):
        place(root, 0)
    return where


def tree_svg(nodes: list[dict[str, Any]], best_path: set[str], href: Callable[[str], str] | None = None) -> str:
    """``nodes``: dicts with id, parent, status, label, edge (how it was made from its parent); ``href`` gives a
    node's link (default: its row in the same page)."""
    href = href or (lambda node_id: f"#cand-{node_id}")
    if not nodes:
        return ""
    where = tree_layout(nodes)
    by_id = {n["id"]: n for n in nodes}
    width = COL * (max(c for c, _ in where.values()) + 1) + 20
    height = ROW * (max(r for _, r in where.values()) + 1) + 20
    parts = [f'<svg width="{width}" height="{height}" role="img" aria-label="search tree" class="tree">']
    for n in nodes:
        parent = n["parent"]
        if parent not in where:
            continue
        (pc, pr), (cc, cr) = where[parent], where[n["id"]]
        x1, y1 = 10 + pc * COL + BOX_W, 10 + pr * ROW + BOX_H / 2
        x2, y2 = 10 + cc * COL, 10 + cr * ROW + BOX_H / 2
        mid = (x1 + x2) / 2
        bold = n["id"] in best_path and parent in best_path
        parts.append(f'<path class="edge" data-parent="{html.escape(parent)}" data-child="{html.escape(n["id"])}" '
                     f'd="M{x1:.0f},{y1:.0f} H{mid:.0f} V{y2:.0f} H{x2:.0f}" fill="none" '
                     f'stroke="{"#26c" if bold else "#aaa"}" stroke-width="{3 if bold else 1.2}">'
                     f'<title>{html.escape(n.get("edge") or "")}</title></path>')
    for node_id, (col, row) in where.items():
        n = by_id[node_id]
        x, y = 10 + col * COL, 10 + row * ROW
        weight = 3 if node_id in best_path else 1
        parts.append(f'<g class="node" id="node-{html.escape(node_id)}" data-status="{html.escape(n["status"] or "")}">'
                     f'<a href="{html.escape(href(node_id))}"><rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" '
                     f'rx="4" fill="#fff" stroke="{colour(n["status"])}" stroke-width="{weight}"/>'
                     f'<text x="{x + 6}" y="{y + 14}" font-size="11">{html.escape(node_id[-8:])} '
                     f'{html.escape(n["status"] or "?")}</text><text x="{x + 6}" y="{y + 28}" font-size="10" '
                     f'fill="#555">{html.escape(n.get("label") or "")}</text></a>'
                     f'<title>{html.escape(n.get("edge") or "first kernel")}</title></g>')
    parts.append("</svg>")
    return "".join(parts)
