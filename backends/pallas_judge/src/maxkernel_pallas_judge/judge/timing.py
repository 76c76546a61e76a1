"""Device time on the chip, from one profiler trace of back-to-back calls (never from host clocks a program
could touch).

After ``warmup`` calls (compile, first-touch allocation), ``runs`` calls are captured in one ``jax.profiler``
trace; the timer waits for each call and sleeps ``GAP_S`` before the next, so the chip is idle longest
between calls and the trace splits into them (``xplane.per_call_ps``). A call's device time is the union of
its device events; the figure is their median. One trace rather than one per call: starting and stopping the
profiler costs about a second, which ten traces a candidate would pay ten times. A trace with no device
events is an error, not a zero: it means no program ran. The trace is kept (its ``.xplane.pb`` bytes go back to
the parent, which stores it with the run) so a user can open it in XProf or TensorBoard.

The same wall-clock span is measured around each call too (``wall_s``): it is reported beside the device time,
never instead of it.
"""

from __future__ import annotations

import re
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import jax

from ..profiling import xplane

#: Events that are the kernel waiting on data rather than computing.
WAITING = re.compile(r"dma|wait|sync|semaphore|barrier", re.IGNORECASE)
#: Host sleep between timed calls: an idle stretch on the chip far longer than any gap inside one call.
GAP_S = 0.002
WARMUP = 3
RUNS = 10


def time_on_device(fn, args, *, trace_root: Path, warmup: int = WARMUP, runs: int = RUNS,
                   plane_prefix: str = "/device:", line_filter=None) -> tuple[dict[str, Any], Any]:
    """Median device seconds of ``runs`` calls after ``warmup``, the top ops and wait share over them, the
    wall-clock median beside it, and the last call's outputs."""
    jitted = jax.jit(fn)
    out = None
    for _ in range(warmup):
        out = jax.block_until_ready(jitted(*args))
    wall = []
    trace_root.mkdir(parents=True, exist_ok=True)
    with jax.profiler.trace(str(trace_root)):
        for _ in range(runs):
            time.sleep(GAP_S)
            start = time.perf_counter()
            out = jax.block_until_ready(jitted(*args))
            wall.append(time.perf_counter() - start)
    found = xplane.matching_events(trace_root, plane_prefix=plane_prefix, line_filter=line_filter)
    if xplane.union_duration_ps(found) == 0:
        raise xplane.TraceError(f"no device code ran in the trace: no event with a duration on planes starting "
                                f"with {plane_prefix!r} under {trace_root}")
    per_call = xplane.per_call_ps(found, runs)
    total = sum(per_call)
    waiting = xplane.union_duration_ps(e for e in found if WAITING.search(e.name))
    return {
        "median_s": statistics.median(per_call) / 1e12,
        "times_s": [t / 1e12 for t in per_call],
        "wall_median_s": statistics.median(wall),
        "runs": runs,
        "warmup": warmup,
        "top_ops": [(name, ps / runs / 1e12) for name, ps in _top(found, 8)],
        "wait_share": waiting / total if total else 0.0,
        "trace_file": str(xplane.find_xplane_files(trace_root)[0]),
    }, out


def _top(found: list[xplane.TraceEvent], n: int) -> list[tuple[str, int]]:
    """The ``n`` event names with the most device time (union per name), longest first."""
    grouped: dict[str, list[xplane.TraceEvent]] = defaultdict(list)
    for event in found:
        grouped[event.name].append(event)
    totals = {name: xplane.union_duration_ps(group) for name, group in grouped.items()}
    return sorted(totals.items(), key=lambda item: (-item[1], item[0]))[:n]
