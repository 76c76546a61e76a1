"""What ``maxkernel run`` says at the end: closing lines for a person, one JSON object for a program."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from .output import EXIT_CANDIDATE_FAILED, EXIT_OK
from ..speed import speed_sentence
from .progress import plural


def spent_line(result) -> str:
    """What the run spent: evaluations against --budget, and what was not counted (re-checks, reused verdicts)."""
    free = [f"{n} {what}" for n, what in ((result.rechecks, "re-check of the best"),
                                           (result.reused, "verdicts of identical code reused")) if n]
    asked = (f"; {plural(result.unusable_replies, 'model reply')} without usable code, each asked again"
             if result.unusable_replies else "")
    return plural(result.evaluations, "evaluation") + (
        f"; not counted in --budget: {', '.join(free)}" if free else "") + asked


def result_json(result, out_dir: Path, target: str) -> dict[str, Any]:
    """The run's outcome as ``run --json`` prints it (one object)."""
    best = result.best
    data: dict[str, Any] = {"run": result.run_id, "task": result.task_id, "status": result.status,
                            "evaluations": result.evaluations, "rechecks": result.rechecks, "reused": result.reused,
                            "unusable_replies": result.unusable_replies,
                            "message": result.message, "target": target, "best": None,
                            "report": str(out_dir / "report.json"), "report_html": str(out_dir / "report.html"),
                            "exit_code": EXIT_OK if best else EXIT_CANDIDATE_FAILED}
    if best is not None:
        ev, p = best.evaluation, best.evaluation.profile
        data["best"] = {"candidate": best.candidate.id, "kernel": str(out_dir / "kernel.py"), "status": ev.status.value,
                        "reason": ev.reason, "parameters": best.candidate.parameters,
                        "seconds": p.seconds if p else None, "reference_seconds": p.reference_seconds if p else None,
                        "speedup_vs_xla": p.speedup if p else None,
                        "speed_kind": None if not p or not p.seconds else ("estimated" if p.estimated else "measured")}
    return data


def report_result(result, out_dir: Path, console: Console, target: str, quiet: bool = False,
                  task_ref: str | None = None) -> int:
    """The closing lines of a run (on ``console``); the exit code (1 when no kernel was verified). The next
    commands name the task as the run was given it (``task_ref``, a path or an id), which finds it again."""
    if result.best is None:
        why = f" ({result.message})" if result.message and "spent" in result.message else ""
        console.print(f"[red]No verified kernel[/]: none of the {plural(result.evaluations, 'candidate')} passed "
                      f"evaluation{escape(why)} (run {result.run_id}; `maxkernel runs show {result.run_id}` lists the "
                      f"verdicts, `maxkernel logs {result.run_id}` the model calls). The reference is not a result. "
                      f"Report: {out_dir / 'report.html'}")
        return EXIT_CANDIDATE_FAILED
    ev, cand = result.best.evaluation, result.best.candidate
    if cand.provenance.role == "tuned":
        console.print(f"Tuned table: {escape(result.message)}")
    if quiet:
        console.print(f"{out_dir / 'kernel.py'}")
        return EXIT_OK
    console.print(f"Optimised task [bold]{escape(result.task_id)}[/] for target {target}: "
                  f"{spent_line(result)}, run {result.run_id}.")
    console.print(f"Best kernel: {out_dir / 'kernel.py'} (candidate {cand.id}, {ev.status.value}): "
                  f"{escape(ev.reason)}")
    console.print(escape(speed_sentence(ev.profile, target)))
    console.print(f"Report: {out_dir / 'report.html'} (and report.json). Next: `maxkernel logs {result.run_id}`, "
                  f"`maxkernel profile --task {escape(shlex.quote(task_ref or result.task_id))} --kernel "
                  f"{escape(shlex.quote(str(out_dir / 'kernel.py')))} --target {target}`.")
    return EXIT_OK
