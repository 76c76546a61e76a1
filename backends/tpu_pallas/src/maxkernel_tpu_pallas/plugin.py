"""Entry point of the TPU Pallas backend plugin: registers the backend, the tester role and ``eval``."""

from __future__ import annotations

from maxkernel_core import hookimpl
from maxkernel_pallas_judge.roles import judge_and_keep, profile_from_verdict

from .backend import TpuPallasBackend

#: This plugin's run cache (``ctx.cache``): the verdicts the profiler reads.
CACHE = "tpu_pallas"


@hookimpl
def register_backends(register):
    register(TpuPallasBackend)


@hookimpl(trylast=True)
def agent_test(task, candidate, ctx):
    """The tester role for this backend: the sandboxed evaluation cascade, on the run's executor."""
    if not isinstance(ctx.backend, TpuPallasBackend):
        return None
    return judge_and_keep(task, candidate, ctx, CACHE)


@hookimpl(trylast=True)
def agent_profile(task, candidate, ctx):
    """The profiler role: device time on a TPU, else the static cost model (labelled an estimate), from the
    candidate's verdict: the evaluation traced the kernel at full size already (and timed it on a TPU)."""
    if not isinstance(ctx.backend, TpuPallasBackend):
        return None
    return profile_from_verdict(task, candidate, ctx, CACHE)


@hookimpl
def register_settings(register):
    from maxkernel_pallas_judge.settings import EvalSettings

    register(EvalSettings)


@hookimpl
def register_commands(cli):
    from .calibrate_cli import calibrate_command
    from .cli import eval_command
    from .new_task_cli import new_task_command
    from .profile_cli import profile_command

    cli.add_command(eval_command)
    cli.add_command(profile_command)
    cli.add_command(calibrate_command)
    cli.add_command(new_task_command)
