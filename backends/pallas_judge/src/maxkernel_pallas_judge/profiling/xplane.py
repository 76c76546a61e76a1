"""Device time from a JAX profiler trace (an XSpace in ``*.xplane.pb`` files).

``jax.profiler.trace(dir)`` writes ``dir/plugins/profile/<run>/<host>.xplane.pb``,
one serialized ``XSpace`` per host. Its structure:

* ``XSpace.planes``: one ``XPlane`` per device (``/device:TPU:0``, ``/device:GPU:0``),
  one for the host threads (``/host:CPU``), plus metadata planes
  (``/host:metadata``, ``Task Environment``) that hold no events.
* ``XPlane.lines``: one ``XLine`` per timeline: on a TPU ``XLA Modules``,
  ``XLA Ops``, ``Steps``...; on the host one line per thread.
* ``XLine.events``: ``XEvent`` intervals. An event starts at
  ``line.timestamp_ns + event.offset_ps`` and lasts ``duration_ps``; its name and
  its stats' names (``hlo_op``, ``hlo_module``, ...) are ids into the plane's
  ``event_metadata`` / ``stat_metadata`` tables.

Kernel device time is the union of the device events of the timed calls: events
nest (a module contains its ops) and overlap (several lines, several cores), so
summing durations would count the same nanoseconds several times.

The ``xprof`` wheel does not ship ``xplane_pb2`` (its own OSS tools say so), and
the only other Python copy is inside TensorFlow. We therefore read traces with
``jax.profiler.ProfileData``, XLA's C++ XSpace reader: it resolves the metadata
ids to names for us. It reports times in whole nanoseconds (offsets and
durations are divided by 1000 before they reach Python), so ``start_ps`` and
``duration_ps`` below are picoseconds at nanosecond resolution.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from attrs import field, frozen
from jax.profiler import ProfileData
from maxkernel_core.errors import MaxKernelError

if TYPE_CHECKING:  # the plane class lives in a private jaxlib module; only name it for typing
    from jaxlib._profile_data import ProfilePlane

__all__ = [
    "DeviceTime", "TraceError", "TraceEvent", "device_planes", "device_time", "events",
    "find_xplane_files", "host_planes", "load_xspace", "matching_events", "per_call_ps", "top_ops", "union_duration_ps",
]

NameFilter = Callable[[str], bool]

#: The gaps that part calls must be this many times longer than any gap inside a call.
PARTING = 1.5
#: Stats that say what an event ran; the others (thread ids, source files) are noise here.
NAMING_STATS = ("hlo_op", "hlo_module", "long_name", "tf_op")


class TraceError(MaxKernelError):
    """A trace is missing, unreadable, or shows no device code for what was timed."""


@frozen
class TraceEvent:
    """One ``XEvent``, placed on the trace's timeline in picoseconds."""

    plane: str
    line: str
    name: str
    start_ps: int
    duration_ps: int
    # Excluded from the hash: a dict is unhashable, and the other fields identify the event.
    stats: dict[str, object] = field(factory=dict, hash=False)

    @property
    def end_ps(self) -> int:
        return self.start_ps + self.duration_ps


@frozen
class DeviceTime:
    """What ``device_time`` measured: ``total_ps`` is the union of all matched events."""

    total_ps: int
    events: int
    by_name: dict[str, int] = field(hash=False)  # union per event name
    planes: tuple[str, ...]


def find_xplane_files(trace_dir: Path | str) -> list[Path]:
    """The ``*.xplane.pb`` files under ``trace_dir`` (at any depth), newest first."""
    trace_dir = Path(trace_dir)
    if trace_dir.is_file() and trace_dir.name.endswith(".xplane.pb"):
        return [trace_dir]
    files = list(trace_dir.rglob("*.xplane.pb")) if trace_dir.is_dir() else []
    if not files:
        raise TraceError(f"no *.xplane.pb trace under {trace_dir}: was the profiler stopped "
                         f"(jax.profiler.stop_trace) before reading it?")
    # Run folders are named by capture time, so the path breaks mtime ties the right way.
    return sorted(files, key=lambda p: (p.stat().st_mtime_ns, str(p)), reverse=True)


def load_xspace(path: Path | str) -> ProfileData:
    """Parse one ``*.xplane.pb`` file into XLA's read-only view of its ``XSpace``."""
    try:
        return ProfileData.from_file(str(path))
    except (RuntimeError, OSError) as err:
        raise TraceError(f"cannot read trace {path}: {err}") from err


def device_planes(xspace: ProfileData) -> list[ProfilePlane]:
    """Planes of accelerators (``/device:TPU:0``, ``/device:GPU:0``...)."""
    return [p for p in xspace.planes if p.name.startswith("/device:")]


def host_planes(xspace: ProfileData) -> list[ProfilePlane]:
    """Planes of the host (``/host:CPU`` holds its threads; ``/host:metadata`` no events)."""
    return [p for p in xspace.planes if p.name.startswith("/host:")]


