"""What the searching strategies share: where moves come from, which are skipped, how a move becomes a candidate.

Moves come from the plugin that knows the candidate's space (``agent_neighbours``),
else from the generic rule (:mod:`.tunables`). A move is skipped when its code was
judged already, or when the backend says before any compile that its blocks cannot
fit on-chip memory (``check_fit``): neither costs an evaluation.
"""

from __future__ import annotations

from collections.abc import Iterator

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
