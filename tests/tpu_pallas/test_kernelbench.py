"""KernelBench-style modules as tasks and as candidates: weights as inputs, derived small sizes, unverified,
scalar outputs, PyTorch modules declined with the reason."""

from __future__ import annotations

import numpy as np
import pytest
from maxkernel_core import Candidate, EvalStatus, TaskError

from maxkernel_pallas_judge import tasks
from maxkernel_pallas_judge.judge.evaluator import Evaluator
from maxkernel_pallas_judge.judge.small_size import derive, ordered_shrink, shrink
from maxkernel_pallas_judge.judge.task_module import load_task_module, read_by_computation, size_constants
from maxkernel_pallas_judge.sandbox.pool import Limits
from maxkernel_tpu_pallas.tpu_platform import TPU

from .conftest import HERE, kernel_source

FOLDER = HERE / "kernelbench"


def load(name: str):
    return tasks.load_task_at(FOLDER / name)


def test_a_kernelbench_module_loads_as_a_task_with_kernelbenchs_tolerance():
    task = load("gemm_bias_relu.py")
    assert (task.id, task.format, task.atol, task.rtol) == ("gemm_bias_relu", "kernelbench", 1e-2, 1e-2)
    assert "Linear layer with bias" in task.description
    refs = tasks.discover(FOLDER)
    by_id = {r.id: r for r in refs}
    assert {"gemm_bias_relu", "mse_loss", "relu_sizes_inline", "torch_module"} <= {r.id for r in refs if not r.problem}
    assert by_id["torch_module"].format == "pytorch"


