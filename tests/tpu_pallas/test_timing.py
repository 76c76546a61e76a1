"""The TPU timing path, as far as a CPU can take it: no device code is an error; the parent's handling."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from maxkernel_core import Task

from maxkernel_pallas_judge.judge.evaluator import Evaluator, ReferenceData
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


def _reference(outputs):
    return ReferenceData([], None, {}, None, [], [], [], "tpu", timing={"median_s": 2e-3}, timing_outputs=outputs)


def _outcome(outputs, trace=b"xspace-bytes"):
    header = {"type": "timing", "ok": True, "median_s": 1e-3, "times_s": [1e-3] * 3, "runs": 3, "warmup": 1,
              "top_ops": [["fusion", 9e-4]], "wait_share": 0.1, "n_outputs": len(outputs)}
    return JobOutcome("done", [(header, [*outputs, np.frombuffer(trace, np.uint8)])])


def test_measured_profile_keeps_the_trace_and_checks_the_timed_outputs(tmp_path, monkeypatch):
    monkeypatch.setenv("MAXKERNEL_HOME", str(tmp_path))
    task = Task("t", "tpu_pallas", "/t", atol=1e-3, rtol=1e-3)
    right = [np.ones((4, 4), np.float32)]
    verdict = Verdict(EVALUATOR, task, type("C", (), {"id": "cand-1"})(), "v5e", _reference(right))
    profile, failure = verdict._timing(_outcome(right))
    assert failure is None and not profile.estimated and profile.speedup == pytest.approx(2.0)
    assert (tmp_path / "traces" / "cand-1").exists()
    assert open(verdict.details["timing"]["xplane"], "rb").read() == b"xspace-bytes"

    wrong = [np.zeros((4, 4), np.float32)]
    verdict = Verdict(EVALUATOR, task, type("C", (), {"id": "cand-2"})(), "v5e", _reference(right))
    profile, failure = verdict._timing(_outcome(wrong))
    assert profile is None and failure.startswith("the outputs of the timed full-size calls are wrong")
