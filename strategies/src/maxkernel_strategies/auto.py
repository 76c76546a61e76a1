"""``auto``: plan -> implement -> validate (with the debugger loop) -> profile -> improve, then autotune.

Each iteration's plan sees every earlier verdict and the latest profile. The
loop stops after ``max_iterations``, when the run's evaluation budget is spent,
or early when the best kernel is within ``roofline_stop`` of the roofline.
After it, the tunable constants of the best kernel (block sizes, as module-level
UPPER_CASE integers) are searched one move at a time, each point judged by the
whole cascade and ranked by device time on a TPU or the cost model elsewhere.
The best kernel is chosen from verified results only and re-evaluated before
it is declared best. Resumable: progress is read back from the session's history.

Options (``[strategy.auto]``): max_iterations (5), autotune_points (8),
roofline_stop (0.9).
"""

from __future__ import annotations

import attrs
from maxkernel_core import Candidate, Provenance, Strategy, hookimpl
from maxkernel_core.errors import ConfigError
from maxkernel_core.session import RECHECK

from .tunables import neighbour_points, tunables, with_values

DEFAULTS = {"max_iterations": 5, "autotune_points": 8, "roofline_stop": 0.9}


class Auto(Strategy):
    name = "auto"
    description = "plan, implement, debug, profile, improve for a few iterations, then autotune the best kernel"

    def option(self, key: str):
        value = self.options.get(key, DEFAULTS[key])
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ConfigError(f"strategy.auto.{key} must be a non-negative number, got {value!r}")
        unknown = set(self.options) - set(DEFAULTS)
        if unknown:
            raise ConfigError(f"unknown option(s) strategy.auto.{', '.join(sorted(unknown))} "
                              f"(options: {', '.join(DEFAULTS)})")
        return value

    def _budget_left(self, session) -> bool:
        return session.budget_left() != 0

    def _close_to_roofline(self, session) -> bool:
        best = session.best()
        profile = best.evaluation.profile if best else None
        fraction = (profile.details or {}).get("roofline_fraction") if profile else None
        return fraction is not None and fraction >= self.option("roofline_stop")

    def run(self, session):
        iterations = int(self.option("max_iterations"))
        debug_attempts = session.settings_value("llm", "debug_attempts", 6)
        done = sum(1 for a in session.history if a.candidate.provenance.role == "implement")
        for _ in range(done, iterations):
            if not self._budget_left(session) or self._close_to_roofline(session):
                break
            plan = session.plan()
            if plan is None:
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
        limit = int(self.option("autotune_points"))
        tried = {session_key(a.candidate.code) for a in session.history}
        spent = sum(1 for a in session.history if a.candidate.provenance.transformation.startswith("autotune"))
        while spent < limit and self._budget_left(session):
            best = session.best()
            current = tunables(best.candidate.code) if best else {}
            moves = [(m, p) for m, p in neighbour_points(current, 4 * len(current))
                     if session_key(with_values(best.candidate.code, p)) not in tried]
            if not moves:
                return
            move, point = moves[0]
            code = with_values(best.candidate.code, point)
            tried.add(session_key(code))
            candidate = Candidate(best.candidate.task_id, code, {**best.candidate.parameters, **point},
                                  parent_id=best.candidate.id, provenance=Provenance(
                                      role="autotune", strategy=self.name, transformation=f"autotune: {move}"))
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
                                 provenance=attrs.evolve(best.candidate.provenance, transformation=RECHECK))
            verdict = session.evaluate(again)
            if verdict.ok:
                return session.finish(best_id=best.candidate.id)
            rejected.update({best.candidate.id, again.id})


def session_key(code: str) -> str:
    return "\n".join(line.rstrip() for line in code.strip().splitlines())


@hookimpl
def register_strategies(register):
    register(Auto)
