"""The judge's jobs as records (``judge/job_records.py``): each kind survives its trip through the protocol's
header whole, and a header that is not a job of its kind is refused in one line before any job code runs."""

from __future__ import annotations

import io

import pytest
from maxkernel_pallas_judge.judge import job_records as jr
from maxkernel_pallas_judge.sandbox import protocol

JOBS = [
    jr.ReferenceJob(platform="m:P", task={"module": "/t/reference.py", "entry": "computation"}, target="v5e",
                    size="small", fresh=2, max_full_input_bytes=1 << 30, device=True, compile_timeout_s=60.0,
                    atol=(1e-2, 1e-3), rtol=1e-2, small_set_bytes=None),
    jr.TraceJob(platform="m:P", target="v5e", full_shapes=[{"shape": [8, 128], "dtype": "float32"}],
                static_full=[], check_sizes=[{"shapes": [], "static": []}], describe_only=True, wrap="module"),
    jr.CheckJob(platform="m:P", target="v6e", programs=[jr.ProgramSlot(size=0), jr.ProgramSlot(size=0, again=True)],
                sets=[jr.SetSlot(n_inputs=2, size=1)], reference_work=[{"flops": 1.0}], atol=1e-5, rtol=1e-5),
    jr.DeviceReferenceJob(platform="m:P", key="k1", n_inputs=3, restore=True),
    jr.DeviceCheckJob(platform="m:P", key="k1", atol=1e-3, rtol=1e-3),
]


@pytest.mark.parametrize("job", JOBS, ids=lambda j: j.KIND)
def test_a_job_crosses_the_pipe_whole(job):
    stream = io.BytesIO()
    protocol.send(stream, job.with_scratch("/scratch/w1").header())
    stream.seek(0)
    header, arrays = protocol.recv(stream)
    assert arrays == [] and header["kind"] == job.KIND
    back = jr.decode(header)
    assert back == job.with_scratch("/scratch/w1") and back.scratch == "/scratch/w1"


@pytest.mark.parametrize("header, says", [
    ({"kind": "sleep"}, "unknown job kind 'sleep'"),
    ({"kind": "device_check", "platform": "m:P", "key": "k"}, "not a device_check job"),
    ({"kind": "device_check", "platform": "m:P", "key": "k", "atol": 0.1, "rtol": 0.1, "tolerance": 1},
     "not a device_check job"),
    ({"kind": "device_reference", "platform": "m:P", "key": "k", "n_inputs": "three"}, "not a device_reference job"),
])
def test_a_header_that_is_not_a_job_is_refused_in_one_line(header, says):
    with pytest.raises(jr.JobError) as caught:
        jr.decode(header)
    assert str(caught.value).startswith(says) and "\n" not in str(caught.value)
