"""Device time on a real TPU, from profiler traces (never from host clocks the candidate could touch).

Each timed call is captured in its own ``jax.profiler`` trace; its device time is
the union of the device events in that trace (``profiling.xplane``). A trace
with no device events is an error, not a zero: it means no kernel ran. The last
trace is kept (its ``.xplane.pb`` bytes go back to the parent, which stores it
with the run) so a user can open it in XProf or TensorBoard.

Untested here (no TPU on the build machines); the trace parsing it relies on is
tested on CPU traces, which have the same structure.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any

import jax

from ..profiling import xplane

#: Events that are the kernel waiting on data rather than computing.
WAITING = re.compile(r"dma|wait|sync|semaphore|barrier", re.IGNORECASE)


def time_on_device(fn, args, *, trace_root: Path, warmup: int = 3, runs: int = 10) -> tuple[dict[str, Any], Any]:
    """Median device seconds of ``runs`` calls after ``warmup``, top ops and wait share of the last
    call, and the last call's outputs."""
    jitted = jax.jit(fn)
    out = None
    for _ in range(warmup):
        out = jax.block_until_ready(jitted(*args))
    times_ps, last = [], None
    for i in range(runs):
        trace_dir = trace_root / f"call{i:03d}"
        with jax.profiler.trace(str(trace_dir)):
            out = jax.block_until_ready(jitted(*args))
        last = xplane.device_time(trace_dir)
        times_ps.append(last.total_ps)
    try:
        waiting_ps = xplane.device_time(trace_dir, name_filter=lambda name: bool(WAITING.search(name))).total_ps
    except xplane.TraceError:
        waiting_ps = 0
    return {
        "median_s": statistics.median(times_ps) / 1e12,
        "times_s": [t / 1e12 for t in times_ps],
        "runs": runs,
        "warmup": warmup,
        "top_ops": [(name, ps / 1e12) for name, ps in xplane.top_ops(last, 8)],
        "wait_share": waiting_ps / last.total_ps if last.total_ps else 0.0,
        "trace_file": str(xplane.find_xplane_files(trace_dir)[0]),
    }, out
