"""The staged template: matmuls and convolutions on a Pallas kernel, the rest of the reference left to XLA."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from jax import lax
from jax.experimental import pallas as pl
from maxkernel_core import EvalStatus, Plan

from maxkernel_tpu_offline.staged import attention as staged_attention
from maxkernel_tpu_offline.staged import conv as staged_conv
from maxkernel_tpu_offline.staged import matmul as staged_matmul
from maxkernel_tpu_offline.staged import planar as staged_planar
from maxkernel_tpu_offline.staged import runtime as staged_runtime
from maxkernel_synthesis.ir import Declined
from maxkernel_synthesis.task import OfflineDeclined
from maxkernel_tpu_offline.staged.template import analyse_staged

from ..helpers import assert_close
from .test_synthesizer import _task, offline_session

TASKS = Path(__file__).parent / "tasks"


@pytest.fixture
def interpret(monkeypatch):
    """Run the runtime's kernels in Pallas' interpreter on CPU (the judge does the same for candidates)."""
    _interpret(monkeypatch)


def _interpret(patch):
    """Interpret mode and small blocks (several grid steps on every axis) for the staged kernels' modules."""

    class _Pallas:
        def __getattr__(self, name):
            return getattr(pl, name)

        def pallas_call(self, *args, **kwargs):
            return pl.pallas_call(*args, interpret=True, **kwargs)

    for module in (staged_matmul, staged_conv, staged_planar, staged_attention):
        patch.setattr(module, "pl", _Pallas())
    patch.setattr(staged_matmul, "BLOCK_M", 16)
    patch.setattr(staged_matmul, "BLOCK_K", 128)
    patch.setattr(staged_attention, "FLASH_BLOCK_Q", 64)
    patch.setattr(staged_attention, "FLASH_BLOCK_K", 128)
    patch.setattr(staged_attention, "FLASH_SCORE_BYTES", 64 * 128 * 4 * 2)  # two heads a step


def _close(got, want):
    assert_close(got, want, rtol=1e-4, atol=1e-4)  # a bf16 output at bf16's resolution


