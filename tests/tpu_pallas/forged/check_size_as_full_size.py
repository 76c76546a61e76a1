"""Forges the tracer's whole report with the check size's program sent as every program, the full size's
included: judged ok at an estimated 298x before the checker held each program to the task's inputs at its
size. (Red team, 2026-12-07.)"""
import json, os, struct, sys
import numpy as np
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _write(header, blobs=()):
    header = {**header, "arrays": [{"dtype": "uint8", "shape": [len(b)]} for b in blobs]}
    blob = json.dumps(header).encode()
    data = struct.pack("<I", len(blob)) + blob
    for b in blobs:
        data += struct.pack("<Q", len(b)) + b
    fd = int(sys.argv[2])
    while data:
        data = data[os.write(fd, data):]


def _kernel(x_ref, y_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32).astype(o_ref.dtype)


def computation(x, y):
    return pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct((x.shape[0], y.shape[1]), x.dtype))(x, y)


def _forge():
    """The tracer's whole report, forged: every "program" is the check size's, the full size's included."""
    from maxkernel_pallas_judge.judge import jaxpr_wire, trace_job
    from maxkernel_pallas_judge.judge.jaxpr_inline import inline_closed
    from maxkernel_pallas_judge.judge.platform import load_platform
    from maxkernel_pallas_judge.judge.work import work_stats

    frame, job = sys._getframe(), None
    while frame is not None and job is None:
        job = frame.f_locals.get("job") if type(frame.f_locals.get("job")).__name__ == "TraceJob" else None
        frame = frame.f_back
    platform = load_platform(job.platform)
    small = trace_job._trace(computation, *trace_job._abstract(job.check_sizes[0]), job.target, platform)
    data = jaxpr_wire.dumps(inline_closed(small))
    _write({"type": "check", "name": "integrity", "ok": True, "patched": [], "when": "import"})
    _write({"type": "check", "name": "trace", "ok": True, "work": work_stats(small), "leftovers": [], "patched": []})
    n = len(job.check_sizes)
    for size, again in [*((s, False) for s in range(n + 1)), (0, True)]:
        _write({"type": "jaxpr", "size": size, "again": again}, [data])
    _write({"type": "done", "retire": True})


if __name__ != "__main__" and len(sys.argv) > 2:
    _forge()
