"""Measure ready JaxBench kernels on the attached TPU beside the cost model's estimates; resumable across calls.

On a TPU host (through the device tool: `tools/tpu/run.sh python3 benchmarks/measured_bench.py run ...`, with
.tpu carried; docs/tpu.md):

    python benchmarks/measured_bench.py run --kernels DIR --results FILE [--tasks GLOB] [--stop-after 480]
        [--jobs N] [--job-log FILE]

Anywhere, from the results file (the per-task table, the rank correlation, the classes, the failures):

    python benchmarks/measured_bench.py report FILE

DIR holds one kernel per task (ID.py or ID/kernel.py: what `benchmarks/offline_sweep.py --out OUT` leaves in
OUT/tasks). Each judged task appends one JSON line to FILE as soon as its verdict is in, so a call cut off at the
device tool's 10-minute limit keeps what it measured, and the next call skips those tasks: copy FILE back into
the checkout between calls. JaxBench stays a validation set here: nothing is fitted on it.
"""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import json
import logging
import math
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "jaxbench"
#: issue 43's targets for the calibrated model on JaxBench (held out)
TARGET_SPEARMAN, TARGET_MEDIAN, TARGET_CLASS = 0.8, (0.9, 1.1), 1.5


def kernel_for(folder: Path, task_id: str) -> Path | None:
    for path in (folder / f"{task_id}.py", folder / task_id / "kernel.py"):
        if path.is_file():
            return path
    return None


def done_tasks(results: Path) -> set[str]:
    if not results.is_file():
        return set()
    return {json.loads(line)["task"] for line in results.read_text().splitlines() if line.strip()}


def record(task, ev, target: str, wall_s: float) -> dict:
    """One task's line: the verdict, the measured and estimated figures, and who is wrong where it failed."""
    import jax
    from maxkernel_tpu_pallas.costmodel.calibration.validation import operator_class

    p, est = ev.profile, ev.estimate
    measured = p is not None and not p.estimated
    line = {"task": task.id, "class": operator_class(task.id), "status": ev.status.value, "reason": ev.reason[:600],
            "target": target, "measured": measured, "wall_s": round(wall_s, 1), "jax": jax.__version__,
            "date": datetime.date.today().isoformat(), "chip": p.chip if measured else None,
            "not_measured": None if measured else ev.details.get("timing"),
            "chip_correctness": ev.details.get("chip_correctness")}
    if measured:
        line.update(seconds=p.seconds, xla_seconds=p.reference_seconds, speedup=p.speedup,
                    achieved=p.details.get("achieved"), xla_achieved=(p.details.get("reference") or {}).get("achieved"))
    if est is not None:
        line.update(estimated_seconds=est.seconds, estimated_xla_seconds=est.reference_seconds,
                    estimated_speedup=est.speedup)
    return line


def _backend(jobs: int):
    """The TPU backend with ``[eval]`` from the usual places, its reference jobs ``jobs`` at once."""
    from maxkernel_pallas_judge.settings import EvalSettings
    from maxkernel_tpu_pallas.backend import TpuPallasBackend

    from maxkernel_core.config import bind_sections, load_settings

    resolved = load_settings(overrides={"eval.references_at_once": (jobs, "--jobs")})
    return TpuPallasBackend(bind_sections(resolved, {"eval": EvalSettings}))


def judge_one(backend, folder: Path, kernel: Path, target: str) -> dict:
    """One task's verdict as a results line (a reference that fails is named and kept)."""
    from maxkernel_tpu_pallas.costmodel.calibration.validation import operator_class

    from maxkernel_core import Candidate
    from maxkernel_core.errors import TaskError

    task = backend.load_task(folder)
    t0 = time.monotonic()
    try:
        ev = backend.evaluate(task, Candidate(task.id, kernel.read_text()), target=target)
    except TaskError as exc:  # the task's own reference failed (over a worker's memory, say): named, kept
        return {"task": task.id, "class": operator_class(task.id), "status": "reference_failed",
                "reason": str(exc)[:600], "target": target, "measured": False,
                "wall_s": round(time.monotonic() - t0, 1), "date": datetime.date.today().isoformat()}
    else:
        return record(task, ev, target, time.monotonic() - t0)
    finally:
        backend.evaluator.release(task)  # its full-size outputs: kept for every task, they fill the host's memory


