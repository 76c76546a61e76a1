"""Device time on the chip, from one profiler trace of back-to-back calls (never from host clocks a program
could touch).

After warm-up calls (compile, first-touch allocation), the timed calls are captured in one ``jax.profiler``
trace. The timer waits for each call and sleeps ``GAP_S`` before the next, so the chip is idle longest between
calls and the trace splits into them (``xplane.per_call_ps``); a call's device time is its span, from its first
device event to its last (idle time inside a call counts: a program that waits on the host pays for it), and
the figure is the median. The calls alternate between the input sets given, and how many warm-up and timed calls
there are is drawn per measurement, so a program cannot count calls to know which is checked. One trace rather
than one per call: starting and stopping the profiler costs about a second. A trace with no device events is an
error, not a zero. The trace's bytes go back to the parent, which stores them (XProf, TensorBoard); the
folder it was written to is fresh for each measurement and removed after.

The wall-clock span around each call is measured too (``wall_median_s``), reported beside the device time, never
instead of it.
"""

from __future__ import annotations

import re
import secrets
import shutil
import statistics
import tempfile
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
#: Warm-up and timed calls are drawn from these ranges for each measurement.
WARMUP = (2, 4)
RUNS = (8, 12)
#: Outputs of timed calls kept on the chip to check after the trace, at most this many bytes together.
KEEP_BYTES = 2 << 30


def _draw(span: tuple[int, int]) -> int:
    return span[0] + secrets.randbelow(span[1] - span[0] + 1)


def _nbytes(out: Any) -> int:
    return sum(int(x.size) * x.dtype.itemsize for x in jax.tree_util.tree_leaves(out))


def time_on_device(fn, input_sets: list[list[Any]], *, trace_root: Path, plane_prefix: str = "/device:",
                   line_filter=None, warmup: int | None = None, runs: int | None = None,
                   stage=None) -> tuple[dict[str, Any], list]:
    """Median device seconds of the timed calls, the top ops and wait share over them, the wall-clock median
    beside it, the trace's bytes; and the outputs of the timed calls kept for checking, as (set index, outputs)."""
    jitted = jax.jit(fn)
    warmup, runs = warmup or _draw(WARMUP), runs or _draw(RUNS)
    out = None
    for i in range(warmup):
        out = jax.block_until_ready(jitted(*input_sets[i % len(input_sets)]))
    size = _nbytes(out)
    keep_every = size * runs <= KEEP_BYTES
    chosen = set(range(runs)) if keep_every else set(secrets.SystemRandom().sample(
        range(runs), max(2, min(runs, KEEP_BYTES // max(size, 1)))))
    kept, wall = [], []
    trace_root.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="trace-", dir=trace_root))
    stage = stage or (lambda name: None)
    try:
        stage("timing: the traced calls")
        with jax.profiler.trace(str(folder)):
            for i in range(runs):
                which = i % len(input_sets)
                time.sleep(GAP_S)
                start = time.perf_counter()
                out = jax.block_until_ready(jitted(*input_sets[which]))
                wall.append(time.perf_counter() - start)
                if i in chosen:
                    kept.append((which, out))
        stage("timing: reading the trace")
        files = xplane.find_xplane_files(folder)
        if len(files) != 1:
            raise xplane.TraceError(f"the profiler wrote {len(files)} trace files for one measurement")
        found = xplane.matching_events(files[0], plane_prefix=plane_prefix, line_filter=line_filter)
        trace = files[0].read_bytes()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if xplane.union_duration_ps(found) == 0:
        raise xplane.TraceError(f"no device code ran in the trace: no event with a duration on planes starting "
                                f"with {plane_prefix!r}")
    per_call = xplane.per_call_ps(found, runs)
    total = sum(per_call)
    waiting = xplane.union_duration_ps(e for e in found if WAITING.search(e.name))
    return {
        "median_s": statistics.median(per_call) / 1e12,
        "times_s": [t / 1e12 for t in per_call],
        "wall_median_s": statistics.median(wall),
        "runs": runs,
        "warmup": warmup,
        "input_sets": len(input_sets),
        "top_ops": [(name, ps / runs / 1e12) for name, ps in _top(found, 8)],
        "wait_share": waiting / total if total else 0.0,
        "trace": trace,
    }, kept


def _top(found: list[xplane.TraceEvent], n: int) -> list[tuple[str, int]]:
    """The ``n`` event names with the most device time (union per name), longest first."""
    grouped: dict[str, list[xplane.TraceEvent]] = defaultdict(list)
    for event in found:
        grouped[event.name].append(event)
    totals = {name: xplane.union_duration_ps(group) for name, group in grouped.items()}
    return sorted(totals.items(), key=lambda item: (-item[1], item[0]))[:n]
