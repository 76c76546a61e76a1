"""JAXBench's own layout loads as it is: a folder of ``<id>/baseline.py`` workloads (a clone's ``benchmark/``)
is a suite, each workload a task named after its folder, its inputs made as JAXBench's runner makes them
(bfloat16), plain Python values among them kept static; and a task of ours states the same workload."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import pytest

from maxkernel_pallas_judge import tasks
from maxkernel_pallas_judge.judge import inputs
from maxkernel_pallas_judge.sandbox.pool import Limits
from maxkernel_tpu_pallas.tpu_platform import TPU

from ..helpers import run_cli

HERE = Path(__file__).parent
FOLDER = HERE / "published_format"
OURS = HERE.parents[1] / "jaxbench"


def abstract(task):
    module = inputs.load_module(task.metadata["module"], f"published_format_{task.id}")
    shapes, static = inputs.abstract_full(module, task.metadata)
    return module, [(tuple(s.shape), s.dtype.name) for s in shapes], static


def test_the_folder_is_a_suite_of_workloads_named_by_their_folders():
    refs = tasks.discover(FOLDER)
    assert [(r.id, r.format, r.dtype, r.problem) for r in refs] == [
        ("8p_GEMM", "jaxbench", "bfloat16", None), ("90x_Grouped_Rows", "jaxbench", "bfloat16", None),
        ("91x_Small_GEMM", "jaxbench", "bfloat16", None)]


def test_our_task_states_the_published_workload_shapes_dtypes_and_flops():
    theirs = tasks.load_task_at(FOLDER / "8p_GEMM")
    ours = tasks.load_task_at(OURS / "8p_GEMM")
    their_module, their_shapes, _ = abstract(theirs)
    our_module, our_shapes, _ = abstract(ours)
    assert their_shapes == our_shapes == [((8192, 8192), "bfloat16"), ((8192, 28672), "bfloat16")]
    assert their_module.get_flops() == our_module.get_flops()
    out = jax.eval_shape(their_module.workload, *[jax.ShapeDtypeStruct(s, d) for s, d in their_shapes])
    assert (out.shape, out.dtype.name) == ((8192, 28672), "bfloat16")


def test_a_python_int_among_the_inputs_stays_static_and_the_reference_traces():
    task = tasks.load_task_at(FOLDER / "90x_Grouped_Rows")
    _, shapes, static = abstract(task)
    assert shapes == [((1024, 256), "bfloat16"), ((8,), "int32")] and static == (128,)
    from maxkernel_pallas_judge.judge.evaluator import Evaluator

    evaluator = Evaluator(Limits(platform=TPU.spec), fresh_inputs=1, spares=0)
    try:
        ref = evaluator.reference(task, "v5e")  # traced abstractly, the int still an int: no __index__ error
    finally:
        evaluator.close()
    assert ref.static_full == [128] or ref.static_full == {"__tuple__": [128]}
    assert ref.outputs and ref.outputs[0][0].shape == (8, 256)


KERNEL = '''
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _kernel(x_ref, w_ref, b_ref, o_ref):
    y = jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32) + b_ref[...].astype(jnp.float32)
    o_ref[...] = jnp.maximum(y, 0).astype(o_ref.dtype)


def workload(x, w, b):  # named as JAXBench's optimized.py files name theirs
    return pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct((x.shape[0], w.shape[1]), x.dtype))(
        x, w, b.reshape(1, -1))
'''


@pytest.mark.slow
def test_bench_over_the_folder_runs_its_workloads(tmp_path):
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    (kernels / "91x_Small_GEMM.py").write_text(KERNEL)
    result = run_cli("bench", "--suite", str(FOLDER), "--tasks", "91x_*", "--kernels", str(kernels),
                     "--out", str(tmp_path / "out"), env={"MAXKERNEL_HOME": str(tmp_path / "home")}, timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = json.loads((tmp_path / "out" / "results.json").read_text())["tasks"]
    assert [(r["task_id"], r["status"]) for r in rows] == [("91x_Small_GEMM", "correct")]