def run(args) -> int:
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    if args.job_log:  # where each evaluation's time goes: one line per sandboxed job
        logging.basicConfig(filename=args.job_log, level=logging.WARNING,
                            format="%(asctime)s %(threadName)s %(message)s")
        logging.getLogger("maxkernel_pallas_judge.jobs").setLevel(logging.INFO)
    try:  # a results file it cannot append to would lose every verdict measured: say so before the first
        args.results.open("a").close()
    except OSError as exc:
        print(f"cannot write the results file: {exc} (copy it to a writable file)", file=sys.stderr)
        return 2
    backend = _backend(args.jobs)
    target = backend.platform().attached_target()
    if target is None:
        print(f"no TPU attached ({backend.platform().found().line()}): this script measures on the chip; "
              "`report` reads a results file anywhere", file=sys.stderr)
        return 2
    done = done_tasks(args.results)
    start = time.monotonic()
    folders = sorted((d for d in SUITE.iterdir() if d.is_dir() and fnmatch.fnmatch(d.name, args.tasks)),
                     key=lambda d: [int(t) if t.isdigit() else t for t in d.name.replace("_", " ").split()])
    todo = [(f, kernel_for(args.kernels, f.name)) for f in folders if f.name not in done]
    todo = [(f, k) for f, k in todo if k is not None]
    running = {}
    try:
        with ThreadPoolExecutor(max_workers=args.jobs, thread_name_prefix="task") as pool:
            while todo or running:
                while todo and len(running) < args.jobs and time.monotonic() - start <= args.stop_after:
                    folder, kernel = todo.pop(0)
                    running[pool.submit(judge_one, backend, folder, kernel, target)] = folder.name
                if not running:
                    print(f"stopping after {args.stop_after:g} s: run again to continue", flush=True)
                    return 0
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    running.pop(future)
                    _write(args.results, future.result())
    finally:
        backend.close()
    print("every task with a kernel is in the results", flush=True)
    return 0


def _write(results: Path, line: dict) -> None:
    with results.open("a") as f:
        f.write(json.dumps(line, default=str) + "\n")
    ratio = f"{line['speedup']:.2f}x measured" if line.get("speedup") else line["status"]
    estimate = line.get("estimated_speedup")
    estimate = f"{estimate:.2f}x" if estimate else "none"  # no XLA estimate: never print it as 0.00x
    print(f"{line['task']:40s} {ratio:16s} (estimated {estimate}) {line['wall_s']:6.1f} s", flush=True)


def _geomean(values):
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _table(lines: list[dict]) -> None:
    print(f"{'task':40s} {'class':22s} {'measured':>9s} {'estimated':>9s} {'kernel est/meas':>15s}")
    for r in sorted(lines, key=lambda r: r["task"]):
        meas = f"{r['speedup']:.2f}x" if r.get("speedup") else r["status"]
        est = f"{r['estimated_speedup']:.2f}x" if r.get("estimated_speedup") else "-"
        ratio = (f"{r['estimated_seconds'] / r['seconds']:.2f}" if r.get("estimated_seconds") and r.get("seconds")
                 else "-")
        print(f"{r['task']:40s} {r['class']:22s} {meas:>9s} {est:>9s} {ratio:>15s}")


def _classes(both: list[dict]) -> float:
    """Per-class geometric means; the worst class's estimate/measured factor."""
    worst = 1.0
    for name in sorted({r["class"] for r in both}):
        members = [r for r in both if r["class"] == name]
        off = _geomean(r["estimated_speedup"] / r["speedup"] for r in members)
        worst = max(worst, off, 1 / off)
        print(f"  {name:22s} {len(members):3d} tasks: measured {_geomean(r['speedup'] for r in members):.2f}x, "
              f"estimated {_geomean(r['estimated_speedup'] for r in members):.2f}x (estimate/measured {off:.2f})")
    return worst


