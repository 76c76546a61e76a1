"""Entry point of the TPU Pallas backend plugin: registers the backend, the tester role and ``eval``."""

from __future__ import annotations

from maxkernel_core import hookimpl

from .backend import TpuPallasBackend


@hookimpl
def register_backends(register):
    register(TpuPallasBackend)


@hookimpl(trylast=True)
def agent_test(task, candidate, ctx):
    """The tester role for this backend: the sandboxed evaluation cascade, on the run's executor."""
    if not isinstance(ctx.backend, TpuPallasBackend):
        return None
    evaluation = ctx.judge(task, candidate)
    # Judged on another host, the verdict (and its cost model) is still what the profiler reads.
    ctx.backend.remember(evaluation, ctx.config.target)
    return evaluation


@hookimpl(trylast=True)
def agent_profile(task, candidate, ctx):
    """The profiler role: device time on a TPU, else the static cost model (labelled an estimate)."""
    if not isinstance(ctx.backend, TpuPallasBackend):
        return None
    return ctx.backend.profile(task, candidate, target=ctx.config.target)


@hookimpl
def register_commands(cli):
    from .cli import eval_command
    from .profile_cli import profile_command

    cli.add_command(eval_command)
    cli.add_command(profile_command)
