"""What a spare does before its first job, so that a candidate pays none of it.

Importing JAX is only part of a cold start: the first jit compile initialises
XLA's CPU compiler, the first interpret-mode pallas_call builds its machinery,
and the first TPU compile loads Mosaic and libtpu's compiler. A trivial kernel
through each path moves those one-time costs out of the candidate's time.
Only trusted code runs here, before any task or candidate is loaded.
"""

from __future__ import annotations


def warm_compilers(target: str = "v5e") -> None:
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    from .platform.compile import compile_for_target

    def double(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0

    def kernel(x):
        return pl.pallas_call(double, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    x = jnp.ones((8, 128), jnp.float32)
    if jax.default_backend() != "tpu":
        with pltpu.force_tpu_interpret_mode(pltpu.InterpretParams()):
            jax.block_until_ready(kernel(x))
    else:
        jax.block_until_ready(jax.jit(kernel)(x))
    compile_for_target(kernel, [jax.ShapeDtypeStruct(x.shape, x.dtype)], target, source_file="<warm-up>")
