"""A bench report's figures (matplotlib, inline SVG) that read at 2 tasks and at 200.

Estimated and measured speedups are drawn in separate figures, each titled
with its kind; a task without a correct kernel is never drawn as a speedup.
Speedup axes are log2 with ticks written as 0.5x, 1x, 2x. Up to
``LABELLED_TASKS`` tasks, the per-task figure is one labelled bar each (sorted);
past that, a sorted dot plot whose labels would not read is drawn instead (the
table below the figures names every task, and links its report).
"""

from __future__ import annotations

import io
import math

KIND_LABEL = {"estimated": "estimated by the cost model (no device)", "measured": "measured on the device"}
LABELLED_TASKS = 40
MIN_FOR_HISTOGRAM = 8
COLOURS = {"estimated": "#4c72b0", "measured": "#55a868"}


def short_name(task_id: str) -> str:
    """JaxBench ids by their number (``19k``), others by their first 14 characters."""
    head = task_id.split("_")[0]
    return head if head[:-1].isdigit() and head[-1:].isalpha() else task_id[:14]


def _svg(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.find("<svg"):]


def speedup_axis(ax, which: str, values: list[float]) -> None:
    """A log2 axis over ``values`` (and 1x), ticked at powers of two written as 0.25x, 1x, 4x."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    lo = math.floor(math.log2(min([*values, 1.0])))
    hi = math.ceil(math.log2(max([*values, 1.0])))
    lo, hi = (lo - 1, hi + 1) if lo == hi else (lo, hi)
    (ax.set_xscale if which == "x" else ax.set_yscale)("log", base=2)
    axis = ax.xaxis if which == "x" else ax.yaxis
    axis.set_major_locator(FixedLocator([2.0 ** k for k in range(lo, hi + 1)]))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    (ax.set_xlim if which == "x" else ax.set_ylim)(2.0 ** lo / 1.15, 2.0 ** hi * 1.15)


def _histogram(plt, rows, label: str):
    fig, ax = plt.subplots(figsize=(7, 3.2))
    logs = [math.log2(r.speedup) for r in rows]
    ax.hist(logs, bins=min(20, max(4, len(rows) // 3)), color="#4c72b0")
    ax.axvline(0, color="black", lw=1)
    from matplotlib.ticker import FuncFormatter

    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{2 ** v:g}x"))
    ax.set_xlabel("speedup vs XLA, log scale (right of the line: faster)")
    ax.set_ylabel("tasks")
    ax.set_title(f"Speedup distribution, {label}")
    return (f"Speedup distribution over {len(rows)} correct tasks ({label}).", _svg(fig))


def _roofline(plt, rows, label: str):
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.scatter([r.arithmetic_intensity for r in rows], [r.roofline_fraction for r in rows], color="#dd8452")
    if len(rows) <= LABELLED_TASKS:
        for r in rows:
            ax.annotate(short_name(r.task_id), (r.arithmetic_intensity, r.roofline_fraction), fontsize=7)
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))  # 10, 100: not 10^1, 2x10^1
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("fraction of roofline")
    ax.set_title(f"Roofline fraction, {label}")
    return (f"Fraction of the roofline reached by each kernel ({label}).", _svg(fig))


def _kind_figures(plt, rows, label: str) -> list[tuple[str, str]]:
    """The speedup histogram (from MIN_FOR_HISTOGRAM tasks: fewer make no distribution) and the roofline scatter."""
    out = []
    if len(rows) >= MIN_FOR_HISTOGRAM:
        out.append(_histogram(plt, rows, label))
    with_roof = [r for r in rows if r.roofline_fraction is not None and r.arithmetic_intensity]
    if with_roof:
        out.append(_roofline(plt, with_roof, label))
    return out


def _per_task(plt, results) -> tuple[str, str] | None:
    """Labelled sorted bars (one per task) up to LABELLED_TASKS tasks; a sorted dot plot past that."""
    fast = sorted((r for r in results if r.correct and r.speedup), key=lambda r: r.speedup)
    failed = len(results) - len(fast)
    if not fast:
        return None
    kinds = sorted({r.speedup_kind or "estimated" for r in fast})
    values = [r.speedup for r in fast]
    if len(fast) <= LABELLED_TASKS:
        fig, ax = plt.subplots(figsize=(7, 1.2 + 0.28 * len(fast)))
        ax.barh(range(len(fast)), [v - 1 for v in values], left=1,
                color=[COLOURS[r.speedup_kind or "estimated"] for r in fast], height=0.6)
        ax.set_yticks(range(len(fast)), [r.task_id[:40] for r in fast], fontsize=8)
        ax.axvline(1, color="black", lw=1)
        speedup_axis(ax, "x", values)
        ax.set_xlabel("speedup vs XLA (log scale; right of 1x: faster)")
    else:
        fig, ax = plt.subplots(figsize=(7, 3.6))
        ax.scatter(range(len(fast)), values, s=10, c=[COLOURS[r.speedup_kind or "estimated"] for r in fast])
        ax.axhline(1, color="black", lw=1)
        speedup_axis(ax, "y", values)
        ax.set_xlabel(f"tasks, slowest to fastest ({len(fast)}; the table names each)")
        ax.set_ylabel("speedup vs XLA (log scale)")
    ax.set_title("Speedup per task")
    caption = ("Speedup per task with a correct kernel, sorted; colour is the kind of figure ("
               + ", ".join(f"{k}: {KIND_LABEL[k]}" for k in kinds) + ")."
               + (f" {failed} task(s) without a correct kernel are not drawn (see the table)." if failed else ""))
    return caption, _svg(fig)


def figures(bench) -> list[tuple[str, str]]:
    """(caption, inline SVG) for each figure; one set per speed kind, never pooled. Without matplotlib (a bare
    TPU host, say) one caption says so and the tables stand alone."""
    try:
        import matplotlib
    except ImportError:
        return [("No figures: matplotlib is not installed here (pip install matplotlib); the tables hold every "
                 "figure.", "")]

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # text as text: smaller pages, selectable, searchable
    import matplotlib.pyplot as plt

    out = []
    per_task = _per_task(plt, bench.results)
    if per_task:
        out.append(per_task)
    for kind in ("estimated", "measured"):
        rows = [r for r in bench.results if r.correct and r.speedup and r.speedup_kind == kind]
        out.extend(_kind_figures(plt, rows, KIND_LABEL[kind]))
    return out
