"""The offline roles on the GPU backend: the offline synthesizer's planner, implementer, neighbours and
debugger (``maxkernel_synthesis.roles``), driven by the GPU templates' synthesis.

Selected as the TPU templates are (``--provider synthesizer``); they answer when the run's backend writes GPU
kernels (``kernel_platform == "gpu"``), where the TPU templates stand aside.
"""

from __future__ import annotations

from maxkernel_core import hookimpl

# The roles and the synthesis are imported when a role is asked of them, not when the plugin loads: they bring in
# jax, which every command would otherwise pay for (about 1.5 s of ``maxkernel --help``).


def _mine(ctx, role: str) -> bool:
    from maxkernel_synthesis.roles import answers

    return answers(ctx, role, "gpu")


def _roles():
    """The chip-neutral roles and the GPU templates' synthesis, imported on first use."""
    from maxkernel_synthesis import roles

    from .synthesis import synthesis

    return roles, synthesis


@hookimpl
def agent_plan(task, history, ctx):
    """The roofline's best untried point of the GPU template (or what a person's instructions ask for)."""
    if not _mine(ctx, "plan"):
        return None
    offline, synthesis = _roles()
    return offline.plan_from(task, history, ctx, synthesis(task, ctx))


@hookimpl
def agent_implement(task, plan, ctx):
    if not _mine(ctx, "implement"):
        return None
    offline, synthesis = _roles()
    return offline.implement_from(task, plan, ctx, synthesis(task, ctx))


@hookimpl
def agent_neighbours(task, candidate, ctx):
    """Single moves of one constant, those that fit shared memory first, then fastest by the roofline."""
    if not _mine(ctx, "plan") or candidate.space is None:
        return None
    offline, synthesis = _roles()
    return offline.neighbours_from(candidate, synthesis(task, ctx))


@hookimpl
def agent_debug(task, candidate, evaluation, attempts, ctx):
    """Tiles over shared memory: halve the largest; nothing else of a template kernel is a parameter problem."""
    if not _mine(ctx, "debug"):
        return None
    offline, synthesis = _roles()
    return offline.debug_from(task, candidate, evaluation, ctx, synthesis(task, ctx))
