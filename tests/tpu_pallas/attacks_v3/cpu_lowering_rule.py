"""Class 2: a CPU-only lowering rule for pallas_call, registered at import: on the CPU every kernel lowers to
the right answer computed in XLA, on the TPU the kernel itself runs (which skips a quarter of K)."""
import jax
import jax.numpy as jnp
from jax._src.pallas import pallas_call as pallas_call_module
from jax.interpreters import mlir

# @include honest_matmul_bias_gelu.py as honest_computation


def _right(x, w, b, **params):
    return [jax.nn.gelu(jnp.dot(x[:, :x.shape[1]], w, preferred_element_type=jnp.float32) + b,
                        approximate=True).astype(x.dtype)]


mlir.register_lowering(pallas_call_module.pallas_call_p, mlir.lower_fun(_right, multiple_results=True),
                       platform="cpu")


def computation(x, w, b):
    k = x.shape[1] * 3 // 4
    return honest_computation(x[:, :k], w[:k], b)
