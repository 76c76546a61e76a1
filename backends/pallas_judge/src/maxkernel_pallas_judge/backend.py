"""What a Pallas backend is to the core, whatever its chip: task formats, the sandboxed judge, its fingerprint and
tuning key. A chip's backend subclasses it with its ``Platform``, its targets, its knowledge pack."""

from __future__ import annotations

import threading
from pathlib import Path

from maxkernel_core import Backend, Candidate, Evaluation, Fit, HostCheck, Task, TaskRef

from . import tasks
from .host_jax import keep_off_the_chip


class PallasBackend(Backend):
    """JAX Pallas kernels: tasks in the MaxKernel, JAXBench or KernelBench format, judged in a sandbox."""

    #: the chip family its kernels are written for ("tpu", "gpu"): which offline templates answer
    kernel_platform = ""
    #: the target a call without one judges for
    default_target = ""

    def __init__(self, settings=None) -> None:
        super().__init__(settings)
        keep_off_the_chip()  # this process traces and reads tasks; the device worker alone opens the chip
        self._evaluator = None
        self._lock = threading.RLock()

    def platform(self):
        """The chip's judge facts (``judge.platform.Platform``)."""
        raise NotImplementedError

    def check_target(self, target: str) -> str:
        """``target`` when this backend judges for it; else a ConfigError naming the choices."""
        raise NotImplementedError

    def fingerprint_parts(self, target: str) -> dict[str, str]:
        """What of the backend itself changes a verdict or estimate (its source, its model's calibration)."""
        return {}

    def discover_tasks(self, root: Path) -> list[TaskRef]:
        return tasks.discover(root)

    def load_task(self, ref: str | Path, search_paths: tuple[Path, ...] = ()) -> Task:
        return tasks.find_task(ref, tuple(search_paths))

    @property
    def evaluator(self):
        with self._lock:
            if self._evaluator is None:
                from .judge.evaluator import evaluator_from_settings

                self._evaluator = evaluator_from_settings(self.settings, self.platform(), self.check_target)
            return self._evaluator

    def evaluate(self, task: Task, candidate: Candidate, *, target: str = "") -> Evaluation:
        return self.evaluator.evaluate(task, candidate, target=self.check_target(target or self.default_target))

    def evaluation_timeout_s(self) -> float:
        """The judge's own limit on one evaluation (``[eval] timeout_s``)."""
        from .settings import eval_settings

        return eval_settings(self.settings).timeout_s

    def check_fit(self, task: Task, candidate: Candidate, *, target: str = "") -> Fit | None:
        """The cost model's VMEM need of the candidate's kernels, from one sandboxed trace (no compile)."""
        return self.evaluator.check_fit(task, candidate, target=self.check_target(target or self.default_target))

    def judge_fingerprint(self, task: Task, *, target: str = "") -> str:
        """Task files, target, ``[eval]`` settings, versions, judge source, cost-model parameters, machine."""
        from .judge.fingerprint import judge_fingerprint
        from .settings import eval_settings

        target = self.check_target(target or self.default_target)
        return judge_fingerprint(task, target, eval_settings(self.settings), self.fingerprint_parts(target))

    def tuning_key(self, task: Task, *, target: str = "") -> dict[str, str] | None:
        """The reference's full-size program fingerprint, its input shapes and dtypes, the chip, jax/libtpu."""
        from .judge.fingerprint import compiler_versions

        target = self.check_target(target or self.default_target)
        ref = self.evaluator.reference(task, target)
        if not ref.signature:
            return None
        shapes = " ".join(f"{s['dtype']}[{','.join(map(str, s['shape']))}]" for s in ref.full_shapes)
        return {"backend": self.name, "signature": ref.signature, "shapes": shapes, "target": target,
                "versions": compiler_versions()}

    def tuning_versions(self) -> str:
        from .judge.fingerprint import compiler_versions

        return compiler_versions()

    def task_prompt(self, task: Task) -> str:
        """The reference source, its sizes and tolerances: what a model needs to write the kernel."""
        source = Path(task.metadata["module"]).read_text()
        entry, inputs_fn = task.metadata["entry"], task.metadata["inputs_fn"]
        sizes = " and ".join(task.sizes)
        if task.metadata.get("wrap") == "kernelbench":
            return (f"{task.description}\n\nReference (KernelBench-style module; the full size is what is "
                    f"compiled and timed):\n\n```python\n{source.strip()}\n```\n\nAnswer with a module defining "
                    "`class ModelNew` with the same `__init__` arguments as `Model` and a `forward` that uses Pallas "
                    "kernels. The judge sets the reference's weights (the array attributes of `Model`, under the "
                    "same names) on your instance before calling `forward`, so read them from `self`; it may check "
                    "correctness at a smaller size than the full one, so take shapes from the inputs. "
                    f"Match within atol={task.atol}, rtol={task.rtol}.")
        return (f"{task.description}\n\nReference ({task.format} format; `{entry}` is the computation to "
                f"reimplement with Pallas kernels, `{inputs_fn}` makes its inputs; sizes: {sizes}, the "
                f"full size is what is compiled and timed):\n\n```python\n{source.strip()}\n```\n\n"
                f"The candidate must define `computation` with the same arguments as `{entry}` "
                f"(dynamic arguments, then static ones) and match it within atol={task.atol}, rtol={task.rtol}.")

    def deliverables(self, evaluation: Evaluation) -> dict[str, bytes]:
        """The full-size program the verdict is about (``kernel.jaxexport``: jax.export's serialization, as the
        checker made, proved and compiled it, and on a chip measured it), when this store holds it."""
        from .judge.evaluator import store_home
        from .judge.traces import ARTIFACT_NAME, artifact_bytes

        data = artifact_bytes(evaluation.artifact, store_home(self.settings)) if evaluation.artifact else None
        return {ARTIFACT_NAME: data} if data is not None else {}

    def host_checks(self) -> list[HostCheck]:
        """The chip this host has (as its runtime reports it) and whether its programs are measured, and the
        sandbox candidates run in."""
        from .sandbox import bwrap
        from .settings import eval_settings

        platform = self.platform()
        device = eval_settings(self.settings).device
        chip = platform.found()
        if device == "cpu":
            line, ok = f"{chip.line()}; [eval] device is cpu: every speed is the cost model's estimate", True
        elif chip.attached:
            target = platform.attached_target()
            ok = target is not None
            line = (f"{chip.line()}: kernels for --target {target} are run and timed on it (measured)" if ok else
                    f"{chip.line()}, a kind this backend does not model: its speeds are estimates")
        else:
            ok = device != platform.name  # [eval] device names the chip, and none is here
            line = chip.line() + ("" if ok else f"; [eval] device is {device}: judging will fail here")
        usable, why = bwrap.probe()
        sandbox = ("bubblewrap: PID, mount, network and IPC namespaces, a read-only filesystem" if usable
                   else f"the weaker fallback: {why}; left open: {bwrap.FALLBACK_GAPS}")
        return [HostCheck("chip", ok, line), HostCheck("sandbox", usable, sandbox)]

    def close(self) -> None:
        if self._evaluator is not None:
            self._evaluator.close()
            self._evaluator = None