def events(plane: ProfilePlane, name_filter: NameFilter | None = None) -> list[TraceEvent]:
    """The events on all lines of ``plane`` whose name passes ``name_filter`` (all if None)."""
    found = []
    for line in plane.lines:
        for event in line.events:
            name = event.name
            if name_filter is not None and not name_filter(name):
                continue  # filter first: reading stats is the costly part on big traces
            stats = {key: value for key, value in event.stats if key in NAMING_STATS}
            found.append(TraceEvent(
                plane=plane.name, line=line.name, name=name,
                start_ps=round(event.start_ns * 1000), duration_ps=round(event.duration_ns * 1000),
                stats=stats,
            ))
    return found


def union_duration_ps(trace_events: Iterable[TraceEvent]) -> int:
    """Length of the union of the events' ``[start, end)`` intervals: overlaps count once."""
    total = 0
    covered_until = None  # end of the merged interval being built
    run_start = 0
    for event in sorted(trace_events, key=lambda e: e.start_ps):
        if covered_until is None or event.start_ps > covered_until:
            if covered_until is not None:
                total += covered_until - run_start
            run_start, covered_until = event.start_ps, event.end_ps
        else:
            covered_until = max(covered_until, event.end_ps)
    if covered_until is not None:
        total += covered_until - run_start
    return total


def _intervals(trace_events: Iterable[TraceEvent]) -> list[tuple[int, int]]:
    """The union of the events as disjoint ``[start, end)`` intervals, in time order."""
    merged: list[list[int]] = []
    for event in sorted(trace_events, key=lambda e: e.start_ps):
        if merged and event.start_ps <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], event.end_ps)
        else:
            merged.append([event.start_ps, event.end_ps])
    return [(a, b) for a, b in merged]


def per_call_ps(trace_events: Iterable[TraceEvent], calls: int) -> list[int]:
    """Device time of each of ``calls`` back-to-back calls captured in one trace: its span, from its first
    event to its last (idle time inside a call counts).

    The timer waits for each call and sleeps between calls, so the device is idle longest between
    them: the ``calls - 1`` longest idle gaps split the busy intervals into the calls. Raises when the trace holds
    fewer separate busy intervals than calls, or when a call's span is not shorter than the gaps that part it
    from its neighbours (the split would then be a guess).
    """
    intervals = [iv for iv in _intervals(trace_events) if iv[1] > iv[0]]
    if len(intervals) < calls:
        raise TraceError(f"the trace shows {len(intervals)} separate stretches of device work for {calls} calls")
    gap = [intervals[i][0] - intervals[i - 1][1] for i in range(1, len(intervals))]
    cuts = sorted(sorted(range(1, len(intervals)), key=lambda i: gap[i - 1], reverse=True)[:calls - 1])
    bounds = [0, *cuts, len(intervals)]
    spans = [intervals[hi - 1][1] - intervals[lo][0] for lo, hi in zip(bounds, bounds[1:], strict=False)]
    inner = [gap[i - 1] for lo, hi in zip(bounds, bounds[1:], strict=False) for i in range(lo + 1, hi)]
    parting = [gap[c - 1] for c in cuts]
    if parting and inner and max(inner) * PARTING >= min(parting):
        raise TraceError("the calls in the trace are not parted by the longest idle gaps: no split to trust")
    return spans


def matching_events(trace_dir: Path | str, *, plane_prefix: str = "/device:",
                    line_filter: NameFilter | None = None) -> list[TraceEvent]:
    """The events of the newest trace under ``trace_dir`` on planes named ``plane_prefix...`` (and lines that
    pass ``line_filter``)."""
    xspace = load_xspace(find_xplane_files(trace_dir)[0])
    planes = [p for p in xspace.planes if p.name.startswith(plane_prefix)]
    return [e for plane in planes for e in events(plane) if line_filter is None or line_filter(e.line)]


def device_time(trace_dir: Path | str, *, name_filter: NameFilter | None = None,
                plane_prefix: str = "/device:") -> DeviceTime:
    """Union of the matching events on every plane named ``plane_prefix...``.

    Reads the newest trace file under ``trace_dir``. Events of all lines are
    merged: on a TPU the ``XLA Modules`` line covers its ``XLA Ops``, so the
    total is the device's busy time; pass ``name_filter`` to keep only the
    kernel's events. Finding nothing is an error, never a zero time: a
    zero would read as an infinitely fast kernel.
    """
    path = find_xplane_files(trace_dir)[0]
    xspace = load_xspace(path)
    all_planes = [p.name for p in xspace.planes]
    planes = [p for p in xspace.planes if p.name.startswith(plane_prefix)]
    matched = [e for plane in planes for e in events(plane, name_filter)]
    total = union_duration_ps(matched)
    if total == 0:
        what = "event matching the name filter" if name_filter else "event"
        raise TraceError(f"no device code ran in the trace: no {what} with a duration on "
                         f"planes starting with {plane_prefix!r} in {path} (planes: {all_planes})")
    grouped: dict[str, list[TraceEvent]] = defaultdict(list)
    for event in matched:
        grouped[event.name].append(event)
    return DeviceTime(
        total_ps=total, events=len(matched),
        by_name={name: union_duration_ps(group) for name, group in grouped.items()},
        planes=tuple(p.name for p in planes),
    )


def top_ops(measured: DeviceTime, n: int) -> list[tuple[str, int]]:
    """The ``n`` event names with the most device time, longest first (ties by name)."""
    return sorted(measured.by_name.items(), key=lambda item: (-item[1], item[0]))[:n]
