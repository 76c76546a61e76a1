"""Entry point of the GPU Pallas backend plugin: the backend and its tester and profiler roles."""

from __future__ import annotations

from maxkernel_core import hookimpl
from maxkernel_pallas_judge.roles import judge_and_keep, profile_from_verdict

from .backend import GpuPallasBackend

#: This plugin's run cache (``ctx.cache``): the verdicts the profiler reads.
CACHE = "gpu_pallas"


@hookimpl
def register_backends(register):
    register(GpuPallasBackend)


@hookimpl(trylast=True)
def agent_test(task, candidate, ctx):
    """The tester role: the shared sandboxed evaluation cascade, on the run's executor."""
    if not isinstance(ctx.backend, GpuPallasBackend):
        return None
    return judge_and_keep(task, candidate, ctx, CACHE)


@hookimpl(trylast=True)
def agent_profile(task, candidate, ctx):
    """The profiler role: device time on a GPU host, else the roofline estimate (labelled one)."""
    if not isinstance(ctx.backend, GpuPallasBackend):
        return None
    return profile_from_verdict(task, candidate, ctx, CACHE)
