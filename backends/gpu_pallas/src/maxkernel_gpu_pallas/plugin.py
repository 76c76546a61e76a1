"""Entry point of the GPU Pallas backend plugin: the backend and its tester and profiler roles."""

from __future__ import annotations

from maxkernel_core import hookimpl

from .backend import GpuPallasBackend

#: This plugin's run cache (``ctx.cache``), and how many verdicts it keeps for the profiler.
CACHE = "gpu_pallas"
KEPT_VERDICTS = 256


@hookimpl
def register_backends(register):
    register(GpuPallasBackend)


@hookimpl(tryfirst=True)
def agent_test(task, candidate, ctx):
    """The tester role: the shared sandboxed evaluation cascade, on the run's executor."""
    if not isinstance(ctx.backend, GpuPallasBackend):
        return None
    evaluation = ctx.judge(task, candidate)
    verdicts = ctx.cache(CACHE).setdefault("verdicts", {})
    verdicts[candidate.id] = evaluation
    while len(verdicts) > KEPT_VERDICTS:
        verdicts.pop(next(iter(verdicts)))
    return evaluation


@hookimpl(tryfirst=True)
def agent_profile(task, candidate, ctx):
    """The profiler role: device time on a GPU host, else the roofline estimate (labelled one)."""
    if not isinstance(ctx.backend, GpuPallasBackend):
        return None
    evaluation = ctx.cache(CACHE).get("verdicts", {}).get(candidate.id) or ctx.judge(task, candidate)
    return evaluation.profile or evaluation.estimate
