"""The live line of ``maxkernel run`` and its closing lines: what the run is doing, and what it found."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console


class RunProgress:
    """Counts stored verdicts and keeps the fastest verified one; ``observe`` is a session observer."""

    def __init__(self, settings) -> None:
        self.settings = settings
        self.n = 0
        self.best = None
        self.line = "starting"
        self.live = None

    def render(self) -> str:
        best = self.best
        if best is None:
            best_text = "no verified kernel yet"
        else:
            p = best.evaluation.profile
            kind = "est." if (p and p.estimated) else "measured"
            speed = f", {p.speedup:.2f}x XLA ({kind})" if p and p.speedup else ""
            best_text = f"best {best.candidate.id}{speed}"
        run = self.settings.run
        return f"[bold]maxkernel run[/] {run.strategy}/{run.provider}: {self.n} evaluations; " \
               f"{best_text}; last: {self.line}"

    def observe(self, attempt) -> None:
        self.n += 1
        ev = attempt.evaluation
        how = attempt.candidate.provenance
        self.line = f"{how.transformation or how.role or 'candidate'} -> {ev.status.value}"
        if ev.ok and self._faster(ev.profile):
            self.best = attempt
        if self.live is not None:
            self.live.update(self.render())

    def _faster(self, p) -> bool:
        if self.best is None:
            return True
        current = self.best.evaluation.profile
        return bool(p and p.seconds and (not current or p.seconds < (current.seconds or 1e9)))


def report_result(result, out_dir: Path, console: Console) -> int:
    """The closing lines of a run; the exit code (1 when no kernel was verified)."""
    if result.best is None:
        why = f" ({result.message})" if result.message and "spent" in result.message else ""
        console.print(f"[red]No verified kernel[/]: none of the {result.evaluations} candidates passed evaluation{why} "
                      f"(run {result.run_id}; `maxkernel runs show {result.run_id}` lists the verdicts). "
                      f"The reference is not a result. Report: {out_dir / 'report.json'}")
        return 1
    if result.best.candidate.provenance.role == "tuned":
        click.echo(f"Tuned table: {result.message}")
    p = result.best.evaluation.profile
    speed = ""
    if p and p.seconds:
        # A profile's two times are of one kind: both estimated by the same model, or both measured.
        kind = "estimated by the cost model" if p.estimated else "measured"
        same = "estimated by the same model" if p.estimated else "measured the same way"
        speed = f"; {p.seconds * 1e6:,.1f} us {kind}" + (
            f", {p.speedup:.2f}x the XLA reference ({same})" if p.speedup else "")
    click.echo(f"Best kernel: {out_dir / 'kernel.py'} ({result.best.evaluation.status.value}: "
               f"{result.best.evaluation.reason}{speed})")
    click.echo(f"Report: {out_dir / 'report.html'} (and report.json); run {result.run_id} ({spent_line(result)})")
    return 0


def spent_line(result) -> str:
    """What the run spent: evaluations against --budget, and what was not counted (re-checks, reused verdicts)."""
    plural = "s" if result.evaluations != 1 else ""
    free = [f"{n} {what}" for n, what in ((result.rechecks, "re-check of the best"),
                                           (result.reused, "verdicts of identical code reused")) if n]
    return f"{result.evaluations} evaluation{plural}" + (f"; not counted in --budget: {', '.join(free)}" if free else "")
