"""The JaxBench suite as a maxkernel plugin: each task is a folder beside this file."""

from __future__ import annotations

from pathlib import Path

from maxkernel_core import TaskSuite, hookimpl


class JaxBench(TaskSuite):
    name = "jaxbench"
    backend = "tpu_pallas"
    description = ("the 50 published JAXBench workloads (bf16): 17 production operators and 33 fused KernelBench "
                   "level-2 patterns")

    @classmethod
    def root(cls) -> Path:
        return Path(__file__).resolve().parent


@hookimpl
def register_task_suites(register):
    register(JaxBench)
