"""What the TPU templates make of a task, computed once per run: the template (the chip-neutral analysis, with
the staged kernels as its last resort), its dtype, the points ranked by the TPU cost model."""

from __future__ import annotations

from typing import Any

from attrs import frozen
from maxkernel_core import Parameter, ParameterSpace

from maxkernel_synthesis.analysis import Analysis
from maxkernel_synthesis.ir import Declined
from maxkernel_synthesis.roles import per_run
from maxkernel_synthesis.task import NAME, OfflineDeclined, analyse_task

from .flash import module_source as flash_module
from .space import neighbours, rank, shrink_largest, space
from .staged.template import analyse_staged_program, last_resort
from .staged.template import module_source as staged_module
from .templates import HEADER, batch_module, matmul_module, rowwise_module

@frozen
class Synthesis:
    """The task's template and its parameter space ranked by the cost model (fastest first)."""

    #: the on-chip memory the blocks must fit, as plans and repairs name it
    MEMORY = "VMEM"

    analysis: Analysis
    dtype: str
    ranked: list[tuple[dict[str, Any], Any]]
    n_dynamic: int
    source: str
    entry: str
    numbers: Any = None

    def complete(self, params: dict[str, Any]) -> dict[str, Any]:
        """A point edited by hand (human-in-the-loop) may name only the blocks it changes: the rest of the
        template's constants come from the cost model's default point."""
        return {**self.ranked[0][0], **params} if self.ranked else dict(params)

    def estimate_of(self, point: dict[str, Any]):
        key = sorted(point.items())
        return next((est for p, est in self.ranked if sorted(p.items()) == key), None)

    @staticmethod
    def fits(est) -> bool:
        from maxkernel_tpu_pallas.api import fits_vmem

        return fits_vmem(est)

    def declared_space(self) -> ParameterSpace:
        return ParameterSpace(tuple(Parameter(name, tuple(values))
                                    for name, values in space(self.analysis, self.dtype).items()))

    def neighbours(self, point: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        return neighbours(self.analysis, point, self.dtype)

    def shrink_largest(self, point: dict[str, Any]) -> dict[str, Any] | None:
        return shrink_largest(self.analysis, point, self.dtype)

    def module(self, task_id: str, params: dict[str, Any]) -> str:
        """The candidate module for a point (completed from the default point) of the template's space."""
        a, params = self.analysis, self.complete(params)
        if a.template == "batch":
            return batch_module(a, task_id, params, self.source, self.entry, self.n_dynamic)
        if a.template == "staged":
            return staged_module(a.staged, task_id, params, self.source, self.entry, self.n_dynamic, HEADER)
        if a.template == "attention":
            return flash_module(a.attention, task_id, params, a.why, self.n_dynamic, self.numbers)
        write = rowwise_module if a.template == "rowwise" else matmul_module
        return write(a, task_id, params, self.dtype, self.n_dynamic)


def synthesis(task, ctx) -> Synthesis:
    """The task's synthesis, from the run's cache (the plugin's own), computed on first use."""
    return per_run(ctx, NAME, lambda: synthesize(task, ctx.config.target))


def synthesize(task, target: str) -> Synthesis:
    from maxkernel_tpu_pallas import api

    found = analyse_task(task, last_resort)
    analysis, numbers = found.analysis, found.numbers
    dtype = _dtype(analysis)
    limit = vmem_limit(target)
    chip = api.chip_facts(target)
    ranked = rank(analysis, dtype, chip, target, limit)
    # Points over VMEM stay in the ranking (the estimate is conservative and the debugger shrinks blocks
    # after a real overflow), unless even the smallest is far over: no repair can fit the template then,
    # and compiling it only wastes evaluations. The batch template's whole-array operands (a weight read by
    # every block) do not shrink with its one block size, so when no point fits it goes staged at once.
    if analysis.template == "batch" and not any(Synthesis.fits(est) for _, est in ranked):
        # The whole computation per batch block does not fit: put only its matmuls on kernels.
        try:
            analysis = analyse_staged_program(analysis.program, f"the batch template needs "
                                              f"{_smallest(ranked) / 2**20:,.0f} MiB of VMEM ({analysis.why})")
        except Declined:
            pass
        else:
            dtype = analysis.staged.dtype
            ranked = rank(analysis, dtype, chip, target, limit)
    smallest = _smallest(ranked)
    if smallest > 2 * limit:
        need = f"even its smallest blocks need {smallest / 2**20:,.0f} MiB" if ranked else "it has no block choice"
        raise OfflineDeclined(f"the offline synthesizer has no template for task {task.id}: the {analysis.template} "
                              f"template does not fit: {need} of VMEM, the limit on {target} is "
                              f"{limit >> 20} MiB ({analysis.why})")
    return Synthesis(analysis, dtype, ranked, found.n_dynamic, found.source, found.entry, numbers)


def vmem_limit(target: str) -> int:
    """The scoped VMEM limit the templates ask for: 3/4 of the chip's VMEM (96 MiB on v5e and v6e, which have
    128), never under the compiler's default. Larger blocks are what cut re-fetches of a weight; the quarter
    left is Mosaic's own (internal scratch, the score tiles the model counts apart)."""
    from maxkernel_tpu_pallas import api

    return max(api.vmem_capacity(target) * 3 // 4, api.scoped_vmem_limit(target))


def _smallest(ranked) -> float:
    """The least VMEM any point's largest kernel needs; infinite with no point."""
    return min((max(k.vmem_bytes for k in est.kernels) for _, est in ranked), default=float("inf"))


def _dtype(analysis: Analysis) -> str:
    if analysis.template == "staged":
        return analysis.staged.dtype
    if analysis.template == "batch":
        return analysis.program.dtypes[analysis.output]
    if analysis.template == "attention":
        return analysis.program.dtypes[analysis.program.inputs[analysis.attention.operand("q").input]]
    lead = analysis.dot.inputs[0] if analysis.dot else analysis.program.inputs[0]
    return analysis.program.dtypes[lead]


