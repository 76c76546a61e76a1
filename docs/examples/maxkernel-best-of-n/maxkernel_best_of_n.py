"""best_of_n: sample N independent kernels, give each a few debug attempts, keep the best.

A worked example of a third-party maxkernel strategy. It uses only the public
API: the ``register_strategies`` hook, the ``Strategy`` base class, and the
``RunSession`` methods that call the sub-agent roles and record every step.

Options (``[strategy.best_of_n]`` in maxkernel.toml):
    samples      how many independent plans to try (default 4; ``run.budget`` caps it)
    debug_tries  fix attempts per failed sample (default 2)
"""

from __future__ import annotations

from maxkernel_core import Strategy, hookimpl
from maxkernel_core.errors import ConfigError


class BestOfN(Strategy):
    name = "best_of_n"
    description = "N independent plan->implement->evaluate samples, each debugged a few times; best verified wins"

    def _option(self, key: str, default: int) -> int:
        value = self.options.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"strategy.best_of_n.{key} must be a non-negative integer, got {value!r}")
        return value

    def run(self, session):
        samples = self._option("samples", 4)
        if session.config.budget is not None:
            samples = min(samples, session.config.budget)
        debug_tries = self._option("debug_tries", 2)
        for _ in range(samples):
            plan = session.plan(required=False)
            if plan is None:  # the planner has nothing more to propose (it declined)
                break
            candidate = session.implement(plan)
            evaluation = session.evaluate(candidate)
            attempts = []  # this sample's failed attempts, for the debugger
            while not evaluation.ok and len(attempts) < debug_tries:
                attempts.append(session.history[-1])
                fixed = session.debug(candidate, evaluation, attempts)
                if fixed is None:
                    break
                candidate, evaluation = fixed, session.evaluate(fixed)
        return session.finish()


@hookimpl
def register_strategies(register):
    register(BestOfN)