def test_without_torchax_a_pytorch_module_is_declined_saying_what_to_install(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torchax" else real(name, *a))
    with pytest.raises(TaskError, match=r"needs torchax .*maxkernel\[torch\]"):
        load("torch_module.py")


def test_a_module_missing_a_part_is_refused_naming_it(tmp_path):
    text = (FOLDER / "mse_loss.py").read_text().replace("def get_init_inputs():", "def get_init_inputs_x():")
    (tmp_path / "no_init.py").write_text(text + "\n# def get_init_inputs\n")
    with pytest.raises(TaskError, match=r"missing: get_init_inputs\(\)"):
        tasks.load_task_at(tmp_path / "no_init.py")


def test_weights_become_inputs_and_constant_ones_are_drawn_at_random():
    task = load("gemm_bias_relu.py")
    module = load_task_module(task.metadata, "kb_test_weights")
    (dynamic, (names, init)), = [module._mk_inputs()]
    assert names == ("weight", "bias") and init == (4096, 256)
    weight, bias = (np.asarray(a) for a in dynamic[:2])
    assert weight.shape == (4096, 256) and weight.std() > 0 and np.abs(weight).max() <= 1 / np.sqrt(256) + 1e-6
    assert bias.std() > 0 and dynamic[2].shape == (2048, 4096)


def test_a_small_size_keeps_divisibility_and_equal_dims_equal():
    assert [shrink(v, 128) for v in (8192, 1000, 4095, 100, 3)] == [128, 232, 255, 100, 3]
    assert shrink((32768, 8192), 512) == (512, 512)
    shrunk = ordered_shrink({"rows": 32768, "width": 4096, "same": 4096, "shape": (32768,), "k": 3}, 512)
    assert shrunk == {"rows": 1024, "width": 512, "same": 512, "shape": (1024,), "k": 3}
    source = "batch_size = 1024\nflag = True\nscale = 0.5\nshape = (8, 4096)\nCONFIG = {'M': 2048, 'name': 'x'}\n"
    assert size_constants(source) == {"batch_size": 1024, "shape": (8, 4096), "CONFIG['M']": 2048}


def test_a_size_written_as_integer_arithmetic_is_a_size_constant():
    """KernelBench's level 1 writes N = 2048 * 2: folded as written, never run; names and floats are not folded."""
    source = ("N = 2048 * 2\nM = 1 << 12\nP = 2**10 + 3\nshape = (64 * 2, 8)\nQ = N * 2\nR = 2 ** 10 ** 10\n"
              "eps = 1e-5 * 2\n")
    assert size_constants(source) == {"N": 4096, "M": 4096, "P": 1027, "shape": (128, 8)}

def test_constants_the_computation_reads_are_not_sizes():
    source = (
        "groups = 64\nchannels = 64\nCONFIG = {'heads': 16, 'seq': 4096}\n"
        "class Model:\n    def __init__(self, channels):\n        self.c = channels\n"
        "    def forward(self, x):\n        return x.reshape(groups, -1)\n"
        "def workload(x):\n    return x * CONFIG['heads']\n"
        "def get_inputs():\n    return [channels, CONFIG['seq']]\n")
    assert read_by_computation(source) >= {"groups", "CONFIG['heads']"}
    assert not read_by_computation(source) & {"channels", "CONFIG['seq']"}  # a parameter; inputs only



def test_the_computation_is_what_its_entry_reaches_not_a_benchmark_beside_it():
    """JAXBench's priority baselines have a benchmark() that reads every size: it is not the computation."""
    source = (
        "CONFIG = {'M': 8192, 'N': 4096, 'heads': 8}\n"
        "def _scale(x):\n    return x / CONFIG['heads']\n"
        "def workload(a):\n    return _scale(a)\n"
        "def create_inputs():\n    return [CONFIG['M'], CONFIG['N']]\n"
        "def benchmark():\n    return CONFIG['M'] * CONFIG['N'] * CONFIG['heads']\n")
    assert read_by_computation(source) >= {"CONFIG['heads']", "_scale"}  # reached through a helper
    assert not read_by_computation(source) & {"CONFIG['M']", "CONFIG['N']"}

def test_the_derived_size_is_the_gentlest_under_the_limit():
    task = load("gemm_bias_relu.py")
    module, how = derive(task.metadata, 40 << 20)
    # distinct sizes stay distinct and in order: 4096 would meet 2048's 512, so it keeps its own (1024)
    assert module.batch_size == 512 and module.in_features == 1024 and module.out_features == 256
    assert "batch_size 2048->512" in how and "in_features 4096->1024" in how
    none, why = derive(load("relu_sizes_inline.py").metadata, 20 << 20)
    assert none is None and "no size constants" in why


@pytest.fixture(scope="module")
def evaluator():
    ev = Evaluator(Limits(platform=TPU.spec), fresh_inputs=1, spares=1)
    yield ev
    ev.close()


def judge(evaluator, task_name: str, kernel: str, edit: tuple[str, str] | None = None):
    """The verdict on a kernel of tests/tpu_pallas/kernelbench/kernels (with one text replaced, if given)."""
    task = load(task_name)
    code = kernel_source(kernel, FOLDER / "kernels")
    if edit is not None:
        assert edit[0] in code
        code = code.replace(*edit)
    return evaluator.evaluate(task, Candidate(task.id, code), target="v5e")


@pytest.mark.slow
def test_a_modelnew_answer_is_judged_at_full_size_and_checked_at_the_derived_size(evaluator):
    ev = judge(evaluator, "gemm_bias_relu.py", "gemm_bias_relu_modelnew.py")
    assert ev.status == EvalStatus.OK, ev.reason
    assert "derived small size (batch_size 2048->512" in ev.reason
    assert ev.details["compile"]["device_kind"]  # compiled at the full size for the target


@pytest.mark.slow
def test_a_kernel_that_ignores_the_tasks_weights_is_incorrect(evaluator):
    ev = judge(evaluator, "gemm_bias_relu.py", "cheat_ignores_weights.py")
    assert ev.status == EvalStatus.INCORRECT, ev.reason


@pytest.mark.slow
def test_a_weight_kept_in_a_shape_of_its_own_gets_the_tasks_values_in_that_shape(evaluator, tmp_path):
    ev = judge(evaluator, "gemm_bias_relu.py", "gemm_bias_relu_own_layout.py")
    assert ev.status == EvalStatus.OK, ev.reason
    # JAXBench's set_weights takes PyTorch's (out, in) layout: a task or answer defining one is never handed its
    # own (in, out) weights, which it would transpose
    torch_layout = (FOLDER / "gemm_bias_relu.py").read_text().replace("    def forward(self, x):", (
        "    def set_weights(self, weights_dict):\n"
        "        for name, value in weights_dict.items():\n"
        "            setattr(self, name, jnp.transpose(value) if name == 'weight' else jnp.array(value))\n\n"
        "    def forward(self, x):"), 1)
    assert "def set_weights" in torch_layout
    (tmp_path / "gemm_bias_relu.py").write_text(torch_layout)
    task = tasks.load_task_at(tmp_path / "gemm_bias_relu.py")
    code = kernel_source("gemm_bias_relu_own_layout.py", FOLDER / "kernels")
    ev = evaluator.evaluate(task, Candidate(task.id, code), target="v5e")
    assert ev.status == EvalStatus.OK, ev.reason


@pytest.mark.slow
def test_work_left_in_jnp_is_refused_as_such_when_the_check_size_does_not_even_trace(evaluator):
    ev = judge(evaluator, "gemm_bias_relu.py", "jnp_gemm_full_size_only.py")
    assert ev.status == EvalStatus.REJECTED, ev.reason
    assert ev.reason.startswith("matmul/conv FLOPs") and "(besides, tracing computation() at check size 1" in ev.reason
    assert [c.name for c in ev.checks if not c.passed] == ["trace", "proof_of_kernel"]


@pytest.mark.slow
def test_a_kernel_failing_only_at_the_smallest_derived_size_is_checked_closer_to_the_full_size(evaluator):
    ev = judge(evaluator, "rows_relu.py", "rows_relu_in_groups.py")
    assert ev.status == EvalStatus.OK, ev.reason
    assert "rows 8192->2048" in ev.reason  # 256 rows per group, where the first size left 128
    assert "rows 8192->1024" in ev.details["smaller_check_size"]["note"]
    # a kernel wrong at every size is still refused, with the first size's reason
    ev = judge(evaluator, "rows_relu.py", "rows_relu_in_groups.py", edit=("jnp.maximum(x_ref[...], 0.0)", "x_ref[...]"))
    assert ev.status == EvalStatus.INCORRECT and "rows 8192->1024" not in ev.reason, ev.reason
    assert "smaller_check_size" not in ev.details


@pytest.mark.slow
def test_with_no_size_small_enough_the_verdict_is_unverified_not_incorrect(evaluator):
    ev = judge(evaluator, "relu_sizes_inline.py", "relu_modelnew.py")
    assert ev.status == EvalStatus.UNVERIFIED and not ev.ok, ev.reason
    assert "no small size could be derived" in ev.reason
    assert "inputs and outputs (40 MiB)" in ev.reason  # 20 MiB in, 20 MiB out: a call's outputs count too


@pytest.mark.slow
def test_a_scalar_output_is_compared_like_any_other(evaluator):
    ev = judge(evaluator, "mse_loss.py", "mse_computation.py")
    assert ev.status == EvalStatus.OK, ev.reason
    bad = judge(evaluator, "mse_loss.py", "mse_computation.py", ("/ predictions.size", "/ predictions.shape[0]"))
    assert bad.status == EvalStatus.INCORRECT and "output 0" in bad.reason


@pytest.mark.slow
def test_a_name_the_installed_jax_lacks_gets_its_alternative_in_the_reason(evaluator):
    ev = judge(evaluator, "mse_loss.py", "mse_computation.py", ("pltpu.CompilerParams(", "pltpu.TPUCompilerParamz("))
    assert ev.status == EvalStatus.COMPILE_ERROR
    assert "API of the installed jax: jax " in ev.reason and "has no pltpu.TPUCompilerParamz" in ev.reason
    assert "CompilerParams" in ev.reason.split("API of the installed jax")[1]


@pytest.mark.slow
def test_a_pytorch_task_runs_through_torchax_and_takes_a_jax_answer(evaluator):
    ev = judge(evaluator, "torch_module.py", "torch_linear_relu_modelnew.py")
    assert ev.status == EvalStatus.OK, ev.reason


@pytest.mark.slow
def test_a_translation_that_differs_from_pytorch_stops_the_task(evaluator):
    with pytest.raises(TaskError, match="differs from PyTorch's own output"):
        evaluator.reference(load("torch_mistranslated.py"), "v5e")


@pytest.mark.slow
def test_a_pytree_of_outputs_with_integers_is_judged_leaf_by_leaf(evaluator):
    ev = judge(evaluator, "argmax_and_max.py", "argmax_and_max.py")
    assert ev.status == EvalStatus.OK, ev.reason
    off_by_one = judge(evaluator, "argmax_and_max.py", "argmax_and_max.py",
                       ('"index": index[:, 0]', '"index": index[:, 0] + 1'))
    assert off_by_one.status == EvalStatus.INCORRECT and "output 0" in off_by_one.reason
