"""``graph``: beam search over kernels. Nodes are candidates, edges are transformations.

A transformation is a move through the parent's parameter space (the moves of
the plugin that wrote it, ``agent_neighbours``, or the generic moves of its
declared or block-size-like constants; a point the backend says cannot fit
on-chip memory is skipped before any compile), or, when a kernel has no move
left, a new idea from the planner implemented as a child. The root comes from the
planner. At each depth every beam node gets ``expansions`` children, judged
concurrently (up to ``concurrency``) by the sandboxed cascade; a child that
regresses stays in the graph but not in the beam, and a node one of its own
children beats leaves it (the search goes on from the child, as a hill climb
does, instead of spending evaluations on the parent's other moves). The beam
keeps the ``beam_width`` fastest verified nodes (device time on a TPU, the cost
model elsewhere). When the moves come in no order of their author's (generic
moves, or the second and later parallel searches), they are tried coarse to
fine (``search.blind_order``): first the fit check's long moves (a growing move
repeated to the edge of what fits on-chip memory, or traded against another
block lowered until it fits), then the rest by step size. Seeded: with a
deterministic provider (offline, replay) the same seed gives the same graph.
Every node and edge is stored before the next expansion, and ``--resume``
reuses every stored verdict instead of judging a candidate twice.

Parallel independent search (``searches`` > 1): that many beams grow from the
same root side by side, each with its own random stream (so each explores
other moves first) and its own beam; their children are judged together in
one concurrent batch per depth, and a kernel two searches reach is judged
once. The best verified node of any search is the result. It trades a few
more evaluations for less chance of every beam settling in one local optimum.

Options (``[strategy.graph]``): beam_width (3), depth (3), expansions (2), searches (1), concurrency
(default: what the run's executor can take: 2 locally, every slot of a Ray cluster).
"""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import attrs
from attrs import field, frozen
from maxkernel_core import Candidate, SearchEdge, SearchNode, Strategy, hookimpl
from maxkernel_core.config_values import options_record

from .search import blind_moves, fresh_children, moves_from, session_key


@frozen
class GraphOptions:
    """``[strategy.graph]``, checked once when the strategy is made."""

    beam_width: int = field(default=3, metadata={"min": 1})
    depth: int = field(default=3, metadata={"min": 1})
    expansions: int = field(default=2, metadata={"min": 1})
    searches: int = field(default=1, metadata={"min": 1})
    #: unset: what the run's executor can take
    concurrency: int | None = field(default=None, metadata={"min": 1})


def score(attempt) -> float:
    profile = attempt.evaluation.profile
    return profile.seconds if attempt.evaluation.ok and profile and profile.seconds else float("inf")


