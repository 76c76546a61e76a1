"""Offline synthesizer coverage: which tasks get a kernel that passes the whole cascade.

    .venv/bin/python benchmarks/offline_coverage.py [TASK_FOLDER ...] [--targets v5e,v6e]

For every task in the folders (default: jaxbench/ when present, and the test
tasks), the offline provider plans and writes a kernel, the debugger repairs
it up to 6 times, and the TPU Pallas judge runs the cascade for each target
(proof of kernel, deviceless TPU compile at full size, interpret-mode
correctness at small size). Prints: task, template, status per target,
estimated speedup vs XLA (an estimate), and the reason for each miss.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_FOLDERS = [REPO / "jaxbench", REPO / "tests" / "tpu_pallas" / "tasks", REPO / "tests" / "tpu_pallas" / "tasks_jaxbench",
                   REPO / "tests" / "offline" / "tasks"]


def judge_task(pm, settings, task_ref, target: str, store_path: Path) -> tuple[str, str, str, float | None]:
    from maxkernel_core import RunConfig
    from maxkernel_core.errors import MaxKernelError
    from maxkernel_core.llm_roles import resolve_role_llms
    from maxkernel_core.session import RunSession
    from maxkernel_core.store import RunStore

    backend = pm.registries.get("backend", "tpu_pallas").cls(settings)
    try:
        task = backend.load_task(task_ref.path)
        session = RunSession(pm, RunStore(store_path), task, RunConfig(task.id, "coverage", "offline", target=target),
                             backend, llms=resolve_role_llms(pm.registries, settings))
        try:
            plan = session.plan()
        except MaxKernelError as exc:
            return task.id, "-", "declined", None, str(exc).split(": ", 1)[-1]
        candidate = session.implement(plan)
        final = session.repair(candidate, session.evaluate(candidate), max_attempts=6)
        ev = final.evaluation
        speedup = ev.estimate.speedup if ev.estimate else None
        return task.id, plan.decisions.get("template", "?"), ev.status.value, speedup, "" if ev.ok else ev.reason[:160]
    finally:
        backend.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path)
    parser.add_argument("--targets", default="v5e,v6e")
    args = parser.parse_args()
    from maxkernel_core.config import Settings
    from maxkernel_core.plugins import get_plugin_manager

    settings = Settings()
    settings.run.provider = "offline"
    pm = get_plugin_manager()
    backend_cls = pm.registries.get("backend", "tpu_pallas").cls
    refs = [r for folder in (args.folders or DEFAULT_FOLDERS) if folder.exists()
            for r in backend_cls().discover_tasks(folder) if not r.problem]
    targets = args.targets.split(",")
    print(f"{'task':34} {'template':16} " + " ".join(f"{t:>13}" for t in targets) + " "
          + " ".join(f"{'est. ' + t:>10}" for t in targets) + "  reason")
    passed, start = 0, time.time()
    with tempfile.TemporaryDirectory() as tmp:
        for ref in refs:
            results = [judge_task(pm, settings, ref, t, Path(tmp) / "runs.db") for t in targets]
            task_id, template = results[0][0], results[0][1]
            ok = all(r[2] == "ok" for r in results)
            passed += ok
            reason = next((r[4] for r in results if r[4]), "")
            speedups = " ".join(f"{f'{r[3]:.3f}x' if r[3] else '-':>10}" for r in results)
            print(f"{task_id:34} {template:16} " + " ".join(f"{r[2]:>13}" for r in results) + f" {speedups}  {reason}",
                  flush=True)
    print(f"\n{passed} of {len(refs)} tasks pass the full cascade on {', '.join(targets)} "
          f"({time.time() - start:.0f} s). Speedups are estimated/estimated: the kernel and the XLA reference by "
          "the same speed model.")


if __name__ == "__main__":
    main()
