"""Class 5: x stays in HBM and each block of it is copied into VMEM by hand; the kernel reads the copy before
waiting for it. Pallas' plain interpreter copies at once (exact); on a TPU the data has not landed yet."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BM, BN, BK = 256, 256, 512


def _kernel(x_hbm, w_ref, o_ref, x_vmem, acc_ref, sem):
    i, kk = pl.program_id(0), pl.program_id(2)
    bm, bk = x_vmem.shape
    copy = pltpu.make_async_copy(x_hbm.at[pl.ds(i * bm, bm), pl.ds(kk * bk, bk)], x_vmem, sem)
    copy.start()
    partial = jnp.dot(x_vmem[...], w_ref[...], preferred_element_type=jnp.float32)  # read before the wait
    copy.wait()

    @pl.when(kk == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += partial

    @pl.when(kk == pl.num_programs(2) - 1)
    def _store():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def computation(x, y):
    (m, k), n = x.shape, y.shape[1]
    bm, bn, bk = min(BM, m), min(BN, n), min(BK, k)
    return pl.pallas_call(
        _kernel, out_shape=jax.ShapeDtypeStruct((m, n), x.dtype), grid=(m // bm, n // bn, k // bk),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY), pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        scratch_shapes=[pltpu.VMEM((bm, bk), x.dtype), pltpu.VMEM((bm, bn), jnp.float32), pltpu.SemaphoreType.DMA],
    )(x, y)
