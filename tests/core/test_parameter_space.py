"""A candidate's declared parameter space is searched by the strategies through ``agent_neighbours``, the backend's
``check_fit`` rules points out before any compile, and a ``Decline`` ends a role call without a fallback."""

from __future__ import annotations

import re

import attrs
import pytest

from maxkernel_core import (
    Candidate,
    Decline,
    EvalStatus,
    Evaluation,
    Fit,
    Move,
    Parameter,
    ParameterSpace,
    Plan,
    Profile,
    RunConfig,
    hookimpl,
)
from maxkernel_core.session import RunSession
from maxkernel_core.store import RunStore
from maxkernel_core.testing import FakeBackend, FakeTester

SPACE = ParameterSpace((Parameter("BLOCK_M", (128, 256, 512)), Parameter("BLOCK_K", (256, 512))))


def module(point: dict[str, int]) -> str:
    return f"BLOCK_M = {point['BLOCK_M']}\nBLOCK_K = {point['BLOCK_K']}\nVMEM_LIMIT_BYTES = 1024\n# pallas_call\n"


def cost(point: dict[str, int]) -> float:
    """The author's model: bigger blocks are faster, K blocks the most."""
    return 1.0 / (point["BLOCK_M"] * point["BLOCK_K"] ** 2)


class Author:
    """A third party's generator: one template with a declared space, and its own ordered moves."""

    def __init__(self) -> None:
        self.neighbour_calls = 0

    @hookimpl
    def agent_plan(self, task, history):
        if history:
            return Decline("one template, one starting point: the strategy searches the rest")
        return Plan(task.id, "smallest blocks", parameters={"BLOCK_M": 128, "BLOCK_K": 256})

    @hookimpl
    def agent_implement(self, task, plan):
        return Candidate(task.id, module(plan.parameters), dict(plan.parameters), space=SPACE)

    @hookimpl
    def agent_debug(self, task, candidate):
        return Decline("templates are exact: nothing to fix")

    @hookimpl
    def agent_profile(self, task, candidate, ctx):
        return next(a.evaluation.profile for a in ctx_history(ctx) if a.candidate.id == candidate.id)

    @hookimpl
    def agent_neighbours(self, task, candidate):
        if candidate.space != SPACE:
            return None
        self.neighbour_calls += 1
        moves = []
        for p in SPACE.parameters:
            i = p.values.index(candidate.parameters[p.name])
            for j in (i - 1, i + 1):
                if 0 <= j < len(p.values):
                    moves.append(Move(f"{p.name} -> {p.values[j]}", {**candidate.parameters, p.name: p.values[j]}))
        return sorted(moves, key=lambda m: cost(m.parameters))


def ctx_history(ctx):
    verdicts = {e.candidate_id: e for e in ctx.store.evaluations(ctx.run_id)}
    return [type("A", (), {"candidate": c, "evaluation": verdicts[c.id]}) for c in ctx.store.candidates(ctx.run_id)
            if c.id in verdicts]


class SpeedBackend(FakeBackend):
    """ok for any module; the estimate is the author's cost; BLOCK_M 512 never fits memory."""

    def __init__(self) -> None:
        super().__init__(judge=self.judge_by_cost)
        self.fit_checks: list[dict[str, int]] = []

    @staticmethod
    def point_of(code: str) -> dict[str, int]:
        return {k: int(v) for k, v in re.findall(r"^(BLOCK_\w+) = (\d+)", code, flags=re.M)}

    def judge_by_cost(self, task, candidate):
        seconds = cost(self.point_of(candidate.code))
        profile = Profile(candidate.id, "model", True, seconds)
        return Evaluation(candidate.id, EvalStatus.OK, "fine", profile=profile, estimate=profile)

    def check_fit(self, task, candidate, *, target):
        point = self.point_of(candidate.code)
        self.fit_checks.append(point)
        return Fit(point["BLOCK_M"] < 512, reason="BLOCK_M 512 overflows")


@pytest.fixture
def session(mk_pm, tmp_path):
    author, backend = Author(), SpeedBackend()
    mk_pm.register(author, name="author")
    mk_pm.register(FakeTester(), name="tester")
    task = backend.load_task("fake_matmul")
    s = RunSession(mk_pm, RunStore(tmp_path / "runs.db"), task, RunConfig(task.id, "auto", budget=6), backend)
    s.author, s.backend = author, backend
    return s


def test_auto_searches_the_declared_space_with_the_authors_moves_and_skips_points_that_cannot_fit(mk_pm, session):
    strategy = mk_pm.registries.get("strategy", "auto").cls({"max_iterations": 3, "autotune_points": 4})
    result = strategy.run(session)
    points = [SpeedBackend.point_of(a.candidate.code) for a in session.history if a.candidate.provenance.role == "autotune"]
    assert session.author.neighbour_calls >= 1
    assert points[0] == {"BLOCK_M": 128, "BLOCK_K": 512}  # the author's best move first
    assert all(p["BLOCK_M"] < 512 for p in points)  # ruled out before any compile: never judged
    assert {"BLOCK_M": 512, "BLOCK_K": 512} in session.backend.fit_checks or \
        {"BLOCK_M": 512, "BLOCK_K": 256} in session.backend.fit_checks
    assert SpeedBackend.point_of(result.best.candidate.code) == {"BLOCK_M": 256, "BLOCK_K": 512}
    # only the moved lines change: the other constants of the module stay as the author wrote them
    assert "VMEM_LIMIT_BYTES = 1024" in result.best.candidate.code
    assert result.best.candidate.space == SPACE


def test_a_decline_ends_the_call_without_asking_a_fallback(mk_pm, session):
    asked = []

    class Fallback:
        @hookimpl(trylast=True)
        def agent_plan(self, task, history):
            asked.append("plan")
            return Plan(task.id, "fallback")

    mk_pm.register(Fallback(), name="fallback")
    session.evaluate(session.implement(session.plan()))
    assert session.plan(required=False) is None and asked == []
    bad = attrs.evolve(session.history[0].evaluation, status=EvalStatus.COMPILE_ERROR)
    assert session.debug(session.history[0].candidate, bad) is None


def test_without_an_author_the_generic_rule_moves_one_declared_parameter(mk_pm, session):
    from maxkernel_strategies.search import moves_from

    mk_pm.unregister(name="author")
    start = Candidate("fake_matmul", module({"BLOCK_M": 256, "BLOCK_K": 256}), {"BLOCK_M": 256, "BLOCK_K": 256},
                      space=SPACE)
    moves, ordered = moves_from(session, start)
    assert not ordered
    assert sorted(m.label for m in moves) == ["double BLOCK_K", "double BLOCK_M", "halve BLOCK_M"]
    assert all(SPACE.contains(m.parameters) for m in moves)


def test_an_undeclared_module_moves_only_block_size_like_constants():
    from maxkernel_strategies.tunables import tunables

    code = "BLOCK_Q = 256\nVMEM_LIMIT_BYTES = 67108864\nFULL_ROWS = 1\nNUM_HEADS = 12\nTILE = 128\n"
    assert tunables(code) == {"BLOCK_Q": 256, "TILE": 128}
