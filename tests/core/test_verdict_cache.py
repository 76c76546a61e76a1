"""Identical code is judged once: in a run, across runs on one store, never across judges, never a re-check."""

import attrs
import pytest

from maxkernel_core.records import EvalStatus, Evaluation, Profile, RunConfig
from maxkernel_core.session import RECHECK, RunSession
from maxkernel_core.verdict_cache import canonical_code, verdict_key

GOOD = "def computation(x):\n    return pl.pallas_call(...)(x)\n"


@pytest.fixture
def parts(parts):
    """The shared parts, with a backend that says what its verdicts (and tuned kernels) depend on."""
    parts[3].fingerprint = "judge-1"
    return parts


def session_with(parts, budget=None):
    pm, agents, store, backend, task = parts
    return RunSession(pm, store, task, RunConfig(task.id, budget=budget), backend)


def implement(parts, session, code):
    parts[1].enqueue(code)
    return session.implement(session.plan())


def test_canonical_code_drops_only_what_the_judge_never_runs():
    assert canonical_code("\n\ndef f():  \n    return 1\t\n\n\n") == "def f():\n    return 1\n"
    assert canonical_code("  x = 1\n") == "  x = 1\n"  # leading indentation is code: kept (and judged as such)
    assert verdict_key("a", "x = 1\n") == verdict_key("a", "x = 1   \n\n")
    assert verdict_key("a", "x = 1\n") != verdict_key("b", "x = 1\n") != verdict_key("a", "x = 2\n")


def test_identical_code_in_one_run_is_judged_once_and_not_counted(parts):
    backend = parts[3]
    session = session_with(parts, budget=2)
    first = session.evaluate(implement(parts, session, GOOD))
    again = session.evaluate(implement(parts, session, "\n" + GOOD.replace("(x)\n", "(x)   \n") + "\n\n"))
    assert len(backend.evaluated) == 1 and first.ok and again.ok
    assert again.reused_from.endswith(f"/{first.candidate_id}") and again.candidate_id != first.candidate_id
    assert session.spent() == 1 and session.budget_left() == 1
    result = session.finish()
    assert (result.evaluations, result.reused) == (1, 1)
    stored = parts[2].evaluations(session.run_id)
    assert [e.reused_from != "" for e in stored] == [False, True]  # both stored, the second says whose verdict


def test_a_later_run_on_the_store_reuses_the_verdict_and_the_estimate(parts):
    backend = parts[3]
    backend.enqueue(Evaluation("x", EvalStatus.OK, profile=Profile("x", "cost_model", True, seconds=2e-6)))
    first = session_with(parts)
    first.evaluate(implement(parts, first, GOOD))
    later = session_with(parts)
    verdict = later.evaluate(implement(parts, later, GOOD))
    assert len(backend.evaluated) == 1 and verdict.profile.seconds == 2e-6
    assert verdict.reused_from.startswith(first.run_id + "/")
    assert later.finish().best.evaluation.reused_from  # the best may be a reused verdict; it says so


def test_another_judge_or_task_judges_again(parts):
    backend = parts[3]
    first = session_with(parts)
    first.evaluate(implement(parts, first, GOOD))
    backend.fingerprint = "judge-2"  # e.g. a new jax, an edited judge, a new calibration
    later = session_with(parts)
    later.evaluate(implement(parts, later, GOOD))
    backend.fingerprint = None  # a backend that cannot say what its verdicts depend on: never reused
    last = session_with(parts)
    last.evaluate(implement(parts, last, GOOD))
    assert len(backend.evaluated) == 3


def test_a_recheck_is_judged_anew_and_a_crash_is_never_reused(parts):
    backend = parts[3]
    backend.enqueue(Evaluation("x", EvalStatus.CRASHED, "worker died"))
    session = session_with(parts)
    crashed = implement(parts, session, GOOD)
    assert session.evaluate(crashed).status is EvalStatus.CRASHED
    ok = implement(parts, session, GOOD)
    assert session.evaluate(ok).ok and len(backend.evaluated) == 2  # the crash said nothing about the code
    recheck = attrs.evolve(ok, id=f"{ok.id}-confirm", parent_id=ok.id,
                           provenance=attrs.evolve(ok.provenance, transformation=RECHECK))
    assert session.evaluate(recheck).ok and len(backend.evaluated) == 3
    assert not session.history[-1].evaluation.reused_from


def test_the_judged_program_is_the_canonical_code(parts):
    backend = parts[3]
    session = session_with(parts)
    session.evaluate(implement(parts, session, "\n\n" + GOOD + "   \n\n"))
    assert backend.evaluated[0].code == GOOD
    assert parts[2].candidates(session.run_id)[0].code == GOOD
