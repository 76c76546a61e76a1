"""The live line of ``maxkernel run`` and its closing lines: what the run is doing, and what it found.

The line always shows the elapsed time and the budget used, and what the run
waits on now (a model call with its retry count, or a verdict) and for how
long, so a hung model never looks like a hung tool.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from ..activity import Activity
from ..session import counted
from ..speed import phrase, rank, versus


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m // 60}:{m % 60:02d}:{s:02d}" if m >= 60 else f"{m}:{s:02d}"


class RunProgress:
    """Counts stored verdicts and keeps the fastest verified one; ``observe`` is a session observer.

    ``verbose`` prints one line per verdict above the live line."""

    def __init__(self, settings, activity: Activity | None = None, console: Console | None = None,
                 verbose: bool = False) -> None:
        self.settings = settings
        self.activity = activity or Activity()
        self.console = console
        self.verbose = verbose
        self.n = 0
        self.best = None
        self.line = "starting"

    def render(self) -> str:
        best = self.best
        if best is None:
            best_text = "no verified kernel yet"
        else:
            ratio = versus(best.evaluation.profile)
            best_text = f"best {best.candidate.id}" + (f", {ratio}" if ratio else "")
        run = self.settings.run
        budget = f"{self.n}/{run.budget} evaluations" if run.budget else plural(self.n, "evaluation")
        now = self.activity.describe()
        doing = f"now: {escape(now)}" if now else f"last: {escape(self.line)}"
        return (f"[bold]maxkernel run[/] {run.strategy}/{run.provider} {_clock(self.activity.elapsed())}: "
                f"{budget}; {best_text}; {doing}")

    def __rich__(self) -> str:  # rich's Live re-renders this object on every refresh: the clock ticks
        return self.render()

    def observe(self, attempt) -> None:
        self.n += counted(attempt)  # as --budget counts: re-checks and reused verdicts are free
        ev = attempt.evaluation
        how = attempt.candidate.provenance
        self.line = f"{how.transformation or how.role or 'candidate'} -> {ev.status.value}"
        if ev.ok and self._faster(ev.profile):
            self.best = attempt
        if self.verbose and self.console is not None:
            speed = f", {phrase(ev.profile, chip=False)}" if ev.profile and ev.profile.seconds else ""
            self.console.print(f"  {attempt.candidate.id} {escape(self.line)}{speed}: {escape(ev.reason[:160])}")

    def _faster(self, p) -> bool:
        return self.best is None or rank(p) < rank(self.best.evaluation.profile)
