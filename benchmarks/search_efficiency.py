"""How many evaluations beam search needs to come within 2% of the best point of the whole space.

    .venv/bin/python benchmarks/search_efficiency.py

For three matmul-class tasks, and three JaxBench tasks with the larger spaces (a
full-row epilogue, x @ W.T, flash attention), the offline synthesizer's parameter space is
enumerated exhaustively with the cost model as the objective (the best point
is the exhaustive optimum). Beam search (beam width 3, 2 expansions per node,
the graph strategy's moves: double, halve, quadruple or quarter one block constant, or the whole
tile, seeded, in its blind order: ``maxkernel_strategies.search``) then starts from the poorest
corner of the space (the smallest blocks; starting from the synthesizer's own choice would find
the optimum at once), one cost-model evaluation per new point, until it finds a point within 2%
of that optimum. As in the graph strategy (``search.fresh_children``), a move to a point the
backend's fit check rules out (over VMEM) is skipped before it is judged: it costs no evaluation
and takes no expansion slot, and an exhaustive search judges only the points that fit. The same
check gives the search its long moves, tried first (``search.fit_moves``): a growing move
repeated to the edge of what fits, and one that does not fit traded against another block
lowered until it does; the other moves follow by step size, smallest first. A beam node one of
its own children beats leaves the beam, as in the graph strategy. Printed: evaluations used
(median over 21 seeds, and the worst seed's), the exhaustive count (the points that fit, of the
space's), and the median's ratio to it. Target: at most 25%.

The objective here is the cost model alone, as the issue asks, so each
evaluation is an estimate, not a compile and correctness run.
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
REPO = Path(__file__).resolve().parents[1]

TASKS = [REPO / "tests" / "tpu_pallas" / "tasks" / "matmul", REPO / "tests" / "tpu_pallas" / "tasks" / "matmul_bias_gelu",
         REPO / "tests" / "offline" / "tasks" / "gemm_bf16",
         # the larger spaces: VMEM up to 3/4 of the chip, a full-row epilogue, x @ W.T, flash attention
         REPO / "jaxbench" / "43k_Gemm_BatchNorm_Scaling_Softmax", REPO / "jaxbench" / "38k_Matmul_Dropout_Softmax",
         REPO / "jaxbench" / "1p_Flash_Attention"]


def synthesize(task_dir: Path, target: str):
    from maxkernel_tpu_offline.synthesis import synthesize as offline_synthesis
    from maxkernel_pallas_judge.tasks import load_task_at

    task = load_task_at(task_dir)
    return task, offline_synthesis(task, target)


def beam_search(s, start: dict, goal: float, width=3, expansions=2, seed=0, limit=10_000) -> float:
    from maxkernel_core import Move
    from maxkernel_strategies.search import blind_order, fit_moves
    from maxkernel_tpu_pallas.api import fits_vmem as fits

    estimates = {json.dumps(p, sort_keys=True): est for p, est in s.ranked}

    def cost(point):
        est = estimates.get(json.dumps(point, sort_keys=True))
        return est.seconds if est is not None and fits(est) else float("inf")

    def judged(point):  # as fresh_children: a point the fit check rules out is never judged
        return cost(point) < float("inf")

    def moves_at(point):
        return [Move(label, p) for label, p in s.neighbours(point)]

    rng = random.Random(seed)
    seen = {json.dumps(start, sort_keys=True)}
    beam, evaluations = [start], 1
    if cost(start) <= goal:
        return evaluations
    while beam and evaluations < limit:
        children, superseded = [], set()
        for point in beam:
            moves = moves_at(point)  # the graph strategy's blind order, its long moves included
            ordered = blind_order(point, moves, fit_moves(point, moves, moves_at, judged), rng)
            fresh = [m.parameters for m in ordered if json.dumps(m.parameters, sort_keys=True) not in seen]
            seen.update(json.dumps(p, sort_keys=True) for p in fresh if not judged(p))  # ruled out, for free
            for child in [p for p in fresh if judged(p)][:expansions]:
                if json.dumps(child, sort_keys=True) in seen:
                    continue  # two moves of one point (a long move landing where a short one does)
                seen.add(json.dumps(child, sort_keys=True))
                evaluations += 1
                if cost(child) <= goal:
                    return evaluations
                if cost(child) < cost(point):  # as the graph strategy: a parent its child beats leaves the beam
                    superseded.add(json.dumps(point, sort_keys=True))
                children.append(child)
        kept = [p for p in beam if json.dumps(p, sort_keys=True) not in superseded]
        pool = sorted({json.dumps(p, sort_keys=True): p for p in kept + children}.values(),
                      key=lambda p: (cost(p), json.dumps(p, sort_keys=True)))
        new_beam = [p for p in pool if cost(p) < float("inf")][:width]
        if new_beam == beam:
            break  # no progress: the beam is stuck in a local optimum
        beam = new_beam
    return float("inf")  # never within 2%: counted as a miss, not as the evaluations it spent


SEEDS = 21


def main() -> None:
    from maxkernel_tpu_pallas.api import fits_vmem as fits

    target = sys.argv[1] if len(sys.argv) > 1 else "v5e"
    print(f"{'task':26} {'fit/space':>9} {'beam evals':>10} {'fraction':>9} {'worst seed':>10}  best estimate "
          f"(median of {SEEDS} seeds)")
    worst = 0.0
    for task_dir in TASKS:
        task, s = synthesize(task_dir, target)
        fitting = [(p, est) for p, est in s.ranked if fits(est)]  # as the planner ranks them
        best = fitting[0][1].seconds
        # start from a deliberately poor point (the smallest blocks), not the model's own choice
        start = min((p for p, _ in fitting), key=lambda p: sum(v for k, v in p.items() if k.startswith("BLOCK")))
        runs = sorted(beam_search(s, start, best * 1.02, seed=seed) for seed in range(SEEDS))
        used = runs[len(runs) // 2]  # the median over seeds: one lucky shuffle proves nothing
        fraction = used / len(fitting)  # what an exhaustive search would judge: every point that fits
        worst = max(worst, fraction)
        print(f"{task.id:26} {f'{len(fitting)}/{len(s.ranked)}':>9} {used:>10} {fraction:>8.0%} {runs[-1]:>10}  "
              f"{best * 1e6:,.1f} us")
    print(f"target (<= 25% of the exhaustive count on every task): {'met' if worst <= 0.25 else 'NOT met'}")


if __name__ == "__main__":
    main()
