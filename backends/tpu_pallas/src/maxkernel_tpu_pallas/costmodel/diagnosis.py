"""Turn a cost estimate into what the planner and debugger act on: short, ordered, concrete.

The full figures stay in the record (``as_details``); the diagnosis is a few
lines meant for a prompt: what bounds the kernel, how much VMEM is left, which
operand's traffic dominates and what a larger block would save, MXU padding,
too many grid steps.
"""

from __future__ import annotations

from maxkernel_pallas_judge.profiling.records import CostEstimate, KernelCost, OperandCost

MIB = 1 << 20


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f} us" if seconds < 1e-2 else f"{seconds * 1e3:,.2f} ms"


def _operand_name(op: OperandCost) -> str:
    if op.role == "dma":
        return f"the kernel's own DMAs ({op.transfers:,} steps' worth)"
    return f"{op.role} {op.index} (block {'x'.join(map(str, op.block_shape))} {op.dtype})"


def _traffic_hint(kernel: KernelCost, op: OperandCost) -> str | None:
    """Which grid axes re-fetch this operand, and what doubling the block along them would save."""
    if op.refetch < 1.5 or not op.depends_on:
        return None
    ignored = [axis for axis, dep in enumerate(op.depends_on) if not dep and kernel.grid[axis] > 1]
    if not ignored:
        return None
    saved = op.hbm_bytes / 2
    axes = ", ".join(f"grid axis {a} (extent {kernel.grid[a]})" for a in ignored)
    return (f"it is re-fetched for every step of {axes}, which its block index ignores: blocks twice as large "
            f"along the dimension that axis walks halve its extent and this traffic (saves ~{saved / MIB:,.0f} MiB)")


def vmem_advice(need: int, limit: int, capacity: int | None) -> str:
    """What to do when blocks overflow the scoped VMEM limit: advice bounded by what the chip has."""
    head = (f"VMEM over the limit: blocks and scratch need {need / MIB:.1f} MiB, the scoped limit is "
            f"{limit / MIB:.0f} MiB")
    if not capacity:
        return f"{head}: shrink the blocks"
    if need > capacity:
        return (f"{head} and the chip has only {capacity / MIB:.0f} MiB of VMEM: shrink the blocks (no limit "
                "can hold them)")
    if limit >= capacity:
        return f"{head}, already the chip's whole VMEM: shrink the blocks"
    return (f"{head}: shrink the blocks, or raise vmem_limit_bytes to at least {need / MIB:.0f} MiB (the chip has "
            f"{capacity / MIB:.0f} MiB)")


def diagnose(est: CostEstimate) -> list[str]:
    lines = []
    for k in est.kernels:
        label = f"{k.name} grid {tuple(k.grid)}" if len(est.kernels) > 1 else f"grid {tuple(k.grid)}"
        lines.append(
            f"{label}: {k.bound}-bound, estimated {_us(k.seconds)} (memory {_us(k.memory_s)}, compute "
            f"{_us(k.compute_s)}, step overhead {_us(k.overhead_s)})")
        share = k.vmem_bytes / k.vmem_limit_bytes if k.vmem_limit_bytes else 0
        if share > 1:
            lines.append(vmem_advice(k.vmem_bytes, k.vmem_limit_bytes, (est.chip or {}).get("vmem_capacity_bytes")))
        else:
            lines.append(f"VMEM {k.vmem_bytes / MIB:.1f} of {k.vmem_limit_bytes / MIB:.0f} MiB scoped limit "
                         f"({share:.0%}); {'room for larger blocks' if share < 0.5 else 'little headroom'}")
        top = max(k.operands, key=lambda o: o.hbm_bytes, default=None)
        if top is not None and k.hbm_bytes:
            times = f", {top.refetch:.1f}x its size" if top.array_bytes else ""
            line = (f"{_operand_name(top)} move{'s' if top.role != 'dma' else ''} {top.hbm_bytes / MIB:,.0f} MiB "
                    f"({top.hbm_bytes / k.hbm_bytes:.0%} of HBM traffic{times})")
            hint = _traffic_hint(k, top)
            lines.append(f"{line}; {hint}" if hint else line)
        for dot in k.dots:
            if dot["padding_waste"] > 0.1:
                lines.append(f"matmul {dot['m']}x{dot['k']} @ {dot['k']}x{dot['n']} per step wastes "
                             f"{dot['padding_waste']:.0%} of the MXU to padding: use multiples of the MXU width")
        if k.overhead_s > 0.2 * k.seconds:
            lines.append(f"{k.steps:,} grid steps cost {_us(k.overhead_s)} of fixed overhead "
                         f"({k.overhead_s / k.seconds:.0%}): use larger blocks")
    if est.glue_seconds > 0.05 * est.seconds:
        lines.append(f"code outside the kernels (XLA's estimate of the candidate beyond the kernels' I/O) takes "
                     f"{_us(est.glue_seconds)} ({est.glue_seconds / est.seconds:.0%}): fuse it into a kernel")
    lines.append(f"arithmetic intensity {est.arithmetic_intensity:,.1f} FLOP/byte; {est.roofline_fraction:.0%} "
                 f"of the roofline (estimate)")
    return lines
