"""Proof of kernel: is the candidate's real work done inside Pallas kernels?

Judged in the parent from counts the checker made on the exported program
(``hlo_work``), never from the candidate's own report, and measured against
the *reference's* work counted by the same rule: a phantom loop of dots in a
kernel, or any other work the candidate adds, buys no room for glue. Defends
against candidates that wrap a trivial kernel around jnp code that does the
work, work hidden in loops (counted per trip; data-dependent loops at a
worst case), in ops the counter does not know (refused outside kernels), and
host callbacks.
"""

from __future__ import annotations

from typing import Any

#: At most this share of the reference's matmul/conv FLOPs may run outside kernels.
MAX_GLUE_MATMUL_SHARE = 0.02
#: At most this share of the reference's work (FLOPs + element-ops) may run outside kernels:
#: a bias broadcast or a final reshape is fine, the bulk of a norm or softmax is not.
MAX_GLUE_WORK_SHARE = 0.25


def _reference_work(reference: dict[str, Any]) -> tuple[float, float]:
    """(matmul FLOPs, all work) of the reference program, which has no kernels: all of it is 'glue'."""
    flops = float(reference.get("glue_flops", 0))
    return flops, flops + float(reference.get("glue_elementwise", 0))


def verdict(stats: dict[str, Any], reference: dict[str, Any], size: str = "full size") -> tuple[bool, str]:
    """(passed, reason) for a candidate program's work counts against the reference's at the same size."""
    if stats["pallas_calls"] == 0:
        return False, f"no pallas_call in the program at {size}: the work must run in a Pallas kernel"
    if stats["callbacks"]:
        return False, (f"host callback(s) {', '.join(sorted(set(stats['callbacks'])))} at {size}: work must run on "
                       "the TPU, not the host")
    if stats.get("unknown_ops"):
        ops = ", ".join(sorted(stats["unknown_ops"]))
        return False, (f"{ops} outside pallas_call at {size}: the judge cannot account for the work of these ops "
                       "outside a kernel; move them into the kernel")
    ref_flops, ref_work = _reference_work(reference)
    glue_flops = float(stats["glue_flops"])
    loops = (f" (with {stats['unbounded_loops']} data-dependent loop(s) charged at a worst case)"
             if stats.get("unbounded_loops") else "")
    if glue_flops > MAX_GLUE_MATMUL_SHARE * max(ref_flops, 1.0):
        share = glue_flops / max(ref_flops, 1.0)
        return False, (f"matmul/conv FLOPs ({glue_flops:.3g}, {share:.0%} of the reference's {ref_flops:.3g}{loops}) "
                       f"run in jnp outside pallas_call at {size} (limit {MAX_GLUE_MATMUL_SHARE:.0%}): move the dot "
                       "products into the kernel")
    glue_work = glue_flops + float(stats["glue_elementwise"])
    if glue_work > MAX_GLUE_WORK_SHARE * max(ref_work, 1.0):
        ops = ", ".join(sorted(stats.get("glue_ops", {}), key=lambda k: -stats["glue_ops"][k])[:6])
        return False, (f"{glue_work / max(ref_work, 1):.0%} (of the reference's work) of the arithmetic runs in jnp "
                       f"outside pallas_call at {size} ({ops}){loops}, limit {MAX_GLUE_WORK_SHARE:.0%}: the kernel "
                       "must do the bulk of the work, not only wrap it")
    return True, (f"{stats['pallas_calls']} Pallas kernel(s); outside them {glue_work / max(ref_work, 1):.1%} of the "
                  "reference's work")
