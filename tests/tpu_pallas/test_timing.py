"""The TPU timing path, as far as a CPU can take it: no device code is an error; the parent's handling."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from maxkernel_core import EvalStatus, Task, TestReport

from maxkernel_pallas_judge.judge.chip_verdict import judge_on_chip
from maxkernel_pallas_judge.judge.evaluator import ChipReference, Evaluator, ReferenceData
from maxkernel_pallas_judge.judge.timing import time_on_device
from maxkernel_pallas_judge.judge.verdict import Verdict
from maxkernel_pallas_judge.profiling.xplane import TraceError
from maxkernel_pallas_judge.sandbox.pool import JobOutcome
from maxkernel_pallas_judge.sandbox.pool import Limits
from maxkernel_tpu_pallas.tpu_platform import TPU


def test_timing_on_a_cpu_is_an_error_not_a_zero(tmp_path):
    with pytest.raises(TraceError, match="no device code ran"):
        time_on_device(lambda x: jnp.tanh(x @ x), (jnp.ones((128, 128)),), trace_root=tmp_path, warmup=1, runs=2)


EVALUATOR = Evaluator(Limits(platform=TPU.spec), spares=0)  # no worker is started: only the parent-side handling is exercised


def _reference():
    chip = ChipReference("key", "TPU v5 lite", {"median_s": 2e-3, "runs": 10}, {"max_abs_error": 0.0, "mismatched": 0})
    return ReferenceData([], None, {}, 1e9, [], [], [], "cpu", chip=chip)


def _outcome(repeat_ok=True, trace=b"xspace-bytes"):
    correct = {"type": "chip_correctness", "ok": True, "against": "xla"}
    header = {"type": "timing", "ok": True, "median_s": 1e-3, "times_s": [1e-3] * 3, "wall_median_s": 1.05e-3,
              "runs": 3, "warmup": 1, "top_ops": [["fusion", 9e-4]], "wait_share": 0.1,
              "repeat": {"ok": repeat_ok, "identical": repeat_ok, "detail": {
                  "ok": repeat_ok, "xla_disagreement": "output 0: 16 of 16 values outside",
                  "kernel_vs_exact": {"max_abs_error": 1.0, "mismatched": 16},
                  "xla_vs_exact": {"max_abs_error": 0.0, "mismatched": 0}}}}
    return JobOutcome("done", [(correct, []), (header, [np.frombuffer(trace, np.uint8)])])


def _verdict(cand_id):
    task = Task("t", "tpu_pallas", "/t", atol=1e-3, rtol=1e-3)
    return Verdict(EVALUATOR, task, type("C", (), {"id": cand_id})(), "v5e", _reference())


def test_measured_profile_keeps_the_trace_and_checks_the_timed_outputs(tmp_path, monkeypatch):
    monkeypatch.setenv("MAXKERNEL_HOME", str(tmp_path))
    report = TestReport("cand-1", True, 4)
    ev = judge_on_chip(_verdict("cand-1"), _outcome(), "4 input sets match", report)
    assert ev.ok and not ev.profile.estimated and ev.profile.speedup == pytest.approx(2.0)
    assert ev.profile.speed.comparison == "measured/measured" and ev.profile.chip == "TPU v5 lite (v5e)"
    assert ev.details["timing"]["achieved"]["tflops"] == pytest.approx(1e9 / 1e-3 / 1e12)
    assert (tmp_path / "traces" / "cand-1").exists()
    assert open(ev.details["timing"]["xplane"], "rb").read() == b"xspace-bytes"

    ev = judge_on_chip(_verdict("cand-2"), _outcome(repeat_ok=False), "4 input sets match", report)
    assert ev.status is EvalStatus.INCORRECT and ev.profile is None
    assert ev.reason.startswith("the outputs of the timed full-size calls are wrong")
