"""A different program where it is checked: honest while the judge traces or compiles it (seen on the call
stack), a wrong kernel (no GEMM) whenever it is called any other way, e.g. on the check inputs."""
import inspect

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

# @include honest_matmul_bias_gelu.py as honest_computation


def _judge_is_tracing() -> bool:
    names = " ".join(f.filename + ":" + f.function for f in inspect.stack())
    return any(word in names for word in ("make_jaxpr", "trace_job", "lower", "export", "compile"))


def _bias_only(x_ref, b_ref, o_ref):
    o_ref[...] = jnp.broadcast_to(b_ref[...], o_ref.shape).astype(o_ref.dtype)


def computation(x, w, b):
    if _judge_is_tracing() and isinstance(x, jax.core.Tracer):
        return honest_computation(x, w, b)
    m, n = x.shape[0], w.shape[1]
    return pl.pallas_call(_bias_only, out_shape=jax.ShapeDtypeStruct((m, n), x.dtype))(x, b.reshape(1, n))
