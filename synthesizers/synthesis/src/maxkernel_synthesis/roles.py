"""The offline synthesizer's roles over any chip's templates: the planner (the estimate's best untried point,
or what a person's instructions ask for), the implementer, the neighbours a search moves to, and the debugger
(a kernel over the chip's on-chip memory: halve the largest block). A chip's templates package answers the
role hooks on its own backends and calls these with its synthesis (:class:`TemplateSynthesis`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any, ClassVar, Protocol

from maxkernel_core import Candidate, Decline, Move, Plan, ParameterSpace, Provenance
from maxkernel_core.errors import PluginError

from .analysis import Analysis
from .feedback import follow
from .task import NAME

_lock = threading.Lock()


class TemplateSynthesis(Protocol):
    """What a chip's templates know about a task: the analysis, the points ranked by the chip's estimate
    (fastest first), and how to move between them and write the module of one."""

    #: the on-chip memory the blocks must fit, as plans and repairs name it ("VMEM", "shared memory")
    MEMORY: ClassVar[str]
    analysis: Analysis
    ranked: list[tuple[dict[str, Any], Any]]

    def complete(self, params: dict[str, Any]) -> dict[str, Any]: ...
    def estimate_of(self, point: dict[str, Any]) -> Any: ...
    def fits(self, est) -> bool: ...
    def declared_space(self) -> ParameterSpace: ...
    def neighbours(self, point: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]: ...
    def shrink_largest(self, point: dict[str, Any]) -> dict[str, Any] | None: ...
    def module(self, task_id: str, params: dict[str, Any]) -> str: ...


def selected(ctx, role: str) -> bool:
    """Whether the run chose the offline synthesizer for ``role`` (each chip's templates ask)."""
    try:
        return ctx.llm_for(role).provider.name == NAME
    except PluginError:
        return False


def answers(ctx, role: str, platform: str, unmarked: str = "") -> bool:
    """Whether ``platform``'s templates answer ``role``: the run chose the synthesizer for it and its backend
    writes that chip's kernels (``kernel_platform``; a backend that does not say is ``unmarked``'s)."""
    return selected(ctx, role) and getattr(ctx.backend, "kernel_platform", unmarked) == platform


def per_run(ctx, cache: str, make: Callable[[], Any]) -> Any:
    """A chip's synthesis of the run's task, kept in the plugin's own cache (``cache``), made on first use."""
    with _lock:
        memory = ctx.cache(cache)
        if "synthesis" not in memory:
            memory["synthesis"] = make()
        return memory["synthesis"]


def _key(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True)


def _figures(s: TemplateSynthesis, point: dict[str, Any]) -> str:
    est = s.estimate_of(point)
    if est is None:
        return "not in the cost model's ranking (a hand-edited point)"
    return (f"estimated {est.seconds * 1e6:,.1f} us, {est.bound}-bound, {s.MEMORY} "
            f"{max(k.vmem_bytes for k in est.kernels) / 2**20:.2f} MiB (cost-model estimate)")


def plan_from(task, history, ctx, s: TemplateSynthesis):
    """The planner role over ``s``, a synthesis of any chip's templates."""
    memory = ctx.cache(NAME)
    new_lines = ctx.feedback[memory.get("feedback_read", 0):]
    memory["feedback_read"] = len(ctx.feedback)
    if new_lines:
        return _plan_from_feedback(task, history, ctx, s, new_lines)
    if any(a.evaluation.ok for a in history):
        return Decline("a kernel is verified: moving through its parameter space is the strategy's search "
                       "(agent_neighbours proposes the moves)")
    untried = _untried(s, history, ctx)
    if not untried:
        return Decline("every point of the template's space has been tried")
    move = "the cost model's best point" if not history else "the next point of the cost model's ranking"
    return _plan(task, s, untried[0], move, memory, history=history)


def _untried(s: TemplateSynthesis, history, ctx) -> list[dict[str, Any]]:
    """Ranked points neither tried nor rejected by a person."""
    tried = {_key(s.complete(a.candidate.parameters)) for a in history}
    tried |= {_key(s.complete(p.parameters)) for p in ctx.rejected}
    return [p for p, _ in s.ranked if _key(p) not in tried]


def _plan(task, s: TemplateSynthesis, point: dict[str, Any], move: str, memory: dict, note: str = "",
          history=()) -> Plan:
    memory["last_plan"], memory["last_plan_at"] = dict(point), len(history)
    summary = (f"{note}Template {s.analysis.template}: {s.analysis.why}. Parameters {point} ({move}); "
               f"{_figures(s, point)}.")
    return Plan(task.id, summary, {"template": s.analysis.template, "why": s.analysis.why, "move": move},
                dict(point), author=NAME)


def _plan_from_feedback(task, history, ctx, s: TemplateSynthesis, lines: list[str]):
    """The best untried point that follows ``lines``, relative to the plan the person last saw."""
    memory = ctx.cache(NAME)
    if history and len(history) > memory.get("last_plan_at", -1):  # a kernel came after the last plan (an edit)
        seen = s.complete(history[-1].candidate.parameters)
    else:
        seen = memory.get("last_plan") or s.ranked[0][0]
    space = {p.name: list(p.values) for p in s.declared_space().parameters}
    points, applied, problems = follow(lines, _untried(s, history, ctx), seen, space)
    quoted = "; ".join(f"'{line}'" for line in lines)
    if applied and points:
        note = f"Following your instructions ({', '.join(applied)})" + (
            f"; not followed: {'; '.join(problems)}" if problems else "") + ". "
        return _plan(task, s, points[0], f"the fastest untried point with {', '.join(applied)}", memory, note,
                     history)
    if applied:
        why = f"no untried point of the template's space has {', '.join(applied)}"
    else:
        why = "; ".join(problems)
    fallback = _untried(s, history, ctx)
    if not fallback:
        return Decline(f"cannot follow {quoted}: {why}; and every other point has been tried")
    note = f"Cannot follow your instructions: {why}. Proposing instead: "
    return _plan(task, s, fallback[0], "the next point of the cost model's ranking", memory, note, history)


def implement_from(task, plan, ctx, s: TemplateSynthesis):
    params = s.complete(plan.parameters)
    return Candidate(task.id, s.module(task.id, params), params, space=s.declared_space(), provenance=Provenance(
        role="implement", provider=NAME, model=s.analysis.template, strategy=ctx.config.strategy,
        transformation=plan.decisions.get("move", ""), plan_id=plan.id))


def neighbours_from(candidate, s: TemplateSynthesis):
    if candidate.space != s.declared_space():  # not a kernel of this template
        return None
    around = s.complete(candidate.parameters)

    def order(move: Move):  # a blind "double" compiles only to overflow: fitting points first
        est = s.estimate_of(move.parameters)
        return (True, float("inf")) if est is None else (not s.fits(est), est.seconds)

    moves = [Move(label, point, _figures(s, point)) for label, point in s.neighbours(around)]
    return sorted(moves, key=order)


def debug_from(task, candidate, evaluation, ctx, s: TemplateSynthesis):
    error = evaluation.compile_error
    over_vmem = (error is not None and error.kind == "vmem_overflow") or (
        evaluation.estimate is not None and evaluation.estimate.fits_memory is False)
    if evaluation.status.value != "compile_error" or not over_vmem:
        return Decline(f"no parameter fixes a {evaluation.status.value} of a template kernel")
    point = s.shrink_largest(s.complete(candidate.parameters))
    if point is None:
        return Decline("every block is at its smallest")
    return Candidate(task.id, s.module(task.id, point), point, parent_id=candidate.id, space=s.declared_space(),
                     provenance=Provenance(role="debug", provider=NAME, model=s.analysis.template,
                                           strategy=ctx.config.strategy,
                                           transformation=f"{s.MEMORY} overflow: halve the largest block"))
