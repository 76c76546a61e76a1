"""The TPU Pallas backend: what the core sees of this plugin."""

from __future__ import annotations

import threading
from pathlib import Path

from maxkernel_core import Backend, Candidate, Evaluation, Profile, Task, TaskRef

from . import tasks
from .targets import DEFAULT_TARGET, check_target


class TpuPallasBackend(Backend):
    """JAX Pallas kernels for TPU: tasks in the MaxKernel or JAXBench format, judged in a sandbox."""

    name = "tpu_pallas"

    def __init__(self, settings=None) -> None:
        super().__init__(settings)
        self._evaluator = None
        self._lock = threading.RLock()
        self._recent: dict[tuple[str, str], Evaluation] = {}

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
        evaluation = self.evaluator.evaluate(task, candidate, target=check_target(target))
        self.remember(evaluation, target)
        return evaluation

    def remember(self, evaluation: Evaluation, target: str) -> None:
        """Keep a verdict for :meth:`profile`, also one judged elsewhere (an executor's remote host)."""
        with self._lock:
            self._recent[(evaluation.candidate_id, target)] = evaluation
            while len(self._recent) > 256:
                self._recent.pop(next(iter(self._recent)))

    def profile(self, task: Task, candidate: Candidate, *, target: str = DEFAULT_TARGET) -> Profile | None:
        """Measured on a TPU, else the cost model's estimate; from the candidate's evaluation.

        The evaluation already traced the kernel at full size (and timed it on a TPU), so a
        candidate evaluated by this backend is not run again. None when it never traced.
        """
        with self._lock:
            evaluation = self._recent.get((candidate.id, target))
        if evaluation is None:
            evaluation = self.evaluate(task, candidate, target=target)
        if evaluation.profile is not None:
            return evaluation.profile
        model = evaluation.details.get("cost_model") or {}
        if "seconds" not in model:
            return None
        return Profile(candidate.id, "cost_model", True, model["seconds"], model.get("xla_reference_seconds"),
                       model.get("bound", ""), tuple(model.get("diagnosis", ())), model)

    def knowledge(self, task: Task, *, target: str = DEFAULT_TARGET, budget_chars: int = 12000) -> str:
        from .knowledge import knowledge_pack

        return knowledge_pack(check_target(target), budget_chars)

    def task_prompt(self, task: Task) -> str:
        """The reference source, its sizes and tolerances: what a model needs to write the kernel."""
        source = Path(task.metadata["module"]).read_text()
        entry, inputs_fn = task.metadata["entry"], task.metadata["inputs_fn"]
        sizes = " and ".join(task.sizes)
        return (f"{task.description}\n\nReference ({task.format} format; `{entry}` is the computation to "
                f"reimplement with Pallas kernels, `{inputs_fn}` makes its inputs; sizes: {sizes}, the "
                f"full size is what is compiled and timed):\n\n```python\n{source.strip()}\n```\n\n"
                f"The candidate must define `computation` with the same arguments as `{entry}` "
                f"(dynamic arguments, then static ones) and match it within atol={task.atol}, rtol={task.rtol}.")

    def close(self) -> None:
        if self._evaluator is not None:
            self._evaluator.close()
            self._evaluator = None
