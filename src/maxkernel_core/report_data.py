"""What a run's report holds (report.json, and report.html drawn from it), gathered from the store once."""

from __future__ import annotations

import difflib
from typing import Any

from .speed import achieved_words, speed_sentence, versus
from .serialize import to_json


def _diff(before: str, after: str, name_before: str, name_after: str) -> str:
    lines = difflib.unified_diff(before.splitlines(), after.splitlines(), name_before, name_after, lineterm="", n=2)
    return "\n".join(lines)


def candidate_rows(evaluations, candidates: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per verdict, in evaluation order: the verdict, its time, and where the candidate came from."""
    rows = []
    for e in evaluations:
        c = candidates.get(e.candidate_id)
        how = c.provenance if c is not None else None
        rows.append({
            "candidate": e.candidate_id, "status": e.status.value, "reason": e.reason,
            "seconds": e.profile.seconds if e.profile else None,
            "estimated": e.profile.estimated if e.profile else None,
            "speedup_vs_xla": e.profile.speedup if e.profile else None,
            # the ratio in the one wording every report uses: its kinds, and "slower" under 1x
            "vs_xla": versus(e.profile) if e.profile else "",
            "chip": e.profile.chip if e.profile else "",
            # what a measured time achieves: TFLOP/s, HBM GB/s, share of the chip's roofline ("" for estimates)
            "achieved": achieved_words(e.profile.achieved) if e.profile and e.profile.achieved else "",
            # which sandbox judged it, as the backend names it (e.g. "bwrap" or "fallback")
            "sandbox": e.sandbox or None,
            # "run/candidate" whose verdict this is when identical code was judged before (not re-judged)
            "reused_from": e.reused_from or None,
            # sha256 of the program the verdict is about (delivered beside kernel.py for the best)
            "artifact": e.artifact or None,
            "parent": c.parent_id if c is not None else None,
            "parameters": dict(c.parameters) if c is not None else {},
            "made_by": (how.transformation or how.role or "") if how is not None else "",
            "model": (f"{how.provider}:{how.model}" if how.provider else how.model or "") if how is not None else "",
        })
    return rows


def best_code(result, candidates: dict[str, Any]) -> dict[str, Any] | None:
    """The winning kernel's code, with diffs against its parent and against the run's first kernel."""
    if result.best is None:
        return None
    best = result.best.candidate
    first = next(iter(candidates.values()), None)
    parent = candidates.get(best.parent_id) if best.parent_id else None
    return {
        "candidate": best.id, "code": best.code,
        "parent": parent.id if parent else None,
        "diff_parent": _diff(parent.code, best.code, parent.id, best.id) if parent else None,
        "first": first.id if first else None,
        # against the first kernel too, unless that is the parent (the same diff twice) or the kernel itself
        "diff_first": _diff(first.code, best.code, first.id, best.id)
        if first and first.id not in (best.id, best.parent_id) else None,
    }


def ancestry(node: str | None, candidates: dict[str, Any]) -> list[str]:
    """``node`` and its ancestors through ``parent_id``, root first (empty for None)."""
    path, seen = [], set()
    while node and node in candidates and node not in seen:
        seen.add(node)
        path.append(node)
        node = candidates[node].parent_id
    return path[::-1]


def best_path(result, candidates: dict[str, Any]) -> list[str]:
    """The best kernel and its ancestors, root first."""
    return ancestry(result.best.candidate.id if result.best else None, candidates)


def report_data(result, config, store) -> dict[str, Any]:
    run_id = result.run_id
    candidates = {c.id: c for c in store.candidates(run_id)}
    profile = result.best.evaluation.profile if result.best else None
    headline = speed_sentence(profile, config.target) if result.best else (
        f"No verified kernel: none of the {result.evaluations} candidates passed. The reference is not a result.")
    return {
        "run": store.run_summary(run_id),
        "result": to_json(result),
        "target": config.target,
        "headline": headline,
        "candidates": candidate_rows(store.evaluations(run_id), candidates),
        "best_code": best_code(result, candidates),
        "best_path": best_path(result, candidates),
        "decisions": store.decisions(run_id),
    }
