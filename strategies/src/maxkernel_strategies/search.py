"""What the searching strategies share: where moves come from, which are skipped, how a move becomes a candidate.

Moves come from the plugin that knows the candidate's space (``agent_neighbours``),
else from the generic rule (:mod:`.tunables`). A move is skipped when its code was
judged already, or when the backend says before any compile that its blocks cannot
fit on-chip memory (``check_fit``): neither costs an evaluation. The same check
makes two longer moves (``fit_moves``): a growing move repeated to the edge of
what fits, and a growing move that does not fit traded against another
parameter; a search that knows nothing of speed tries them first
(``blind_order``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from typing import Any

from maxkernel_core import Candidate, Move, Provenance
from maxkernel_core.verdict_cache import canonical_code

from .tunables import constant_moves, declared_moves, tunables, with_values


def session_key(code: str) -> str:
    """Code compared as the session compares it: the canonical program the judge runs."""
    return canonical_code(code)


def moves_from(session, candidate: Candidate) -> tuple[list[Move], bool]:
    """(moves, ordered): the author's moves best first (ordered), else the generic rule's (unordered)."""
    moves = session.neighbours(candidate)
    if moves is not None:
        return list(moves), True
    if candidate.space is not None and candidate.space.parameters:
        return declared_moves(candidate.space, dict(candidate.parameters)), False
    return constant_moves(tunables(candidate.code)), False


def child_of(parent: Candidate, move: Move, role: str, strategy: str) -> Candidate:
    """The parent's module at the move's point: exactly the moved constants' lines rewritten."""
    changed = {k: v for k, v in move.parameters.items() if parent.parameters.get(k) != v}
    if not parent.parameters:  # an undeclared module: its constants are the point
        changed = {k: v for k, v in move.parameters.items() if tunables(parent.code).get(k) != v}
    code = with_values(parent.code, changed)
    return Candidate(parent.task_id, code, {**parent.parameters, **move.parameters}, parent_id=parent.id,
                     space=parent.space, provenance=Provenance(role=role, strategy=strategy,
                                                               transformation=f"{role}: {move.label}"
                                                               if role == "autotune" else move.label))


def ruled_out(session, candidate: Candidate) -> bool:
    """Whether the backend says, before any compile, that the candidate's blocks cannot fit."""
    fit = session.check_fit(candidate)
    return fit is not None and not fit.fits


def fresh_children(session, parent: Candidate, moves: list[Move], tried: set[str], role: str,
                   strategy: str) -> Iterator[tuple[Move, Candidate]]:
    """Children not judged before (by code) and not ruled out by the backend, in the moves' order.

    Each yielded child's code is added to ``tried``; so is each ruled-out child's (never checked twice).
    """
    for move in moves:
        try:
            child = child_of(parent, move, role, strategy)
        except KeyError:  # the move names a constant the module does not have
            continue
        key = session_key(child.code)
        if key in tried:
            continue
        tried.add(key)
        if ruled_out(session, child):
            continue
        yield move, child


#: How many steps a move is repeated, or another parameter lowered, before it is given up.
FIT_STEPS = 8


def fit_moves(point: dict[str, Any], moves: list[Move], moves_at: Callable[[dict[str, Any]], list[Move]],
              fits: Callable[[dict[str, Any]], bool]) -> list[Move]:
    """The moves the fit check makes worth one evaluation, beyond ``moves`` (the moves at ``point``).

    * **To the edge**: a move that grows blocks, repeated while the point still fits on-chip memory: the
      largest blocks that way for one evaluation (a corner of small blocks is five doublings from a good tile).
    * **Traded**: a growing move that does not fit, with one other parameter lowered step by step until it
      does (a taller tile with a shorter K): the fit boundary is a ridge single moves cannot cross.

    ``moves_at`` gives the moves at any point, ``fits`` the backend's fit check; neither is an evaluation. A
    long move may land where a short one does (``blind_order`` keeps it as the long one)."""
    found: dict[str, Move] = {}
    for move in moves:
        if not _grows(point, move.parameters):
            continue
        if fits(move.parameters):
            edge = _to_the_edge(move, moves_at, fits)
            if edge is not None:
                found.setdefault(_key(edge), Move(f"{move.label} to the edge", edge))
            continue
        for name in (k for k, v in point.items() if type(v) is int and move.parameters.get(k) == v):
            traded = _lowered_until_it_fits(move.parameters, name, moves_at, fits)
            if traded is not None:
                found.setdefault(_key(traded), Move(f"{move.label}, {name} lowered to fit", traded))
    return [m for k, m in found.items() if k != _key(point)]


