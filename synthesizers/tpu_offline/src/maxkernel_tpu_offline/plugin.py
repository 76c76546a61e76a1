"""The offline synthesizer on a TPU backend: when ``--provider synthesizer`` is chosen for a role, the TPU
templates answer it (the chip-neutral roles of ``maxkernel_synthesis.roles`` over the TPU synthesis), and
propose the moves through their parameter spaces. On a backend whose kernels are another chip's they stand
aside for that chip's templates.
"""

from __future__ import annotations

from maxkernel_core import hookimpl

# The roles and the synthesis are imported when a role is asked of them, not when the plugin loads: they bring in
# jax, which every command would otherwise pay for (about 1.5 s of ``maxkernel --help``).


def _mine(ctx, role: str) -> bool:
    """The TPU templates answer on a backend that writes TPU kernels (one that does not say is taken for one);
    another chip's templates answer on theirs, or no one does."""
    from maxkernel_synthesis.roles import answers

    return answers(ctx, role, "tpu", unmarked="tpu")


def _roles():
    """The chip-neutral roles and the TPU templates' synthesis, imported on first use."""
    from maxkernel_synthesis import roles

    from .synthesis import synthesis

    return roles, synthesis


@hookimpl
def agent_plan(task, history, ctx):
    """The cost model's best untried point; once a kernel is verified, the search is the strategy's, unless a
    person's new instructions (hitl) ask for something: then the best point that follows them, or a plan that
    says which instruction it cannot follow."""
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
    """Single moves of one block constant around ``candidate``, those that fit VMEM first, then fastest
    (by the cost model): the order a search should try them in."""
    if not _mine(ctx, "plan") or candidate.space is None:
        return None
    offline, synthesis = _roles()
    return offline.neighbours_from(candidate, synthesis(task, ctx))


@hookimpl
def agent_debug(task, candidate, evaluation, attempts, ctx):
    """A VMEM overflow is a parameter problem: halve the largest block. Anything else, the templates being
    exact by construction, is not one this debugger can fix."""
    if not _mine(ctx, "debug"):
        return None
    offline, synthesis = _roles()
    return offline.debug_from(task, candidate, evaluation, ctx, synthesis(task, ctx))
