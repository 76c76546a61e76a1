"""The checker's work counter on exported programs: loops by trip count, branches at the dearer arm,
composites through their decomposition, unknown ops named, and the Mosaic kernels' grid and matmul work."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax import export

from maxkernel_pallas_judge.judge import program
from maxkernel_pallas_judge.judge.hlo_work import UNBOUNDED_TRIPS, program_work
from maxkernel_tpu_pallas.tpu_platform import TPU

from .conftest import KERNELS, kernel_source

X = jax.ShapeDtypeStruct((128, 256), jnp.float32)
W = jax.ShapeDtypeStruct((256, 128), jnp.float32)
DOT = 2 * 128 * 256 * 128


def work_of(fn, *shapes, platform="tpu"):
    return program_work(export.export(jax.jit(fn), platforms=[platform])(*shapes).mlir_module(), platform=TPU)


def test_a_static_loop_counts_every_trip_and_a_data_dependent_one_its_worst_case():
    fori = work_of(lambda x, w: jax.lax.fori_loop(0, 5, lambda i, a: a + x @ w, jnp.zeros((128, 128))), X, W)
    assert fori["glue_flops"] == 5 * DOT and fori["unbounded_loops"] == 0
    scan = work_of(lambda x, w: jax.lax.scan(lambda c, _: (c + x @ w, None), jnp.zeros((128, 128)), None, 7)[0], X, W)
    assert scan["glue_flops"] == 7 * DOT

    def data_dependent(x, w):
        n = (x[0, 0] * 0).astype(jnp.int32) + 3
        return jax.lax.while_loop(lambda s: s[0] < n, lambda s: (s[0] + 1, s[1] + x @ w), (0, jnp.zeros((128, 128))))[1]

    loop = work_of(data_dependent, X, W)
    assert loop["unbounded_loops"] == 1 and loop["glue_flops"] == UNBOUNDED_TRIPS * DOT


def test_a_branch_is_charged_at_its_dearest_arm():
    work = work_of(lambda p, x, w: jax.lax.cond(p > 0, lambda: x @ w, lambda: jnp.zeros((128, 128))),
                   jax.ShapeDtypeStruct((), jnp.int32), X, W)
    assert work["glue_flops"] == DOT


def test_unknown_ops_are_named_and_composites_counted_through_their_decomposition():
    solve = work_of(lambda a, b: jax.lax.linalg.triangular_solve(a, b, left_side=True, lower=True),
                    jax.ShapeDtypeStruct((128, 128), jnp.float32), jax.ShapeDtypeStruct((128, 64), jnp.float32))
    assert "stablehlo.triangular_solve" in solve["unknown_ops"]
    erf = work_of(lambda x: jax.lax.erf(x) * 2.0, X)
    assert not erf["unknown_ops"] and erf["glue_elementwise"] >= 2 * 128 * 256


class _NamedKernels:
    """A platform whose device program is the judge's interpret-mode export (the tests' stand-in chip)."""

    kernel_functions = True

    def kernel_work(self, call_target, op):
        return None


@pytest.mark.parametrize("kernel", ["honest_matmul.py", "honest_matmul_bias_gelu.py"])
def test_mosaic_kernels_are_counted_and_a_name_is_never_a_kernel(kernel):
    module = {}
    exec(compile(kernel_source(kernel), str(KERNELS / kernel), "exec"), module)
    shapes = ([X, W] if kernel == "honest_matmul.py"
              else [X, W, jax.ShapeDtypeStruct((128,), jnp.float32)])
    closed = jax.make_jaxpr(module["computation"])(*shapes)
    tpu = program_work(export.deserialize(bytearray(TPU.export(closed, "v5e"))).mlir_module(), platform=TPU)
    assert tpu["pallas_calls"] == 1 and tpu["kernel_flops"] == DOT and tpu["kernels"][0]["grid"]
    interpret = export.deserialize(bytearray(program.export_cpu_interpret(closed))).mlir_module()
    stand_in = program_work(interpret, platform=_NamedKernels())
    assert stand_in["pallas_calls"] == 1 and stand_in["kernel_flops"] == DOT
    named = program_work(interpret, platform=TPU)  # on a chip, maxkernel_kernel_N is only a name
    assert named["pallas_calls"] == 0 and named["glue_flops"] >= DOT


def test_a_jnp_gemm_named_like_a_kernel_is_glue():
    def maxkernel_kernel_0(x, w):
        return x @ w

    work = work_of(lambda x, w: jax.jit(maxkernel_kernel_0)(x, w), X, W)
    assert work["pallas_calls"] == 0 and work["glue_flops"] == DOT


def _loop_of(start, stop, step, dtype, cond=lambda i, stop: i < stop):
    def program(x, w):
        def body(s):
            return s[0] + jnp.asarray(step, dtype), s[1] + x @ w

        return jax.lax.while_loop(lambda s: cond(s[0], jnp.asarray(stop, dtype)), body,
                                  (jnp.asarray(start, dtype), jnp.zeros((128, 128))))[1]

    return work_of(program, X, W)


def test_integer_folding_in_the_counters_width_never_undercharges_a_loop():
    assert _loop_of(0, 5, 1, jnp.int8)["glue_flops"] == 5 * DOT  # an honest small loop, exactly counted
    # an int8 counter from 0, stepped by -1, run until it equals 1: it wraps through -128 (255 trips), never 1 trip
    wraps = _loop_of(0, 1, -1, jnp.int8, cond=lambda i, stop: i != stop)
    assert wraps["unbounded_loops"] == 1 and wraps["glue_flops"] == UNBOUNDED_TRIPS * DOT
    # stepped past its type's top (int8 127 + 1 wraps to -128): the count cannot be trusted
    past_top = _loop_of(120, 127, 4, jnp.int8, cond=lambda i, stop: i <= stop)
    assert past_top["unbounded_loops"] == 1
    # a bound that says no trip at all is charged as unknown too
    assert _loop_of(5, 5, 1, jnp.int32)["unbounded_loops"] == 1


def test_a_start_folded_past_its_width_is_unknown_not_a_big_number():
    def program(x, w):
        start = jnp.int16(256) * jnp.int16(256)  # 65536 in Python's integers, 0 in an int16
        return jax.lax.while_loop(lambda s: s[0] < jnp.int16(3), lambda s: (s[0] + jnp.int16(1), s[1] + x @ w),
                                  (start, jnp.zeros((128, 128))))[1]

    work = work_of(program, X, W)
    assert work["unbounded_loops"] == 1 and work["glue_flops"] == UNBOUNDED_TRIPS * DOT


def test_a_matmul_spelled_as_a_product_of_broadcasts_summed_is_matmul_work():
    spelled = work_of(lambda x, w: jnp.sum(x[:, :, None] * w[None, :, :], axis=1), X, W)
    assert spelled["glue_flops"] == DOT and "contraction" in spelled["glue_ops"]
    squares = work_of(lambda x: jnp.sum(x * x, axis=1), X)  # a norm's sum of squares stays element work
    assert squares["glue_flops"] == 0 and squares["glue_elementwise"] > 0


def projection_then_attention(x, w, q, k):
    """A reference in the shape of MLA's: a projection, then the owned attention scores."""
    y = x @ w
    with jax.named_scope("attention"):
        s = jnp.exp(jnp.einsum("bqhd,bkhd->bhqk", q, k))
    return y, s


