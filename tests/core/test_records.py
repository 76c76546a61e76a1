import json

import pytest

from maxkernel_core import records
from maxkernel_core.errors import StoreError
from maxkernel_core.interfaces import LLMMessage, LLMRequest, LLMResponse
from maxkernel_core.records import (
    Attempt, Candidate, CheckResult, CompileError, Decline, EvalStatus, Evaluation, Fit, Move, Parameter,
    ParameterSpace, Plan, Profile, Provenance, RunConfig, SearchEdge, SearchNode, Speed, Task, TestReport,
    TunedConfig, Achieved,
)
from maxkernel_core.model_records import KernelTime, ModelBreakdown, OperandTraffic, OpTime
from maxkernel_core.serialize import from_json, to_json
from maxkernel_core.session import RunResult

OPERAND = OperandTraffic("in", 0, (256, 512), "bfloat16", 1 << 20, 8, 1.0, 1 << 18)
KERNEL = KernelTime("matmul", (4, 2), 8, 9e-4, "compute", 3e-4, 8e-4, 1e-5, 2e-5, 8e-4, 1e-4, 0.0, "mxu", 1 << 21,
                    2.1e9, 2.2e9, 1 << 20, 16 << 20, 1, (OPERAND,))
GLUE = OpTime("transpose.1", "transpose", "x.T", 1, 4096.0, 0.0, 2e-6, 0.0, 1e-6, 2e-6, "memory")
MODEL = ModelBreakdown("v5e", 9.1e-4, "compute", 1 << 21, 2.1e9, (KERNEL,), 2e-6, (GLUE,), "shipped",
                       {"device_kind": "TPU v5 lite"})
SPACE = ParameterSpace((Parameter("BLOCK_M", (128, 256, 512)),))
CAND = Candidate("t1", "def computation(x): ...", {"BLOCK_M": 256}, parent_id="cand-0",
                 provenance=Provenance(role="implement", provider="fake", llm_call_ids=(1, 2)), space=SPACE)
EVAL = Evaluation(
    CAND.id, EvalStatus.INCORRECT, "max abs error 3.1 > atol 1e-2",
    checks=(CheckResult("load", True), CheckResult("correctness", False, "mismatch", {"max_abs": 3.1})),
    test=TestReport(CAND.id, False, 4, 3.1, 0.5),
    profile=Profile(CAND.id, "cost_model", True, 1e-3, 2e-3, "memory", ("HBM bound",), roofline_fraction=0.5,
                    fits_memory=True),
    estimate=Profile(CAND.id, "cost_model", True, 1e-3, fits_memory=False, model=MODEL),
    compile_error=CompileError("vmem_overflow", "Ran out of memory in memory space vmem", 12),
)
SAMPLES = [
    Task("t1", "tpu_pallas", "/x", sizes=("full", "small"), atol=(1e-2, 1e-3), rtol=1e-2, metadata={"k": [1]}),
    Task("t2", "tpu_pallas", "/y", atol=1e-5),
    Plan("t1", "tile 256x512", {"tiling": "256x512"}, {"BLOCK_M": 256}),
    CAND.provenance, CAND, EVAL.checks[1], EVAL.test, EVAL.profile, EVAL,
    SearchNode("run-1", CAND.id, None, 0, 1.5, True), SearchEdge("run-1", "node-a", "node-b", "bigger_k_block"),
    RunConfig("t1", "graph", "offline", None, "tpu_pallas", "v6e", 10, 3, {"beam_width": 3}),
    Attempt(CAND, EVAL), SPACE, SPACE.parameters[0], Move("double BLOCK_M", {"BLOCK_M": 512}, "est. 3 us"),
    Decline("nothing left"), EVAL.compile_error, Fit(False, 80 << 20, 64 << 20, "over"),
    LLMMessage("user", "hi"), LLMRequest((LLMMessage("system", "s"), LLMMessage("user", "u")), "m", 0.2, 100, "plan"),
    LLMResponse("text", "m", 3, 4, 0.01, 0.5, "stop"),
    RunResult("run-1", "t1", "ok", Attempt(CAND, EVAL), 3, ""),
    TunedConfig({"signature": "abc", "target": "v5e"}, "t1", "x = 1\n", {"BLOCK_M": 256}, 1e-6, True, 1.5,
                "run-1", CAND.id, "graph"),
    Speed(8.93e-4, True, "TPU v5 lite (v5e)", "device_trace", 7.36e-4, True),
    Achieved(154.0, 301.0, 0.79),
    OPERAND, KERNEL, GLUE, MODEL, EVAL.estimate,
]


def test_every_record_type_has_a_sample():
    assert {type(s).__name__ for s in SAMPLES} == set(records.RECORD_TYPES)


@pytest.mark.parametrize("record", SAMPLES, ids=lambda r: type(r).__name__)
def test_json_round_trip(record):
    data = to_json(record)
    assert data["_record"] == type(record).__name__ and data["_v"] == 1
    text = json.dumps(data)  # must be plain JSON
    assert from_json(text) == record
    assert from_json(data, type(record)) == record


def test_records_are_frozen():
    with pytest.raises(AttributeError):
        CAND.code = "x"


def test_newer_schema_version_is_refused_not_misread():
    data = to_json(CAND)
    data["_v"] = 99
    with pytest.raises(StoreError, match="schema version 99.*upgrade maxkernel"):
        from_json(data)


def test_wrong_type_and_unknown_type_are_errors():
    with pytest.raises(StoreError, match="expected a stored Plan, found a Candidate"):
        from_json(to_json(CAND), Plan)
    with pytest.raises(StoreError, match="unknown record type"):
        from_json({"_record": "Nope", "_v": 1})


def test_status_round_trips_as_enum():
    assert from_json(to_json(EVAL)).status is EvalStatus.INCORRECT
    assert to_json(EVAL)["status"] == "incorrect"
