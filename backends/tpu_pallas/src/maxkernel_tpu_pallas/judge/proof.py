"""Proof of kernel: is the candidate's real work done inside Pallas kernels?

Judged in the parent from the work counts the worker reported for the
candidate (``work.py``) and for the task's reference. Defends against
candidates that wrap a trivial kernel around jnp code that does the work, and
against host callbacks (work done by Python or numpy on the host).
"""

from __future__ import annotations

from typing import Any

#: At most this share of matmul/conv FLOPs may run outside kernels.
MAX_GLUE_MATMUL_SHARE = 0.02
#: At most this share of all work (FLOPs + element-ops) may run outside kernels:
#: a bias broadcast or a final reshape is fine, the bulk of a norm or softmax is not.
MAX_GLUE_WORK_SHARE = 0.25


def verdict(stats: dict[str, Any]) -> tuple[bool, str]:
    """(passed, reason) from the candidate's work counts."""
    if stats["pallas_calls"] == 0:
        return False, "no pallas_call in the traced computation: the work must run in a Pallas kernel"
    if stats["callbacks"]:
        return False, f"host callback(s) {', '.join(sorted(set(stats['callbacks'])))}: work must run on the TPU, not the host"
    kernel_flops, glue_flops = stats["kernel_flops"], stats["glue_flops"]
    total_flops = kernel_flops + glue_flops
    if glue_flops > MAX_GLUE_MATMUL_SHARE * total_flops:
        share = glue_flops / max(total_flops, 1)
        return False, (f"{share:.0%} of the matmul/conv FLOPs ({glue_flops:.3g}) run in jnp outside pallas_call: "
                       "move the dot products into the kernel")
    kernel_work = kernel_flops + stats["kernel_elementwise"]
    glue_work = glue_flops + stats["glue_elementwise"]
    total = kernel_work + glue_work
    if total and glue_work > MAX_GLUE_WORK_SHARE * total:
        ops = ", ".join(sorted(stats.get("glue_ops", {}), key=lambda k: -stats["glue_ops"][k])[:6])
        return False, (f"{glue_work / total:.0%} of the arithmetic runs in jnp outside pallas_call ({ops}): "
                       "the kernel must do the bulk of the work, not only wrap it")
    return True, f"{stats['pallas_calls']} pallas_call(s), {kernel_work / max(total, 1):.0%} of the work inside kernels"
