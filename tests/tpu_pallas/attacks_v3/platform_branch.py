"""Class 2: one program by the public API, two behaviours: the CPU program runs the honest kernel, the TPU
program one that contracts only three quarters of K (a quarter less work, a wrong answer)."""
import jax
import jax.numpy as jnp
from jax import lax

# @include honest_matmul_bias_gelu.py as honest_computation


def _short(x, w, b):
    k = x.shape[1] * 3 // 4
    return honest_computation(x[:, :k], w[:k], b)


def computation(x, w, b):
    return lax.platform_dependent(x, w, b, cpu=honest_computation, default=_short)
