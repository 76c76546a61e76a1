"""``maxkernel calibrate``: fit the speed model to the TPU this runs on, and keep the fit for every later estimate.

On a TPU host it times a short micro-benchmark suite from device traces
(``costmodel/calibration/microbench.py``), describes the same programs with
the model, fits the model's parameters (``costmodel/calibration/fit.py``) and
stores them per chip in ``$MAXKERNEL_HOME/calibration/<target>.toml``. Timings
measured elsewhere can be fitted from a file (``--from-timings``), which is how
the fitting is tested without a TPU. The timing path is written for a TPU host
and has not run on one here.
"""

from __future__ import annotations

import datetime
import json
import math
from pathlib import Path
from typing import Any

import click
from maxkernel_core.errors import MaxKernelError
from rich.console import Console
from rich.table import Table

from .targets import TARGETS


class CalibrationInputError(MaxKernelError):
    """A timings file or option that cannot be calibrated from (one line: what is wrong, how to fix it)."""


def attached_target() -> tuple[str, str]:
    """(target, device kind) of the attached TPU, as its runtime reports it (a child process asks: this one never
    opens the chip); raises with one line when there is none."""
    from .tpu_platform import TPU

    chip = TPU.found()
    if not chip.attached:
        raise CalibrationInputError(f"no TPU attached ({chip.how}): maxkernel calibrate times the chip it runs on; "
                                    "to fit timings measured on a TPU elsewhere, pass --from-timings FILE (see --list)")
    target = TPU.attached_target()
    if target is None:
        raise CalibrationInputError(f"the attached device {chip.kind!r} is not a TPU generation maxkernel models "
                                    f"({', '.join(TARGETS)})")
    return target, chip.kind


def time_on_chip(trace_root: Path, log=print) -> dict[str, float]:
    """The micro-suite timed on the attached TPU, in a child process that holds the chip (``device_run``):
    this process stays on the CPU (``calibrate_command`` keeps it off the chip)."""
    import os
    import subprocess
    import sys

    out = trace_root / "timings.json"
    env = {k: v for k, v in os.environ.items() if k != "ALLOW_MULTIPLE_LIBTPU_LOAD"}
    env["JAX_PLATFORMS"] = "tpu"
    command = [sys.executable, "-m", "maxkernel_tpu_pallas.costmodel.calibration.device_run", str(out), str(trace_root)]
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as child:
        for line in child.stdout:
            if line.startswith("  "):  # the suite's progress lines; libtpu's start-up chatter stays out
                log(line.rstrip())
        child.wait()
    if child.returncode != 0 or not out.is_file():
        raise CalibrationInputError(f"timing the micro-suite on the TPU failed (exit {child.returncode}); rerun "
                                    "with MAXKERNEL_LOG=debug, or time it elsewhere and pass --from-timings")
    return {k: float(v) for k, v in json.loads(out.read_text()).items()}


