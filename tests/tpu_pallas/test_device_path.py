"""The judge's path on a host with the chip, run end to end with the host CPU standing in for it (``host_chip``):
one device worker holds the chip across jobs, the reference is held and timed there, a candidate's full-size
program is checked against XLA's outputs on the same inputs and timed the same way, and the verdict is
measured/measured. Its times are CPU times: they test the path, never a TPU's speed."""

from __future__ import annotations

import os

import numpy as np
import pytest
from maxkernel_core import Candidate, EvalStatus
from maxkernel_core.speed import phrase, sentence

from ..helpers import REPO
from .conftest import HERE, kernel_source

pytestmark = pytest.mark.slow  # real workers: JAX starts, interpret-mode runs


@pytest.fixture(scope="module")
def chip_evaluator(tmp_path_factory):
    from maxkernel_pallas_judge.judge.evaluator import Evaluator
    from maxkernel_pallas_judge.sandbox.pool import Limits

    from .host_chip import HOST_CHIP

    # the workers import the stand-in platform from this repository's tests package
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), *([saved] if saved else [])])
    evaluator = Evaluator(Limits(timeout_s=240, platform=HOST_CHIP.spec), fresh_inputs=1, spares=0,
                          home=tmp_path_factory.mktemp("home"))
    yield evaluator
    evaluator.close()
    if saved is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = saved


@pytest.fixture(scope="module")
def tiny(tpu_backend):
    return tpu_backend.load_task(HERE / "device_tasks" / "tiny_matmul")


FULL_SIZE_ONLY_WRONG = '''
# @include honest_matmul.py as honest_computation


def computation(x, y):
    out = honest_computation(x, y)
    return out * (1.01 if x.shape[0] == 256 else 1.0)  # the same program at both sizes, but for one literal
'''


