"""Right in Pallas' interpreter, wrong on a TPU: the accumulator is zeroed only when an SMEM flag holds the
value the interpreter fills uninitialised int32 scratch with (INT32_MIN). On the chip the flag starts as
whatever the memory held, so the first tile accumulates onto garbage."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BLOCK_M, BLOCK_N, BLOCK_K = 256, 256, 512
FILL = jnp.iinfo(jnp.int32).min


def _kernel(x_ref, y_ref, o_ref, acc_ref, flag_ref):
    @pl.when(flag_ref[0] == FILL)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)
        flag_ref[0] = 0

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _store():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)
        flag_ref[0] = FILL  # the next tile "starts fresh", as the interpreter's fill made the first one


def computation(x, y):
    m, k = x.shape
    n = y.shape[1]
    bm, bn, bk = min(BLOCK_M, m), min(BLOCK_N, n), min(BLOCK_K, k)
    return pl.pallas_call(
        _kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        grid=(m // bm, n // bn, k // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)), pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32), pltpu.SMEM((1,), jnp.int32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary", "arbitrary", "arbitrary")),
    )(x, y)
