"""The offline synthesizer's plugin: it answers the planner, implementer and debugger roles when selected,
and proposes the moves through its own templates' parameter spaces.

It is selected like a provider (``--provider offline``, or ``llm.roles.<role>.provider``
per role) and registers one so that the choice is validated and reported like any
other; its ``complete`` is never reached, because when selected it always answers
its roles itself: a plan, a candidate, or a :class:`~maxkernel_core.Decline`.
"""

from __future__ import annotations

import json
import os
from typing import Any

# The orchestrator only traces references here (before jax is imported: it reads these once); never let it
# claim a TPU the workers need.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")

from maxkernel_core import Candidate, Decline, LLMProvider, Move, Plan, Provenance, Readiness, hookimpl
from maxkernel_core.errors import PluginError
from maxkernel_core.llm import LLMError

from .feedback import follow
from .synthesis import ALIASES, NAME, Synthesis, synthesis


class OfflineProvider(LLMProvider):
    """The handle that selects the synthesizer for a role; it takes no prompts."""

    name = NAME
    aliases = ALIASES

    def readiness(self) -> Readiness:
        try:
            import maxkernel_tpu_pallas.api  # noqa: F401
        except ImportError:
            return Readiness(False, "the offline synthesizer writes TPU Pallas kernels: install maxkernel-tpu-pallas")
        return Readiness(True)

    def complete(self, request):
        raise LLMError("the offline synthesizer answers the plan, implement and debug roles itself and takes no "
                       "prompts: choose a model provider for the roles that need one")


@hookimpl
def register_llm_providers(register):
    register(OfflineProvider)


def _selected(ctx, role: str) -> bool:
    """Whether the run chose the offline synthesizer for ``role`` (the GPU templates' plugin asks too)."""
    try:
        return ctx.llm_for(role).provider.name == NAME
    except PluginError:
        return False


def _key(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True)


def _figures(s: Synthesis, point: dict[str, Any]) -> str:
    est = s.estimate_of(point)
    if est is None:
        return "not in the cost model's ranking (a hand-edited point)"
    return (f"estimated {est.seconds * 1e6:,.1f} us, {est.bound}-bound, {s.MEMORY} "
            f"{max(k.vmem_bytes for k in est.kernels) / 2**20:.2f} MiB (cost-model estimate)")


def _other_chip(ctx) -> str | None:
    """The chip family of a backend whose kernels are not TPU kernels (the templates here are TPU kernels)."""
    family = getattr(ctx.backend, "kernel_platform", "tpu")
    return None if family == "tpu" else family


@hookimpl
def agent_plan(task, history, ctx):
    """The cost model's best untried point; once a kernel is verified, the search is the strategy's, unless a
    person's new instructions (hitl) ask for something: then the best point that follows them, or a plan that
    says which instruction it cannot follow."""
    if not _selected(ctx, "plan"):
        return None
    if _other_chip(ctx):
        return None  # that chip's templates answer (a plugin of its backend), or no one does
    return plan_from(task, history, ctx, synthesis(task, ctx))


def plan_from(task, history, ctx, s):
    """The planner role over ``s``, a synthesis of any chip's templates (the GPU's reuse it)."""
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


def _untried(s: Synthesis, history, ctx) -> list[dict[str, Any]]:
    """Ranked points neither tried nor rejected by a person."""
    tried = {_key(s.complete(a.candidate.parameters)) for a in history}
    tried |= {_key(s.complete(p.parameters)) for p in ctx.rejected}
    return [p for p, _ in s.ranked if _key(p) not in tried]


def _plan(task, s: Synthesis, point: dict[str, Any], move: str, memory: dict, note: str = "",
          history=()) -> Plan:
    memory["last_plan"], memory["last_plan_at"] = dict(point), len(history)
    summary = (f"{note}Template {s.analysis.template}: {s.analysis.why}. Parameters {point} ({move}); "
               f"{_figures(s, point)}.")
    return Plan(task.id, summary, {"template": s.analysis.template, "why": s.analysis.why, "move": move},
                dict(point), author=NAME)


def _plan_from_feedback(task, history, ctx, s: Synthesis, lines: list[str]):
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


@hookimpl
def agent_implement(task, plan, ctx):
    if not _selected(ctx, "implement") or _other_chip(ctx):
        return None
    return implement_from(task, plan, ctx, synthesis(task, ctx))


def implement_from(task, plan, ctx, s):
    params = s.complete(plan.parameters)
    return Candidate(task.id, s.module(task.id, params), params, space=s.declared_space(), provenance=Provenance(
        role="implement", provider=NAME, model=s.analysis.template, strategy=ctx.config.strategy,
        transformation=plan.decisions.get("move", ""), plan_id=plan.id))


@hookimpl
def agent_neighbours(task, candidate, ctx):
    """Single moves of one block constant around ``candidate``, those that fit VMEM first, then fastest
    (by the cost model): the order a search should try them in."""
    if not _selected(ctx, "plan") or candidate.space is None or _other_chip(ctx):
        return None
    return neighbours_from(candidate, synthesis(task, ctx))


def neighbours_from(candidate, s):
    if candidate.space != s.declared_space():  # not a kernel of this template
        return None
    around = s.complete(candidate.parameters)

    def order(move: Move):  # a blind "double" compiles only to overflow: fitting points first
        est = s.estimate_of(move.parameters)
        return (True, float("inf")) if est is None else (not s.fits(est), est.seconds)

    moves = [Move(label, point, _figures(s, point)) for label, point in s.neighbours(around)]
    return sorted(moves, key=order)


@hookimpl
def agent_debug(task, candidate, evaluation, attempts, ctx):
    """A VMEM overflow is a parameter problem: halve the largest block. Anything else, the templates being
    exact by construction, is not one this debugger can fix."""
    if not _selected(ctx, "debug") or _other_chip(ctx):
        return None
    return debug_from(task, candidate, evaluation, ctx, synthesis(task, ctx))


def debug_from(task, candidate, evaluation, ctx, s):
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
