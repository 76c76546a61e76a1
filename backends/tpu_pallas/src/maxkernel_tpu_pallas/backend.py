"""The TPU Pallas backend: what the core sees of this plugin."""

from __future__ import annotations

import threading
from pathlib import Path

from maxkernel_core import Backend, Candidate, Evaluation, Task, TaskRef

from . import tasks
from .targets import DEFAULT_TARGET, check_target


class TpuPallasBackend(Backend):
    """JAX Pallas kernels for TPU: tasks in the MaxKernel or JAXBench format, judged in a sandbox."""

    name = "tpu_pallas"

    def __init__(self, settings=None) -> None:
        super().__init__(settings)
        self._evaluator = None
        self._lock = threading.Lock()

    def discover_tasks(self, root: Path) -> list[TaskRef]:
        return tasks.discover(root)

    def load_task(self, ref: str | Path, search_paths: tuple[Path, ...] = ()) -> Task:
        return tasks.find_task(ref, tuple(search_paths))

    @property
    def evaluator(self):
        with self._lock:
            if self._evaluator is None:
                from maxkernel_core.config import Settings

                from .judge.evaluator import evaluator_from_settings

                self._evaluator = evaluator_from_settings(self.settings or Settings())
            return self._evaluator

    def evaluate(self, task: Task, candidate: Candidate, *, target: str = DEFAULT_TARGET) -> Evaluation:
        return self.evaluator.evaluate(task, candidate, target=check_target(target))

    def close(self) -> None:
        if self._evaluator is not None:
            self._evaluator.close()
            self._evaluator = None