class GraphSearch(Strategy):
    name = "graph"
    description = ("beam search: children are parameter moves or planner ideas; regressions, and parents their "
                   "children beat, leave the beam")

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.opts = options_record(GraphOptions, self.options, "strategy.graph")

    def run(self, session):
        self.session = session
        searches = self.opts.searches
        seed = session.config.seed
        # One stream per search; a single search keeps the plain seed.
        self.rngs = [random.Random(seed if searches == 1 else f"{seed}/search-{i}") for i in range(searches)]
        self.judged = {session_key(a.candidate.code): a for a in session.history}  # resume: reuse verdicts
        self.nodes = {n.candidate_id: n for n in session.store.nodes(session.run_id)}
        self.fits: dict[str, bool | None] = {}  # the fit check's answers by point, for the long moves it makes
        root = self._root()
        if root is None:
            return session.finish()
        beams = [[root] for _ in range(searches)]
        for depth in range(1, self.opts.depth + 1):
            if session.budget_left() == 0:
                break
            beams_before = beams
            grown, beaten = self._expand(beams, depth)
            pools = [{pair[0].id: pair for pair in [*beam, *children] if pair[0].id not in gone}
                     for beam, children, gone in zip(beams, grown, beaten, strict=False)]
            # ties broken by the code itself, never by random ids: the same seed must give the same beam
            beams = [[pair for pair in sorted(pool.values(), key=lambda p: (score(p[1]), session_key(p[1].candidate.code)))
                      if score(pair[1]) < float("inf")][: self.opts.beam_width] for pool in pools]
            in_beam = {node.id for beam in beams for node, _ in beam}
            seen = set()
            for pool, beam in zip(pools, beams_before, strict=False):  # a beaten parent is stored out of the beam
                for node, attempt in [*pool.values(), *beam]:
                    if node.id not in seen:
                        seen.add(node.id)
                        self._store(attrs.evolve(node, in_beam=node.id in in_beam, score=_finite(score(attempt))))
            if not any(beams):
                break
        return session.finish()

    def _concurrency(self) -> int:
        """The configured limit, else as many as the run's executor can take (a Ray cluster: its slots)."""
        if self.opts.concurrency is not None:
            return self.opts.concurrency
        return max(self.session.ctx.executor.max_concurrency, 1)

    def _judge(self, candidate: Candidate):
        """A stored verdict for this exact code (resume), else the cascade (with the debugger for the root)."""
        key = session_key(candidate.code)
        if key in self.judged:
            return self.judged[key]
        self.session.evaluate(candidate)
        attempt = next(a for a in reversed(self.session.history) if a.candidate.id == candidate.id)
        self.judged[key] = attempt
        return attempt

    def _store(self, node: SearchNode) -> None:
        self.nodes[node.candidate_id] = node
        self.session.add_node(node)

    def _node_for(self, attempt, parent: SearchNode | None, depth: int) -> SearchNode:
        existing = self.nodes.get(attempt.candidate.id)
        if existing is not None:
            return existing
        node = SearchNode(self.session.run_id, attempt.candidate.id, parent.id if parent else None, depth,
                          _finite(score(attempt)), False, id=f"node-{attempt.candidate.id}")
        self._store(node)
        return node

    def _replayed_root(self):
        """The root a killed run had judged but not stored as a node: its first candidate, through its repairs."""
        history = self.session.history
        attempt = history[0]
        while not attempt.evaluation.ok:
            fix = next((a for a in history if a.candidate.parent_id == attempt.candidate.id
                        and a.candidate.provenance.role == "debug"), None)
            if fix is None:
                break
            attempt = fix
        return self._node_for(attempt, None, 0), attempt

    def _root(self):
        roots = [n for n in self.nodes.values() if n.depth == 0]
        if roots:
            attempt = next(a for a in self.session.history if a.candidate.id == roots[0].candidate_id)
            return roots[0], attempt
        if self.session.history:  # killed after judging the root, before its node: never plan it anew
            return self._replayed_root()
        plan = self.session.plan(required=False)
        if plan is None:
            return None
        candidate = self.session.implement(plan)
        attempt = self._judge(candidate)
        if not attempt.evaluation.ok:
            attempt = self.session.repair(attempt.candidate, attempt.evaluation,
                                          self.session.config.debug_attempts)
            self.judged[session_key(attempt.candidate.code)] = attempt
        return self._node_for(attempt, None, 0), attempt

    def _in_graph_before(self, depth: int) -> set[str]:
        """The code of every node above ``depth``: a child that is one of them adds nothing to the graph.

        Nodes above the depth being grown are all stored before it starts, so a resumed run sees the same set."""
        code = {a.candidate.id: session_key(a.candidate.code) for a in self.session.history}
        return {code[n.candidate_id] for n in self.nodes.values() if n.depth < depth and n.candidate_id in code}

    def _children_of(self, node: SearchNode, attempt, rng: random.Random, search: int,
                     known: set[str]) -> list[tuple[str, Candidate]]:
        moves, ordered = moves_from(self.session, attempt.candidate)
        if not ordered or search > 0:  # the author's order leads the first search; the others explore
            moves = blind_moves(self.session, attempt.candidate, moves, rng, self.fits)
        children = []
        seen = {session_key(attempt.candidate.code), *known}
        for move, child in fresh_children(self.session, attempt.candidate, moves, seen, "search", self.name):
            children.append((move.label, child))
            if len(children) == self.opts.expansions:
                break
        if not children:  # nothing to tune: ask the planner for a new idea
            plan = self.session.plan(required=False)
            if plan is not None:
                children.append((f"planner idea: {plan.summary[:80]}", self.session.implement(plan)))
        return children

    def _expand(self, beams, depth: int):
        """Children of every beam node of every search, judged in one concurrent batch (each code once); and,
        per search, the ids of the beam nodes a child of their own beat."""
        known = self._in_graph_before(depth)
        work = [(i, node, move, child) for i, beam in enumerate(beams) for node, attempt in beam
                for move, child in self._children_of(node, attempt, self.rngs[i], i, known)]
        unique: dict[str, Candidate] = {}
        for *_, child in work:
            unique.setdefault(session_key(child.code), child)
        left = self.session.budget_left()
        if left is not None:  # the budget is a hard limit: the first children in a fixed order, up to it
            new = [key for key in unique if key not in self.judged]
            unique = {key: child for key, child in unique.items() if key in self.judged or key in new[:left]}
            work = [item for item in work if session_key(item[3].code) in unique]
        with ThreadPoolExecutor(max_workers=self._concurrency()) as pool:
            verdicts = dict(zip(unique, pool.map(self._judge, unique.values()), strict=False))
        grown: list[list] = [[] for _ in beams]
        beaten: list[set[str]] = [set() for _ in beams]
        parent_score = {node.id: score(attempt) for beam in beams for node, attempt in beam}
        for i, parent, move, child in work:  # stored in a fixed order: seeded runs match
            attempt = verdicts[session_key(child.code)]
            if score(attempt) < parent_score[parent.id]:
                beaten[i].add(parent.id)
            known = attempt.candidate.id in self.nodes  # resumed, or reached by another search: stored already
            node = self._node_for(attempt, parent, depth)
            if not known:
                note = f"search {i}" if len(beams) > 1 else ""
                self.session.add_edge(SearchEdge(self.session.run_id, parent.id, node.id, move, note))
            grown[i].append((node, attempt))
        return grown, beaten


def _finite(value: float) -> float | None:
    return None if value == float("inf") else value


@hookimpl
def register_strategies(register):
    register(GraphSearch)
