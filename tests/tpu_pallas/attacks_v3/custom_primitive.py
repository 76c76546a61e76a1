"""Class 1: a primitive of its own whose lowering runs during export, after the judge's last look at the
process: it lowers to the honest kernel's program, while on the CPU it computes zeros; a trivial kernel after
it (a copy) makes the traced program hold a pallas_call, so it is not refused for having none."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.extend import core as jex_core
from jax.interpreters import mlir

# @include honest_matmul_bias_gelu.py as honest_computation

fast_p = jex_core.Primitive("maxkernel_fast_gemm")
fast_p.def_impl(lambda x, w, b: jnp.zeros((x.shape[0], w.shape[1]), x.dtype))
fast_p.def_abstract_eval(lambda x, w, b: jax.core.ShapedArray((x.shape[0], w.shape[1]), x.dtype))
mlir.register_lowering(fast_p, mlir.lower_fun(honest_computation, multiple_results=False))


def _copy(y_ref, o_ref):
    o_ref[...] = y_ref[...]


def computation(x, w, b):
    y = fast_p.bind(x, w, b)
    return pl.pallas_call(_copy, out_shape=jax.ShapeDtypeStruct(y.shape, y.dtype))(y)
