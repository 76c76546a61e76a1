"""``report.html``: one self-contained page per run (inline SVG, no scripts, no network).

Progress over evaluations (each candidate's time and the best so far, failures
marked), the candidates table, and for a graph search the search graph laid
out by depth. Estimated and measured times are never plotted together
without saying so: every figure is labelled with what its numbers are.
"""

from __future__ import annotations

import html
from typing import Any

WIDTH, HEIGHT, PAD = 720, 260, 40
COLOURS = {"ok": "#2a7", "incorrect": "#c33", "compile_error": "#d80", "rejected": "#a3a", "timeout": "#888",
           "crashed": "#555", "unverified": "#b9a000"}


def _progress_svg(rows: list[dict[str, Any]]) -> str:
    timed = [(i, r) for i, r in enumerate(rows) if r["seconds"]]
    if not timed:
        return "<p>No candidate passed with a time to plot.</p>"
    kinds = {r["estimated"] for _, r in timed}
    label = "estimated by the cost model" if kinds == {True} else "measured on the device" if kinds == {False} else \
        "mixed: hollow points are estimates, filled ones measured"
    top = max(r["seconds"] for _, r in timed) * 1.1
    n = max(len(rows) - 1, 1)

    def xy(i: int, s: float) -> tuple[float, float]:
        return PAD + (WIDTH - 2 * PAD) * i / n, HEIGHT - PAD - (HEIGHT - 2 * PAD) * s / top

    parts = [f'<svg width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="progress">',
             f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" stroke="#999"/>',
             f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{HEIGHT - PAD}" stroke="#999"/>',
             f'<text x="{PAD}" y="{PAD - 10}" font-size="12">time per call, us ({html.escape(label)})</text>',
             f'<text x="{WIDTH - PAD}" y="{HEIGHT - 8}" font-size="12" text-anchor="end">evaluation</text>']
    best, line = float("inf"), []
    for i, r in enumerate(rows):
        if r["seconds"] and r["status"] == "ok":
            best = min(best, r["seconds"])
        if best < float("inf"):
            line.append("{:.1f},{:.1f}".format(*xy(i, best)))
    parts.append(f'<polyline points="{" ".join(line)}" fill="none" stroke="#26c" stroke-width="2"/>')
    for i, r in enumerate(rows):
        x, y = xy(i, r["seconds"]) if r["seconds"] else xy(i, 0)
        colour = COLOURS.get(r["status"], "#000")
        fill = "none" if r["estimated"] else colour
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" stroke="{colour}" fill="{fill}">'
                     f'<title>{html.escape(r["candidate"])}: {r["status"]}</title></circle>')
    parts.append(f'<text x="{PAD}" y="{HEIGHT - PAD + 14}" font-size="11">0</text>')
    parts.append(f'<text x="{PAD - 4}" y="{PAD + 4}" font-size="11" text-anchor="end">{top * 1e6:,.0f}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _graph_svg(nodes: list[dict[str, Any]], edges: list[dict[str, Any]]) -> str:
    if not nodes:
        return ""
    by_depth: dict[int, list[dict[str, Any]]] = {}
    for n in nodes:
        by_depth.setdefault(n["depth"], []).append(n)
    width = 200 * (max(by_depth) + 1) + 40
    height = 50 * max(len(v) for v in by_depth.values()) + 40
    where = {}
    for depth, column in by_depth.items():
        for row, n in enumerate(column):
            where[n["id"]] = (20 + 200 * depth, 20 + 50 * row)
    parts = [f'<svg width="{width}" height="{height}" role="img" aria-label="search graph">']
    for e in edges:
        if e["parent_id"] in where and e["child_id"] in where:
            (x1, y1), (x2, y2) = where[e["parent_id"]], where[e["child_id"]]
            parts.append(f'<line x1="{x1 + 150}" y1="{y1 + 15}" x2="{x2}" y2="{y2 + 15}" stroke="#aaa">'
                         f'<title>{html.escape(e["transformation"])}</title></line>')
    for n in nodes:
        x, y = where[n["id"]]
        colour = COLOURS.get(n.get("status") or "", "#000")
        weight = 3 if n["in_beam"] else 1
        score = f' {n["score"] * 1e6:,.0f} us' if n.get("score") else ""
        parts.append(f'<rect x="{x}" y="{y}" width="150" height="30" rx="4" fill="#fff" stroke="{colour}" '
                     f'stroke-width="{weight}"/><text x="{x + 6}" y="{y + 19}" font-size="11">'
                     f'{html.escape(n["status"] or "?")}{score}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _row(i: int, r: dict[str, Any], best: str | None) -> str:
    us = f"{r['seconds'] * 1e6:,.1f}" if r["seconds"] else ""
    kind = "" if r["estimated"] is None else ("estimate" if r["estimated"] else "measured")
    speedup = f"{r['speedup_vs_xla']:.2f}x" if r["speedup_vs_xla"] else ""
    cls = " class=best" if r["candidate"] == best else ""
    return (f"<tr{cls}><td>{i}</td><td>{html.escape(r['candidate'])}</td>"
            f"<td style=\"color:{COLOURS.get(r['status'], '#000')}\">{r['status']}</td><td>{us}</td><td>{kind}</td>"
            f"<td>{speedup}</td><td>{html.escape(r['reason'][:200])}</td></tr>")


def render(report: dict[str, Any], graph: dict[str, Any] | None) -> str:
    run, rows = report["run"], report["candidates"]
    best = (report["result"].get("best") or {}).get("candidate", {}).get("id")
    table = "".join(_row(i, r, best) for i, r in enumerate(rows))
    graph_html = ""
    if graph and graph.get("nodes"):
        graph_html = ("<h2>Search graph</h2><p>Columns are depths; bold boxes are in the final beam; hover an edge "
                      "for its transformation. Times as in the table.</p>" + _graph_svg(graph["nodes"], graph["edges"]))
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>maxkernel run {html.escape(run['id'])}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1100px}}td,th{{padding:2px 8px;text-align:left;
font-size:13px}}tr.best{{background:#eef8ee}}</style></head><body>
<h1>maxkernel run {html.escape(run['id'])}</h1>
<p>Task <b>{html.escape(run['task'])}</b>, strategy {html.escape(run['strategy'])}, provider
{html.escape(str(run['provider']))}, status <b>{html.escape(run['status'])}</b>; {len(rows)} evaluations,
{run['llm_calls']} LLM calls ({run['tokens']} tokens). Best: {html.escape(best or 'none verified')}.</p>
<h2>Progress</h2><p>Each point is a candidate (colour: verdict); the line is the best verified time so far.</p>
{_progress_svg(rows)}
<h2>Candidates</h2><table><tr><th>#</th><th>candidate</th><th>verdict</th><th>us</th><th>kind</th>
<th>vs XLA</th><th>reason</th></tr>{table}</table>
{graph_html}
</body></html>
"""
