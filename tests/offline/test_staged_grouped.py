"""Grouped matmuls inside a staged program: lax.ragged_dot, and a loop over groups that is one, on one kernel."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from maxkernel_tpu_offline.staged import epilogue as staged_epilogue
from maxkernel_tpu_offline.staged import grouped as staged_grouped
from maxkernel_tpu_offline.staged import grouped_match as staged_grouped_match
from maxkernel_tpu_offline.staged import runtime as staged_runtime
from maxkernel_synthesis.ir import Declined
from maxkernel_tpu_offline.staged.describe import describe
from maxkernel_tpu_offline.staged.template import analyse_staged

from ..helpers import assert_close
from .test_staged_paged import _Pallas

GMM = Path(__file__).parents[2] / "jaxbench" / "11p_Megablox_GMM"


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def grouped(monkeypatch):
    """The grouped kernel in the TPU interpreter (it scalar-prefetches its item table); returns a setter for its
    tile constants."""
    monkeypatch.setattr(staged_grouped, "pl", _Pallas())

    def sizes(rows=None, columns=None, weight_bytes=None):
        for name, value in (("GROUPED_ROWS", rows), ("GROUPED_COLUMNS", columns),
                            ("GROUPED_WEIGHT_BYTES", weight_bytes)):
            if value is not None:
                monkeypatch.setattr(staged_grouped, name, value)

    return sizes


def _pallas_calls(fn, *args) -> list:
    return [e for e in jax.make_jaxpr(fn)(*args).jaxpr.eqns if e.primitive.name == "pallas_call"]


@pytest.mark.parametrize("m, k, n, sizes, dtype, tiles", [
    (256, 128, 256, [100, 0, 60, 96], jnp.bfloat16, {}),  # one tile, three groups on it and an empty one
    # rows past the tiles (200 in tiles of 64), N and K in several blocks, rows past the last group left zero
    (200, 384, 384, [37, 0, 90, 20, 10], jnp.float32, {"rows": 64, "columns": 128, "weight_bytes": 128 * 128 * 4}),
    (512, 128, 128, [0, 300, 0, 212], jnp.float32, {"rows": 64}),  # a group over five tiles, empty first group
])
def test_the_grouped_kernel_is_ragged_dot(grouped, m, k, n, sizes, dtype, tiles):
    grouped(**tiles)
    keys = jax.random.split(jax.random.key(len(sizes)), 2)
    lhs = jax.random.normal(keys[0], (m, k), dtype)
    rhs = (jax.random.normal(keys[1], (len(sizes), k, n)) / k ** 0.5).astype(dtype)
    group_sizes = jnp.asarray(sizes, jnp.int32)
    got = jax.jit(staged_grouped._ragged_dot_on_kernel, static_argnums=3)(lhs, rhs, group_sizes, dtype)
    want = lax.ragged_dot(lhs, rhs, group_sizes, preferred_element_type=jnp.float32).astype(dtype)
    tol = 2e-2 if dtype == jnp.bfloat16 else 1e-5
    np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=tol, atol=tol)
    assert not np.asarray(got[sum(sizes):]).any()  # rows of no group are zeros
    assert len(_pallas_calls(lambda *a: staged_grouped._ragged_dot_on_kernel(*a, dtype), lhs, rhs, group_sizes)) == 1


def test_work_items_visit_each_tile_once_per_group_on_it():
    """Tiles of 4 rows, 3 tiles; groups of 6, 0, 2 and 0 rows: group 0 on tiles 0 and 1, group 2 on tile 1 after
    it, tile 2 under no group (visited once, not live: written as zeros); the table's 3 entries past the 4 items
    repeat tile 2."""
    sizes = jnp.array([6, 0, 2, 0], jnp.int32)
    count, items = staged_grouped._grouped_items(jnp.cumsum(sizes) - sizes, sizes, 3, 4)
    tile, group, live, first, last, lo, hi = (np.asarray(a).tolist() for a in items)
    assert int(count) == 4  # the grid's run-time extent: the entries past it are never visited
    assert tile == [0, 1, 1, 2, 2, 2, 2]
    assert live == [1, 1, 1, 0, 0, 0, 0]
    assert first == [1, 1, 0, 1, 0, 0, 0] and last[:4] == [1, 0, 1, 1]  # the last item stores its tile
    assert group[:3] == [0, 0, 2] and set(group[3:]) == {2}  # a dead item keeps the last live item's weights
    assert (lo[:3], hi[:3]) == ([0, -4, 2], [6, 2, 4])  # each live item's rows, relative to its tile


def _gmm():
    return _module(GMM / "reference.py", "gmm_reference")


def test_a_loop_over_groups_runs_as_one_grouped_kernel(grouped):
    """11p's reference (a scan of windowed matmuls over uneven groups, some empty) is one kernel, exact, and the
    kernel writes the M rows the program keeps: no scan, no slice of a larger carry."""
    grouped(rows=64)
    ref = _gmm()
    (lhs, rhs, sizes), (window,) = ref.get_inputs(size="small", seed=3)
    assert int((sizes == 0).sum()) > 0 and len(set(np.asarray(sizes).tolist())) > 2

    def program(a, b, c):
        return ref.computation(a, b, c, window)

    staged = staged_runtime._with_kernels(program, 3)
    np.testing.assert_array_equal(np.asarray(jax.jit(staged)(lhs, rhs, sizes), np.float32),
                                  np.asarray(jax.jit(program)(lhs, rhs, sizes), np.float32))
    eqns = jax.make_jaxpr(staged)(lhs, rhs, sizes).jaxpr.eqns
    names = [e.primitive.name for e in eqns]
    assert names.count("pallas_call") == 1 and "scan" not in names and "while" not in names
    assert eqns[names.index("pallas_call")].outvars[0].aval.shape == (lhs.shape[0], rhs.shape[2])


def _plans(program, *args):
    closed = jax.make_jaxpr(program)(*args)
    flat, _ = staged_epilogue._flattened(closed.jaxpr, closed.consts, list(args))
    return staged_grouped_match._grouped_scans(flat)


def _loop(starts_of=None, init=0.0, mask_axis=0, weights_at=lambda i, g: i, offset=0):
    """11p's loop with one thing changed: where the starts come from, the carry's first value, the axis the mask
    runs along, which group's weights a step reads, where its update lands."""
    def program(lhs, rhs, sizes):
        m, k = lhs.shape
        g, _, n = rhs.shape
        window = 16
        starts = starts_of(sizes) if starts_of else jnp.concatenate([jnp.zeros(1, jnp.int32), jnp.cumsum(sizes)[:-1]])
        rows = lax.broadcasted_iota(jnp.int32, (window, n), mask_axis)

        def step(out, i):
            x = lax.dynamic_slice(lhs, (starts[i], 0), (window, k))
            p = jnp.where(rows < sizes[i], jnp.dot(x, rhs[weights_at(i, g)], preferred_element_type=jnp.float32), 0.0)
            current = lax.dynamic_slice(out, (starts[i], 0), (window, n))
            at = starts[i] + offset if offset else starts[i]
            return lax.dynamic_update_slice(out, current + p.astype(out.dtype), (at, 0)), None

        out, _ = lax.scan(step, jnp.full((m + window, n), init, lhs.dtype), jnp.arange(g))
        return out[:m]

    return program


