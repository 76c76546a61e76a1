"""Run a strategy, or judge ready kernels, over every task of a suite; resumable, one task at a time per job.

Each task is optimized by :func:`maxkernel_core.optimize` exactly as
``maxkernel run`` would (its own run in the store, its own output folder), so
a bench is a set of ordinary runs plus a row per task saying which run it is
and how it ended. A task that cannot load, or whose run fails, becomes an
``error`` row with the reason; the suite goes on.
"""

from __future__ import annotations

import concurrent.futures
import copy
import fnmatch
import re
import time
from pathlib import Path
from typing import Any
from collections.abc import Callable

from attrs import asdict, define, frozen

from ..config import Settings
from ..errors import MaxKernelError, TaskError
from ..interfaces import Backend, Executor, TaskRef
from ..records import Attempt, Candidate, EvalStatus, Provenance, RunConfig
from ..store import RunStore
from .metrics import TaskResult, suite_metrics

Progress = Callable[[str, TaskRef, "TaskResult | None"], None]


@frozen
class BenchConfig:
    """What a bench was asked to do; stored, so ``--resume`` continues with the same."""

    suite: str  # a registered suite name, or a folder of tasks
    tasks: str = "*"  # glob over task ids
    strategy: str | None = None
    provider: str | None = None
    model: str | None = None
    target: str | None = None
    budget: int | None = None
    seed: int | None = None
    kernels: str | None = None  # a folder of ready kernels: judge them, no strategy
    jobs: int = 1
    tuned: str | None = None  # the tuned-config table: use, refresh, off (default run.tuned)
    time_limit_s: float | None = None  # per task: no new evaluation starts past it (default run.time_limit_s)
    backend: str | None = None  # the kernel backend (default run.backend)


@define
class BenchResult:
    bench_id: str
    config: BenchConfig
    results: list[TaskResult]
    metrics: dict[str, Any]
    out: Path
    target: str


def suite_root(suite: str, pm) -> Path:
    registered = pm.registries.task_suites
    if suite in registered:
        return registered[suite].cls.root()
    path = Path(suite).expanduser()
    if path.exists():
        return path
    names = ", ".join(registered) or "none installed"
    raise TaskError(f"no suite {suite!r}: not a registered suite ({names}) and not a folder of tasks")


def select_tasks(backend: Backend, root: Path, pattern: str) -> list[TaskRef]:
    refs = backend.discover_tasks(root)
    if not refs:
        raise TaskError(f"{root}: no task found (a folder of task folders or JAXBench modules; `maxkernel tasks {root}`)")
    chosen = [r for r in refs if fnmatch.fnmatchcase(r.id, pattern)]
    if not chosen:
        raise TaskError(f"no task in {root} matches --tasks {pattern!r} (ids look like {refs[0].id!r})")
    return sorted(chosen, key=lambda r: natural_key(r.id))


def natural_key(text: str) -> list:
    """``2p_x`` before ``10p_x``: numbers in ids compare as numbers."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text)]


def result_of_run(store: RunStore, run_id: str, best, wall_s: float, kernel: Path | None) -> TaskResult:
    """A task's figures from its run in the store: any compile, any proof, the best verified kernel."""
    evaluations = store.evaluations(run_id)
    checks = [c for e in evaluations for c in e.checks if c.passed]
    calls = store.llm_calls(run_id)
    costs = [c["cost_usd"] for c in calls if c["cost_usd"] is not None]
    common = dict(run_id=run_id, evaluations=len(evaluations), llm_calls=len(calls),
                  tokens=sum((c["input_tokens"] or 0) + (c["output_tokens"] or 0) for c in calls),
                  cost_usd=sum(costs) if costs else None, wall_s=wall_s,
                  compiled=any("compile" in c.name for c in checks),
                  proof_of_kernel=any(c.name.startswith("proof") for c in checks))
    if best is None:
        return TaskResult(store.get_run(run_id).task_id, *_without_kernel(evaluations), **common)
    ev = best.evaluation
    return TaskResult(best.candidate.task_id, "correct", ev.reason[:300], correct=True,
                      kernel=str(kernel) if kernel else None, **_speed_fields(ev), **common)


def _speed_fields(ev) -> dict:
    """A verified kernel's speed figures, of their kind; where the speed is measured, the cost model's estimate
    of the same kernel beside it (how wrong the model is)."""
    p = ev.profile
    if p is None:
        return {}
    estimate = p if p.estimated else ev.estimate
    return dict(speedup=p.speedup, speedup_kind="estimated" if p.estimated else "measured",
                estimated_speedup=estimate.speedup if estimate else None,
                tflops=p.achieved.tflops if p.achieved else None, seconds=p.seconds,
                reference_seconds=p.reference_seconds, roofline_fraction=p.roofline_fraction,
                arithmetic_intensity=p.arithmetic_intensity)


