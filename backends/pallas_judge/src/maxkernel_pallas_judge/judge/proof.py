"""Proof of kernel: is the candidate's real work done inside Pallas kernels?

Judged in the parent from counts the checker made on the exported program
(``hlo_work``), never from the candidate's own report, and measured against
the *reference's* work counted by the same rule: a phantom loop of dots in a
kernel, or any other work the candidate adds, buys no room for glue. Defends
against candidates that wrap a trivial kernel around jnp code that does the
work, work hidden in loops (counted per trip; data-dependent loops at a
worst case), in ops the counter does not know (refused outside kernels), and
host callbacks.

A task may say which operation the kernel must own (``kernel_owns`` in
kernel_task.yaml: a ``jax.named_scope`` of its reference, e.g. MLA's
attention, whose projections the published Pallas MLA leaves to XLA). Then
the limits apply to that operation's work, and the reference's own work
outside it may stay in XLA: a glue matmul of the same shape as one of the
reference's matmuls outside the scope (each at most as often as the
reference has it) and the reference's element-ops outside the scope are
allowed on top. Any other matmul still counts against the 2%: doing the
projections in a kernel buys no room to leave the attention in XLA.
"""

from __future__ import annotations

from typing import Any

#: At most this share of the reference's matmul/conv FLOPs may run outside kernels.
MAX_GLUE_MATMUL_SHARE = 0.02
#: At most this share of the reference's work (FLOPs + element-ops) may run outside kernels:
#: a bias broadcast or a final reshape is fine, the bulk of a norm or softmax is not.
MAX_GLUE_WORK_SHARE = 0.25
#: A count past any real program's (``hlo_work`` counts in Python ints: nested data-dependent loops charged
#: at a worst case can pass what a float holds). Clamped to it, a count still fails every limit.
MOST_WORK = 1e300


def _count(value) -> float:
    """A work count as a float, clamped: never an OverflowError for an int past a float's range."""
    return float(min(value, MOST_WORK))


def _reference_work(reference: dict[str, Any]) -> tuple[float, float]:
    """(matmul FLOPs, all work) the kernel must own: the whole reference program (it has no kernels, so all
    of it is 'glue'), or with ``kernel_owns`` the work inside that scope."""
    if "owned_flops" in reference:
        flops = _count(reference["owned_flops"])
        return flops, flops + _count(reference.get("owned_elementwise", 0))
    flops = _count(reference.get("glue_flops", 0))
    return flops, flops + _count(reference.get("glue_elementwise", 0))


def allowed_glue(stats: dict[str, Any], reference: dict[str, Any]) -> tuple[float, float]:
    """(matmul FLOPs, element-ops) of the candidate's glue the reference's work outside its owned scope
    covers: its dots of the same shapes as the reference's unowned dots (each matched at most the reference's
    number of times), and as many element-ops as the reference has outside the scope."""
    if "owned_flops" not in reference:
        return 0.0, 0.0
    budget: dict[str, int] = {}
    for dot in reference.get("glue_dots", []):
        if not dot.get("owned"):
            budget[dot["shape"]] = budget.get(dot["shape"], 0) + int(dot["times"])
    matched = 0.0
    for dot in sorted(stats.get("glue_dots", []), key=lambda d: -d["flops"]):
        times = min(int(dot["times"]), budget.get(dot["shape"], 0))
        if times:
            budget[dot["shape"]] -= times
            matched += _count(dot["flops"]) * (times / max(int(dot["times"]), 1))
    unowned_elementwise = _count(reference.get("glue_elementwise", 0)) - _count(reference.get("owned_elementwise", 0))
    return matched, max(unowned_elementwise, 0.0)


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
    free_flops, free_elementwise = allowed_glue(stats, reference)
    glue_flops = _count(stats["glue_flops"]) - free_flops
    loops = (f" (with {stats['unbounded_loops']} data-dependent loop(s) charged at a worst case)"
             if stats.get("unbounded_loops") else "")
    if glue_flops > MAX_GLUE_MATMUL_SHARE * max(ref_flops, 1.0):
        share = glue_flops / max(ref_flops, 1.0)
        return False, (f"matmul/conv FLOPs ({glue_flops:.3g}, {share:.0%} of the reference's {ref_flops:.3g}{loops}) "
                       f"run in jnp outside pallas_call at {size} (limit {MAX_GLUE_MATMUL_SHARE:.0%}): move the dot "
                       "products into the kernel")
    glue_work = glue_flops + max(_count(stats["glue_elementwise"]) - free_elementwise, 0.0)
    if glue_work > MAX_GLUE_WORK_SHARE * max(ref_work, 1.0):
        ops = ", ".join(sorted(stats.get("glue_ops", {}), key=lambda k: -stats["glue_ops"][k])[:6])
        return False, (f"{glue_work / max(ref_work, 1):.0%} (of the reference's work) of the arithmetic runs in jnp "
                       f"outside pallas_call at {size} ({ops}){loops}, limit {MAX_GLUE_WORK_SHARE:.0%}: the kernel "
                       "must do the bulk of the work, not only wrap it")
    owned = " (besides the reference's own work outside its owned scope)" if free_flops or free_elementwise else ""
    return True, (f"{stats['pallas_calls']} Pallas kernel(s); outside them {glue_work / max(ref_work, 1):.1%} of the "
                  f"reference's work{owned}")
