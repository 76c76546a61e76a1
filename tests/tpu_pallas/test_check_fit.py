"""``check_fit``: the backend says before any compile whether a candidate's blocks fit VMEM (one sandboxed trace)."""

from __future__ import annotations

import time

import pytest
from maxkernel_core import Candidate

from .conftest import kernel_source

pytestmark = pytest.mark.slow


def test_blocks_over_vmem_are_ruled_out_and_honest_blocks_fit(tpu_backend, task_of):
    task = task_of("matmul")
    over = Candidate(task.id, kernel_source("compile_vmem_overflow.py"))
    start = time.monotonic()
    fit = tpu_backend.check_fit(task, over, target="v5e")
    assert fit is not None and not fit.fits
    assert fit.needed_bytes > fit.limit_bytes and "MiB of VMEM" in fit.reason and "over" in fit.reason
    honest = tpu_backend.check_fit(task, Candidate(task.id, kernel_source("honest_matmul.py")), target="v5e")
    assert honest is not None and honest.fits and honest.needed_bytes < honest.limit_bytes
    # no compile and no correctness run: far quicker than an evaluation's cascade
    assert time.monotonic() - start < 120


def test_a_module_that_does_not_trace_cannot_be_told(tpu_backend, task_of):
    task = task_of("matmul")
    assert tpu_backend.check_fit(task, Candidate(task.id, "def computation(x, y):\n    raise ValueError\n"),
                                 target="v5e") is None