def _without_kernel(evaluations) -> tuple[str, str]:
    """(status, reason) of a task whose run verified no kernel: "unverified" when a candidate passed every check
    that could run but nothing could check its outputs (counted apart, never as failed), else "failed"."""
    unverified = next((e for e in evaluations if e.status == EvalStatus.UNVERIFIED), None)
    if unverified is not None:
        return "unverified", unverified.reason[:500]
    last = evaluations[-1] if evaluations else None
    return "failed", (f"no verified kernel; last verdict {last.status.value}: {last.reason}" if last
                      else "no candidate")[:500]


def task_settings(settings: Settings, config: BenchConfig) -> Settings:
    """A copy of the settings with the bench's run choices (each task's run changes its copy)."""
    s = copy.deepcopy(settings)
    for key in ("strategy", "provider", "model", "backend", "target", "budget", "seed", "tuned", "time_limit_s"):
        value = getattr(config, key)
        if value is not None:
            setattr(s.run, key, value)
    return s


class _Bench:
    def __init__(self, settings: Settings, pm, store: RunStore, bench_id: str, config: BenchConfig, out: Path,
                 executor: Executor) -> None:
        self.settings, self.pm, self.store, self.bench_id, self.config, self.out = settings, pm, store, bench_id, config, out
        self.rows = store.bench_tasks(bench_id)
        self.executor = executor  # one for the whole bench: a cluster's hosts stay warm from task to task

    def optimize_one(self, ref: TaskRef) -> TaskResult:
        from ..run import optimize

        row = self.rows.get(ref.id) or {}
        resume = row.get("run_id") if row.get("status") == "running" else None
        started: dict[str, str] = {}

        def on_start(run_id: str) -> None:
            started["run"] = run_id
            self.store.set_bench_task(self.bench_id, ref.id, "running", run_id=run_id)

        out = self.out / "tasks" / ref.id
        t0 = time.monotonic()
        try:
            result = optimize(ref.path, settings=task_settings(self.settings, self.config), pm=self.pm, resume=resume, out=out,
                              on_start=on_start, executor=self.executor)
        except MaxKernelError as exc:
            return TaskResult(ref.id, "error", str(exc)[:500], run_id=started.get("run"), wall_s=time.monotonic() - t0)
        except Exception as exc:  # a plugin's bug on one task must not stop the suite
            return TaskResult(ref.id, "error", f"{type(exc).__name__}: {exc}"[:500], run_id=started.get("run"),
                              wall_s=time.monotonic() - t0)
        kernel = out / "kernel.py"
        return result_of_run(self.store, result.run_id, result.best, time.monotonic() - t0,
                             kernel if kernel.exists() else None)

    def judge_one(self, ref: TaskRef, task, backend: Backend, target: str) -> TaskResult:
        folder = Path(self.config.kernels)
        path = next((p for p in (folder / f"{ref.id}.py", folder / ref.id / "kernel.py") if p.is_file()), None)
        if path is None:
            return TaskResult(ref.id, "failed", f"no kernel for this task in {folder} ({ref.id}.py or {ref.id}/kernel.py)")
        t0 = time.monotonic()
        row = self.rows.get(ref.id) or {}
        run_id = row.get("run_id") if row.get("status") == "running" else None
        stored = self.store.candidates(run_id) if run_id else []
        if stored:  # a killed bench left this task's run behind: finish that run, don't start another
            candidate = stored[0]
            verdicts = self.store.evaluations(run_id)
        else:
            try:
                text = path.read_bytes().decode("utf-8")
            except UnicodeDecodeError:
                return TaskResult(ref.id, "failed", f"kernel file {path} is not UTF-8 text: give a Python module")
            candidate = Candidate(task.id, text,
                                  provenance=Provenance(role="user", transformation=f"file {path}"))
            run_id = run_id or self.store.create_run(RunConfig(
                task.id, strategy="kernels", provider="none", backend=backend.name, target=target,
                options={"kernel": str(path)}))
            self.store.set_bench_task(self.bench_id, ref.id, "running", run_id=run_id)
            self.store.add_candidate(run_id, candidate)
            verdicts = []
        if verdicts:
            evaluation = verdicts[-1]
        else:
            evaluation = self.executor.evaluate(backend, task, candidate, target=target)
            self.store.add_evaluation(run_id, evaluation)
        self.store.set_run_status(run_id, "done" if evaluation.ok else "failed")
        best = Attempt(candidate, evaluation) if evaluation.ok else None
        return result_of_run(self.store, run_id, best, time.monotonic() - t0, path if best else None)

    def run_one(self, ref: TaskRef, backend: Backend, target: str) -> TaskResult:
        task, problem = None, ref.problem
        if not problem:
            try:  # read once: for the kernels mode and for the shortcut the report names
                task = backend.load_task(ref.path)
            except MaxKernelError as exc:
                problem = str(exc)
        if problem:
            result = TaskResult(ref.id, "error", f"the task cannot load: {problem}")
        elif self.config.kernels:
            try:
                result = self.judge_one(ref, task, backend, target)
            except Exception as exc:
                result = TaskResult(ref.id, "error", f"{type(exc).__name__}: {exc}"[:500])
        else:
            result = self.optimize_one(ref)
        if task is not None:
            result.notes = task.notes
        self.store.set_bench_task(self.bench_id, ref.id, "error" if result.status == "error" else "done",
                                  run_id=result.run_id, result=result.to_dict())
        return result


