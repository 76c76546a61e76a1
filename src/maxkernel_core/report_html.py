"""``report.html``: one self-contained page per run (inline SVG, no scripts, no network).

What the headline number is, in a sentence; progress over evaluations; the
search tree by parent; every candidate with its parameters, verdict and full
reason; the winning code with its diffs; the models, tokens and cost; a
person's decisions. Everything from the store is escaped: a reason or a reply
holding ``<script>`` renders as text.
"""

from __future__ import annotations

import datetime as dt
import html
import json
from typing import Any

from .report_svg import colour, progress_svg, tree_svg

e = html.escape
CLIP = 220
STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
td,th{padding:3px 8px;text-align:left;vertical-align:top;font-size:13px;border-bottom:1px solid #eee}
table{border-collapse:collapse}tr.best{background:#eef8ee}tr:target{outline:2px solid #26c}
pre{background:#f6f6f6;padding:8px;overflow-x:auto;font-size:12px}.headline{font-size:15px;max-width:62em}
code.params{font-size:11px}.reason{min-width:22em;max-width:36em}"""


def clip(text: str, limit: int = CLIP) -> str:
    """``text`` cut at a word boundary under ``limit`` characters, with an ellipsis; never mid-word."""
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0].rstrip(",;:")
    return cut + " …"


def _reason_cell(reason: str) -> str:
    if len(reason) <= CLIP:
        return f'<td class="reason">{e(reason)}</td>'
    return (f'<td class="reason"><details><summary>{e(clip(reason))}</summary>'
            f'<pre style="white-space:pre-wrap">{e(reason)}</pre></details></td>')


def _row(i: int, r: dict[str, Any], best: str | None) -> str:
    us = f"{r['seconds'] * 1e6:,.1f}" if r["seconds"] and r["status"] == "ok" else ""
    kind = "" if not us or r["estimated"] is None else ("estimate" if r["estimated"] else "measured")
    speedup = e(r.get("vs_xla") or "") if us else ""
    if us and r.get("achieved"):
        speedup += f"<br><small>{e(r['achieved'])}</small>"
    cls = ' class="best"' if r["candidate"] == best else ""
    params = " ".join(f"{k}={json.dumps(v)}" for k, v in sorted((r.get("parameters") or {}).items()))
    reused = f"<br><i>verdict of {e(r['reused_from'])}</i>" if r.get("reused_from") else ""
    return (f'<tr id="cand-{e(r["candidate"])}"{cls}><td>{i}</td><td>{e(r["candidate"])}{reused}</td>'
            f'<td>{e(r.get("parent") or "-")}</td><td>{e(r.get("made_by") or "")}</td>'
            f'<td><code class="params">{e(params)}</code></td>'
            f'<td style="color:{colour(r["status"])}">{e(r["status"])}</td><td>{us}</td><td>{kind}</td>'
            f"<td>{speedup}</td>{_reason_cell(r['reason'])}</tr>")


def _code_section(code: dict[str, Any] | None) -> str:
    if not code:
        return ""
    parts = [f"<h2>The winning kernel</h2><p>Candidate <a href=\"#cand-{e(code['candidate'])}\">"
             f"{e(code['candidate'])}</a>.</p><details open><summary>code</summary><pre>{e(code['code'])}</pre>"
             "</details>"]
    for key, label in (("diff_parent", f"diff against its parent {code['parent']}"),
                       ("diff_first", f"diff against the first kernel {code['first']}")):
        if code.get(key):
            parts.append(f'<details class="{key}"><summary>{e(label)}</summary><pre>{e(code[key])}</pre></details>')
    return "".join(parts)


def _cost(usd: float | None) -> str:
    return "not reported" if usd is None else f"${usd:.4f}"


def _usage_section(run: dict[str, Any]) -> str:
    usage = run.get("llm_usage") or []
    if not usage:
        return "<h2>Models</h2><p>No model calls (the offline synthesizer answers its roles itself).</p>"
    rows = "".join(
        f"<tr><td>{e(u['provider'])}:{e(u['model'] or '?')}</td><td>{e(u['role'] or '-')}</td><td>{u['calls']}</td>"
        f"<td>{u['errors']}</td><td>{u['input_tokens']:,}</td><td>{u['output_tokens']:,}</td>"
        f"<td>{_cost(u['cost_usd'])}</td>"
        f"<td>{u['latency_s']:.1f} s</td></tr>" for u in usage)
    return ("<h2>Models</h2><table><tr><th>model</th><th>role</th><th>calls</th><th>failed</th><th>tokens in</th>"
            f"<th>tokens out</th><th>cost</th><th>model time</th></tr>{rows}</table>"
            f"<p>Prompts and replies: <code>maxkernel logs {e(run['id'])} --full</code></p>")


def _decisions_section(decisions: list[dict[str, Any]]) -> str:
    if not decisions:
        return ""
    rows = "".join(f"<tr><td>{dt.datetime.fromtimestamp(d['created_at']):%H:%M:%S}</td><td>{e(d['kind'])}</td>"
                   f"<td>{e(d['detail'] or '')}</td></tr>" for d in decisions)
    return f"<h2>Decisions</h2><table><tr><th>when</th><th>decision</th><th>detail</th></tr>{rows}</table>"


def tree_nodes(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    nodes, seen = [], set()
    for r in rows:
        if r["candidate"] in seen:
            continue
        seen.add(r["candidate"])
        label = f"{r['seconds'] * 1e6:,.0f} us" if r["seconds"] and r["status"] == "ok" else ""
        nodes.append({"id": r["candidate"], "parent": r.get("parent"), "status": r["status"], "label": label,
                      "edge": r.get("made_by") or ""})
    return nodes


def render(report: dict[str, Any]) -> str:
    run, rows = report["run"], report["candidates"]
    best = (report["result"].get("best") or {}).get("candidate", {}).get("id")
    table = "".join(_row(i, r, best) for i, r in enumerate(rows))
    tree = tree_svg(tree_nodes(rows), set(report.get("best_path") or []))
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>maxkernel run {e(run['id'])}</title>
<style>{STYLE}</style></head><body>
<h1>maxkernel run {e(run['id'])}</h1>
<p>Task <b>{e(run['task'])}</b>, target {e(str(report.get('target') or '?'))}, strategy {e(run['strategy'])},
provider {e(str(run['provider']))}, status <b>{e(run['status'])}</b>; {len(rows)} evaluations,
{run['llm_calls']} LLM calls ({run['tokens']:,} tokens). Best: {e(best or 'none verified')}.</p>
<p class="headline" id="headline">{e(report.get('headline') or '')}</p>
<h2>Progress</h2><p>Each point is a verified candidate's time (colour: verdict); the line is the best verified time so
far. Candidates that failed have no time: they are the crosses in the strip under the axis.</p>
{progress_svg(rows)}
<h2>Search tree</h2><p>Each candidate sits one column right of the candidate it was made from (hover for how); the
path to the best kernel is bold; click a box for its row below.</p>{tree}
<h2>Candidates</h2><table><tr><th>#</th><th>candidate</th><th>parent</th><th>made by</th><th>parameters</th>
<th>verdict</th><th>us</th><th>kind</th><th>vs XLA</th><th>reason</th></tr>{table}</table>
{_code_section(report.get('best_code'))}
{_usage_section(run)}
{_decisions_section(report.get('decisions') or [])}
</body></html>
"""