CONVS = [  # (lhs shape, rhs shape, keyword arguments of lax.conv_general_dilated)
    ((2, 9, 9, 5), (3, 3, 5, 7), dict(window_strides=(2, 1), padding="SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    ((2, 4, 10, 11), (6, 4, 3, 2), dict(window_strides=(1, 1), padding=((1, 2), (0, 1)), rhs_dilation=(2, 1))),
    ((2, 6, 8, 8), (8, 3, 3, 3), dict(window_strides=(1, 1), padding="VALID", feature_group_count=2)),
    ((1, 5, 4, 6, 4), (3, 3, 3, 4, 3), dict(window_strides=(1, 1, 1), padding=((2, 1),) * 3, lhs_dilation=(2, 2, 2),
                                            dimension_numbers=("NDHWC", "DHWIO", "NCDHW"))),
    ((3, 16, 2), (3, 2, 4), dict(window_strides=(1,), padding="VALID", dimension_numbers=("NWC", "WIO", "NWC"))),
    ((2, 7, 3), (4, 3, 5), dict(window_strides=(1,), padding=((2, 2),), lhs_dilation=(2,),
                                dimension_numbers=("NWC", "WIO", "NWC"))),
    ((2, 7, 3), (2, 3, 5), dict(window_strides=(1,), padding=((0, 3),), lhs_dilation=(3,),
                                dimension_numbers=("NWC", "WIO", "NCW"))),
]


@pytest.mark.parametrize("lhs, rhs, kwargs", CONVS, ids=["strided-nhwc", "rhs-dilated", "grouped", "transposed-3d",
                                                           "1d", "transposed-k4-s2", "transposed-window-under-stride"])
def test_convolutions_lower_to_the_matmul_kernel_exactly(interpret, lhs, rhs, kwargs):
    _check_conv(lhs, rhs, kwargs)


def _check_conv(lhs, rhs, kwargs, seed=0):
    """The runtime's convolution (on the kernels, interpreted) against lax's own, at full precision."""
    kx, kw = jax.random.split(jax.random.key(seed))
    x, w = jax.random.normal(kx, lhs), jax.random.normal(kw, rhs)

    def conv(x, w):
        return lax.conv_general_dilated(x, w, **kwargs)

    with jax.default_matmul_precision("highest"):
        want = conv(x, w)
        got = jax.jit(staged_runtime._with_kernels(conv, 2))(x, w)
    assert got.shape == want.shape
    _close(got, want)


DIRECT = [  # 2-D stride-1 convolutions the direct kernel takes (no im2col): widths on and off the sublane tile
    ((2, 10, 16, 32), (3, 3, 32, 8), dict(window_strides=(1, 1), padding="VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    ((2, 16, 9, 11), (24, 16, 3, 2), dict(window_strides=(1, 1), padding="SAME")),  # NCHW/OIHW, width 12 -> 16
    ((2, 5, 6, 20, 16), (3, 2, 3, 16, 8), dict(window_strides=(1, 1, 1), padding="VALID",
                                               dimension_numbers=("NDHWC", "DHWIO", "NDHWC"))),  # 3-D
    ((1, 24, 4, 7, 5), (8, 24, 2, 3, 3), dict(window_strides=(1, 1, 1), padding="SAME")),  # NCDHW, 3-D, padded
    ((2, 7, 18, 16), (3, 3, 16, 8), dict(window_strides=(1, 1), padding="VALID",  # each tap's window read
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    ((1, 16, 4, 5, 34), (8, 16, 3, 2, 3), dict(window_strides=(1, 1, 1), padding="VALID")),  # 3-D windows
]


@pytest.mark.parametrize("lhs, rhs, kwargs", DIRECT, ids=["nhwc-valid", "nchw-same-ragged-width", "ndhwc-valid",
                                                            "ncdhw-same", "nhwc-windows", "ncdhw-windows"])
def test_direct_convolutions_are_exact_and_never_build_patches(interpret, monkeypatch, lhs, rhs, kwargs):
    def no_patches(*args, **kwargs):
        raise AssertionError("im2col was used for a convolution the direct kernel takes")

    monkeypatch.setattr(staged_conv, "_im2col_conv", no_patches)
    monkeypatch.setattr(staged_conv, "DIRECT_ACC_BYTES", 4 * 16 * 128 * 4)  # several row blocks per image
    _check_conv(lhs, rhs, kwargs, seed=1)


def test_few_channels_go_to_their_own_kernel_and_a_huge_image_through_im2col():
    def fits(shape, window=(3, 3), dtype=jnp.bfloat16):
        return staged_conv._direct_conv_takes(shape[1:-1], shape[-1], window, jnp.dtype(dtype).itemsize)

    def few(shape, window=(3, 3), o=64, out=jnp.bfloat16):
        return staged_planar._planar_conv_takes(shape[1:-1], shape[-1], window, o, 2, jnp.dtype(out).itemsize)

    assert fits((128, 130, 130, 64)) and not fits((128, 258, 258, 8))  # JaxBench 18k and 39k
    assert not fits((1, 1024, 1024, 128))  # 256 MiB of image: over the VMEM budget
    assert fits((16, 34, 66, 66, 32), (3, 3, 3))  # JaxBench 33k: three 66 x 80 x 128-lane planes
    assert not fits((128, 26, 34, 34, 3), (3, 3, 3))  # 25k: 3 channels
    assert few((128, 256, 256, 8)) and few((128, 128, 128, 8))  # 39k, 46k: 8 channels
    assert not few((128, 130, 130, 64)) and not few((128, 26, 34, 34, 3), (3, 3, 3))  # 18k (direct), 25k (3-D)
    assert not few((128, 256, 256, 8), out=jnp.float32)  # an f32 output of 2 x 16 MiB: over its budget
    assert not few((1, 30, 30, 3), (11, 3))  # a window over 9 rows: a row group would read past two tiles


FEW = [  # 2-D stride-1 convolutions with fewer than 16 channels
    ((2, 8, 20, 19), (16, 8, 3, 3), "VALID", ("NCHW", "OIHW", "NCHW")),  # 18 rows: two groups and a tail of 2
    ((3, 10, 12, 3), (5, 3, 3, 24), "SAME", ("NHWC", "HWIO", "NHWC")),  # 3 channels (padded to 8), padded
    ((1, 9, 40, 130), (1, 9, 5, 2), ((1, 1), (0, 1)), ("NCHW", "OIHW", "NHWC")),  # a 5-row window, 2 lane tiles
]


@pytest.mark.parametrize("lhs, rhs, padding, spec", FEW, ids=["nchw-valid", "nhwc-same-3-channels", "tall-window"])
def test_few_channel_convolutions_are_exact_on_their_kernel(interpret, monkeypatch, lhs, rhs, padding, spec):
    def no_patches(*args, **kwargs):
        raise AssertionError("im2col was used for a convolution the few-channel kernel takes")

    monkeypatch.setattr(staged_conv, "_im2col_conv", no_patches)
    _check_conv(lhs, rhs, dict(window_strides=(1, 1), padding=padding, dimension_numbers=spec), seed=2)


def test_the_few_channel_kernel_takes_nchw_data_and_its_tail_as_the_reference_writes_them(interpret):
    """39k's and 46k's shape of program: NCHW data transposed to NHWC for the convolution, a bias, GELU and
    the global mean after it (39k) or a bias and the transpose back (46k). The kernel reads the NCHW image
    itself (the two transposes cancel), applies the tail channels first, writes per-channel sums for the
    mean (only its division runs after it), and nothing elementwise runs after it; exact."""
    keys = jax.random.split(jax.random.key(7), 3)
    x, w, b = (jax.random.normal(keys[0], (2, 8, 11, 14)), jax.random.normal(keys[1], (16, 8, 3, 3)),
               jax.random.normal(keys[2], (16,)))

    def conv(x, w):
        return lax.conv_general_dilated(jnp.transpose(x, (0, 2, 3, 1)), jnp.transpose(w, (2, 3, 1, 0)), (1, 1),
                                        "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))

    programs = {"gelu-mean": (lambda x, w, b: jnp.mean(jax.nn.gelu(conv(x, w) + b), axis=(1, 2)), (2, 16, 1)),
                "to-nchw": (lambda x, w, b: jnp.transpose(conv(x, w) + b, (0, 3, 1, 2)) * 2, (2, 16, 9, 12)),
                "to-nchw-sum": (lambda x, w, b: jnp.sum(jnp.transpose(conv(x, w), (0, 3, 1, 2)), (2, 3)), (2, 16, 1))}
    for name, (program, written) in programs.items():
        closed = jax.make_jaxpr(staged_runtime._with_kernels(program, 3))(x, w, b)
        (kernel,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "pallas_call"]
        after = {e.primitive.name for e in closed.jaxpr.eqns[closed.jaxpr.eqns.index(kernel) + 1:]}
        assert kernel.outvars[0].aval.shape == written, name  # NCHW, or per-channel sums
        assert not after & {"add", "mul", "tanh", "erf", "reduce_sum"}, (name, after)
        with jax.default_matmul_precision("highest"):
            _close(jax.jit(staged_runtime._with_kernels(program, 3))(x, w, b), program(x, w, b))


def test_the_direct_kernel_reads_the_input_without_padding_it_where_it_can():
    """Whole rows and shifted products when W is a whole number of sublane tiles (18k: 128), each tap's own
    window when the windows end at W (33k: 66 = 64 + 2); either way no zero columns are added in HBM."""
    g = staged_conv._direct_geometry((130, 128), 64, (3, 3), 128, 2)
    assert g["shifted"] and g["width"] == 128 and g["k"] == 192 and g["dots"] == 3
    g = staged_conv._direct_geometry((34, 66, 66), 32, (3, 3, 3), 64, 2)
    assert not g["shifted"] and g["width"] == 66 and g["k"] == 864 and g["dots"] == 1
    assert staged_conv._direct_geometry((7, 18), 16, (3, 3), 8, 4)["shifted"] is False  # the test case above


@pytest.mark.parametrize("spec, lhs, rhs", [
    ("bqhd,bkhd->bhqk", (2, 24, 3, 8), (2, 40, 3, 8)),
    ("ijk,kjl->il", (20, 3, 136), (136, 3, 130)),
    ("i,i->", (300,), (300,)),
])
def test_any_dot_general_runs_on_the_kernel(interpret, spec, lhs, rhs):
    kx, kw = jax.random.split(jax.random.key(1))
    x, w = jax.random.normal(kx, lhs), jax.random.normal(kw, rhs)
    fn = lambda x, w: jnp.einsum(spec, x, w)  # noqa: E731
    closed = jax.make_jaxpr(staged_runtime._with_kernels(fn, 2))(x, w)
    assert "pallas_call" in str(closed) and "dot_general" not in str(closed.jaxpr.eqns[-1])
    with jax.default_matmul_precision("highest"):
        _close(jax.jit(staged_runtime._with_kernels(fn, 2))(x, w), fn(x, w))


def _gqa(q, k, v, bias, mask):
    """Grouped-query attention as JAXBench writes it: k and v repeated over the query heads."""
    g = q.shape[1] // k.shape[2]
    scores = jnp.einsum("nhqd,nkhd->nhqk", q, jnp.repeat(k, g, axis=2)) * 0.125 + bias
    probs = jax.nn.softmax(jnp.where(mask, scores, -1e30), axis=-1)
    return jnp.einsum("nhqk,nkhd->nqhd", probs, jnp.repeat(v, g, axis=2))


@pytest.mark.parametrize("queries, bias_shape", [(1, (4, 1, 1, 256)), (24, (256,)), (24, (4, 8, 24, 256))],
                         ids=["decode", "lane-bias", "full-bias"])
def test_a_repeated_operand_is_read_once_with_its_group_as_rows(interpret, queries, bias_shape):
    """jnp.repeat of k and v over the heads is not materialised: the other operand's heads split into (kv head,
    group) and the group joins its rows, so every kernel runs over n x kv heads. A decode's probabilities @ v
    (one column) are swapped onto the rows. A lane bias over the keys stops the fold only where it would
    have to repeat (it is over N there), and the result is exact either way."""
    ks = jax.random.split(jax.random.key(3), 5)
    q = jax.random.normal(ks[0], (4, 8, queries, 128))
    k, v = (jax.random.normal(key, (4, 256, 2, 128)) for key in ks[1:3])
    bias = jax.random.normal(ks[3], bias_shape)
    mask = jax.random.bernoulli(ks[4], 0.8, (4, 1, 1, 256))
    closed = jax.make_jaxpr(staged_runtime._with_kernels(_gqa, 5))(q, k, v, bias, mask)
    calls = [e for e in closed.jaxpr.eqns if e.primitive.name == "pallas_call"]
    batches = {u.aval.shape[0] for e in calls for u in e.invars if u.aval.ndim == 3}  # a lane vector's is 1
    assert len(calls) == 2 and batches <= {4 * 2, 1}
    with jax.default_matmul_precision("highest"):
        _close(jax.jit(staged_runtime._with_kernels(_gqa, 5))(q, k, v, bias, mask), _gqa(q, k, v, bias, mask))


def test_a_fold_that_would_repeat_a_lane_vector_repeats_the_operand_instead(interpret):
    """The repeated operand on the lhs puts the group on N, where a lane vector (a bias over N) cannot follow it:
    the operand is repeated back and the product is the reference's."""
    ks = jax.random.split(jax.random.key(4), 3)
    k, q, bias = jax.random.normal(ks[0], (2, 2, 40, 128)), jax.random.normal(ks[1], (2, 6, 24, 128)), \
        jax.random.normal(ks[2], (24,))
    numbers = (([3], [3]), ([0, 1], [0, 1]))  # (n, kv head, keys, d) . (n, head, queries, d) -> (n, head, keys, queries)
    tail = staged_matmul._Tail(lambda acc, sides: acc + sides[0], ["lane"], [bias], jnp.float32)
    got = staged_matmul._dot_general_on_kernel(k, q, dimension_numbers=numbers, out_dtype=jnp.float32, tail=tail,
                                               fold=(0, 1, 3))
    with jax.default_matmul_precision("highest"):
        _close(got, lax.dot_general(jnp.repeat(k, 3, axis=1), q, numbers) + bias)


def test_matmuls_inside_scans_and_loops_reach_the_kernel(interpret):
    def fn(x, ws):
        h, _ = lax.scan(lambda h, w: (jnp.tanh(h @ w), None), x, ws)
        return lax.fori_loop(0, 2, lambda i, h: h @ ws[0], h)

    x, ws = jax.random.normal(jax.random.key(2), (32, 128)), jax.random.normal(jax.random.key(3), (3, 128, 128)) / 11
    closed = jax.make_jaxpr(staged_runtime._with_kernels(fn, 2))(x, ws)
    from maxkernel_pallas_judge.judge.work import work_stats

    stats = work_stats(closed)
    assert stats["glue_flops"] == 0 and stats["kernel_flops"] >= 5 * 2 * 32 * 128 * 128
    with jax.default_matmul_precision("highest"):
        _close(jax.jit(staged_runtime._with_kernels(fn, 2))(x, ws), fn(x, ws))


@given(n=st.integers(1, 1 << 20), target=st.sampled_from([2 ** i for i in range(3, 12)]),
       align=st.sampled_from([8, 16, 32, 128]))
def test_staged_blocks_are_always_legal(n, target, align):
    """A block divides the (possibly zero-padded) extent, and is aligned and within the target, or whole."""
    block, padded = staged_matmul._tile(n, target, align)
    assert padded >= n and padded % block == 0 and padded - n < block
    assert block == padded == n or (block % align == 0 and block <= max(target, align))


def test_the_planners_kernel_descriptions_are_what_the_judge_extracts(monkeypatch):
    """The VMEM the planner ranks by is the VMEM of the kernels the runtime emits: an f32 output under
    preferred_element_type (bf16 inputs) counts 4 bytes, not the inputs' 2 (9p's first point overflowed)."""
    from maxkernel_pallas_judge.profiling.extract import describe_kernels

    from maxkernel_tpu_offline.staged.describe import describe

    def program(x, w, img, f, vol, g, few, e, q, k, v, mask):
        h = jnp.dot(x, w, preferred_element_type=jnp.float32)
        c = lax.conv_general_dilated(img, f, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        c = jnp.transpose(c, (0, 3, 1, 2))  # stored channels first by the kernel
        d = lax.conv_general_dilated(vol, g, (1, 1, 1), "VALID", dimension_numbers=("NDHWC", "DHWIO", "NDHWC"))
        # im2col (strided) with a ragged output width (30): rows grow past BLOCK_M, the width to 32
        i = lax.conv_general_dilated(few, e, (2, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        p = lax.conv_general_dilated(few, e, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        p = jnp.sum(jnp.tanh(p), axis=(1, 2))  # summed in the kernel: per-channel sums are all it writes
        return h, c, d, i, p, _gqa(q, k, v, 0.5, mask)  # a decode: repeats folded, probabilities @ v swapped

    args = (jax.ShapeDtypeStruct((1024, 512), jnp.bfloat16), jax.ShapeDtypeStruct((512, 2048), jnp.bfloat16),
            jax.ShapeDtypeStruct((2, 16, 16, 128), jnp.float32), jax.ShapeDtypeStruct((3, 3, 128, 256), jnp.float32),
            jax.ShapeDtypeStruct((2, 6, 10, 20, 32), jnp.bfloat16),
            jax.ShapeDtypeStruct((3, 3, 3, 32, 64), jnp.bfloat16),
            jax.ShapeDtypeStruct((8, 34, 32, 4), jnp.bfloat16), jax.ShapeDtypeStruct((3, 3, 4, 32), jnp.bfloat16),
            jax.ShapeDtypeStruct((2, 8, 1, 128), jnp.bfloat16), *[jax.ShapeDtypeStruct((2, 256, 2, 128), jnp.bfloat16)] * 2,
            jax.ShapeDtypeStruct((2, 1, 1, 256), jnp.bool_))
    point = {"BLOCK_M": 256, "BLOCK_N": 1024, "BLOCK_K": 256, "VMEM_LIMIT_BYTES": 32 << 20}
    for name, value in point.items():
        for module in (staged_matmul, staged_conv):
            monkeypatch.setattr(module, name, value, raising=name in vars(module))
    planned = describe(analyse_staged(jax.make_jaxpr(program)(*args)), point)
    emitted = describe_kernels(jax.make_jaxpr(staged_runtime._with_kernels(program, 12))(*args))
    assert len(planned) == len(emitted) == 7

    def vmem_view(kernel):
        return [(o["role"], o["block_shape"], o["dtype"]) for o in kernel["operands"]], kernel["grid"]

    assert [vmem_view(k) for k in planned] == [vmem_view(k) for k in emitted]
    assert planned[0]["operands"][2]["dtype"] == "float32"
    assert planned[1]["operands"][-1]["block_shape"] == [1, 256, 16, 16]  # NCHW: a whole image's output a step
    assert planned[3]["operands"][0]["block_shape"] == [1, 8 * 16 * 32, 36]  # all 8 images' rows in one step
    # 4 channels: one image a step, channels first, its 32 columns computed as a whole lane tile
    assert planned[4]["operands"][0]["block_shape"] == [1, 4, 34, 128] and planned[4]["grid"] == [8]
    assert planned[4]["operands"][-1]["block_shape"] == [1, 32, 1]
    assert planned[4]["body"]["dots"][0] | {"dtype": None} == {"m": 32, "n": 8 * 128, "k": 9 * 8, "batch": 1,
                                                              "dtype": None, "count": 4}  # 32 rows: 4 groups
    # n x kv heads = 4 products each, small enough to run all in one step of the batched kernel
    assert [(k["grid"], k["operands"][0]["block_shape"][0]) for k in planned[5:]] == [([1], 4), ([1], 4)]
    assert planned[6]["operands"][0]["block_shape"][1] == 4  # the group's 4 probability rows, not 128 x 1


def test_declines_programs_with_no_matmul():
    x = jnp.ones((64, 128))
    with pytest.raises(Declined, match="no matmul or convolution"):
        analyse_staged(jax.make_jaxpr(lambda x: jnp.exp(x))(x))


def test_a_program_mostly_outside_its_matmul_is_declined_with_the_share(tmp_path):
    body = "y = x\n    for _ in range(60):\n        y = jnp.sin(y) + y\n    return jax.lax.conv(y, w, (1, 1), 'SAME')"
    session, backend = offline_session(tmp_path, _task(tmp_path, body))
    try:
        with pytest.raises(OfflineDeclined, match=r"no staged kernels: \d+% of the arithmetic is outside the matmuls"):
            session.plan()
    finally:
        backend.close()


@pytest.mark.slow
@pytest.mark.parametrize("task_name, target", [("conv_batchnorm", "v5e"),
                                               pytest.param("conv_batchnorm", "v6e", marks=pytest.mark.second_chip),
                                               # in the suite, the debugger's test below takes the same
                                               # template on the same task to an ok verdict
                                               pytest.param("mlp_scan", "v5e", marks=pytest.mark.jaxbench_full),
                                               ("attention_projected", "v6e"),
                                               ("paged_decode", "v6e"), ("grouped_experts", "v6e")])
def test_staged_kernels_pass_the_cascade(tmp_path, task_name, target):
    session, backend = offline_session(tmp_path, TASKS / task_name, target)
    try:
        plan = session.plan()
        assert plan.decisions["template"] == "staged", plan.decisions
        candidate = session.implement(plan)
        assert "template: staged" in candidate.code and "def _matmul_kernel(" in candidate.code
        for name, value in plan.parameters.items():
            assert f"{name} = {value}" in candidate.code
        verdict = session.repair(candidate, session.evaluate(candidate), max_attempts=4).evaluation
        assert verdict.status is EvalStatus.OK, verdict.reason
        proof = next(c for c in verdict.checks if c.name == "proof_of_kernel")
        assert proof.passed and "of the reference's work" in proof.message
        if task_name == "paged_decode":  # Mosaic took the page copies and the strided head reads at full size
            assert "def _paged_kernel(" in candidate.code and verdict.details["compile"]["device_kind"] == "TPU v6 lite"
        if task_name == "grouped_experts":  # the three ragged_dots on the grouped kernel, compiled at full size
            assert "def _grouped_kernel(" in candidate.code and verdict.details["compile"]["device_kind"] == "TPU v6 lite"
            assert "with its 3 grouped matmul(s) (one kernel each) on Pallas" in " ".join(candidate.code.split())
    finally:
        backend.close()


@pytest.mark.slow
def test_debugger_shrinks_staged_blocks_after_a_real_vmem_overflow(tmp_path):
    session, backend = offline_session(tmp_path, TASKS / "mlp_scan")
    try:
        assert session.plan().decisions["template"] == "staged"
        oversized = Plan(session.task.id, "too big on purpose", {"template": "staged"},
                         {"BLOCK_M": 1024, "BLOCK_N": 2048, "BLOCK_K": 1024, "VMEM_LIMIT_BYTES": 16 << 20})
        # Overflows 16 MiB on libtpu; one halving of BLOCK_N fits (each evaluation compiles the scan: ~15 s).
        candidate = session.implement(oversized)
        verdict = session.evaluate(candidate)
        assert verdict.status is EvalStatus.COMPILE_ERROR and "vmem" in verdict.reason.lower()
        fixed = session.repair(candidate, verdict, max_attempts=6)
        assert fixed.evaluation.ok, fixed.evaluation.reason
        assert fixed.candidate.parameters["BLOCK_N"] < 2048 and fixed.candidate.provenance.role == "debug"
    finally:
        backend.close()


def test_large_im2col_patches_are_built_one_block_of_the_batch_at_a_time(interpret, monkeypatch):
    monkeypatch.setattr(staged_conv, "PATCH_BYTES", 40_000)  # the 4 images' patches take 4 x 28.8 kB
    x, w = jax.random.normal(jax.random.key(4), (4, 10, 10, 8)), jax.random.normal(jax.random.key(5), (3, 3, 8, 16))

    def conv(x, w):  # dilated: not a kind the direct or the few-channel kernel takes
        return lax.conv_general_dilated(x, w, (1, 1), "SAME", rhs_dilation=(2, 1),
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))

    closed = jax.make_jaxpr(staged_runtime._with_kernels(conv, 2))(x, w)
    (scan,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "scan"]
    assert scan.params["length"] == 4  # one image per step
    with jax.default_matmul_precision("highest"):
        _close(jax.jit(staged_runtime._with_kernels(conv, 2))(x, w), conv(x, w))


@pytest.mark.parametrize("width, stored_first", [(16, True), (18, True), (140, False)],
                         ids=["whole-rows", "tap-windows", "rows-past-a-lane-tile"])
def test_a_transpose_to_nchw_after_a_direct_convolution_is_the_kernels_store(interpret, monkeypatch, width,
                                                                            stored_first):
    """18k's shape of program: NCHW in, the convolution in NHWC, a bias and relu, the transpose back to NCHW and
    a per-channel bias after it. The direct kernel stores its tiles channels first (several row blocks per
    image), the whole tail fused: no transposing copy after it. Rows past 128 columns keep the NHWC store
    and leave the tail to XLA; exact either way."""
    monkeypatch.setattr(staged_conv, "DIRECT_ACC_BYTES", 4 * 16 * 128 * 4)
    keys = jax.random.split(jax.random.key(6), 4)
    x, w = jax.random.normal(keys[0], (2, 16, 7, width)), jax.random.normal(keys[1], (24, 16, 3, 3))
    b, c = jax.random.normal(keys[2], (24,)), jax.random.normal(keys[3], (24, 1, 1))

    def program(x, w, b, c):
        y = lax.conv_general_dilated(jnp.transpose(x, (0, 2, 3, 1)), jnp.transpose(w, (2, 3, 1, 0)), (1, 1), "VALID",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jnp.transpose(jax.nn.relu(y + b), (0, 3, 1, 2)) * c + 0.5

    closed = jax.make_jaxpr(staged_runtime._with_kernels(program, 4))(x, w, b, c)
    (kernel,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "pallas_call"]
    after = [e.primitive.name for e in closed.jaxpr.eqns[closed.jaxpr.eqns.index(kernel) + 1:]]
    assert (kernel.outvars[0].aval.shape == (2, 24, 5, width - 2)) == stored_first
    assert ("transpose" not in after and "mul" not in after) == stored_first
    with jax.default_matmul_precision("highest"):
        _close(jax.jit(staged_runtime._with_kernels(program, 4))(x, w, b, c), program(x, w, b, c))


def test_only_a_2d_convolutions_nhwc_to_nchw_transpose_joins_its_tail():
    from maxkernel_tpu_offline.staged.epilogue import _epilogue_plan

    def tails(program, *shapes):
        closed = jax.make_jaxpr(program)(*[jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes])
        return [[closed.jaxpr.eqns[j].primitive.name for j in tail] for _, tail, _ in _epilogue_plan(closed.jaxpr).values()]

    def conv(x, w, spec=("NHWC", "HWIO", "NHWC")):
        return lax.conv_general_dilated(x, w, (1,) * (x.ndim - 2), "VALID", dimension_numbers=spec)

    assert tails(lambda x, w: jnp.transpose(conv(x, w) * 2, (0, 3, 1, 2)) + 1, (1, 6, 6, 16), (3, 3, 16, 8)) == [
        ["mul", "transpose", "add"]]
    assert tails(lambda x, w: jnp.transpose(conv(x, w) * 2, (0, 3, 2, 1)), (1, 6, 6, 16), (3, 3, 16, 8)) == [["mul"]]
    assert tails(lambda x, w: jnp.transpose(conv(x, w, ("NDHWC", "DHWIO", "NDHWC")) * 2, (0, 4, 1, 2, 3)),
                 (1, 5, 6, 6, 16), (3, 3, 3, 16, 8)) == [["mul"]]
    # a bias along the rows after the transpose ends the tail there
    assert tails(lambda x, w, r: jnp.transpose(conv(x, w), (0, 3, 1, 2)) + r, (1, 6, 6, 16), (3, 3, 16, 8),
                 (1, 1, 4, 1)) == [["transpose"]]
