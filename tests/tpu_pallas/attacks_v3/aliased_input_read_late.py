"""Class 5: the output is aliased to x (input_output_aliases), and each row of output blocks is written
before the same rows of x are read again for the next column. Pallas' plain interpreter keeps x apart from
the output it writes (exact); on a TPU they are one buffer, and the later reads see the output."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BM, BN, BK = 256, 256, 128


def _kernel(x_ref, w_ref, o_ref, acc_ref):
    kk = pl.program_id(2)

    @pl.when(kk == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)

    @pl.when(kk == pl.num_programs(2) - 1)
    def _store():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def computation(x, y):
    (m, k), n = x.shape, y.shape[1]
    bm, bn, bk = min(BM, m), min(BN, n), min(BK, k)
    return pl.pallas_call(
        _kernel, out_shape=jax.ShapeDtypeStruct((m, n), x.dtype), grid=(m // bm, n // bn, k // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)), pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)), scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        input_output_aliases={0: 0},
    )(x, y)
