"""Device time on a real TPU, from profiler traces (never from host clocks the candidate could touch).

Each timed call is captured in its own ``jax.profiler`` trace; its device time is
the union of the device events in that trace (``profiling.xplane``). A trace
with no device events is an error, not a zero: it means no kernel ran.

Untested here (no TPU on the build machines); the trace parsing it relies on is
tested on CPU traces.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import jax

from ..profiling import xplane


def time_on_device(fn, args, *, trace_root: Path, warmup: int = 3, runs: int = 10) -> tuple[dict[str, Any], Any]:
    """Median device seconds of ``runs`` calls after ``warmup``; also the last call's outputs."""
    jitted = jax.jit(fn)
    out = None
    for _ in range(warmup):
        out = jax.block_until_ready(jitted(*args))
    times_ps = []
    for i in range(runs):
        trace_dir = trace_root / f"call{i:03d}"
        with jax.profiler.trace(str(trace_dir)):
            out = jax.block_until_ready(jitted(*args))
        times_ps.append(xplane.device_time(trace_dir).total_ps)
    return {
        "median_s": statistics.median(times_ps) / 1e12,
        "times_s": [t / 1e12 for t in times_ps],
        "runs": runs,
        "warmup": warmup,
        "trace_dir": str(trace_root / f"call{runs - 1:03d}"),
    }, out
