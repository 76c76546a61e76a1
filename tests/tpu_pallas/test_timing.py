"""The TPU timing path, as far as a CPU can take it: no device code is an error; the parent's handling."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from maxkernel_core import EvalStatus, Task, TestReport

from maxkernel_pallas_judge.judge.chip_verdict import judge_on_chip
from maxkernel_pallas_judge.judge.chip_host import ChipReference
from maxkernel_pallas_judge.judge.device_messages import DeviceTiming
from maxkernel_pallas_judge.judge.evaluator import Evaluator, ReferenceData
from maxkernel_pallas_judge.judge.timing import time_on_device
from maxkernel_pallas_judge.judge.verdict import Verdict
from maxkernel_pallas_judge.profiling.xplane import TraceError
from maxkernel_pallas_judge.sandbox.pool import JobOutcome
from maxkernel_pallas_judge.sandbox.pool import Limits
from maxkernel_tpu_pallas.tpu_platform import TPU


def test_timing_on_a_cpu_is_an_error_not_a_zero(tmp_path):
    with pytest.raises(TraceError, match="no device code ran"):
        time_on_device(lambda x: jnp.tanh(x @ x), [(jnp.ones((128, 128)),)], trace_root=tmp_path, warmup=1, runs=2)


EVALUATOR = Evaluator(Limits(platform=TPU.spec), spares=0)  # no worker is started: only the parent-side handling is exercised
RIGHT = np.ones((4, 4), np.float32)


def _reference():
    return ReferenceData([], None, {}, 1e9, [], [], [], "cpu")


def _timing(median_s):
    return DeviceTiming(median_s=median_s, times_s=[median_s] * 10, wall_median_s=median_s, runs=10, warmup=3,
                        input_sets=1)


def _chip():
    return ChipReference("key", "TPU v5 lite", _timing(2e-3), [RIGHT], [RIGHT])


def _outcome(outputs, differ=0, trace=b"xspace-bytes", **timing):
    first = {"type": "chip_outputs", "sets": 1, "n_outputs": 1, "n_reference": 1}
    timing = {"median_s": 1e-3, "times_s": [1e-3] * 9, "wall_median_s": 1.05e-3, "runs": 9, "warmup": 3,
              "input_sets": 1, "top_ops": [["fusion", 9e-4]], "wait_share": 0.1, **timing}
    header = {"type": "timing", "ok": True, "calls_checked": 9, "calls_differ": differ, "timing": timing}
    return JobOutcome("done", [(first, outputs), (header, [np.frombuffer(trace, np.uint8)])])


def _verdict(cand_id):
    task = Task("t", "tpu_pallas", "/t", atol=1e-3, rtol=1e-3)
    return Verdict(EVALUATOR, task, type("C", (), {"id": cand_id})(), "v5e", _reference())


def test_measured_profile_keeps_the_trace_and_checks_every_timed_call(tmp_path, monkeypatch):
    monkeypatch.setattr(EVALUATOR, "home", tmp_path)  # the run store's folder: the trace is kept there
    report = TestReport("cand-1", True, 4)
    ev = judge_on_chip(_verdict("cand-1"), _outcome([RIGHT]), _chip(), "4 input sets match", report)
    assert ev.ok and not ev.profile.estimated and ev.profile.speedup == pytest.approx(2.0)
    assert ev.profile.speed.comparison == "measured/measured" and ev.profile.chip == "TPU v5 lite (v5e)"
    assert ev.details["timing"]["achieved"]["tflops"] == pytest.approx(1e9 / 1e-3 / 1e12) == ev.profile.achieved.tflops
    assert ev.profile.diagnosis[0].startswith("measured: the costliest ops per call are fusion")
    assert (tmp_path / "traces" / "cand-1").exists()
    assert open(ev.details["timing"]["xplane"], "rb").read() == b"xspace-bytes"

    ev = judge_on_chip(_verdict("cand-2"), _outcome([RIGHT], differ=2), _chip(), "4 input sets match", report)
    assert ev.status is EvalStatus.INCORRECT and ev.profile is None
    assert ev.reason.startswith("2 of 9 timed calls on the TPU v5 lite (v5e) returned outputs other than")

    ev = judge_on_chip(_verdict("cand-3"), _outcome([RIGHT * 2]), _chip(), "4 input sets match", report)
    assert ev.status is EvalStatus.INCORRECT and "the kernel is the farther" in ev.reason


@pytest.mark.parametrize("timing", [{"median_s": "1e-3"}, {"runs": True}, {"times_s": None}, {"median_s": 0.0},
                                    {"median_s": float("nan")}, {"wall_median_s": -1.0}, {"runs": 0}])
def test_a_malformed_message_from_the_device_worker_is_a_crash_in_one_line(tmp_path, monkeypatch, timing):
    monkeypatch.setattr(EVALUATOR, "home", tmp_path)
    ev = judge_on_chip(_verdict("cand-5"), _outcome([RIGHT], **timing), _chip(), "ok", TestReport("cand-5", True, 4))
    assert ev.status is EvalStatus.CRASHED and ev.profile is None
    assert ev.reason.startswith("the device worker sent a") and "timing message" in ev.reason
    assert "\n" not in ev.reason


@pytest.mark.parametrize("first, timed", [
    ({"sets": 3, "n_outputs": 1, "n_reference": 1}, {}),  # more sets than the worker runs
    ({"sets": 1, "n_outputs": 2, "n_reference": 1}, {}),  # counts that do not match its arrays
    ({"sets": 1, "n_outputs": 1, "n_reference": 1}, {"calls_checked": None}),  # timed with no count of the checks
    ({"sets": 1, "n_outputs": 1, "n_reference": 1}, {"calls_differ": 10}),  # more differing than checked
])
def test_device_worker_messages_are_held_to_their_counts(tmp_path, monkeypatch, first, timed):
    monkeypatch.setattr(EVALUATOR, "home", tmp_path)
    outcome = _outcome([RIGHT])
    (head, arrays), (header, trace) = outcome.messages
    header = {k: v for k, v in {**header, **timed}.items() if v is not None}
    outcome = JobOutcome("done", [({**head, **first}, arrays), (header, trace)])
    ev = judge_on_chip(_verdict("cand-6"), outcome, _chip(), "ok", TestReport("cand-6", True, 4))
    assert ev.status is EvalStatus.CRASHED and ev.reason.startswith("the device worker sent a"), ev.reason


def test_a_kernel_with_more_outputs_than_xla_is_wrong_not_a_crash(tmp_path, monkeypatch):
    monkeypatch.setattr(EVALUATOR, "home", tmp_path)
    first = {"type": "chip_outputs", "sets": 2, "n_outputs": 2, "n_reference": 1, "exact": True}
    arrays = [RIGHT, RIGHT, RIGHT, RIGHT, RIGHT, RIGHT]  # two sets of two, then XLA's and the arbiter's one each
    outcome = JobOutcome("done", [(first, arrays), _outcome([RIGHT]).messages[1]])
    ev = judge_on_chip(_verdict("cand-7"), outcome, _chip(), "ok", TestReport("cand-7", True, 4))
    assert ev.status is EvalStatus.INCORRECT, ev.reason


def test_a_time_below_the_chips_floor_for_the_work_is_refused(tmp_path, monkeypatch):
    """The task's 1e12 FLOPs in 1 ms would be 1,000 TFLOP/s, five times the chip's peak, where XLA's 6 ms is
    within it: the kernel did not do the work."""
    monkeypatch.setattr(EVALUATOR, "home", tmp_path)
    ref = ReferenceData([], None, {}, 1e12, [], [], [], "cpu", xla={"ok": True, "chip": {"bf16_ops_per_second": 197e12}})
    verdict = Verdict(EVALUATOR, Task("t", "tpu_pallas", "/t", atol=1e-3, rtol=1e-3),
                      type("C", (), {"id": "cand-4"})(), "v5e", ref)
    chip = ChipReference("key", "TPU v5 lite", _timing(6e-3), [RIGHT], [RIGHT])
    ev = judge_on_chip(verdict, _outcome([RIGHT]), chip, "ok", TestReport("cand-4", True, 4))
    assert ev.status is EvalStatus.REJECTED and "faster than the chip can do that work" in ev.reason


def test_the_tracer_must_hand_over_exactly_one_program_per_size():
    """The tracer writes its program messages itself: the checker reads exactly one per size, and the full
    size's second trace."""
    from maxkernel_pallas_judge.judge.verdict import _well_formed

    from maxkernel_pallas_judge.judge.messages import Program

    blob = np.zeros(4, np.uint8)
    good = [(Program(size=0), [blob]), (Program(size=1), [blob]), (Program(size=0, again=True), [blob])]
    assert _well_formed(good, 1)
    assert not _well_formed([(Program(size=-1), [blob]), *good], 1)  # one the checker would sort first
    assert not _well_formed([good[0], *good], 1)  # two full-size programs
    assert not _well_formed(good[:2], 1)  # no second trace
    assert not _well_formed([good[0], (Program(size=1), [blob, blob]), good[2]], 1)  # two blobs in one message