def test_an_honest_kernel_is_checked_and_timed_on_the_chip(chip_evaluator, tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("MAXKERNEL_HOME", str(tmp_path))
    ev = chip_evaluator.evaluate(tiny, Candidate(tiny.id, kernel_source("honest_matmul.py")), target="v5e")
    assert ev.status is EvalStatus.OK, ev.reason
    names = [c.name for c in ev.checks]
    assert names[-2:] == ["chip_correctness", "timing"] and all(c.passed for c in ev.checks)
    assert "2 full-size input sets match XLA's reference" in ev.checks[-2].message
    p = ev.profile
    assert not p.estimated and p.source == "device_trace" and p.reference_measured
    assert p.speed.comparison == "measured/measured" and p.speedup == pytest.approx(p.reference_seconds / p.seconds)
    assert p.chip == "cpu (v5e)"  # the device kind jax reports in the device worker, and the target
    timing = ev.details["timing"]
    assert 8 <= timing["runs"] <= 12 and len(timing["times_s"]) == timing["runs"] == timing["calls_checked"]
    assert timing["median_s"] == p.seconds and timing["input_sets"] == 2  # the task's inputs and a fresh set
    assert timing["achieved"]["tflops"] == pytest.approx(2 * 256 * 512 * 256 / p.seconds / 1e12)
    assert os.path.exists(timing["xplane"]) and os.path.exists(timing["reference"]["xplane"])
    # the device time of each call is within the wall time around it, never above it
    assert 0 < p.seconds <= timing["wall_median_s"] * 1.05
    assert ev.estimate is not None and ev.estimate.estimated  # the model's view stays beside it, labelled
    words = phrase(p)
    assert "measured" in words and "measured/measured" in words and any(w in words for w in ("faster", "slower", "level"))
    assert "measured on the chip" in sentence(p, "v5e")


def test_a_kernel_wrong_only_at_full_size_is_refused_on_the_chip(chip_evaluator, tiny):
    ev = chip_evaluator.evaluate(tiny, Candidate(tiny.id, _with_include(FULL_SIZE_ONLY_WRONG)), target="v5e")
    assert ev.status is EvalStatus.INCORRECT, ev.reason  # a CPU passes it: only the full size runs wrong
    assert "at full size (the task's inputs)" in ev.reason and "the kernel is the farther" in ev.reason
    failed = [c for c in ev.checks if not c.passed]
    assert [c.name for c in failed] == ["chip_correctness"]
    assert any(c.name == "correctness" and c.passed for c in ev.checks)  # the CPU check size passed


def test_the_device_worker_is_kept_and_a_dead_one_is_replaced(chip_evaluator, tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("MAXKERNEL_HOME", str(tmp_path))
    pool = chip_evaluator.pool
    chip_evaluator.evaluate(tiny, Candidate(tiny.id, kernel_source("honest_matmul.py") + "\n# a"), target="v5e")
    first = pool._device
    assert first is not None and first.on_device and first.proc.poll() is None
    chip_evaluator.evaluate(tiny, Candidate(tiny.id, kernel_source("honest_matmul.py") + "\n# b"), target="v5e")
    assert pool._device is first  # one process held the chip for both
    first.kill()
    first.proc.wait(timeout=10)
    ev = chip_evaluator.evaluate(tiny, Candidate(tiny.id, kernel_source("honest_matmul.py") + "\n# c"),
                                 target="v5e")
    assert ev.ok and not ev.profile.estimated, ev.reason  # a fresh worker, the reference sent to it again
    assert pool._device is not first


def _with_include(text: str) -> str:
    import re

    from .conftest import KERNELS

    def include(match):
        body = (KERNELS / match[1]).read_text()
        return re.sub(r"^def computation\(", f"def {match[2]}(", body, flags=re.M)

    return re.sub(r"^# @include (\S+) as (\w+)$", include, text, flags=re.M)


def test_who_is_wrong_is_decided_by_the_high_precision_reference():
    from maxkernel_pallas_judge.judge.chip_verdict import judge_outputs

    exact = [np.linspace(-1, 1, 1000, dtype=np.float32)]
    xla = [exact[0] + np.float32(0.01)]  # XLA's default precision: off by 0.01 everywhere
    assert judge_outputs([xla[0] + 1e-5], xla, exact, 1e-3, 0)["ok"]  # agrees with XLA
    closer = judge_outputs([exact[0] + 1e-5], xla, exact, 1e-3, 0)  # disagrees with XLA, right by the arbiter
    assert closer["ok"] and closer["farther"] == "xla"
    as_bad = judge_outputs([exact[0] - np.float32(0.009)], xla, exact, 1e-3, 0)  # off, but no farther than XLA
    assert as_bad["ok"] and as_bad["farther"] == "xla"
    wrong = [exact[0].copy()]
    wrong[0][::100] += 1.0  # ten values far off
    judged = judge_outputs(wrong, xla, exact, 1e-3, 0)
    assert not judged["ok"] and judged["farther"] == "kernel" and judged["kernel_vs_exact"]["mismatched"] == 10
    nan = [exact[0].copy()]
    nan[0][3] = np.nan
    assert not judge_outputs(nan, xla, exact, 1e-3, 0)["ok"]
    narrower = [exact[0].astype(np.float16)]  # another dtype is wrong, however close its values
    assert not judge_outputs(narrower, xla, exact, 1e-3, 0)["ok"]
    inf_ref = [np.array([np.inf, 1.0], np.float32)]
    assert not judge_outputs([np.array([1e30, 1.0], np.float32)], inf_ref, inf_ref, 1e-3, 0)["ok"]


def test_a_task_whose_inputs_were_let_go_is_held_again(chip_evaluator, tiny, tpu_backend, tmp_path, monkeypatch):
    """The chip holds one task at a time and the parent keeps the inputs of the last two: a task judged again
    after two others is built again (fresh inputs, XLA timed again), and measured as before."""
    import shutil

    monkeypatch.setenv("MAXKERNEL_HOME", str(tmp_path))
    honest = kernel_source("honest_matmul.py")
    first = chip_evaluator.evaluate(tiny, Candidate(tiny.id, honest + "\n# 1"), target="v5e")
    assert first.ok and not first.profile.estimated, first.reason
    for name in ("other-1", "other-2"):
        shutil.copytree(HERE / "device_tasks" / "tiny_matmul", tmp_path / name)
        other = tpu_backend.load_task(tmp_path / name)
        assert chip_evaluator.evaluate(other, Candidate(other.id, honest + f"\n# {name}"), target="v5e").ok
    assert len(chip_evaluator.chip._payloads) == 2 and first.details["timing"]["reference"]["xplane"]
    again = chip_evaluator.evaluate(tiny, Candidate(tiny.id, honest + "\n# 3"), target="v5e")
    assert again.ok and not again.profile.estimated, again.reason


def test_a_reference_put_back_for_a_check_is_not_timed_again(chip_evaluator, tiny, tmp_path, monkeypatch):
    """A task put back on the chip for a check (another task held it, or the worker was replaced) gets its
    inputs and XLA's outputs there, not a second timing: the verdict's reference figures are the first's."""
    monkeypatch.setenv("MAXKERNEL_HOME", str(tmp_path))
    ref = chip_evaluator.reference(tiny, "v5e")
    put_back = chip_evaluator.chip._send(tiny, ref.chip.key, restore=True)
    head = put_back.last("device_reference")[0]
    assert put_back.status == "done" and head["restored"] and "timing" not in head
    ev = chip_evaluator.evaluate(tiny, Candidate(tiny.id, kernel_source("honest_matmul.py") + "\n# r"), target="v5e")
    assert ev.ok and ev.profile.reference_seconds == ref.chip.timing.median_s, ev.reason


def test_a_released_task_lets_go_of_its_full_size_data(chip_evaluator, tiny, tmp_path, monkeypatch):
    """A bench over many tasks releases each when done (its full-size outputs would fill the host's memory);
    judging it again builds the reference afresh and measures as before."""
    monkeypatch.setenv("MAXKERNEL_HOME", str(tmp_path))
    ref = chip_evaluator.reference(tiny, "v5e")
    chip_evaluator.release(tiny)
    assert ref.chip.key not in chip_evaluator.chip._payloads
    assert all(key[0] != tiny.id for key in chip_evaluator._references)
    ev = chip_evaluator.evaluate(tiny, Candidate(tiny.id, kernel_source("honest_matmul.py") + "\n# d"), target="v5e")
    assert ev.ok and not ev.profile.estimated, ev.reason
