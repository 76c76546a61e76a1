"""Entry point ``ray`` of the maxkernel-ray distribution: registers the executor."""

from __future__ import annotations

from maxkernel_core import hookimpl

from .executor import RayExecutor


@hookimpl
def register_executors(register):
    register(RayExecutor)