def _targets(both: list[dict], worst: float) -> None:
    from maxkernel_core.bench.metrics import spearman

    rho = spearman([r["estimated_speedup"] for r in both], [r["speedup"] for r in both])
    kernel_ratio = statistics.median(r["estimated_seconds"] / r["seconds"] for r in both)
    verdict = {True: "PASS", False: "MISS"}
    rho_text = f"{rho:.2f}" if rho is not None else "-"
    print(f"rank correlation of estimated vs measured speedups: {rho_text} (target >= {TARGET_SPEARMAN}: "
          f"{verdict[rho is not None and rho >= TARGET_SPEARMAN]})")
    print(f"kernel time estimate/measured, median: {kernel_ratio:.2f} (target {TARGET_MEDIAN[0]}-{TARGET_MEDIAN[1]}: "
          f"{verdict[TARGET_MEDIAN[0] <= kernel_ratio <= TARGET_MEDIAN[1]]})")
    print(f"worst class off by {worst:.2f}x (target <= {TARGET_CLASS}x: {verdict[worst <= TARGET_CLASS]})")


def _failures(lines: list[dict]) -> None:
    for r in lines:
        if r["status"] != "ok":
            who = (r.get("chip_correctness") or {}).get("farther") if isinstance(r.get("chip_correctness"), dict) else None
            print(f"  not ok: {r['task']}: {r['status']}" + (f" (the {who} is farther from the high-precision "
                                                              "reference)" if who else "") + f": {r['reason'][:160]}")
        elif not r.get("measured"):
            print(f"  ok but not measured: {r['task']}: {r.get('not_measured')}")


def report(args) -> int:
    lines = [json.loads(line) for line in args.results.read_text().splitlines() if line.strip()]
    both = [r for r in lines if r.get("speedup") and r.get("estimated_speedup") and r["status"] == "ok"]
    _table(lines)
    if not both:
        print("no task has both a measured and an estimated speedup")
        return 0
    print(f"\n{len(both)} tasks measured on {', '.join(sorted({r['chip'] for r in both}))} (jax {both[0]['jax']}, "
          f"{both[0]['date']})")
    print(f"geometric mean vs XLA: {_geomean(r['speedup'] for r in both):.2f}x measured, "
          f"{_geomean(r['estimated_speedup'] for r in both):.2f}x estimated; faster than XLA on "
          f"{sum(r['speedup'] > 1 for r in both)} of {len(both)} measured "
          f"({sum(r['estimated_speedup'] > 1 for r in both)} estimated); direction right on "
          f"{sum((r['speedup'] > 1) == (r['estimated_speedup'] > 1) for r in both)}")
    _targets(both, _classes(both))
    _failures(lines)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    go = sub.add_parser("run", help="judge and time each task's kernel on the attached TPU")
    go.add_argument("--kernels", type=Path, required=True)
    go.add_argument("--results", type=Path, required=True)
    go.add_argument("--tasks", default="*")
    go.add_argument("--stop-after", type=float, default=float(os.environ.get("MEASURED_BENCH_STOP_S", "480")),
                    help="start no task after this many seconds (the device tool cuts a call at 600)")
    go.add_argument("--jobs", type=int, default=1,
                    help="tasks judged at once (their CPU-side jobs in parallel; the chip's in turn)")
    go.add_argument("--job-log", type=Path, help="append one line per sandboxed job (kind, seconds) here")
    shown = sub.add_parser("report", help="the table and figures of a results file")
    shown.add_argument("results", type=Path)
    args = parser.parse_args()
    return run(args) if args.command == "run" else report(args)


if __name__ == "__main__":
    sys.exit(main())
