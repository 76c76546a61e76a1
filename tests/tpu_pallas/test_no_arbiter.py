"""A task whose highest-precision reference cannot run on the chip (on the lent v5e, flash attention's
reference widened to f32 needs 33 GB of temporaries where XLA's own program fits): the reference is still held
and timed, the arbiter is left out and said so, and a kernel is then right only where it matches XLA.

The device worker's jobs run here in-process, with the host CPU standing in for the chip (``host_chip``)."""

from __future__ import annotations

import numpy as np
import pytest
from maxkernel_pallas_judge.judge import device_messages
from maxkernel_pallas_judge.sandbox.records import JobOutcome

pytestmark = pytest.mark.slow  # a profiler trace of the stand-in chip


def _blob(fn, shape):
    import jax
    import jax.numpy as jnp
    from jax import export

    exported = export.export(jax.jit(fn))(jax.ShapeDtypeStruct(shape, jnp.float32))
    return np.frombuffer(bytes(exported.serialize()), dtype=np.uint8)


@pytest.fixture
def held(tmp_path):
    from maxkernel_pallas_judge.judge import device_job
    from maxkernel_pallas_judge.judge.job_records import DeviceReferenceJob

    from .host_chip import HOST_CHIP

    x = np.linspace(-1, 1, 64 * 128, dtype=np.float32).reshape(64, 128)
    xla = _blob(lambda a: a * 2.0, x.shape)
    unrunnable = _blob(lambda a: a * 2.0, (8, 8))  # refuses the task's inputs, as an arbiter over memory would
    sent = []
    job = DeviceReferenceJob(platform=HOST_CHIP.spec, key="k", n_inputs=1, scratch=str(tmp_path))
    device_job.run_device_reference(job, [x, xla, unrunnable], lambda h, a=(): sent.append((h, list(a))),
                                    lambda stage: None)
    yield device_job, sent, x, tmp_path
    device_job._held.clear()


def test_the_reference_is_held_and_timed_without_its_arbiter(held):
    device_job, sent, x, _ = held
    (header, arrays), = sent
    assert header["exact_error"]["message"] and header["timing"]["median_s"] > 0
    assert len(arrays) == 1 + header["n_outputs"]  # the trace and XLA's outputs: no arbiter's
    np.testing.assert_allclose(arrays[1], x * 2.0)
    assert device_job._held["k"].exact is None
    record, _ = device_messages.last(JobOutcome("done", sent), "device_reference")  # the worker keeps its wire
    assert record.exact_error is not None and record.timing.runs > 0


def test_a_check_without_an_arbiter_sends_xla_outputs_alone(held):
    from maxkernel_pallas_judge.judge.job_records import DeviceCheckJob

    from .host_chip import HOST_CHIP

    device_job, sent, x, tmp_path = held
    out = []
    job = DeviceCheckJob(platform=HOST_CHIP.spec, key="k", atol=1e-3, rtol=0.0, scratch=str(tmp_path))
    device_job.run_device_check(job, [_blob(lambda a: a * 2.0 + 1.0, x.shape)],
                                lambda h, a=(): out.append((h, list(a))), lambda stage: None)
    (outputs, arrays), timing = out[0], out[1][0]
    assert outputs["exact"] is False and outputs["sets"] == 2
    assert len(arrays) == outputs["sets"] * outputs["n_outputs"] + outputs["n_outputs"]  # XLA's beside, alone
    assert timing["ok"]
    record, _ = device_messages.last(JobOutcome("done", out), "timing")
    assert record.ok and record.timing.median_s > 0 and record.calls_checked == record.timing.runs
    assert device_messages.last(JobOutcome("done", out), "chip_outputs")[0].exact is False


@pytest.mark.parametrize("arbiter", [False, True])
def test_a_task_put_back_on_the_chip_keeps_its_arbiter_left_out(held, arbiter):
    """Put back for a check (another task held the chip, or a fresh worker): an arbiter left out when first held
    is not brought back, and one that cannot run at check time is left out for that set, never a crash."""
    from maxkernel_pallas_judge.judge.job_records import DeviceCheckJob, DeviceReferenceJob

    from .host_chip import HOST_CHIP

    device_job, sent, x, tmp_path = held
    device_job._held.clear()
    unrunnable = _blob(lambda a: a * 2.0, (8, 8))
    job = DeviceReferenceJob(platform=HOST_CHIP.spec, key="k", n_inputs=1, restore=True, arbiter=arbiter)
    device_job.run_device_reference(job, [x, _blob(lambda a: a * 2.0, x.shape), unrunnable],
                                    lambda h, a=(): None, lambda stage: None)
    assert (device_job._held["k"].exact is None) is (not arbiter)
    out = []
    check = DeviceCheckJob(platform=HOST_CHIP.spec, key="k", atol=1e-3, rtol=0.0, scratch=str(tmp_path))
    device_job.run_device_check(check, [_blob(lambda a: a * 2.0, x.shape)], lambda h, a=(): out.append((h, list(a))),
                                lambda stage: None)
    record, arrays = device_messages.last(JobOutcome("done", out), "chip_outputs")
    assert record.exact is False and len(arrays) == 3  # two sets of the candidate's, XLA's on the fresh set


def test_without_an_arbiter_a_kernel_is_right_only_where_it_matches_xla():
    from maxkernel_pallas_judge.judge.chip_host import ChipReference
    from maxkernel_pallas_judge.judge.chip_verdict import judge_outputs, reference_note, wrong_reason
    from maxkernel_pallas_judge.judge.device_messages import DeviceTiming

    xla = [np.linspace(-1, 1, 1000, dtype=np.float32)]
    why = "the highest-precision reference did not run on the TPU: RESOURCE_EXHAUSTED"
    assert judge_outputs([xla[0] + 1e-5], xla, None, 1e-3, 0, why)["ok"]
    closer = judge_outputs([xla[0] + 0.01], xla, None, 1e-3, 0, why)  # it might be the truer: nobody can say
    assert not closer["ok"]
    assert "no highest-precision reference could side with the kernel" in wrong_reason(closer, "TPU", "set")
    timing = DeviceTiming(median_s=1e-3, times_s=[1e-3], wall_median_s=1e-3, runs=1, warmup=1, input_sets=1)
    chip = ChipReference("k", "TPU v5 lite", timing, xla, None, {}, None, why)
    assert "accuracy is not known" in reference_note(chip) and "RESOURCE_EXHAUSTED" in reference_note(chip)