def blind_order(point: dict[str, Any], moves: list[Move], extra: list[Move], rng) -> list[Move]:
    """Moves in an order that knows nothing of their speed, coarse to fine: the fit check's long moves first,
    the longest first, then the rest by the size of their step, smallest first; ties in the seeded random
    order."""
    long_points = {_key(m.parameters) for m in extra}  # a short move to where a long one lands goes with it
    ordered = [*(m for m in moves if _key(m.parameters) not in long_points), *extra]
    rng.shuffle(ordered)
    long_moves = {id(m) for m in extra}
    return sorted(ordered, key=lambda m: (0, -_span(point, m.parameters)) if id(m) in long_moves
                  else (1, _span(point, m.parameters)))


def _key(point: dict[str, Any]) -> str:
    return json.dumps(point, sort_keys=True, default=str)


def _grows(point: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether a move raises every parameter it changes (and changes one), all of them integers."""
    changed = [k for k in new if new[k] != point.get(k)]
    return bool(changed) and all(type(point.get(k)) is int and type(new[k]) is int and new[k] > point[k]
                                 for k in changed)


def _span(point: dict[str, Any], new: dict[str, Any]) -> float:
    """A move's step: the factors its integer parameters change by, in doublings."""
    return sum(abs(math.log2(new[k] / point[k])) for k in new
               if type(point.get(k)) is int and type(new[k]) is int and point[k] > 0 < new[k] and new[k] != point[k])


def _to_the_edge(move: Move, moves_at, fits) -> dict[str, Any] | None:
    """``move`` repeated (the move of the same label at each new point) while the point fits; None after one."""
    current = move.parameters
    for _ in range(FIT_STEPS):
        following = next((m.parameters for m in moves_at(current) if m.label == move.label), None)
        if following is None or following == current or not fits(following):
            break
        current = following
    return current if current != move.parameters else None


def _lowered_until_it_fits(start: dict[str, Any], name: str, moves_at, fits) -> dict[str, Any] | None:
    """``start`` with ``name`` lowered by the smallest step a move offers, until it fits (None if it never does)."""
    current = start
    for _ in range(FIT_STEPS):
        lower = [m.parameters for m in moves_at(current)
                 if [k for k in m.parameters if m.parameters[k] != current.get(k)] == [name]
                 and type(m.parameters[name]) is int and m.parameters[name] < current[name]]
        if not lower:
            return None
        current = max(lower, key=lambda p: p[name])
        if fits(current):
            return current
    return None


def blind_moves(session, candidate: Candidate, moves: list[Move], rng, memo: dict[str, bool | None]) -> list[Move]:
    """``candidate``'s moves in ``blind_order``, with the long moves ``fit_moves_of`` finds."""
    point = dict(candidate.parameters) or tunables(candidate.code)
    return blind_order(point, moves, fit_moves_of(session, candidate, point, moves, memo), rng)


def fit_moves_of(session, candidate: Candidate, point: dict[str, Any], moves: list[Move],
                 memo: dict[str, bool | None]) -> list[Move]:
    """``fit_moves`` at ``candidate``'s ``point``, through the session: the moves at a point are its module's
    at that point, the fit check the backend's (``memo`` keeps its answers by point for the run). A backend
    that cannot tell what fits has no edge to go to: no long moves (a point it cannot tell about ends one)."""
    def at(p: dict[str, Any]) -> Candidate:
        return child_of(candidate, Move("", p), "search", "")

    def answer(p: dict[str, Any]) -> bool | None:
        key = _key(p)
        if key not in memo:
            fit = session.check_fit(at(p))
            memo[key] = None if fit is None else fit.fits
        return memo[key]

    if answer(point) is None:
        return []
    return fit_moves(point, moves, lambda p: moves_from(session, at(p))[0], lambda p: answer(p) is True)
