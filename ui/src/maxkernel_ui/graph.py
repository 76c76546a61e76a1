"""The search graph in the UI: the report's drawing (boxes with ids and times) up to ``COMPACT_FROM``
candidates; past that, the same layout drawn compactly, a dot per candidate (its id, verdict and time on
hover, a click opens it), so that a 2,000-candidate graph is a few hundred KB a browser lays out at once."""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

from maxkernel_core.report_svg import colour, tree_layout, tree_svg

COMPACT_FROM = 200
COL, ROW, R, PAD = 26, 9, 3.5, 8


def graph_svg(nodes: list[dict[str, Any]], best_path: set[str], href: Callable[[str], str]) -> str:
    if len(nodes) < COMPACT_FROM:
        return tree_svg(nodes, best_path, href=href)
    return compact_svg(nodes, best_path, href)


def compact_svg(nodes: list[dict[str, Any]], best_path: set[str], href: Callable[[str], str]) -> str:
    where = tree_layout(nodes)
    e = html.escape

    def xy(node_id: str) -> tuple[float, float]:
        col, row = where[node_id]
        return PAD + col * COL, PAD + row * ROW

    width = PAD * 2 + COL * max(c for c, _ in where.values())
    height = PAD * 2 + ROW * max(r for _, r in where.values())
    plain, bold = [], []
    for n in nodes:
        if n["parent"] in where:
            (x1, y1), (x2, y2) = xy(n["parent"]), xy(n["id"])
            (bold if n["id"] in best_path and n["parent"] in best_path else plain).append(
                f"M{x1:.0f},{y1:.0f}V{y2:.0f}H{x2:.0f}")
    parts = [f'<svg width="{width:.0f}" height="{height:.0f}" role="img" aria-label="search tree, compact" '
             f'class="tree compact"><path d="{"".join(plain)}" fill="none" stroke="#bbb" stroke-width="1"/>'
             f'<path class="best-path" d="{"".join(bold)}" fill="none" stroke="#26c" stroke-width="2.5"/>']
    for n in nodes:
        x, y = xy(n["id"])
        tip = f'{n["id"]} {n["status"] or "being judged"} {n.get("label") or ""}'.strip()
        big = n["id"] in best_path
        parts.append(f'<a class="node" id="node-{e(n["id"])}" data-status="{e(n["status"] or "")}" '
                     f'href="{e(href(n["id"]))}"><circle cx="{x:.0f}" cy="{y:.0f}" r="{R * (1.6 if big else 1)}" '
                     f'fill="{colour(n["status"])}"><title>{e(tip)}</title></circle></a>')
    parts.append("</svg>")
    return "".join(parts)
