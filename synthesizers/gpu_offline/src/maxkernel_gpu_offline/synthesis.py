"""What the GPU templates make of a task, once per run: the template, its declared space, the points ranked
by the GPU roofline estimate of the kernel each one writes (traced, never run)."""

from __future__ import annotations

import itertools
import math
import types
from typing import Any

from attrs import frozen
from maxkernel_core import Parameter, ParameterSpace
from maxkernel_synthesis.analysis import Analysis
from maxkernel_synthesis.roles import per_run
from maxkernel_synthesis.task import NAME, OfflineDeclined, analyse_task

from .attention import attention_module, unsupported
from .templates import matmul_module, rowwise_module

CACHE = "gpu_offline"
#: Triton's smallest dot tile side (tl.dot needs every dimension >= 16).
MIN_DOT = 16
SPACES = {
    "rowwise": {"BLOCK_ROWS": (1, 2, 4, 8, 16, 32, 64), "NUM_WARPS": (4, 8)},
    "matmul_epilogue": {"BLOCK_M": (32, 64, 128), "BLOCK_N": (64, 128, 256), "BLOCK_K": (32, 64),
                        "NUM_WARPS": (4, 8), "NUM_STAGES": (3,)},
    "attention": {"BLOCK_Q": (32, 64, 128), "BLOCK_K": (32, 64, 128), "NUM_WARPS": (4, 8), "NUM_STAGES": (2,)},
}
#: Parameters that change the kernel's tiles (the estimate's inputs); the others (warps, stages) only tune it.
TILES = ("BLOCK_ROWS", "BLOCK_M", "BLOCK_N", "BLOCK_K", "BLOCK_Q")


