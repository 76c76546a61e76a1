"""What each page shows, read from the run store: plain dicts for the templates (which escape everything).

The UI only reads the store, apart from answering a hitl run's open question (app.py); it never runs a
candidate's code.
"""

from __future__ import annotations

import difflib
import json
import threading
from typing import Any

from maxkernel_core.report_data import ancestry, candidate_rows
from maxkernel_core.report_html import tree_nodes
from maxkernel_core.report_svg import progress_svg

from .graph import graph_svg

RUNS_SHOWN = 300


class RecordCache:
    """Each run's candidates and verdicts, parsed once: the store only appends them, so a live page reads
    only the rows stored since it last looked (a new verdict on a 2,000-candidate run parses one row)."""

    def __init__(self, store) -> None:
        self.store = store
        self._runs: dict[str, tuple[int, int, dict[str, Any], list[Any]]] = {}
        self._lock = threading.Lock()

    def get(self, run_id: str) -> tuple[dict[str, Any], list[Any]]:
        with self._lock:
            last_cand, last_eval, candidates, evaluations = self._runs.get(run_id, (0, 0, {}, []))
            new_cands, new_evals = self.store.records_since(run_id, last_cand, last_eval)
            candidates = {**candidates, **{c.id: c for _, c in new_cands}} if new_cands else candidates
            evaluations = evaluations + [e for _, e in new_evals] if new_evals else evaluations
            self._runs[run_id] = (new_cands[-1][0] if new_cands else last_cand,
                                  new_evals[-1][0] if new_evals else last_eval, candidates, evaluations)
            return candidates, evaluations


def diff(before: str, after: str, name_before: str, name_after: str) -> str:
    return "\n".join(difflib.unified_diff(before.splitlines(), after.splitlines(), name_before, name_after,
                                          lineterm="", n=3))


def runs_view(store, task: str = "", strategy: str = "", status: str = "") -> dict[str, Any]:
    """The newest runs, filtered by task (substring), strategy and status, with the runs waiting on a person."""
    runs = store.list_runs(limit=RUNS_SHOWN)
    waiting = {p["run_id"] for p in store.open_prompts()}
    shown = [r for r in runs if (not task or task in r.task_id) and (not strategy or r.strategy == strategy)
             and (not status or r.status == status)]
    return {
        "runs": [{"id": r.id, "task": r.task_id, "strategy": r.strategy, "provider": r.provider, "status": r.status,
                  "created_at": r.created_at, "waiting": r.id in waiting} for r in shown],
        "strategies": sorted({r.strategy for r in runs}), "statuses": sorted({r.status for r in runs}),
        "filters": {"task": task, "strategy": strategy, "status": status},
        "benches": store.list_benches(limit=20),
    }


def _best_id(run, rows: list[dict[str, Any]]) -> str | None:
    """The run's best: its result's when finished, else the fastest verified so far."""
    best = ((run.result or {}).get("best") or {}).get("candidate", {}).get("id")
    if best:
        return best
    timed = [r for r in rows if r["status"] == "ok" and r["seconds"]]
    return min(timed, key=lambda r: r["seconds"])["candidate"] if timed else None


def _verdicts(store, run_id: str, records: RecordCache | None):
    """(run, candidates by id, one row per verdict, the best candidate's id)."""
    run = store.get_run(run_id)
    candidates, evaluations = (records or RecordCache(store)).get(run.id)
    rows = candidate_rows(evaluations, candidates)
    return run, candidates, rows, _best_id(run, rows)


def run_view(store, run_id: str, records: RecordCache | None = None) -> dict[str, Any]:
    """A run as it stands: graph by parent, progress, candidates, open question, decisions."""
    run, candidates, rows, best = _verdicts(store, run_id, records)
    judged = {r["candidate"] for r in rows}
    pending = [c for c in candidates.values() if c.id not in judged]  # implemented, verdict not in yet
    path = ancestry(best, candidates)
    nodes = tree_nodes(rows) + [{"id": c.id, "parent": c.parent_id, "status": "", "label": "being judged",
                                 "edge": c.provenance.transformation or c.provenance.role} for c in pending]
    prompts = store.open_prompts(run.id)
    return {
        "run": run, "rows": rows, "best": best, "best_path": path, "pending": [c.id for c in pending],
        "tree": graph_svg(nodes, set(path), href=lambda cid: f"/runs/{run.id}/candidates/{cid}"),
        "progress": progress_svg(rows) if rows else "",
        "prompt": prompts[-1] if prompts else None,
        "decisions": store.decisions(run.id),
        "target": run.config.target,
    }


def _calls(store, run_id: str, ids: tuple[int, ...]) -> list[dict[str, Any]]:
    wanted = set(ids)
    calls = [c for c in store.llm_calls(run_id) if c["id"] in wanted]
    for c in calls:
        try:
            c["messages"] = json.loads(c["prompt_json"]).get("messages", [])
        except (ValueError, AttributeError):
            c["messages"] = [{"role": "?", "content": c["prompt_json"]}]
    return calls


def candidate_view(store, run_id: str, candidate_id: str) -> dict[str, Any] | None:
    """One candidate: its code, the diff against its parent, each verdict with its checks, the model calls."""
    run = store.get_run(run_id)
    candidates = {c.id: c for c in store.candidates(run.id)}
    cand = candidates.get(candidate_id)
    if cand is None:
        return None
    parent = candidates.get(cand.parent_id) if cand.parent_id else None
    return {
        "run": run, "candidate": cand, "parent": parent,
        "diff": diff(parent.code, cand.code, parent.id, cand.id) if parent else None,
        "evaluations": [e for e in store.evaluations(run.id) if e.candidate_id == cand.id],
        "calls": _calls(store, run.id, cand.provenance.llm_call_ids),
        "children": [c.id for c in candidates.values() if c.parent_id == cand.id],
    }


def _side(store, ref: str, records: RecordCache | None) -> dict[str, Any]:
    """A compared thing: ``RUN`` (its best kernel) or ``RUN/CANDIDATE``."""
    run_ref, _, cand_ref = ref.partition("/")
    run, candidates, rows, best = _verdicts(store, run_ref, records)
    cand_id = cand_ref or best
    mine = [r for r in rows if r["candidate"] == cand_id]
    return {"ref": ref, "run": run, "candidate": candidates.get(cand_id), "row": mine[-1] if mine else None,
            "evaluations": len(rows), "verified": sum(r["status"] == "ok" for r in rows)}


def compare_view(store, a: str, b: str, records: RecordCache | None = None) -> dict[str, Any]:
    left, right = _side(store, a, records), _side(store, b, records)
    code = None
    if left["candidate"] and right["candidate"]:
        code = diff(left["candidate"].code, right["candidate"].code, left["candidate"].id, right["candidate"].id)
    return {"left": left, "right": right, "diff": code}


def bench_view(store, bench_id: str) -> dict[str, Any]:
    """A bench's tasks with their runs and speedups, and the report's figures made interactive (charts.py)."""
    from .charts import speedup_bars

    bench = store.get_bench(bench_id)
    tasks = []
    for task_id, t in sorted(store.bench_tasks(bench["id"]).items()):
        result = t.get("result") or {}
        tasks.append({"task": task_id, "status": t["status"], "run": t.get("run_id"),
                      "speedup": result.get("speedup"), "kind": result.get("speedup_kind") or "",
                      "correct": bool(result.get("correct")), "reason": result.get("reason") or "",
                      "roofline": result.get("roofline_fraction"), "intensity": result.get("arithmetic_intensity")})
    return {"bench": bench, "tasks": tasks, "chart": speedup_bars(tasks)}
