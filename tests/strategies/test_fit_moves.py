"""The search's long moves (``fit_moves``) and its blind order, on a space whose fit rule is known by hand."""

from __future__ import annotations

import random
import re

from maxkernel_core import (Candidate, Decline, EvalStatus, Evaluation, Fit, Move, Parameter, ParameterSpace, Plan,
                            Profile, RunConfig, hookimpl)
from maxkernel_core.session import RunSession
from maxkernel_core.store import RunStore
from maxkernel_core.testing import FakeBackend, FakeTester
from maxkernel_strategies.search import blind_order, fit_moves
from maxkernel_strategies.tunables import STEPS

#: Block sizes of a two-block tile; a point fits when M x K is at most 512 x 1024 (a VMEM budget).
VALUES = {"BLOCK_M": [16, 32, 64, 128, 256, 512, 1024], "BLOCK_K": [128, 256, 512, 1024, 2048]}
BUDGET = 512 * 1024


def moves_at(point: dict) -> list[Move]:
    """Each block doubled, halved, multiplied or divided by 4 within its values (the generic rule's moves)."""
    moves = []
    for name, values in VALUES.items():
        i = values.index(point[name])
        for step, label in STEPS:
            if 0 <= i + step < len(values):
                moves.append(Move(f"{label} {name}", {**point, name: values[i + step]}))
    return moves


def fits(point: dict) -> bool:
    return point["BLOCK_M"] * point["BLOCK_K"] <= BUDGET


def test_a_growing_move_goes_to_the_edge_of_what_fits():
    corner = {"BLOCK_M": 16, "BLOCK_K": 128}
    long = {m.label: m.parameters for m in fit_moves(corner, moves_at(corner), moves_at, fits)}
    assert long["double BLOCK_M to the edge"] == {"BLOCK_M": 1024, "BLOCK_K": 128}  # 512 x 1024 = the budget
    assert long["double BLOCK_K to the edge"] == {"BLOCK_M": 16, "BLOCK_K": 2048}
    assert not any(label.startswith(("halve", "quarter")) for label in long)  # shrinking goes to no edge
    # x4 reaches the same points (M 16, 64, 256, 1024; K 128, 512, 2048): each offered once
    assert "quadruple BLOCK_M to the edge" not in long and "quadruple BLOCK_K to the edge" not in long
    assert len(long) == 2
    # a move whose next repetition does not fit is at its edge already: nothing longer to offer
    near = {"BLOCK_M": 256, "BLOCK_K": 1024}
    assert not [m for m in fit_moves(near, moves_at(near), moves_at, fits) if m.label.endswith("to the edge")]


def test_a_growing_move_that_does_not_fit_is_traded_against_another_block():
    at_edge = {"BLOCK_M": 256, "BLOCK_K": 2048}  # 512 K: fits; doubling M does not
    long = {m.label: m.parameters for m in fit_moves(at_edge, moves_at(at_edge), moves_at, fits)}
    # K lowered by its smallest step until the taller tile fits: 2048 -> 1024
    assert long["double BLOCK_M, BLOCK_K lowered to fit"] == {"BLOCK_M": 512, "BLOCK_K": 1024}
    assert long["quadruple BLOCK_M, BLOCK_K lowered to fit"] == {"BLOCK_M": 1024, "BLOCK_K": 512}
    assert all(fits(p) for p in long.values())
    assert at_edge not in long.values()


def test_a_block_that_cannot_be_lowered_enough_gives_no_trade():
    tight = {"BLOCK_M": 1024, "BLOCK_K": 512}  # at the budget: doubling K fits only with M lowered

    def fits_with_tall_tiles(point):  # a rule under which no lower M fits either
        return fits(point) and point["BLOCK_M"] >= 1024

    assert fit_moves(tight, moves_at(tight), moves_at, fits_with_tall_tiles) == []
    traded = {m.label: m.parameters for m in fit_moves(tight, moves_at(tight), moves_at, fits)}
    assert traded["double BLOCK_K, BLOCK_M lowered to fit"] == {"BLOCK_M": 512, "BLOCK_K": 1024}


def test_the_blind_order_is_coarse_to_fine_and_seeded():
    corner = {"BLOCK_M": 16, "BLOCK_K": 128}
    moves = moves_at(corner)
    extra = fit_moves(corner, moves, moves_at, fits)
    order = blind_order(corner, moves, extra, random.Random(0))
    labels = [m.label for m in order]
    assert set(labels[:len(extra)]) == {m.label for m in extra}  # the long moves first
    assert len({str(sorted(m.parameters.items())) for m in order}) == len(order)  # each point once
    # the longest first: M 16 -> 1024 (6 doublings) before K 128 -> 2048 (4)
    assert labels.index("double BLOCK_M to the edge") < labels.index("double BLOCK_K to the edge")
    rest = labels[len(extra):]
    assert max(rest.index("double BLOCK_M"), rest.index("double BLOCK_K")) < min(
        rest.index("quadruple BLOCK_M"), rest.index("quadruple BLOCK_K"))  # then fine: x2 before x4
    assert [m.label for m in blind_order(corner, moves, extra, random.Random(0))] == labels


