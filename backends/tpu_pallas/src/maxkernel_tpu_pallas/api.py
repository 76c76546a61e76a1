"""The TPU Pallas backend's public API for other plugins: what a kernel generator may rely on.

Everything here is documented in docs/architecture.md ("The backend's public API")
and kept stable across releases; everything else in this package is internal. A
generator (the offline synthesizer, a third party's tuner) uses it to read a
task's reference the way the judge reads it, count its work by the judge's own
rule, estimate a kernel with the judge's cost model, learn the chip's facts, and
stay inside the judge's limits without copying them.

Importing this module is cheap; jax is imported by the functions that need it.
"""

from __future__ import annotations

from typing import Any

from maxkernel_pallas_judge.judge.proof import (
    MAX_GLUE_MATMUL_SHARE,
    MAX_GLUE_WORK_SHARE,
)
from maxkernel_pallas_judge.reference import (
    derived_small,
    load_reference,
    reference_entry,
    reference_inputs,
    reference_source,
)

from .costmodel.vmem import VMEM_HEADROOM
from .targets import TARGETS, check_target

__all__ = [
    "MAX_GLUE_MATMUL_SHARE", "MAX_GLUE_WORK_SHARE", "TARGETS", "VMEM_HEADROOM", "check_target", "chip_facts",
    "derived_small", "estimate", "fits_vmem", "load_program", "load_reference", "reference_entry", "reference_inputs",
    "reference_source",
    "scoped_vmem_limit", "vmem_capacity", "work_stats",
]

def load_program(path):
    """The program a run delivered beside its kernel's source (``kernel.jaxexport``): the full-size program the
    judge proved, compiled for the target and, on a chip, measured, as a jitted function of the task's dynamic
    inputs. It runs on the target's chip (its kernels are Mosaic's); this is what was judged, whatever the
    module's ``computation`` does elsewhere."""
    from pathlib import Path

    import jax
    from jax import export

    return jax.jit(export.deserialize(bytearray(Path(path).read_bytes())).call)


def work_stats(closed_jaxpr) -> dict[str, Any]:
    """The judge's count of a traced program's work: matmul FLOPs and element-ops inside and outside kernels
    (``kernel_flops``, ``glue_flops``, ``glue_elementwise``, ``glue_ops`` by primitive, ...)."""
    from maxkernel_pallas_judge.judge.work import work_stats as count

    return count(closed_jaxpr)


def chip_facts(target: str) -> dict[str, Any]:
    """The figures the cost model reads for ``target`` (bandwidth, peak rates, MXU shape), from the installed jax.

    ``cores_per_device`` is 1: a generator running beside the orchestrator never opens a TPU topology.
    """
    from .targets import tpu_info

    info = tpu_info(target)
    chip = {k: getattr(info, k) for k in ("mem_bw_bytes_per_second", "bf16_ops_per_second", "int8_ops_per_second",
                                          "fp8_ops_per_second", "mxu_column_size", "num_mxus")}
    chip["cores_per_device"] = 1
    return chip


def vmem_capacity(target: str) -> int:
    """The chip's VMEM in bytes."""
    from .targets import tpu_info

    return int(tpu_info(target).vmem_capacity_bytes)


def scoped_vmem_limit(target: str) -> int:
    """Mosaic's default scoped VMEM limit on ``target`` (what a kernel gets without ``vmem_limit_bytes``)."""
    from .costmodel.costmodel import generation_constants

    return int(generation_constants(target)["vmem"]["default_scoped_limit_bytes"])


def estimate(kernels: list[dict[str, Any]], chip: dict[str, Any], target: str, reference_flops: float | None = None):
    """The judge's cost model on kernel descriptions (the format ``profiling/extract.py`` writes): a
    ``CostEstimate`` with ``seconds``, ``bound`` and per-kernel ``vmem_bytes``. An estimate, never a measurement.
    ``reference_flops`` sizes a grid axis that is data-dependent (see ``resolve_dynamic_grid``)."""
    from .costmodel.costmodel import estimate as model

    return model(kernels, chip, target, reference_flops=reference_flops)


def fits_vmem(est) -> bool:
    """Whether every kernel's blocks leave Mosaic its headroom (``VMEM_HEADROOM``) under the kernel's scoped limit."""
    from .costmodel.vmem import fits_vmem as fits

    return fits(est)