ATTN = [jax.ShapeDtypeStruct(s, jnp.float32) for s in [(128, 256), (256, 128), (2, 64, 4, 128), (2, 64, 4, 128)]]


def test_the_owned_scope_of_the_reference_is_counted_apart_and_its_dots_are_marked():
    text = export.export(jax.jit(projection_then_attention), platforms=["tpu"])(*ATTN).mlir_module()
    work = program_work(text, "attention", platform=TPU)
    scores = 2 * 2 * 4 * 64 * 64 * 128
    assert work["glue_flops"] == DOT + scores and work["owned_flops"] == scores
    assert work["owned_elementwise"] == 2 * 4 * 64 * 64  # the exp inside the scope
    assert sorted((d["shape"], d["owned"]) for d in work["glue_dots"]) == [
        ("1x256x128x128", False), ("8x128x64x64", True)]
    assert "owned_flops" not in program_work(text, platform=TPU)  # a candidate's scopes are never read


def test_the_proof_allows_the_references_unowned_dots_and_nothing_in_their_place():
    from maxkernel_pallas_judge.judge.proof import verdict

    text = export.export(jax.jit(projection_then_attention), platforms=["tpu"])(*ATTN).mlir_module()
    reference = program_work(text, "attention", platform=TPU)
    as_written = {**program_work(text, platform=TPU), "pallas_calls": 1}  # the projection left in XLA is the reference's own
    assert verdict({**as_written, "glue_flops": DOT, "glue_dots": as_written["glue_dots"][:1],
                    "glue_elementwise": 0}, reference)[0]
    # The same FLOPs as the projection, but the attention's dot: it does not match, and it is over 2%.
    swapped = {**as_written, "glue_flops": DOT, "glue_elementwise": 0,
               "glue_dots": [{"shape": "8x128x64x64", "flops": DOT, "times": 1}]}
    ok, why = verdict(swapped, reference)
    assert not ok and "run in jnp outside pallas_call" in why
    # Twice the projection: the reference has it once, the second counts against the owned attention.
    twice = {**as_written, "glue_flops": 2 * DOT, "glue_elementwise": 0,
             "glue_dots": [{"shape": "1x256x128x128", "flops": DOT, "times": 1}] * 2}
    assert not verdict(twice, reference)[0]
    # Counts past a float's range (nested data-dependent loops at their worst case): refused, not an error.
    huge = {**as_written, "glue_flops": 10**400, "glue_elementwise": 10**400,
            "glue_dots": [{"shape": "1x256x128x128", "flops": 10**400, "times": 10**400}]}
    ok, why = verdict(huge, reference)
    assert not ok and "outside pallas_call" in why


def test_a_static_loop_inside_a_mosaic_kernel_counts_its_trips():
    """A kernel's serialized ops carry their dialect's prefix (``stable_mosaic.arith.constant``): its loop's
    bounds are still constants, so the TPU program's kernel does 5 products, as its interpret twin does, not
    the worst case charged to a loop of unknown trips."""
    from jax.experimental import pallas as pl

    def kernel(x_ref, w_ref, o_ref):
        o_ref[...] = jax.lax.fori_loop(0, 5, lambda i, a: a + jnp.dot(x_ref[...], w_ref[...]),
                                       jnp.zeros((128, 128), jnp.float32))

    def computation(x, w):
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((128, 128), jnp.float32))(x, w)

    closed = jax.make_jaxpr(computation)(X, W)
    tpu = program_work(export.deserialize(bytearray(TPU.export(closed, "v5e"))).mlir_module(), platform=TPU)
    cpu = program_work(export.deserialize(bytearray(program.export_cpu_interpret(closed))).mlir_module(),
                       platform=_NamedKernels())
    assert tpu["kernel_flops"] == cpu["kernel_flops"] == 5 * DOT
