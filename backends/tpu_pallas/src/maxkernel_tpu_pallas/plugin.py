"""Entry point of the TPU Pallas backend plugin: registers the backend, its ``[eval]`` settings and its commands."""

from __future__ import annotations

from maxkernel_core import hookimpl

from .backend import TpuPallasBackend


@hookimpl
def register_backends(register):
    register(TpuPallasBackend)


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