def test_only_a_loop_that_is_a_grouped_matmul_is_read_as_one():
    args = (jnp.ones((64, 128)), jnp.ones((4, 128, 128)), jnp.array([16, 0, 30, 18], jnp.int32))
    assert [p.window for p in _plans(_loop(), *args).values()] == [16]
    assert next(iter(_plans(_loop(starts_of=lambda s: jnp.cumsum(s) - s), *args).values())).sliced is not None
    for changed in (_loop(starts_of=lambda s: jnp.cumsum(s)),  # inclusive: not each group's first row
                    _loop(starts_of=lambda s: jnp.zeros_like(s)),  # every group at row 0
                    _loop(init=1.0),  # the carry does not start at zero
                    _loop(mask_axis=1),  # the mask keeps columns, not the group's rows
                    _loop(weights_at=lambda i, g: (i + 1) % g),  # another group's weights
                    _loop(offset=1)):  # the update lands a row below the window it read
        assert _plans(changed, *args) == {}


def test_a_loop_read_otherwise_still_runs_exactly(grouped):
    """A loop the matcher leaves alone runs as the reference's scan with its matmul on the matmul kernel."""
    from .test_staged import _interpret

    with pytest.MonkeyPatch.context() as patch:
        _interpret(patch)
        args = (jax.random.normal(jax.random.key(0), (64, 128)), jax.random.normal(jax.random.key(1), (4, 128, 128)),
                jnp.array([16, 0, 30, 18], jnp.int32))
        program = _loop(offset=1)
        got = jax.jit(staged_runtime._with_kernels(program, 3))(*args)
        assert_close(got, jax.jit(program)(*args), rtol=1e-5, atol=1e-4)


