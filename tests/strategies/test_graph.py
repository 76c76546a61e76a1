"""Graph search with the offline provider: the graph is stored and exported, seeded, and resumable."""

from __future__ import annotations

import json

import pytest
from maxkernel_core.config import Settings
from maxkernel_core.store import RunStore

from maxkernel_core import optimize

from ..helpers import run_cli, run_until_killed
from ..tpu_pallas.conftest import TASKS

pytestmark = pytest.mark.slow


def structure(store: RunStore, run_id: str):
    """The graph without ids: (depth, transformation, parameters) of each node, by insertion order."""
    cands = {c.id: c for c in store.candidates(run_id)}
    nodes = store.nodes(run_id)
    by_id = {n.id: n for n in nodes}
    moves = {e.child_id: e.transformation for e in store.edges(run_id)}
    return [(n.depth, moves.get(n.id, "root"), json.dumps(cands[n.candidate_id].parameters, sort_keys=True),
             by_id[n.parent_id].depth if n.parent_id else None) for n in nodes]


def run_graph(tmp_path, name: str, seed: int = 0):
    settings = Settings()
    settings.store.home = str(tmp_path / name)
    # a beam of two at depth 2 from one child each: 4 evaluations, the smallest graph with a real beam
    settings.strategy["graph"] = {"beam_width": 2, "depth": 2, "expansions": 1}
    result = optimize(TASKS / "matmul_bias_gelu", settings=settings, strategy="graph", provider="offline", seed=seed,
                      out=tmp_path / name / "out")
    return result, RunStore(tmp_path / name / "runs.db")


def test_graph_search_same_seed_same_graph_and_exports(tmp_path):
    first, store_a = run_graph(tmp_path, "a")
    second, store_b = run_graph(tmp_path, "b")
    assert first.status == "ok" and first.best is not None
    graph = structure(store_a, first.run_id)
    assert graph == structure(store_b, second.run_id)
    assert graph[0][:2] == (0, "root") and any(depth == 2 for depth, *_ in graph)
    exported = json.loads((tmp_path / "a" / "out" / "graph.json").read_text())
    assert len(exported["nodes"]) == len(graph) and len(exported["edges"]) == len(graph) - 1
    dot = (tmp_path / "a" / "out" / "graph.dot").read_text()
    assert dot.startswith("digraph search {") and "->" in dot and "(est.)" in dot
    in_beam = [n for n in store_a.nodes(first.run_id) if n.in_beam]
    assert 1 <= len(in_beam) <= 2 and all(n.score is not None for n in in_beam)


def test_killed_graph_search_resumes_without_losing_or_repeating_a_node(tmp_path):
    home = tmp_path / "home"
    (tmp_path / "maxkernel.toml").write_text("[strategy.graph]\nbeam_width = 2\ndepth = 2\nexpansions = 2\n")
    args = ["run", "--task", str(TASKS / "matmul_bias_gelu"), "--strategy", "graph", "--provider", "offline",
            "--out", str(tmp_path / "out")]
    store, run_id = run_until_killed(args, home, lambda s, run: len(s.nodes(run)) >= 3, cwd=tmp_path)
    nodes_before = {n.id for n in store.nodes(run_id)}
    evaluated_before = [e.candidate_id for e in store.evaluations(run_id)]

    resumed = run_cli(*args, "--resume", run_id, cwd=tmp_path, env={"MAXKERNEL_HOME": str(home)}, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    nodes_after = {n.id for n in store.nodes(run_id)}
    assert nodes_before <= nodes_after  # no node lost
    evaluated = [e.candidate_id for e in store.evaluations(run_id)]
    assert evaluated[:len(evaluated_before)] == evaluated_before
    codes = [c.code for c in store.candidates(run_id) if c.id in set(evaluated)]
    assert len(codes) == len(set(codes))  # no candidate judged twice
    edges = [(e.parent_id, e.child_id) for e in store.edges(run_id)]
    assert len(edges) == len(set(edges)) == len(nodes_after) - 1


def test_parallel_independent_searches_explore_apart_and_judge_each_kernel_once(tmp_path):
    settings = Settings()
    settings.store.home = str(tmp_path / "home")
    settings.strategy["graph"] = {"beam_width": 1, "depth": 2, "expansions": 1, "searches": 3}
    result = optimize(TASKS / "rmsnorm", settings=settings, strategy="graph", provider="offline", seed=0,
                      out=tmp_path / "out")
    store = RunStore(tmp_path / "home" / "runs.db")
    assert result.status == "ok"
    edges = store.edges(result.run_id)
    searches = {e.description for e in edges}
    assert len(searches) >= 2 and searches <= {"search 0", "search 1", "search 2"}  # more than one search grew
    evaluated = [e.candidate_id for e in store.evaluations(result.run_id)]
    codes = {c.id: c.code for c in store.candidates(result.run_id)}
    judged = [codes[c] for c in evaluated]
    assert len(judged) == len(set(judged))  # a kernel two searches reach is judged once
    scored = [n.score for n in store.nodes(result.run_id) if n.score is not None]
    assert result.best.evaluation.profile.seconds == pytest.approx(min(scored))
