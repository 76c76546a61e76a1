"""``maxkernel calibrate``'s micro-benchmarks: short programs that each lean on one part of the model.

Each benchmark is a program the model can describe (``fitset.describe``) and
the chip can run: copies at several block sizes (HBM bandwidth, grid-step
overhead), bf16 matmuls at several blocks (MXU efficiency), an f32 matmul (the
passes of Mosaic's f32 matmul), element-op and exp chains (VPU, EUP), a
small-op loop in XLA (the launch cost of an XLA op), and a flash-attention
kernel (how the units overlap). On a TPU each is timed from device traces; the
same suite is described on any machine, so timings measured elsewhere can be
fitted here (``--from-timings``).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from attrs import frozen
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from .programs import splash_attention, tiled_matmul


@frozen
class Bench:
    name: str
    shapes: tuple[tuple[tuple[int, ...], str], ...]
    kernels: bool  # Pallas kernels (described from the trace) or a plain XLA program

    def build(self):
        fn = BUILDERS[self.name]()
        return fn, [jax.ShapeDtypeStruct(s, d) for s, d in self.shapes]

    def inputs(self, seed: int = 0):
        keys = jax.random.split(jax.random.key(seed), len(self.shapes))
        return [jax.random.normal(k, s, d) for k, (s, d) in zip(keys, self.shapes, strict=True)]


def _copy(rows: int):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    def copy(x):
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(x.shape[0] // rows,),
                              in_specs=[pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0))],
                              out_specs=pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0)),
                              # in and out, double-buffered: 32 MiB at 2048 rows, over v5e's 16 MiB default
                              compiler_params=pltpu.CompilerParams(vmem_limit_bytes=64 << 20))(x)

    return copy


def _chain(steps: int, op):
    """``steps`` rounds of ``op`` on each element of (512 x 1024) f32 blocks."""

    def kernel(x_ref, o_ref):
        x = x_ref[...]
        for _ in range(steps):
            x = op(x)
        o_ref[...] = x

    def chain(x):
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(x.shape[0] // 512,),
                              in_specs=[pl.BlockSpec((512, x.shape[1]), lambda i: (i, 0))],
                              out_specs=pl.BlockSpec((512, x.shape[1]), lambda i: (i, 0)))(x)

    return chain


def _narrow_matmul(bm: int, bn: int):
    """x's (bm x K) row block stays in VMEM while (K x bn) column blocks of y stream past: the MXU's time
    for outputs only ``bn`` wide (how the MXU pads a narrow N) against a light HBM stream."""

    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32).astype(o_ref.dtype)

    def matmul(x, y):
        (m, k), n = x.shape, y.shape[1]
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((m, n), x.dtype), grid=(m // bm, n // bn),
                              in_specs=[pl.BlockSpec((bm, k), lambda i, j: (i, 0)),
                                        pl.BlockSpec((k, bn), lambda i, j: (0, j))],
                              out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
                              compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary"),
                                                                   vmem_limit_bytes=64 << 20))(x, y)

    return matmul


def _small_ops(trips: int):
    """A loop of tiny XLA ops: each trip a few launches that move almost nothing."""

    def loop(x):
        return jax.lax.fori_loop(0, trips, lambda i, y: jnp.tanh(y * 1.0001 + 0.5) - 0.25, x)

    return loop


BUILDERS = {
    "copy_rows8": functools.partial(_copy, 8), "copy_rows64": functools.partial(_copy, 64),
    "copy_rows512": functools.partial(_copy, 512), "copy_rows2048": functools.partial(_copy, 2048),
    "matmul_bf16_128": functools.partial(tiled_matmul, 128, 128, 128),
    "matmul_bf16_256": functools.partial(tiled_matmul, 256, 512, 256),
    "matmul_bf16_1024": functools.partial(tiled_matmul, 512, 1024, 1024),
    "matmul_f32_512": functools.partial(tiled_matmul, 512, 512, 512),
    "matmul_f32_2048": functools.partial(tiled_matmul, 2048, 256, 2048, vmem_limit_bytes=100 << 20),
    "matmul_bf16_n128": functools.partial(_narrow_matmul, 2048, 128),
    "vpu_chain": functools.partial(_chain, 32, lambda x: x * 1.0001 + 0.5),
    "eup_chain": functools.partial(_chain, 8, jnp.exp),
    "xla_small_ops": functools.partial(_small_ops, 2000),
    "flash_attention": functools.partial(splash_attention, heads=8, seq_q=4096, seq_kv=4096, causal=True,
                                         block_q=1024, block_kv=1024, block_kv_compute=512, layouts=(1, 1, 1),
                                         save_residuals=False, scale=0.088),
}

_BF16, _F32 = "bfloat16", "float32"
SUITE = (
    Bench("copy_rows8", (((16384, 1024), _F32),), True),
    Bench("copy_rows64", (((16384, 1024), _F32),), True),
    Bench("copy_rows512", (((16384, 1024), _F32),), True),
    Bench("copy_rows2048", (((16384, 1024), _F32),), True),
    Bench("matmul_bf16_128", (((4096, 4096), _BF16), ((4096, 4096), _BF16)), True),
    Bench("matmul_bf16_256", (((4096, 4096), _BF16), ((4096, 4096), _BF16)), True),
    Bench("matmul_bf16_1024", (((8192, 8192), _BF16), ((8192, 8192), _BF16)), True),
    Bench("matmul_f32_512", (((4096, 4096), _F32), ((4096, 4096), _F32)), True),
    Bench("matmul_f32_2048", (((8192, 4096), _F32), ((4096, 8192), _F32)), True),
    Bench("matmul_bf16_n128", (((8192, 4096), _BF16), ((4096, 8192), _BF16)), True),
    Bench("vpu_chain", (((8192, 1024), _F32),), True),
    Bench("eup_chain", (((8192, 1024), _F32),), True),
    Bench("xla_small_ops", (((8, 128), _F32),), False),
    Bench("flash_attention", (((2, 4096, 8, 128), _BF16),) * 3, True),
)
BY_NAME = {b.name: b for b in SUITE}


def describe_suite(target: str, names: list[str] | None = None, log=print) -> dict[str, dict]:
    """Each benchmark's description for ``target`` (traces and deviceless compiles: seconds each)."""
    from .fitset import describe

    out = {}
    for bench in SUITE:
        if names is not None and bench.name not in names:
            continue
        log(f"  describing {bench.name}")
        fn, shapes = bench.build()
        out[bench.name] = describe(fn, shapes, target, kernels=bench.kernels)
    return out


def time_suite(trace_root, log=print) -> dict[str, float]:
    """Median device seconds of every benchmark on the attached TPU (jax.profiler device events).
    Written for a TPU host; untested here (no TPU on the build machines)."""
    from maxkernel_pallas_judge.judge.timing import time_on_device

    measured = {}
    for bench in SUITE:
        fn, _ = bench.build()
        timing, _ = time_on_device(fn, [bench.inputs()], trace_root=trace_root / bench.name)
        measured[bench.name] = timing["median_s"]
        log(f"  {bench.name}: {timing['median_s'] * 1e6:,.1f} us (device, median of {timing['runs']})")
    return measured
