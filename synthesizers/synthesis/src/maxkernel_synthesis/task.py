"""The task's reference read as a template, chip-neutral: what every chip's templates are written from.

The reference is traced at full size (abstract inputs, nothing allocated) and analysed (``analysis.py``); its
size-dependent constants are bound by a trace at the small size (the task's own, else the one the judge
derives), so a generated kernel checks at both. A chip's templates add their last resort (the TPU's staged
kernels) and rank the points by their chip's cost model.
"""

from __future__ import annotations

from typing import Any

from attrs import frozen
from maxkernel_core.errors import MaxKernelError
from maxkernel_pallas_judge import reference as ref

from .analysis import Analysis, LastResort, analyse
from .ir import Declined, bind_size_literals, bind_tail_shapes, trace_reference
from .names import ALIASES, NAME  # noqa: F401  (the synthesizer's names, read from here by its templates)



class OfflineDeclined(MaxKernelError):
    """The synthesizer has no template for this computation; the message says why."""

    exit_code = 1


@frozen
class TaskAnalysis:
    """Which template a task's reference is, with its size-bound constants: chip-neutral, so another backend's
    templates (the GPU's) can be written from it."""

    analysis: Analysis
    numbers: Any
    n_dynamic: int
    source: str
    entry: str


def analyse_task(task, last_resort: LastResort | None = None) -> TaskAnalysis:
    """The reference traced at full size and analysed (``OfflineDeclined`` when no template takes it);
    ``last_resort`` is the chip's template for what no other takes."""
    module = ref.load_reference(task)
    shapes, static = ref.reference_inputs(task, module)
    entry = ref.reference_entry(task)
    fn = getattr(module, entry)
    try:
        analysis, numbers = _analyse(task, module, fn, shapes, static, last_resort)
    except Declined as exc:
        raise OfflineDeclined(f"the offline synthesizer has no template for task {task.id}: {exc}") from exc
    return TaskAnalysis(analysis, numbers, len(shapes), ref.reference_source(task), entry)


def _analyse(task, module, fn, shapes, static, last_resort: LastResort | None) -> tuple[Analysis, Any]:
    """The template for the reference at full size, with its size-dependent constants bound by the small size
    (the task's own, else the one the judge derives)."""
    analysis = analyse(trace_reference(fn, shapes, static), last_resort)
    if analysis.template in ("batch", "staged"):
        return analysis, None
    if "small" in task.sizes:
        small = trace_reference(fn, *ref.reference_inputs(task, module, size="small"))
        return _bind(analysis, analyse(small, last_resort))
    small = _derived_small(task, module, last_resort)
    try:
        return _bind(analysis, small)
    except Declined:  # a derived size the template cannot follow: its constants stay the full size's
        return _bind(analyse(trace_reference(fn, shapes, static), last_resort), None)


def _bind(analysis: Analysis, small: Analysis | None) -> tuple[Analysis, Any]:
    if analysis.template == "attention":
        from .attention import bind_sizes, literal_texts

        if small is None:
            return analysis, literal_texts(analysis.attention)
        if small.template != "attention":
            raise Declined(f"at the small size the reference is not attention-shaped ({small.why})")
        return analysis, bind_sizes(analysis.attention, small.attention)  # the score pipeline's constants
    if small is not None:  # constants that depend on the size (1/D)
        bind_size_literals(analysis.program, small.program, dims(analysis), dims(small))
        if analysis.tail_from is not None:  # a tail on the whole per-row array: its shapes follow the size
            bind_tail_shapes(analysis.program.eqns[analysis.tail_from:], small.program.eqns[analysis.tail_from:],
                             dims(analysis), dims(small))
    return analysis, None


def _derived_small(task, module, last_resort: LastResort | None) -> Analysis | None:
    """The analysis at the small size the judge derives for a task without one (so size-dependent constants
    become expressions of the dims and the kernel checks there); None when there is none or it cannot be read."""
    derived = ref.derived_small(task, module)
    if derived is None:
        return None
    try:
        return analyse(trace_reference(*derived), last_resort)
    except Declined:
        return None


def dims(analysis: Analysis) -> dict[str, int]:
    """The sizes a generated kernel knows by name: rows and d, or m, n and k."""
    if analysis.template == "rowwise":
        return {"d": analysis.d, "rows": analysis.rows}
    m, k = analysis.program.shapes[analysis.dot.inputs[0]]
    return {"m": m, "n": analysis.d, "k": k}
