"""Hold the speed model against JAXBench's published TPU v6e timings, the held-out set it was never fitted on.

    .venv/bin/python benchmarks/speed_validation.py [--cache DIR] [--tasks]

Prints, for the 50 JaxBench references (XLA programs, estimated by the XLA
model) and for the Pallas expert kernels of JAXBench's optimized variants
(kernel model plus the XLA model of the code around them): how far each
estimate is from the measured time, per operator class, and the issue's
targets with PASS or MISS. The references compile deviceless for v6e (about 6
minutes on 2 cores the first time; --cache keeps them).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")

import numpy as np  # noqa: E402
from scipy.stats import spearmanr  # noqa: E402

from maxkernel_tpu_pallas.costmodel.calibration.fit import predict, summarize  # noqa: E402
from maxkernel_tpu_pallas.costmodel.calibration.fitset import cached  # noqa: E402
from maxkernel_tpu_pallas.costmodel.calibration.validation import expert_points, geomean, reference_points  # noqa: E402
from maxkernel_tpu_pallas.costmodel.chip import chip_figures  # noqa: E402
from maxkernel_tpu_pallas.costmodel.params import shipped_params  # noqa: E402

DEFAULT_CACHE = Path(os.environ.get("MAXKERNEL_HOME", Path.home() / ".cache" / "maxkernel")) / "calibration-points"
SUITE = Path(__file__).resolve().parents[1] / "jaxbench"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def references(points, chip, params, show: bool) -> dict[str, float]:
    est = np.array([predict(p, params, chip) for p in points])
    meas = np.array([p["measured_s"] for p in points])
    logs = np.log(est / meas)
    print(f"\n== JaxBench references on v6e ({len(points)} tasks): the XLA model of each compiled reference")
    if show:
        for p, e, r in zip(points, est, logs, strict=True):
            old = p.get("xla_optimal_s")
            before = f"  libtpu optimal_seconds x{old / p['measured_s']:.2f}" if old and old > 0 else ""
            print(f"  {p['id'][:44]:44s} measured {p['measured_s'] * 1e3:8.3f} ms  estimated {e * 1e3:8.3f} ms  "
                  f"x{math.exp(r):.2f}{before}")
    rho = float(spearmanr(est, meas).statistic)
    med = float(np.median(np.abs(logs)))
    print(f"  Spearman {rho:.3f}; median |log(est/measured)| {med:.3f}; worst task x{math.exp(logs[np.argmax(np.abs(logs))]):.2f} "
          f"({points[int(np.argmax(np.abs(logs)))]['id']})")
    old = [(p["xla_optimal_s"], p["measured_s"]) for p in points if (p.get("xla_optimal_s") or 0) > 0]
    if old:
        o = np.log([a / b for a, b in old])
        print(f"  before (libtpu's optimal_seconds): Spearman {spearmanr([a for a, _ in old], [b for _, b in old]).statistic:.3f}, "
              f"median |log| {np.median(np.abs(o)):.3f}")
    classes: dict[str, list[float]] = {}
    for p, r in zip(points, logs, strict=True):
        classes.setdefault(p["cls"], []).append(math.exp(r))
    worst_class = 1.0
    for name, ratios in sorted(classes.items()):
        g = geomean(ratios)
        worst_class = max(worst_class, g, 1 / g)
        print(f"  class {name:22s} {len(ratios):2d} tasks: geometric-mean est/measured x{g:.2f}, range "
              f"x{min(ratios):.2f}..x{max(ratios):.2f}")
    return {"spearman": rho, "median_abs_log": med, "worst_class": worst_class}


def experts(points, ref_points, chip, params) -> dict[str, bool]:
    ref_est = {p["id"]: predict(p, params, chip) for p in ref_points}
    ref_meas = {p["id"]: p["measured_s"] for p in ref_points}
    print(f"\n== Expert Pallas kernels on v6e ({len(points)}): JAXBench's optimized variants, kernel model + code around")
    within, direction = [], []
    for p in points:
        est = predict(p, params, chip)
        ratio = est / p["measured_s"]
        within.append(1 / 1.5 <= ratio <= 1.5)
        line = f"  {p['id']:28s} measured {p['measured_s'] * 1e3:8.3f} ms  estimated {est * 1e3:8.3f} ms  x{ratio:.2f}"
        if p["same_workload"] and p["id"] in ref_est:
            measured_speedup = ref_meas[p["id"]] / p["measured_s"]
            estimated_speedup = ref_est[p["id"]] / est
            line += f"   vs XLA: measured {measured_speedup:.2f}x, estimated {estimated_speedup:.2f}x (both like for like)"
            if abs(math.log(measured_speedup)) > math.log(1.2):
                direction.append((measured_speedup > 1) == (estimated_speedup > 1))
        print(line)
    s = summarize([math.log(predict(p, params, chip) / p["measured_s"]) for p in points])
    print(f"  median |log(est/measured)| {s['median_abs_log']:.3f}; within 1.5x: {sum(within)} of {len(within)}; "
          f"direction right where the measured gap is over 20%: {sum(direction)} of {len(direction)}")
    return {"within": all(within), "direction": all(direction)}


def against_experts(points, chip, params, results_path: Path) -> bool:
    """The offline kernels of a v6e bench (results.json) against the expert kernels of the same operators, both
    estimated by the same model (kernel model + code around): the bar is 0.9x (at most 10% behind an expert)."""
    import json

    ours = {r["task_id"]: r for r in json.loads(results_path.read_text())["tasks"]}
    print(f"\n== Offline kernels ({results_path}) against the expert kernels, both estimated by the same model")
    ok = []
    for p in points:
        mine = ours.get(p["id"])
        expert = predict(p, params, chip)
        if not p["same_workload"]:  # the expert kernel runs another workload than the task: no comparison
            print(f"  {p['id']:28s} expert {expert * 1e3:8.3f} ms  not compared: the expert runs another workload")
            continue
        if not mine or not mine.get("seconds"):
            ok.append(False)
            print(f"  {p['id']:28s} expert {expert * 1e3:8.3f} ms  offline: {mine['status'] if mine else 'not run'}")
            continue
        ratio = expert / mine["seconds"]
        ok.append(ratio >= 0.9)
        print(f"  {p['id']:28s} expert {expert * 1e3:8.3f} ms  offline {mine['seconds'] * 1e3:8.3f} ms  "
              f"{ratio:5.2f}x of the expert's speed  {'ok' if ratio >= 0.9 else 'behind'}")
    print(f"  within 10% of the expert (>= 0.9x): {sum(ok)} of {len(ok)} compared")
    return all(ok)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--tasks", action="store_true", help="print every reference, not only the summary")
    parser.add_argument("--offline", type=Path, metavar="RESULTS_JSON",
                        help="a v6e bench's results.json: its kernels against the experts under the same model")
    args = parser.parse_args()
    chip, params = chip_figures("v6e"), shipped_params("v6e")
    print(f"model parameters: {params.source}")
    ref_points = cached(args.cache / "jaxbench_references_v6e.json", lambda: reference_points(SUITE))
    # v2: the points carry their task's reference work (run-time loops sized by it); older caches lack it
    exp_points = cached(args.cache / "jaxbench_experts_v6e.v2.json", lambda: expert_points(SUITE))
    r = references(ref_points, chip, params, args.tasks)
    e = experts(exp_points, ref_points, chip, params)
    print("\n== Targets (held-out v6e measurements)")
    print(f"  {verdict(r['spearman'] >= 0.9)}  reference estimates: Spearman >= 0.9 ({r['spearman']:.3f})")
    print(f"  {verdict(r['median_abs_log'] <= 0.2)}  reference estimates: median |log(est/measured)| <= 0.2 "
          f"({r['median_abs_log']:.3f})")
    print(f"  {verdict(r['worst_class'] <= 2)}  no operator class off by more than 2x (worst class x{r['worst_class']:.2f})")
    print(f"  {verdict(e['within'])}  every expert-kernel estimate within 1.5x of measured")
    print(f"  {verdict(e['direction'])}  expert-vs-XLA direction right wherever the measured gap is over 20%")
    if args.offline:
        met = against_experts(exp_points, chip, params, args.offline)
        print(f"  {verdict(met)}  every offline kernel at >= 0.9x of the expert kernel's speed (estimated/estimated)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
