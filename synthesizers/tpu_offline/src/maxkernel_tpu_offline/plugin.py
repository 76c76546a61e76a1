"""The offline synthesizer on a TPU backend: when ``--provider synthesizer`` is chosen for a role, the TPU
templates answer it (the chip-neutral roles of ``maxkernel_synthesis.roles`` over the TPU synthesis), and
propose the moves through their parameter spaces. On a backend whose kernels are another chip's they stand
aside for that chip's templates.
"""

from __future__ import annotations

import os

# The orchestrator only traces references here (before jax is imported: it reads these once); never let it
# claim a TPU the workers need.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")

from maxkernel_core import hookimpl
from maxkernel_synthesis.roles import debug_from, implement_from, neighbours_from, plan_from, selected

from .synthesis import synthesis


def _other_chip(ctx) -> str | None:
    """The chip family of a backend whose kernels are not TPU kernels (the templates here are TPU kernels)."""
    family = getattr(ctx.backend, "kernel_platform", "tpu")
    return None if family == "tpu" else family


@hookimpl
def agent_plan(task, history, ctx):
    """The cost model's best untried point; once a kernel is verified, the search is the strategy's, unless a
    person's new instructions (hitl) ask for something: then the best point that follows them, or a plan that
    says which instruction it cannot follow."""
    if not selected(ctx, "plan"):
        return None
    if _other_chip(ctx):
        return None  # that chip's templates answer (a plugin of its backend), or no one does
    return plan_from(task, history, ctx, synthesis(task, ctx))


@hookimpl
def agent_implement(task, plan, ctx):
    if not selected(ctx, "implement") or _other_chip(ctx):
        return None
    return implement_from(task, plan, ctx, synthesis(task, ctx))


@hookimpl
def agent_neighbours(task, candidate, ctx):
    """Single moves of one block constant around ``candidate``, those that fit VMEM first, then fastest
    (by the cost model): the order a search should try them in."""
    if not selected(ctx, "plan") or candidate.space is None or _other_chip(ctx):
        return None
    return neighbours_from(candidate, synthesis(task, ctx))


@hookimpl
def agent_debug(task, candidate, evaluation, attempts, ctx):
    """A VMEM overflow is a parameter problem: halve the largest block. Anything else, the templates being
    exact by construction, is not one this debugger can fix."""
    if not selected(ctx, "debug") or _other_chip(ctx):
        return None
    return debug_from(task, candidate, evaluation, ctx, synthesis(task, ctx))
