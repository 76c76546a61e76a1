"""The records a worker's messages are held to (``judge/messages.py``), on outcomes made here: what the verdict
reads with ``[...]`` must be present and of its type, with no default standing in for it."""

from __future__ import annotations

import pytest
from maxkernel_pallas_judge.judge import messages
from maxkernel_pallas_judge.sandbox.records import JobOutcome

WORK = {"pallas_calls": 1, "callbacks": [], "glue_flops": 0, "glue_elementwise": 0}


def _outcome(*headers) -> JobOutcome:
    return JobOutcome("done", messages=[(h, []) for h in headers])


def _read(*headers) -> messages.Decoded:
    read = messages.decoded(_outcome(*headers))
    assert isinstance(read, messages.Decoded), read
    return read


def test_what_an_honest_tracer_sends_reads_whole():
    read = _read(
        {"type": "check", "name": "integrity", "ok": True, "patched": [], "when": "import"},
        {"type": "check", "name": "trace", "ok": True, "work": WORK, "leftovers": [], "patched": []},
        {"type": "jaxpr", "size": 0, "again": False}, {"type": "jaxpr", "size": 0, "again": True},
        {"type": "done", "retire": True})
    assert [name for name, _ in read.checks()] == ["integrity", "trace"] and read.checks("trace")[0][1].work
    assert [p.again for p, _ in read.read("jaxpr")] == [False, True] and read.last("jaxpr")[0].again
    assert read.last("outputs") is None


@pytest.mark.parametrize("header, says", [
    ({"type": "work", "size": 0, "work": {**WORK, "glue_dots": [{"shape": "1x2x3x4", "flops": 8.0}]}},
     "malformed work"),  # the proof reads a glue dot's times itself
    ({"type": "work", "size": 0, "work": {**WORK, "pallas_calls": True}}, "malformed work"),
    ({"type": "check", "name": "trace", "ok": True, "work": {**WORK, "glue_flops": "0"}}, "malformed check trace"),
    ({"type": "work", "size": 0, "work": {**WORK, "unknown_ops": ["stablehlo.custom_call"]}}, "malformed work"),
    ({"type": "work", "size": 0, "work": {**WORK, "unknown_ops": {"stablehlo.fft": "1"}}}, "malformed work"),
    ({"type": "traced_work", "work": {**WORK, "vmem_bytes": ["lots"]}}, "malformed traced_work"),
    ({"type": "outputs", "index": 1.5}, "malformed outputs"),
    ({"type": 7}, "not a string"),
    ({"type": "check", "name": "compile", "ok": True, "seconds": 0.1, "memory": ["lots"]}, "malformed check compile"),
    ({"type": "check", "name": "compile", "ok": True, "seconds": 0.1, "cost": {"flops": "many"}},
     "malformed check compile"),
    ({"type": "check", "name": "load", "ok": False, "error": {"type": "E", "message": "m", "hint": 3}},
     "malformed check load"),
    ({"type": "check", "name": "compile", "ok": True, "seconds": float("nan")}, "compile time that is not finite"),
])
def test_a_header_missing_what_the_verdict_reads_is_named(header, says):
    why = messages.decoded(_outcome(header))
    assert isinstance(why, str) and says in why and "\n" not in why



def test_an_error_keeps_in_details_what_its_sender_said():
    """The traceback and the API hint reach the check's details (the debugger reads them); a field the sender
    left out does not appear as None."""
    from maxkernel_pallas_judge.judge.trace_job import error_record

    try:
        raise AttributeError("module 'jax.experimental.pallas' has no attribute 'pallas_cal'")
    except AttributeError as exc:
        sent = error_record(exc)
    header = {"type": "check", "name": "load", "ok": False, "error": {**sent, "hint": "pallas_call"}}
    (name, check), = _read(header).checks()
    details = check.error.as_details()
    assert name == "load" and details["traceback"] == sent["traceback"] and details["hint"] == "pallas_call"
    assert details["type"] == "AttributeError" and "kind" not in details


def test_a_compiles_figures_are_read_from_its_record():
    header = {"type": "check", "name": "compile", "ok": True, "seconds": 0.5, "device_kind": "TPU v5 lite",
              "memory": {"argument_bytes": 4096}, "cost": {"flops": 8.0}, "program": {"ops": []},
              "summary": None}
    (_, compiled), = _read(header).checks()
    assert (compiled.device_kind, compiled.memory, compiled.cost, compiled.program) == (
        "TPU v5 lite", {"argument_bytes": 4096}, {"flops": 8.0}, {"ops": []})


def test_a_lowering_its_sender_did_not_time_is_stored_as_0_seconds():
    """The tracer's export failure carries no time: the check stores 0, a number a stored run reads back."""
    header = {"type": "check", "name": "export", "ok": False, "size": 0, "error": {"type": "E", "message": "m"}}
    (_, export), = _read(header).checks()
    assert export.seconds == 0.0


def test_a_count_past_a_floats_range_is_a_number_not_a_malformed_message():
    header = {"type": "work", "size": 0, "work": {**WORK, "glue_flops": 10**400}}
    assert _read(header).last("work")[0].work.glue_flops == 10**400
