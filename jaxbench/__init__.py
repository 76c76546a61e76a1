"""The JaxBench suite as a maxkernel plugin: each task is a folder beside this file."""

from __future__ import annotations

from pathlib import Path

from maxkernel_core import TaskSuite, hookimpl


class JaxBench(TaskSuite):
    name = "jaxbench"
    backend = "tpu_pallas"
    description = "50 TPU kernel tasks: 17 production operators (bf16) and 33 fused KernelBench level-2 patterns (f32)"

    @classmethod
    def root(cls) -> Path:
        return Path(__file__).resolve().parent


@hookimpl
def register_task_suites(register):
    register(JaxBench)
