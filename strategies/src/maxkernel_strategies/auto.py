"""``auto``: plan -> implement -> validate (with the debugger loop) -> profile -> improve, then autotune.

Each iteration's plan sees every earlier verdict and the latest profile. The
loop stops after ``max_iterations``, when the run's evaluation budget is spent,
or early when the best kernel is within ``roofline_stop`` of the roofline.
After it (or as soon as the planner has nothing more to propose), the best
kernel's parameter space is searched one move at a time: the moves of the plugin
that wrote it (``agent_neighbours``, best first) or the generic moves of its
declared or block-size-like constants; a point the backend says cannot fit
on-chip memory is skipped before any compile. Each point is judged by the whole
cascade and ranked by device time on a TPU or the cost model elsewhere.
The best kernel is chosen from verified results only and re-evaluated before
it is declared best. Resumable: progress is read back from the session's history.

Options (``[strategy.auto]``): max_iterations (5), autotune_points (8),
roofline_stop (0.9).
"""

from __future__ import annotations

import attrs
from attrs import field, frozen
from maxkernel_core import Strategy, hookimpl
from maxkernel_core.config_values import options_record
from maxkernel_core.session import RECHECK

from .search import fresh_children, moves_from, session_key

@frozen
class AutoOptions:
    """``[strategy.auto]``, checked once when the strategy is made."""

    max_iterations: int = field(default=5, metadata={"min": 0})
    autotune_points: int = field(default=8, metadata={"min": 0})
    roofline_stop: float = field(default=0.9, metadata={"min": 0})


class Auto(Strategy):
    name = "auto"
    description = "plan, implement, debug, profile, improve for a few iterations, then autotune the best kernel"

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.opts = options_record(AutoOptions, self.options, "strategy.auto")

    def _budget_left(self, session) -> bool:
        return session.budget_left() != 0

    def _close_to_roofline(self, session) -> bool:
        best = session.best()
        profile = best.evaluation.profile if best else None
        fraction = profile.roofline_fraction if profile else None
        return fraction is not None and fraction >= self.opts.roofline_stop

    def run(self, session):
        iterations = self.opts.max_iterations
        debug_attempts = session.config.debug_attempts
        done = sum(1 for a in session.history if a.candidate.provenance.role == "implement")
        for _ in range(done, iterations):
            if not self._budget_left(session) or self._close_to_roofline(session):
                break
            plan = session.plan(required=False)
            if plan is None:  # the planner has nothing more to propose: the search below takes over
                break
            candidate = session.implement(plan)
            verdict = session.evaluate(candidate)
            if not verdict.ok:
                attempt = session.repair(candidate, verdict, max_attempts=debug_attempts)
                candidate, verdict = attempt.candidate, attempt.evaluation
            if verdict.ok:
                session.profile(candidate)
        self.autotune(session)
        return self.confirm(session)

    def autotune(self, session) -> None:
        limit = self.opts.autotune_points
        tried = {session_key(a.candidate.code) for a in session.history}
        spent = sum(1 for a in session.history if a.candidate.provenance.role == "autotune")
        while spent < limit and self._budget_left(session):
            best = session.best()
            if best is None:
                return
            moves, _ = moves_from(session, best.candidate)
            _, candidate = next(fresh_children(session, best.candidate, moves, tried, "autotune", self.name),
                                (None, None))
            if candidate is None:
                return
            spent += 1
            if session.evaluate(candidate).ok:
                session.profile(candidate)

    def confirm(self, session):
        """Re-evaluate the best verified kernel before declaring it; a second failure rules it out."""
        rejected: set[str] = set()
        while True:
            best = session.best(exclude=rejected)
            if best is None:
                return session.finish()
            # a re-check (named RECHECK): counted apart from the budget, and a failed one rules the kernel out
            again = attrs.evolve(best.candidate, id=f"{best.candidate.id}-confirm", parent_id=best.candidate.id,
                                 provenance=attrs.evolve(best.candidate.provenance, transformation=RECHECK,
                                                         recheck=True))
            verdict = session.evaluate(again)
            if verdict.ok:
                return session.finish(best_id=best.candidate.id)
            rejected.update({best.candidate.id, again.id})


@hookimpl
def register_strategies(register):
    register(Auto)