@frozen
class GpuSynthesis:
    """The task's GPU template and its points ranked by the roofline (fastest first, those that fit first): a
    ``maxkernel_synthesis.roles.TemplateSynthesis``, so the offline roles drive it as they drive the TPU's."""

    #: the on-chip memory the tiles must fit, as plans and repairs name it
    MEMORY = "shared memory"

    analysis: Analysis
    ranked: list[tuple[dict[str, Any], Any]]
    writer: Any  # (task id, point) -> module source

    @property
    def template(self) -> str:
        return self.analysis.template

    def complete(self, params: dict[str, Any]) -> dict[str, Any]:
        return {**self.ranked[0][0], **params} if self.ranked else dict(params)

    def estimate_of(self, point: dict[str, Any]):
        return next((est for p, est in self.ranked if p == point), None)

    @staticmethod
    def fits(est) -> bool:
        return est.fits_vmem

    def declared_space(self) -> ParameterSpace:
        return ParameterSpace(tuple(Parameter(k, tuple(v)) for k, v in SPACES[self.template].items()))

    def neighbours(self, point: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        moves = []
        for name, values in SPACES[self.template].items():
            at = values.index(point[name])
            for step in (-1, 1):
                if 0 <= at + step < len(values):
                    moves.append((f"{name} {point[name]} -> {values[at + step]}", {**point, name: values[at + step]}))
        return moves

    def shrink_largest(self, point: dict[str, Any]) -> dict[str, Any] | None:
        tiles = [n for n in TILES if n in point and SPACES[self.template][n].index(point[n]) > 0]
        if not tiles:
            return None
        name = max(tiles, key=lambda n: point[n])
        values = SPACES[self.template][name]
        return {**point, name: values[values.index(point[name]) - 1]}

    def module(self, task_id: str, params: dict[str, Any]) -> str:
        return self.writer(task_id, self.complete(params))


def synthesis(task, ctx) -> GpuSynthesis:
    return per_run(ctx, CACHE, lambda: synthesize(task, ctx.config.target))


def _writer(found):
    a = found.analysis
    if a.tail_from is not None and a.template == "matmul_epilogue":
        raise OfflineDeclined("ops after the epilogue's per-row result (run in XLA by the TPU template) have no GPU "
                              "template yet")
    if a.group_reductions:
        raise OfflineDeclined(f"statistics over groups of {a.group} features (GroupNorm) have no GPU template yet: "
                              "the TPU templates take them with lane rotations Triton does not have")
    if a.template == "rowwise":
        if not any(a.kinds[n] == "row" for n in a.program.inputs):
            raise OfflineDeclined("no input has the output's row shape (the rows come from a broadcast)")
        return lambda task_id, point: rowwise_module(a, task_id, point, found.n_dynamic)
    if a.template == "matmul_epilogue":
        return lambda task_id, point: matmul_module(a, task_id, point, found.n_dynamic)
    if a.template == "attention":
        why = unsupported(a.attention)
        if why:
            raise OfflineDeclined(f"the GPU attention template cannot write this attention: {why}")
        return lambda task_id, point: attention_module(a.attention, task_id, point, a.why, found.n_dynamic,
                                                       found.numbers)
    raise OfflineDeclined(f"the GPU templates are row-wise, matmul + epilogue and attention; this task is "
                          f"{a.template} ({a.why})")


def _legal(template: str, analysis, point: dict[str, int]) -> bool:
    """Triton's power-of-2 rule at the full size: every tile a power of 2 (dots at least 16 a side)."""
    if template == "rowwise":
        return analysis.d & (analysis.d - 1) == 0
    if template == "attention":
        spec = analysis.attention
        tiles = [math.gcd(spec.sq, point["BLOCK_Q"]), math.gcd(spec.sk, point["BLOCK_K"]), spec.d, spec.e]
        return all(t >= MIN_DOT and t & (t - 1) == 0 for t in tiles)
    m, k = analysis.program.shapes[analysis.dot.inputs[0]]
    n = analysis.d
    tiles = [math.gcd(m, point["BLOCK_M"]), math.gcd(k, point["BLOCK_K"]),
             n if analysis.reductions else math.gcd(n, point["BLOCK_N"])]
    return all(t >= MIN_DOT and t & (t - 1) == 0 for t in tiles)


def _estimate(source: str, shapes, static, target: str):
    import jax

    from maxkernel_gpu_pallas.platform import GPU

    namespace = types.ModuleType("maxkernel_gpu_template")
    exec(compile(source, "<gpu template>", "exec"), namespace.__dict__)  # our own template's code
    closed = jax.make_jaxpr(lambda *d: namespace.computation(*d, *static))(*shapes)
    return GPU.estimate(GPU.describe_kernels(closed), GPU.chip(target), target, reference_flops=None,
                        ideal_f32_passes=None)


def synthesize(task, target: str) -> GpuSynthesis:
    from maxkernel_pallas_judge.judge.inputs import abstract_full
    from maxkernel_pallas_judge.judge.task_module import load_task_module

    found = analyse_task(task)
    writer = _writer(found)
    template = found.analysis.template
    reference = load_task_module(task.metadata, "maxkernel_gpu_template_reference")  # the user's own task code
    shapes, static = abstract_full(reference, task.metadata, size="full")
    space = SPACES[template]
    points = [dict(zip(space, values, strict=True)) for values in itertools.product(*space.values())]
    points = [p for p in points if _legal(template, found.analysis, p)]
    if not points:
        raise OfflineDeclined(f"no block size of the GPU {template} template meets Triton's power-of-2 rule at "
                              f"task {task.id}'s sizes")
    by_tiles: dict[tuple, Any] = {}
    ranked = []
    for point in points:
        tiles = tuple(point.get(n) for n in TILES)
        if tiles not in by_tiles:  # warps and stages do not change the kernel the estimate reads
            by_tiles[tiles] = _estimate(writer(task.id, point), shapes, static, target)
        ranked.append((point, by_tiles[tiles]))
    ranked.sort(key=lambda pe: (not pe[1].fits_vmem, pe[1].seconds))
    return GpuSynthesis(found.analysis, ranked, writer)


__all__ = ["NAME", "GpuSynthesis", "synthesis", "synthesize"]
