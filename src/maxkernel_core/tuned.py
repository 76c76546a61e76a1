"""Tuned configs as data: a run starts from the table's kernel for its operator, and keeps a better one.

The key is the backend's (:meth:`~maxkernel_core.interfaces.Backend.tuning_key`): the
operator's program fingerprint, shapes, dtypes, chip and compiler versions. With
``run.tuned = "use"`` a run whose key is in the table judges that kernel once (afresh,
never from the verdict cache: the table may come from another machine) and, when
it passes, ends with it: a repeat run is one confirmation evaluation. ``refresh``
searches anyway; ``off`` neither reads nor writes. Every run that ends with a
verified kernel offers it to the table, where the faster of the two stays.
"""

from __future__ import annotations

from .errors import ConfigError
from .records import Candidate, Provenance, TunedConfig

MODES = ("use", "refresh", "off")
#: The role a candidate taken from the table is recorded under.
TUNED_ROLE = "tuned"


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ConfigError(f"run.tuned is {mode!r}: use one of {', '.join(MODES)} (--tuned)")
    return mode


def _describe(entry: TunedConfig) -> str:
    speed = ""
    if entry.seconds:
        speed = f", {entry.seconds * 1e6:,.1f} us {'estimated' if entry.estimated else 'measured'}"
    return f"tuned table entry from run {entry.run_id} on task {entry.task_id}{speed}"


def start_from_table(session):
    """The run's result when the table's kernel for this task passes again; None: the strategy searches.

    Resumable: a run killed after the confirmation finishes with it instead of judging it twice."""
    if session.config.tuned != "use":
        return None
    done = [a for a in session.history if a.candidate.provenance.role == TUNED_ROLE]
    if done:
        attempt = done[-1]
        return session.finish(best_id=attempt.candidate.id, message=attempt.candidate.provenance.transformation) \
            if attempt.evaluation.ok else None
    if session.history:
        return None
    key = session.tuning_key()
    entry = session.store.tuned(key) if key else None
    if entry is None:
        return None
    note = f"started from the {_describe(entry)}: confirmed in one evaluation (--tuned refresh searches again)"
    candidate = Candidate(session.task.id, entry.code, dict(entry.parameters),
                          provenance=Provenance(role=TUNED_ROLE, strategy=session.config.strategy,
                                                transformation=note))
    if session.evaluate(candidate, fresh=True).ok:
        return session.finish(best_id=candidate.id, message=note)
    return None


def keep_best(session, result) -> bool:
    """Offer the run's verified best kernel to the table (the faster entry stays); whether it was kept. The
    table's own kernel, just judged again, replaces its entry whatever its speed: its figure is the current
    judge's (a changed cost model would otherwise leave the entry's old estimate standing, or beat it)."""
    if session.config.tuned == "off" or result.best is None or not result.best.evaluation.ok:
        return False
    key = session.tuning_key()
    if key is None:
        return False
    best = result.best
    profile = best.evaluation.profile
    entry = TunedConfig(key, session.task.id, best.candidate.code, dict(best.candidate.parameters),
                        seconds=profile.seconds if profile else None,
                        estimated=profile.estimated if profile else True,
                        speedup=profile.speedup if profile else None, run_id=result.run_id,
                        candidate_id=best.candidate.id, strategy=session.config.strategy)
    return session.store.keep_tuned(entry, replace=best.candidate.provenance.role == TUNED_ROLE)