def read_timings(path: Path, target: str | None) -> tuple[str, str, dict[str, float]]:
    """(target, measured_on, seconds per benchmark) from a timings file written by --save-timings."""
    from .costmodel.calibration.microbench import BY_NAME

    try:
        raw = json.loads(path.read_text())
        file_target, seconds = raw["target"], {k: float(v) for k, v in raw["seconds"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CalibrationInputError(f"{path} is not a timings file ({type(exc).__name__}: {exc}): it needs "
                                    '{"target": ..., "measured_on": ..., "seconds": {benchmark: seconds}}') from None
    if target and target != file_target:
        raise CalibrationInputError(f"{path} holds timings of {file_target}, not {target}: drop --target or pass "
                                    "the right file")
    if file_target not in TARGETS:
        raise CalibrationInputError(f"{path}: unknown target {file_target!r}: use one of {', '.join(TARGETS)}")
    unknown = sorted(set(seconds) - set(BY_NAME))
    bad = sorted(k for k, v in seconds.items() if not (v > 0 and math.isfinite(v)))
    if unknown or bad or len(seconds) < 4:
        why = (f"unknown benchmark(s) {', '.join(unknown)}" if unknown else
               f"non-positive time(s) for {', '.join(bad)}" if bad else "fewer than 4 benchmarks")
        raise CalibrationInputError(f"{path}: {why}: see maxkernel calibrate --list for the suite")
    return file_target, str(raw.get("measured_on") or f"{file_target}, {path.name}"), seconds


def fit_timings(target: str, seconds: dict[str, float], log=print):
    """The fit of the model's parameters on these benchmark timings (a FitResult)."""
    from .costmodel.calibration.fit import fit
    from .costmodel.calibration.microbench import describe_suite
    from maxkernel_tpu_pallas.costmodel.chip import chip_figures
    from .costmodel.params import FITTED, shipped_params

    described = describe_suite(target, sorted(seconds), log=log)
    points = [{"source": "maxkernel calibrate", "id": name, "target": target, "measured_s": seconds[name],
               **described[name]} for name in sorted(seconds)]
    chip = chip_figures(target)
    wide = chip["mxu_column_size"] > 128
    discrete = {"mxu_pad_k": [128, chip["mxu_column_size"]], "mxu_pad_n": [128, chip["mxu_column_size"]]} if wide else {}
    return fit(points, {target: chip}, shipped_params(target), [n for n in FITTED], discrete=discrete,
               source="maxkernel calibrate")


def _report(console: Console, target: str, result, stored: Path | None) -> None:
    from .costmodel.params import shipped_params

    shipped = shipped_params(target)
    table = Table("parameter", "shipped", "fitted here", title=f"speed model parameters for {target}")
    for name, value in result.values.items():
        table.add_row(name, f"{getattr(shipped, name):.4g}", f"{value:.4g}")
    console.print(table)
    s = result.summary()
    console.print(f"fit: {s['points']} benchmarks, median |log(est/measured)| {s['median_abs_log']:.3f}, worst "
                  f"{s['worst_ratio']:.2f}x")
    if stored:
        console.print(f"stored in {stored}: every later estimate for {target} on this machine uses these values and "
                      "says so (delete the file to go back to the shipped ones)")


@click.command("calibrate")
@click.option("--target", type=click.Choice(list(TARGETS)), default=None,
              help="The TPU generation (default: the attached chip's, or the timings file's).")
@click.option("--from-timings", "timings_file", type=click.Path(path_type=Path), default=None,
              help="Fit timings measured elsewhere (a file --save-timings wrote) instead of timing this machine.")
@click.option("--save-timings", type=click.Path(path_type=Path), default=None, help="Also write the timings here.")
@click.option("--dry-run", is_flag=True, help="Fit and print, but do not store the calibration.")
@click.option("--list", "list_suite", is_flag=True, help="List the micro-benchmarks and exit.")
@click.option("--json", "as_json", is_flag=True, help="Print the fitted values and residuals as JSON.")
def calibrate_command(target: str | None, timings_file: Path | None, save_timings: Path | None, dry_run: bool,
                      list_suite: bool, as_json: bool) -> int:
    """Time a micro-benchmark suite on the attached TPU, fit the speed model's parameters to it, and store them
    for every later estimate on this machine."""
    from maxkernel_pallas_judge.host_jax import keep_off_the_chip

    from .costmodel.calibration.microbench import SUITE
    from .costmodel.user_calibration import save_user_calibration

    keep_off_the_chip()  # this process compiles the suite deviceless; its child alone opens the chip
    console = Console(soft_wrap=True, stderr=as_json)
    if list_suite:
        for bench in SUITE:
            shapes = ", ".join("x".join(map(str, s)) + f" {d}" for s, d in bench.shapes)
            click.echo(f"{bench.name:18s} {'Pallas kernel' if bench.kernels else 'XLA program':14s} {shapes}")
        return 0
    if timings_file is not None:
        target, measured_on, seconds = read_timings(timings_file, target)
    else:
        target, kind = attached_target()
        measured_on = f"{kind}, {datetime.date.today().isoformat()}"
        from tempfile import mkdtemp

        seconds = time_on_chip(Path(mkdtemp(prefix="maxkernel-calibrate-")), log=console.print)
    if save_timings:
        save_timings.write_text(json.dumps({"target": target, "measured_on": measured_on, "seconds": seconds}, indent=1))
    console.print(f"fitting {len(seconds)} benchmark timings of {target} ({measured_on})")
    result = fit_timings(target, seconds, log=console.print)
    summary: dict[str, Any] = result.summary()
    stored = None if dry_run else save_user_calibration(target, result.values, measured_on, summary)
    if as_json:
        click.echo(json.dumps({"target": target, "measured_on": measured_on, "values": result.values,
                               "fit": summary, "stored": str(stored) if stored else None,
                               "residuals": result.residuals}, sort_keys=True))
    else:
        _report(console, target, result, stored)
    return 0
