"""The XLA side of the speed model, on programs libtpu really compiled (deviceless): ops, loops, kernels, bytes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from maxkernel_tpu_pallas.costmodel.calibration.fitset import compiled_program
from maxkernel_tpu_pallas.costmodel.chip import chip_figures
from maxkernel_tpu_pallas.costmodel.hlo_program import describe_program
from maxkernel_tpu_pallas.costmodel.params import shipped_params
from maxkernel_tpu_pallas.costmodel.xla_model import estimate_program


def sds(shape, dtype=jnp.bfloat16):
    return jax.ShapeDtypeStruct(shape, dtype)


def program(fn, shapes, target="v6e", **kw):
    text, cost = compiled_program(fn, shapes, target)
    return describe_program(text, **kw), cost


def test_a_gemm_with_its_epilogue_is_one_mxu_bound_fusion():
    described, _ = program(lambda x, w, b: jax.nn.relu(x @ w + b), [sds((4096, 4096)), sds((4096, 4096)), sds((4096,))])
    est = estimate_program(described, chip_figures("v6e"), shipped_params("v6e"))
    gemm = max(est.ops, key=lambda o: o.flops)
    assert gemm.flops == pytest.approx(2 * 4096 ** 3)
    assert gemm.unit == "mxu" and gemm.seconds > 2 * 4096 ** 3 / chip_figures("v6e")["bf16_ops_per_second"]
    assert est.seconds == pytest.approx(sum(o.seconds for o in est.ops))


def test_a_loop_is_charged_every_trip():
    def chunks(x, w):  # a lax.map over 8 row chunks: XLA's own cost analysis counts its body once
        return jax.lax.map(lambda c: c @ w, x.reshape(8, 512, 1024))

    described, cost = program(chunks, [sds((4096, 1024)), sds((1024, 1024))])
    dots = [o for o in described["ops"] if o["dots"]]
    assert dots and all(o["trips"] == 8 for o in dots)
    flops = sum(2 * d["m"] * d["n"] * d["k"] * d["count"] * d["batch"] * o["trips"] for o in dots for d in o["dots"])
    assert flops == pytest.approx(2 * 4096 * 1024 * 1024)
    assert cost["flops"] < 0.5 * flops  # what the old estimate missed


def test_an_in_place_update_moves_its_update_not_its_buffer():
    def scatter_rows(buf, rows):
        return jax.lax.fori_loop(0, 4, lambda i, b: jax.lax.dynamic_update_slice(b, rows * i, (i * 256, 0)), buf)

    described, _ = program(scatter_rows, [sds((65536, 1024)), sds((256, 1024))])
    in_loop = [o for o in described["ops"] if o["trips"] == 4]
    assert in_loop and sum(o["hbm_bytes"] for o in in_loop) <= 4 * 256 * 1024 * 2  # a 512 KiB update, not 128 MiB


def test_a_batched_matmul_spelled_as_a_dilated_convolution_counts_its_real_taps():
    described, _ = program(lambda q, k: jnp.einsum("bhqd,bhkd->bhqk", q, k),
                           [sds((2, 8, 512, 128)), sds((2, 8, 512, 128))])
    flops = sum(2 * d["m"] * d["n"] * d["k"] * d["count"] * d["batch"] for o in described["ops"] for d in o["dots"])
    assert flops == pytest.approx(2 * 2 * 8 * 512 * 512 * 128)


def test_a_shallow_convolution_folds_its_window_into_one_contraction():
    conv = lambda x, w: jax.lax.conv_general_dilated(x, w, (1, 1), "VALID")  # noqa: E731
    described, _ = program(conv, [sds((8, 3, 64, 64)), sds((16, 3, 3, 3))])
    (dot,) = [d for o in described["ops"] for d in o["dots"]]
    assert dot["k"] * dot["count"] == 27 and dot["count"] == 1  # 3 channels x 9 taps in one pass, not 9 of K=3


def test_xlas_own_mosaic_kernel_is_read_with_its_grid():
    """XLA writes a softmax feeding a matmul as its own Mosaic kernel (online softmax); its grid and work count."""

    def attention(q, k, v):
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k)
        return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)

    described, _ = program(attention, [sds((1, 8, 2048, 128))] * 3)
    kernels = [o for o in described["ops"] if o["kernel"]]
    if not kernels:
        pytest.skip("this libtpu does not rewrite the softmax into its own kernel")
    (kernel,) = kernels
    assert kernel["steps"] > 1 and kernel["transcendental"] >= 8 * 2048 * 2048
    assert kernel["hbm_bytes"] >= 3 * 8 * 2048 * 128 * 2  # q, k and v at least once each


def test_a_candidates_glue_leaves_its_kernels_out_and_charges_unknown_loops_the_worst_case():
    from jax.experimental import pallas as pl

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    def candidate(x, n):
        y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
        return jax.lax.while_loop(lambda c: c[1] < n, lambda c: (c[0] + 1, c[1] + 1), (y, 0))[0]

    text, _ = compiled_program(candidate, [sds((256, 128), jnp.float32), sds((), jnp.int32)], "v5e")
    glue = describe_program(text, skip_kernels=True, unknown_trips=4096)
    assert not any(o["kernel"] for o in glue["ops"])
    assert any(o["trips"] == 4096 for o in glue["ops"]) and any("4096" in n for n in glue["notes"])
    assert any(o["kernel"] for o in describe_program(text)["ops"])


def test_xlas_ragged_dot_kernel_is_charged_the_work_items_that_cover_its_output():
    """XLA lowers lax.ragged_dot to its own Mosaic kernel whose grid walks work items counted only at run time;
    read with that axis at one trip it was one 256-row tile of the product (16x too fast here)."""
    m, k, n, groups = 4096, 1024, 2048, 8
    described, _ = program(lambda x, w, s: jax.lax.ragged_dot(x, w, s, preferred_element_type=jnp.float32),
                           [sds((m, k)), sds((groups, k, n)), sds((groups,), jnp.int32)])
    kernels = [o for o in described["ops"] if o["kernel"] and o["dots"]]
    if not kernels:
        pytest.skip("this libtpu does not lower ragged_dot to a Mosaic kernel")
    (kernel,) = kernels
    flops = sum(2 * d["m"] * d["n"] * d["k"] * d["batch"] * d["count"] for d in kernel["dots"])
    assert flops >= 2 * m * k * n  # every row meets one group's matrix, at least
    assert kernel["hbm_bytes"] >= m * n * 4  # the f32 output written once, at least
    assert any("run-time grid axis charged" in note for note in described["notes"])