def run_bench(settings: Settings, pm, config: BenchConfig | None = None, *, resume: str | None = None,
              out: Path, progress: Progress | None = None, on_start: Callable[[str], None] | None = None,
              on_tasks: Callable[[list[TaskRef]], None] | None = None) -> BenchResult:
    """Run (or resume) a bench and write its report to ``out``; returns every task's result and the suite figures.

    :param progress: called ``(event, ref, result)``: ``"start"`` before a task (sequential runs) and
        ``"done"`` with its :class:`TaskResult` after it (also for tasks a resumed bench had finished).
    :param on_start: called with the bench id once it is in the store.
    :param on_tasks: called with the selected tasks before the first starts.
    """
    from ..llm_roles import resolve_role_llms
    from ..run import executor_for
    from .report import write_report

    store = RunStore.open(settings.store.home)
    if resume:
        resume = store.resolve_id("bench", resume)  # a unique prefix names the bench
        config = BenchConfig(**store.get_bench(resume)["config"])
    elif config is None:
        raise ValueError("run_bench needs a config or a bench id to resume")
    target = config.target or settings.run.target
    backend = pm.registries.get("backend", config.backend or settings.run.backend).cls(settings)
    executor = None
    try:
        refs = select_tasks(backend, suite_root(config.suite, pm), config.tasks)  # bad input stores nothing
        if not config.kernels:  # nor does an unknown strategy or provider, or a missing key
            chosen = task_settings(settings, config)
            pm.registries.get("strategy", chosen.run.strategy)
            resolve_role_llms(pm.registries, chosen)
        executor = executor_for(settings, pm)  # nor does a missing extra or an unreachable cluster
        bench_id = resume or store.create_bench(asdict(config))
        if on_start is not None:
            on_start(bench_id)
        if on_tasks is not None:
            on_tasks(refs)
        bench = _Bench(settings, pm, store, bench_id, config, out, executor)
        results: dict[str, TaskResult] = {
            tid: TaskResult.from_dict(row["result"]) for tid, row in bench.rows.items()
            if row["status"] in ("done", "error") and row["result"]
        }
        todo = [r for r in refs if r.id not in results]
        for ref in refs:
            if ref.id in results and progress:
                progress("done", ref, results[ref.id])
        try:
            _run_all(bench, todo, backend, target, max(config.jobs, 1), results, progress)
        except KeyboardInterrupt:
            store.set_bench_status(bench_id, "interrupted")
            raise
        ordered = [results[r.id] for r in refs]
        store.set_bench_status(bench_id, "done")
        bench_result = BenchResult(bench_id, config, ordered, suite_metrics(ordered), out, target)
        write_report(bench_result)
        return bench_result
    finally:
        if executor is not None:
            executor.close()
        backend.close()


def _run_all(bench: _Bench, todo: list[TaskRef], backend: Backend, target: str, jobs: int,
             results: dict[str, TaskResult], progress: Progress | None) -> None:
    def finished(ref: TaskRef, result: TaskResult) -> None:
        results[ref.id] = result
        if progress:
            progress("done", ref, result)

    if jobs == 1:  # in this thread, so Ctrl-C reaches the run and leaves it resumable
        for ref in todo:
            if progress:
                progress("start", ref, None)
            finished(ref, bench.run_one(ref, backend, target))
        return
    pool = concurrent.futures.ThreadPoolExecutor(jobs)
    try:
        futures = {pool.submit(bench.run_one, ref, backend, target): ref for ref in todo}
        for future in concurrent.futures.as_completed(futures):
            finished(futures[future], future.result())
    except KeyboardInterrupt:
        # Rows already written stay; unfinished tasks resume their runs with --resume.
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