SPACE = ParameterSpace(tuple(Parameter(name, tuple(values)) for name, values in VALUES.items()))


def point_of(code: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r"^(BLOCK_\w+) = (\d+)", code, flags=re.M)}


class CornerAuthor:
    """A third party's template that starts at the smallest blocks and leaves the moves to the generic rule."""

    @hookimpl
    def agent_plan(self, task, history):
        if history:
            return Decline("one starting point")
        return Plan(task.id, "smallest blocks", parameters={"BLOCK_M": 16, "BLOCK_K": 128})

    @hookimpl
    def agent_implement(self, task, plan):
        code = "".join(f"{k} = {v}\n" for k, v in plan.parameters.items()) + "# pallas_call\n"
        return Candidate(task.id, code, dict(plan.parameters), space=SPACE)

    @hookimpl
    def agent_profile(self, task, candidate, ctx):
        verdicts = {e.candidate_id: e for e in ctx.store.evaluations(ctx.run_id)}
        return verdicts[candidate.id].profile


def seconds_at(point: dict[str, int]) -> float:
    """A made-up time: fewer row blocks and fewer K steps are faster, rows the most."""
    return 1.0 / point["BLOCK_M"] + 0.1 / point["BLOCK_K"]


class BudgetBackend(FakeBackend):
    """Judges by a made-up time (larger tiles faster: fewer steps); ``fits`` is its fit check."""

    def __init__(self) -> None:
        super().__init__(judge=self.judge)
        self.judged: list[dict[str, int]] = []

    def judge(self, task, candidate):
        point = point_of(candidate.code)
        self.judged.append(point)
        seconds = seconds_at(point)
        profile = Profile(candidate.id, "model", True, seconds)
        return Evaluation(candidate.id, EvalStatus.OK, "fine", profile=profile, estimate=profile)

    def check_fit(self, task, candidate, *, target):
        return Fit(fits(point_of(candidate.code)), reason="over the budget")


def test_graph_walks_a_blind_space_by_its_long_moves_and_drops_parents_their_children_beat(mk_pm, tmp_path):
    """From the poorest corner, with moves in no author's order: the first children are the fit check's long
    moves (the tallest tile that fits, then traded for K), nothing over the budget is judged, the optimum
    (1024 x 512) is reached in 4 evaluations of the 32 points that fit, and the root leaves the beam once a
    child beats it (before, it stayed and spent two more evaluations on its short moves)."""
    backend = BudgetBackend()
    mk_pm.register(CornerAuthor(), name="corner")
    mk_pm.register(FakeTester(), name="tester")
    task = backend.load_task("fake_matmul")
    store = RunStore(tmp_path / "runs.db")
    session = RunSession(mk_pm, store, task, RunConfig(task.id, "graph", seed=0), backend)
    strategy = mk_pm.registries.get("strategy", "graph").cls({"beam_width": 3, "depth": 2, "expansions": 2})
    result = strategy.run(session)
    assert all(fits(p) for p in backend.judged)
    labels = [e.transformation for e in store.edges(session.run_id)]
    assert labels[:2] == ["double BLOCK_M to the edge", "double BLOCK_K to the edge"]
    every_point = [{"BLOCK_M": m, "BLOCK_K": k} for m in VALUES["BLOCK_M"] for k in VALUES["BLOCK_K"]]
    optimum = min(filter(fits, every_point), key=seconds_at)
    assert optimum == {"BLOCK_M": 1024, "BLOCK_K": 512} and len(list(filter(fits, every_point))) == 32
    assert point_of(result.best.candidate.code) == optimum
    assert backend.judged.index(optimum) == 3  # the 4th evaluation
    root = next(n for n in store.nodes(session.run_id) if n.depth == 0)
    assert not root.in_beam
    assert sum(1 for e in store.edges(session.run_id) if e.parent_id == root.id) == 2  # expanded once


def test_a_backend_that_cannot_tell_what_fits_gives_no_long_moves(mk_pm, tmp_path):
    """No fit check, no edge: a repeated doubling would run to the end of the values (256x the blocks)."""
    from maxkernel_strategies.search import fit_moves_of, moves_from

    class Blind(BudgetBackend):
        def check_fit(self, task, candidate, *, target):
            return None

    mk_pm.register(CornerAuthor(), name="corner")
    backend = Blind()
    task = backend.load_task("fake_matmul")
    session = RunSession(mk_pm, RunStore(tmp_path / "runs.db"), task, RunConfig(task.id, "graph"), backend)
    corner = session.implement(session.plan())
    moves, _ = moves_from(session, corner)
    assert fit_moves_of(session, corner, corner.parameters, moves, {}) == []
    backend_that_tells = BudgetBackend()
    told = RunSession(mk_pm, RunStore(tmp_path / "told.db"), task, RunConfig(task.id, "graph"), backend_that_tells)
    assert [m.label for m in fit_moves_of(told, corner, corner.parameters, moves, {})] == ["double BLOCK_M to the edge",
                                                                         "double BLOCK_K to the edge"]
