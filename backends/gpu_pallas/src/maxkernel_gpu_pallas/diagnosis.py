"""What the GPU roofline estimate says a kernel is limited by, in sentences a person can act on."""

from __future__ import annotations


def diagnose(est) -> list[str]:
    notes = []
    for k in est.kernels:
        if k.vmem_bytes > k.vmem_limit_bytes:
            notes.append(f"{k.name}: its tiles need {k.vmem_bytes / 1024:.0f} KB of shared memory per program, over "
                         f"the {k.vmem_limit_bytes / 1024:.0f} KB a thread block may take: use smaller blocks")
        sms = int(est.chip.get("num_sms", 0))
        if k.steps < sms:
            notes.append(f"{k.name}: {k.steps} programs leave {sms - k.steps} of {sms} SMs idle: smaller blocks give "
                         "more programs")
        worst = max(k.operands, key=lambda o: o.refetch, default=None)
        if k.bound == "memory" and worst is not None and worst.refetch > 2:
            notes.append(f"{k.name}: {worst.role} {worst.index} crosses HBM {worst.refetch:.1f}x: larger blocks on the "
                         "axes that re-read it cut the traffic")
        if k.bound == "compute" and k.compute_unit != "mxu" and k.flops:
            notes.append(f"{k.name}: element-ops ({k.compute_unit}) outweigh the dots: fuse or simplify the epilogue")
    notes.append("a roofline estimate from datasheet figures, not held against a GPU measurement yet")
    return notes
