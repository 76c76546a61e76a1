"""The offline roles on the GPU backend: the offline synthesizer's planner, implementer, neighbours and
debugger (``maxkernel_synthesis.roles``), driven by the GPU templates' synthesis.

Selected as the TPU templates are (``--provider synthesizer``); they answer when the run's backend writes GPU
kernels (``kernel_platform == "gpu"``), where the TPU templates stand aside.
"""

from __future__ import annotations

from maxkernel_core import hookimpl
from maxkernel_synthesis import roles as offline

from .synthesis import synthesis


def _mine(ctx, role: str) -> bool:
    return offline.answers(ctx, role, "gpu")


@hookimpl
def agent_plan(task, history, ctx):
    """The roofline's best untried point of the GPU template (or what a person's instructions ask for)."""
    return offline.plan_from(task, history, ctx, synthesis(task, ctx)) if _mine(ctx, "plan") else None


@hookimpl
def agent_implement(task, plan, ctx):
    return offline.implement_from(task, plan, ctx, synthesis(task, ctx)) if _mine(ctx, "implement") else None


@hookimpl
def agent_neighbours(task, candidate, ctx):
    """Single moves of one constant, those that fit shared memory first, then fastest by the roofline."""
    if not _mine(ctx, "plan") or candidate.space is None:
        return None
    return offline.neighbours_from(candidate, synthesis(task, ctx))


@hookimpl
def agent_debug(task, candidate, evaluation, attempts, ctx):
    """Tiles over shared memory: halve the largest; nothing else of a template kernel is a parameter problem."""
    return offline.debug_from(task, candidate, evaluation, ctx, synthesis(task, ctx)) if _mine(ctx, "debug") else None
