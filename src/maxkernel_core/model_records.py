"""How a cost model reached an estimate (``ModelBreakdown``): its time per kernel and per operand, and the code
around the kernels. It lives inside the one speed figure (``Profile.model``), beside an estimate or beside a
measurement on the chip, so a report, the debugger and ``maxkernel profile`` read the same typed record a
backend's model filled, never a dict of its keys."""

from __future__ import annotations

from typing import Any

from attrs import field, frozen

from .record_base import record


@record
@frozen
class OperandTraffic:
    """One ``BlockSpec``'d operand of a kernel: what its blocks move over HBM and hold on chip."""

    role: str  # "in", "out" or "scratch"
    index: int
    block_shape: tuple[int, ...]
    dtype: str
    hbm_bytes: int
    transfers: int
    #: bytes moved over the array's bytes: 1.0 means each element crosses HBM once
    refetch: float
    vmem_bytes: int


@record
@frozen
class KernelTime:
    """The model's time of one kernel: the grid's steps, the units' times before they overlap, and its blocks."""

    name: str
    #: None for an axis whose size is known only at run time (a model may charge it as it sees fit)
    grid: tuple[int | None, ...]
    steps: int
    seconds: float
    #: what limits it: "memory", "compute" or "step overhead"
    bound: str
    memory_s: float
    compute_s: float
    overhead_s: float
    fill_s: float
    mxu_s: float
    vpu_s: float
    eup_s: float
    #: the busiest compute unit: "mxu", "vpu" or "eup"
    compute_unit: str
    hbm_bytes: int
    flops: float
    mxu_flops_padded: float
    vmem_bytes: int
    vmem_limit_bytes: int
    cores_used: int
    operands: tuple[OperandTraffic, ...] = ()


@record
@frozen
class OpTime:
    """The model's time of one op of a compiled XLA program, every trip of it: an op of the code around a
    candidate's kernels (a transpose, an im2col, a norm left to XLA), or of XLA's reference."""

    name: str
    opcode: str
    label: str
    trips: int
    hbm_bytes: float
    flops: float
    memory_s: float
    compute_s: float
    overhead_s: float
    seconds: float  # all trips
    #: the busiest unit of one launch: "memory", "mxu", "vpu", "eup" or "overhead"
    unit: str


@record
@frozen
class ModelBreakdown:
    """A cost model's estimate of a whole candidate, taken apart: its kernels add up, with the code around them,
    to ``seconds``. Always a model's figure, never a measurement, whichever ``Profile`` holds it."""

    target: str
    seconds: float
    bound: str
    hbm_bytes: int
    flops: float
    kernels: tuple[KernelTime, ...] = ()
    #: the time of the code around the kernels, included in ``seconds``
    glue_seconds: float = 0.0
    #: the costliest ops of that code
    glue_ops: tuple[OpTime, ...] = ()
    #: which model parameters made it (shipped, or the user's own calibration)
    params_source: str = ""
    #: the chip's figures the model used, as its backend's datasheet names them (read by that backend alone)
    chip: dict[str, Any] = field(factory=dict)
