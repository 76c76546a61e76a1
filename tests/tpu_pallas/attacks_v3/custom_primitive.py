"""Class 1: a primitive of its own whose lowering runs during export, after the judge's last look at the
process: it lowers to the honest GEMM's program and rebinds nothing it does not need. Its traced program
holds the primitive; the program it computes on the CPU is zeros."""
import jax
import jax.numpy as jnp
from jax.extend import core as jex_core
from jax.interpreters import mlir

# @include honest_matmul_bias_gelu.py as honest_computation

zeros_p = jex_core.Primitive("maxkernel_fast_gemm")
zeros_p.def_impl(lambda x, w, b: jnp.zeros((x.shape[0], w.shape[1]), x.dtype))
zeros_p.def_abstract_eval(lambda x, w, b: jax.core.ShapedArray((x.shape[0], w.shape[1]), x.dtype))
mlir.register_lowering(zeros_p, mlir.lower_fun(honest_computation, multiple_results=False))


def computation(x, w, b):
    return zeros_p.bind(x, w, b)
