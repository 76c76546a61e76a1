"""Fit the speed model's parameters on public TPU measurements and print the residuals.

    .venv/bin/python benchmarks/calibrate_fit.py [--write] [--cache DIR] [--points]
    .venv/bin/python benchmarks/calibrate_fit.py --measured FILE [--write]

The fit sets (package data, each with its source: costmodel/calibration/data/)
are rebuilt as programs and described by the model (traces and deviceless
compiles, about 6 minutes on 2 cores the first time, cached in --cache), then
fitted stage by stage as costmodel/calibration/plan.py says. --write puts the
fitted values, and where each came from, into costmodel/chips/*.toml. JAXBench's
timings are never used here: benchmarks/speed_validation.py holds the result
against them.

--measured FILE fits one generation on its own chip instead: the timings of
`maxkernel calibrate`'s micro-suite measured on that chip (a file its
--save-timings wrote; benchmarks/results/calibration-v5e-*.json was measured on
the lent v5e by `make test-tpu`), and --write ships them for that generation.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import sys
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")

from maxkernel_tpu_pallas.costmodel.calibration.fit import fit, summarize  # noqa: E402
from maxkernel_tpu_pallas.costmodel.calibration.fitset import build_points  # noqa: E402
from maxkernel_tpu_pallas.costmodel.calibration.plan import START, STAGES, TRANSFERS, write_model_section  # noqa: E402
from maxkernel_tpu_pallas.costmodel.chip import chip_figures  # noqa: E402
from maxkernel_tpu_pallas.costmodel.params import FITTED, shipped_params  # noqa: E402
from maxkernel_tpu_pallas.targets import TARGETS  # noqa: E402

DEFAULT_CACHE = Path(os.environ.get("MAXKERNEL_HOME", Path.home() / ".cache" / "maxkernel")) / "calibration-points"


def run_stages(cache: Path, show_points: bool) -> dict[str, dict]:
    """Fit every stage; returns per target the fitted values, the nuisance terms and the residual summaries."""
    chips = {t: chip_figures(t) for t in ("v5e", "v6e")}
    fitted = {}
    for stage in STAGES:
        points = build_points(list(stage.sources), cache)
        base = shipped_params(stage.target).with_values(START, "fit start", "fit start")
        taken = {name: fitted[origin]["result"].values[name] for (target, name), (origin, _) in TRANSFERS.items()
                 if target == stage.target and origin in fitted and name in fitted[origin]["result"].values}
        base = base.with_values(taken, "fit start", "transferred") if taken else base
        result = fit(points, chips, base, list(stage.names), dict(stage.nuisance),
                     dict(stage.discrete), source=f"fit on {', '.join(stage.sources)}")
        fitted[stage.target] = {"stage": stage, "result": result}
        print(f"\n== {stage.target}: fitted on {', '.join(stage.sources)} ({len(points)} points)")
        for name, value in result.values.items():
            print(f"  {name:26s} {value:.4g}")
        for name, value in result.nuisance.items():
            print(f"  {name:26s} {value:.4g}   (nuisance: a fact of the measurements, never used in estimates)")
        by_source: dict[str, list[float]] = {}
        for row in result.residuals:
            by_source.setdefault(row["source"], []).append(row["log_ratio"])
        for source, ratios in by_source.items():
            s = summarize(ratios)
            print(f"  residuals {source}: {s['points']} points, median |log(est/measured)| {s['median_abs_log']:.3f}, "
                  f"worst {s['worst_ratio']:.2f}x, within 1.5x {s['within_1_5x']:.0%}")
        rows = sorted(result.residuals, key=lambda r: -abs(r["log_ratio"]))
        for row in rows if show_points else rows[:5]:
            print(f"    {row['id'][:64]:64s} measured {row['measured_s'] * 1e3:9.3f} ms  estimated "
                  f"{row['predicted_s'] * 1e3:9.3f} ms  x{math.exp(row['log_ratio']):.2f}")
    return fitted


def model_values(fitted: dict[str, dict]) -> dict[str, tuple[dict, dict]]:
    """Per target: (values, source of each), from the fits, the transfers and the shipped assumptions."""
    today = datetime.date.today().isoformat()
    out = {}
    for target in TARGETS:
        shipped = shipped_params(target)
        values = {n: getattr(shipped, n) for n in FITTED}
        sources = {n: shipped.sources.get(n, "assumption") for n in FITTED}
        if target in fitted:
            stage, result = fitted[target]["stage"], fitted[target]["result"]
            for name, value in result.values.items():
                values[name] = value
                sources[name] = (f"fitted {today} on {', '.join(stage.sources)} (costmodel/calibration/data/: each "
                                 "file names its public source and commit) by benchmarks/calibrate_fit.py")
        out[target] = (values, sources)
    for (target, name), (origin, why) in TRANSFERS.items():
        if origin in fitted or out[origin][1][name].startswith("transferred"):
            out[target][0][name] = out[origin][0][name]
            there = out[origin][1][name].split(" (costmodel/")[0]
            out[target][1][name] = f"transferred from {origin} ({why}); {origin}: {there}"
    return out


def fit_measured(path: Path, write: bool) -> int:
    """Fit the generation a timings file was measured on, from those timings alone; --write ships the values."""
    from maxkernel_tpu_pallas.calibrate_cli import fit_timings, read_timings

    target, measured_on, seconds = read_timings(path, None)
    result = fit_timings(target, seconds, log=lambda line: None)
    s = result.summary()
    print(f"{target}: {len(seconds)} micro-benchmarks measured on {measured_on}: median |log(est/measured)| "
          f"{s['median_abs_log']:.3f}, worst {s['worst_ratio']:.2f}x")
    values = {n: getattr(shipped_params(target), n) for n in FITTED}
    sources = {n: shipped_params(target).sources.get(n, "assumption") for n in FITTED}
    for name, value in result.values.items():
        print(f"  {name}: {values[name]:.4g} -> {value:.4g}")
        values[name] = value
        sources[name] = (f"fitted {datetime.date.today().isoformat()} on maxkernel calibrate's micro-suite measured "
                         f"on the chip ({measured_on}; {path.name}) by benchmarks/calibrate_fit.py --measured")
    if write:
        print(f"wrote {write_model_section(target, values, sources)}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="write the fitted values into costmodel/chips/*.toml")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where the built points are cached")
    parser.add_argument("--points", action="store_true", help="print every point's residual, not the worst five")
    parser.add_argument("--measured", type=Path, help="fit one generation on micro-suite timings measured on its chip")
    args = parser.parse_args()
    if args.measured:
        return fit_measured(args.measured, args.write)
    fitted = run_stages(args.cache, args.points)
    values = model_values(fitted)
    print("\n== parameters per generation")
    for target, (vals, _) in values.items():
        print(f"  {target}: " + ", ".join(f"{n}={v:.4g}" for n, v in vals.items()))
    if args.write:
        for target, (vals, sources) in values.items():
            print(f"wrote {write_model_section(target, vals, sources)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