def test_the_planner_describes_the_grouped_kernel_the_judge_extracts():
    from maxkernel_pallas_judge.profiling.extract import describe_kernels

    ref = _gmm()
    (lhs, rhs, sizes), (window,) = ref.get_inputs(size="small")

    def program(a, b, c):
        return ref.computation(a, b, c, window)

    spec = analyse_staged(jax.make_jaxpr(program)(lhs, rhs, sizes))
    assert [(mm.source, mm.groups, mm.m, mm.k, mm.n) for mm in spec.matmuls] == [("grouped matmul", 16, 1024, 256, 256)]
    planned = describe(spec, {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128})
    extracted = describe_kernels(jax.make_jaxpr(staged_runtime._with_kernels(program, 3))(lhs, rhs, sizes))
    assert len(planned) == len(extracted) == 1
    assert planned[0]["grid"] == extracted[0]["grid"] == [1, None, 1]  # as many steps as work items: run time
    assert planned[0]["dynamic_axes"] == extracted[0]["dynamic_axes"] == [1]
    # ranked as the judge estimates it: the item axis charged the trips that reach the reference's matmul work
    # (its 16 windows of 128 rows: 2,048 rows of products, 8 tiles of 256), not one
    from maxkernel_tpu_pallas.costmodel.costmodel import resolve_dynamic_grid

    assert spec.matmul_flops == 2 * 16 * 128 * 256 * 256
    assert resolve_dynamic_grid(planned[0], spec.matmul_flops)["grid"] == [1, 8, 1]
    for mine, judged in zip(planned[0]["operands"], extracted[0]["operands"], strict=True):
        assert (mine["role"], mine["block_shape"], mine["dtype"]) == (judged["role"], judged["block_shape"],
                                                                      judged["dtype"])
        assert mine["changes"] is judged["changes"] is None  # blocks chosen by the item table: data-dependent


def test_ragged_dot_is_planned_on_the_grouped_kernel_in_its_own_form_only():
    x, w, g = jnp.ones((64, 128)), jnp.ones((4, 128, 256)), jnp.full((4,), 16, jnp.int32)
    spec = analyse_staged(jax.make_jaxpr(lambda x, w, g: jnp.tanh(lax.ragged_dot(x, w, g)))(x, w, g))
    assert [(mm.source, mm.groups, mm.m, mm.k, mm.n) for mm in spec.matmuls] == [("ragged_dot", 4, 64, 128, 256)]
    assert list(spec.ops_left) == ["tanh"]  # the grouped product is the kernel's, not left to XLA
    with pytest.raises(Declined, match="integer ragged_dot"):
        xi, wi = x.astype(jnp.int8), w.astype(jnp.int8)
        analyse_staged(jax.make_jaxpr(lambda x, w, g: lax.ragged_dot(x, w, g))(xi, wi, g))
