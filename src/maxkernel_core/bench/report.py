"""A bench's outputs: results.json, results.csv, report.md and report.html with matplotlib figures.

Estimated and measured speedups are drawn in separate figures, each titled
with its kind; tasks without a correct kernel are listed as failures, never
drawn as 1x.
"""

from __future__ import annotations

import csv
import html
import json
from typing import Any

from attrs import asdict

from .figures import KIND_LABEL, figures
from ..speed import ratio_words
from .metrics import FAST_P, TaskResult

def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def _x(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def write_report(bench) -> dict[str, Any]:
    out = bench.out
    out.mkdir(parents=True, exist_ok=True)
    data = {"bench": bench.bench_id, "config": asdict(bench.config), "target": bench.target,
            "metrics": bench.metrics, "tasks": [r.to_dict() for r in bench.results]}
    (out / "results.json").write_text(json.dumps(data, indent=2, sort_keys=True, default=str))
    with (out / "results.csv").open("w", newline="") as f:
        fields = [a.name for a in TaskResult.__attrs_attrs__]
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for r in bench.results:
            writer.writerow(r.to_dict())
    (out / "report.md").write_text(markdown(bench))
    (out / "report.html").write_text(html_report(bench))
    return data


def _vs(r) -> str:
    """A task's ratio to XLA as every report words it ("0.82x XLA (slower, measured/measured)"); "-" without."""
    return ratio_words(r.speedup, r.speedup_kind or "estimated") or "-"


def summary_lines(bench) -> list[str]:
    m = bench.metrics
    lines = [f"{m['tasks']} tasks on {bench.target}: {m['compiled']} compiled ({_pct(m['compile_rate'])}), "
             f"{m['correct']} correct ({_pct(m['correctness_rate'])}); fast_0 = {_pct(m['fast_0'])}"]
    for s in m["speed"]:
        fast = ", ".join(f"fast_{p} = {_pct(v)}" for p, v in s["fast_p"].items() if p != "0")
        lines.append(f"speedup vs XLA, {KIND_LABEL[s['kind']]}: geometric mean {_x(s['geomean_speedup'])} over "
                     f"{s['tasks_with_speedup']} correct tasks; {fast}")
    if not m["speed"]:
        lines.append("no correct task has a speed figure")
    versus = m.get("model_vs_measured")
    if versus:
        rho = f"{versus['spearman']:.2f}" if versus["spearman"] is not None else "-"
        lines.append(f"the cost model against the chip on {versus['tasks']} measured tasks: geometric mean "
                     f"{_x(versus['geomean_estimated'])} estimated vs {_x(versus['geomean_measured'])} measured, rank "
                     f"correlation {rho}, direction right on {versus['direction_agrees']} of {versus['tasks']}")
    apart = [f"{m[k]} {label}" for k, label in (("unverified", "unverified (compiled and proven, outputs not "
                                                 "checkable here)"), ("errors", "could not load or run"))
             if m.get(k)]
    lines.append(f"{len(m['failures'])} tasks without a correct kernel{' (' + '; '.join(apart) + ')' if apart else ''} "
                 "(listed separately, not counted as 1x); "
                 f"{m['evaluations']} evaluations, {m['llm_calls']} LLM calls, {m['tokens']} tokens"
                 + (f", ${m['cost_usd']:.2f}" if m["cost_usd"] else ""))
    return lines


def markdown(bench) -> str:
    c = bench.config
    how = f"kernels from {c.kernels}" if c.kernels else f"strategy {c.strategy or 'default'}, provider {c.provider or 'default'}"
    lines = [f"# maxkernel bench {bench.bench_id}", "", f"Suite `{c.suite}` (tasks `{c.tasks}`), {how}, target {bench.target}.",
             "", *[f"- {line}" for line in summary_lines(bench)], "",
             "| task | status | compiled | proof | vs XLA | kind | roofline | evals | tokens | wall s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in bench.results:
        lines.append(f"| {r.task_id} | {r.status} | {'yes' if r.compiled else 'no'} | {'yes' if r.proof_of_kernel else 'no'} "
                     f"| {_vs(r)} | {r.speedup_kind or '-'} | {_pct(r.roofline_fraction)} | {r.evaluations} "
                     f"| {r.tokens} | {r.wall_s:.0f} |")
    failures = [r for r in bench.results if not r.correct]
    if len(failures) > 10:  # at suite scale, what to fix first: the reasons by how many tasks share them
        lines += ["", "## Why, most common first", "", "| tasks | status | reason |", "|---|---|---|"]
        lines += [f"| {n} | {status} | {reason} |" for (status, reason), n in reason_counts(failures)[:15]]
    if failures:
        lines += ["", "## Tasks without a correct kernel", ""]
        lines += [f"- **{r.task_id}** ({r.status}): {r.reason}" for r in failures]
    shortcuts = [r for r in bench.results if r.notes]
    if shortcuts:
        lines += ["", "## Legitimate algebraic shortcuts these tasks allow", ""]
        lines += [f"- **{r.task_id}**: {r.notes}" for r in shortcuts]
    return "\n".join(lines) + "\n"


def reason_counts(failures) -> list[tuple[tuple[str, str], int]]:
    """(status, the reason's first clause, numbers and names blanked) -> how many tasks share it, most first."""
    import collections
    import re

    def gist(reason: str) -> str:
        first = re.split(r"[;(]|\. ", reason.replace("no verified kernel; last verdict ", ""), maxsplit=1)[0]
        text = ": ".join(part.strip() for part in first.split(":")[:4] if part.strip())
        return re.sub(r"\b\d[\d,.]*\b", "N", re.sub(r"task [\w.-]+", "task T", text))[:160]

    counts = collections.Counter((r.status, gist(r.reason)) for r in failures)
    return counts.most_common()


def html_report(bench) -> str:
    e = html.escape
    rows = []
    for r in bench.results:
        cls = "ok" if r.correct else "bad"
        page = bench.out / "tasks" / r.task_id / "report.html"
        name = f'<a href="tasks/{e(r.task_id)}/report.html">{e(r.task_id)}</a>' if page.exists() else e(r.task_id)
        rows.append(f"<tr class={cls} id=\"task-{e(r.task_id)}\"><td>{name}</td><td>{e(r.status)}</td><td>{'yes' if r.compiled else 'no'}</td>"
                    f"<td>{'yes' if r.proof_of_kernel else 'no'}</td><td>{e(_vs(r))}</td><td>{e(r.speedup_kind or '-')}</td>"
                    f"<td>{_pct(r.roofline_fraction)}</td><td>{r.evaluations}</td><td>{r.tokens}</td>"
                    f"<td>{r.wall_s:.0f}</td><td>{e(r.reason)}{'<br><i>shortcut: ' + e(r.notes) + '</i>' if r.notes else ''}</td></tr>")
    figs = "".join(f"<figure>{svg}<figcaption>{e(cap)}</figcaption></figure>" for cap, svg in figures(bench))
    summary = "".join(f"<li>{e(line)}</li>" for line in summary_lines(bench))
    fast_head = "".join(f"<th>fast_{p:g}</th>" for p in FAST_P)
    speed_rows = "".join(
        f"<tr><td>{e(KIND_LABEL[s['kind']])}</td><td>{_x(s['geomean_speedup'])}</td>"
        + "".join(f"<td>{_pct(v)}</td>" for v in s["fast_p"].values()) + "</tr>" for s in bench.metrics["speed"])
    return f"""<!doctype html><html><head><meta charset=utf-8><title>maxkernel bench {e(bench.bench_id)}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}}table{{border-collapse:collapse;font-size:13px}}
td,th{{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}}tr.bad td{{background:#fdf0f0}}
figure{{margin:1em 0}}figcaption{{font-size:13px;color:#444}}</style></head><body>
<h1>maxkernel bench <code>{e(bench.bench_id)}</code></h1>
<p>Suite <code>{e(bench.config.suite)}</code>, target {e(bench.target)}.</p><ul>{summary}</ul>
<table><tr><th>speed figures</th><th>geomean</th>{fast_head}</tr>{speed_rows}</table>
{figs}
<h2>Tasks</h2><table><tr><th>task</th><th>status</th><th>compiled</th><th>proof</th><th>vs XLA</th><th>kind</th>
<th>roofline</th><th>evals</th><th>tokens</th><th>wall s</th><th>reason / notes</th></tr>{''.join(rows)}</table>
</body></html>"""
