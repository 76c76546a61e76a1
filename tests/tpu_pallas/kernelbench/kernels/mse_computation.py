"""Mean squared error with the sum of squares in a Pallas kernel (a scalar output), written as a function of
(weights, inputs, static arguments), as the judge calls a KernelBench-style task."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

ROWS = 64


def _kernel(p_ref, t_ref, o_ref):
    @pl.when(pl.program_id(0) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    d = p_ref[...] - t_ref[...]
    o_ref[...] += jnp.sum(d * d, axis=0, keepdims=True)


def computation(predictions, targets, *_static):  # then (weight names, init inputs): none here
    rows = ROWS if predictions.shape[0] % ROWS == 0 else predictions.shape[0]
    spec = pl.BlockSpec((rows, predictions.shape[1]), lambda i: (i, 0))
    partial = pl.pallas_call(
        _kernel, out_shape=jax.ShapeDtypeStruct((1, predictions.shape[1]), jnp.float32),
        grid=(predictions.shape[0] // rows,), in_specs=[spec, spec],
        out_specs=pl.BlockSpec((1, predictions.shape[1]), lambda i: (0, 0)),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)),
    )(predictions, targets)
    return jnp.sum(partial) / predictions.size
