"""Seconds per candidate through the warm worker pool versus a cold process per candidate.

    .venv/bin/python benchmarks/eval_throughput.py [--candidates 6] [--spares 2]

For a small matmul and a small RMSNorm task (tests/tpu_pallas/tasks), it judges
the same honest kernel N times (each a new candidate: a new worker process,
the full cascade including the deviceless TPU compile at full size) and prints
the median wall seconds per candidate:

* warm: pre-warmed spares (JAX, Pallas and libtpu already imported) take each candidate;
* cold: no spares, so every candidate pays for starting Python and importing JAX.

Target on a 2-core machine: warm <= 2 s per candidate, and at least 2x faster than cold.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from maxkernel_core import Candidate  # noqa: E402

from maxkernel_pallas_judge.judge.evaluator import Evaluator  # noqa: E402
from maxkernel_pallas_judge.sandbox.pool import Limits  # noqa: E402
from maxkernel_pallas_judge.tasks import load_task_at  # noqa: E402
from maxkernel_tpu_pallas.tpu_platform import TPU  # noqa: E402
from tests.tpu_pallas.conftest import KERNELS, TASKS  # noqa: E402

CASES = [("matmul", "honest_matmul.py"), ("rmsnorm", "honest_rmsnorm.py")]


def per_candidate(task, code: str, n: int, spares: int) -> list[float]:
    evaluator = Evaluator(Limits(timeout_s=300, platform=TPU.spec), fresh_inputs=3, spares=spares)
    try:
        evaluator.reference(task)  # the reference is computed once per task either way
        if spares:
            evaluator.pool.warm_up()
            time.sleep(6)  # let the spares finish importing, as they would between real candidates
        times = []
        for _ in range(n):
            start = time.perf_counter()
            verdict = evaluator.evaluate(task, Candidate(task.id, code), target="v5e")
            times.append(time.perf_counter() - start)
            if not verdict.ok:
                raise SystemExit(f"benchmark kernel failed: {verdict.reason}")
        return times
    finally:
        evaluator.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=6)
    parser.add_argument("--spares", type=int, default=2)
    args = parser.parse_args()
    print(f"{'task':10} {'warm s/cand':>12} {'cold s/cand':>12} {'speedup':>8}")
    ok = True
    for task_dir, kernel in CASES:
        task = load_task_at(TASKS / task_dir)
        code = (KERNELS / kernel).read_text()
        warm = statistics.median(per_candidate(task, code, args.candidates, args.spares))
        cold = statistics.median(per_candidate(task, code, args.candidates, 0))
        print(f"{task_dir:10} {warm:12.2f} {cold:12.2f} {cold / warm:7.1f}x")
        ok &= warm <= 2.0 and cold / warm >= 2.0
    print("target (warm <= 2 s and >= 2x faster than cold):", "met" if ok else "NOT met")


if __name__ == "__main__":
    main()
