"""A candidate writing on the judge's pipe: the tracer is the candidate's own process, and the descriptor of its
results pipe is on its command line. Whatever it writes there, well-formed or not, the verdict is never ok and
the judge never fails with an exception of its own (``judge/messages.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from maxkernel_core import Candidate, EvalStatus

pytestmark = pytest.mark.slow  # real workers

HONEST = '''
import json, os, struct, sys

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

FORGED = {forged}


def _write(header):
    blob = json.dumps({{**header, "arrays": []}}).encode()
    os.write(int(sys.argv[2]), struct.pack("<I", len(blob)) + blob)


for _header in FORGED:
    _write(_header)
if {leave}:
    os._exit(0)


def _kernel(x_ref, y_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32).astype(o_ref.dtype)


def computation(x, y):
    return pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct((x.shape[0], y.shape[1]), x.dtype))(x, y)
'''

WORK = {"pallas_calls": 1, "callbacks": [], "glue_flops": 0.0, "glue_elementwise": 0.0}


@pytest.mark.parametrize("forged, leave, status, says", [
    # a pass with no count, then the real trace: two traces
    ([{"type": "check", "name": "trace", "ok": True}], False, EvalStatus.REJECTED, "malformed check trace"),
    # a well-formed pass before the real one
    ([{"type": "check", "name": "trace", "ok": True, "work": WORK}], False, EvalStatus.REJECTED,
     "a second check trace message"),
    # a load failure with no error to read
    ([{"type": "check", "name": "load", "ok": False, "error": {}}], False, EvalStatus.REJECTED,
     "malformed check load"),
    # an integrity check that blames nothing, and a program of no size
    ([{"type": "check", "name": "integrity", "ok": False}], False, EvalStatus.REJECTED, "malformed check integrity"),
    ([{"type": "jaxpr", "size": "full"}], False, EvalStatus.REJECTED, "malformed jaxpr"),
    # a well-formed pass, and then the process ends before the real trace: nothing to check
    ([{"type": "check", "name": "trace", "ok": True, "work": WORK}], True, EvalStatus.CRASHED, "worker exited"),
    # the end of the job announced before it began
    ([{"type": "done", "retire": True}], False, None, ""),
    # a check with no name, or a list for one; numbers where names go; strings where counts go (red team)
    ([{"type": "check"}], False, EvalStatus.REJECTED, "not a string"),
    ([{"type": "check", "name": ["trace"]}], False, EvalStatus.REJECTED, "not a string"),
    ([{"type": "check", "name": "integrity", "ok": False, "patched": [1], "when": "import"}], False,
     EvalStatus.REJECTED, "malformed check integrity"),
    ([{"type": "check", "name": "trace", "ok": False, "size": 0, "error": {"type": "E", "message": "m"},
       "work": {**WORK, "glue_ops": {"dot_general": "1"}}}], False, EvalStatus.REJECTED, "malformed check trace"),
    ([{"type": "verdict", "status": "ok"}], False, EvalStatus.REJECTED, "no kind the judge reads"),
], ids=["pass-no-count", "second-trace", "load-no-error", "integrity-blames-nothing", "program-of-no-size",
        "pass-then-exit", "early-done", "check-no-name", "check-list-name", "patched-numbers", "counts-as-strings",
        "unknown-kind"])
def test_what_a_candidate_writes_on_the_pipe_never_passes(tpu_backend, task_of, forged, leave, status, says):
    task = task_of("matmul")
    code = HONEST.format(forged=json.dumps(forged).replace("true", "True").replace("false", "False"), leave=leave)
    ev = tpu_backend.evaluate(task, Candidate(task.id, code), target="v5e")
    assert ev.status != EvalStatus.OK, ev.reason
    if status is not None:
        assert ev.status == status and says in ev.reason, (ev.status, ev.reason)


FORGED = Path(__file__).parent / "forged"


@pytest.mark.parametrize("name, says", [
    ("poison_kept_checker.py", "changes Var in place"),
    ("check_size_as_full_size.py", "the program sent for the full size takes inputs"),
])
def test_a_whole_report_forged_by_the_candidate_is_refused(tpu_backend, task_of, name, says):
    task = task_of("matmul")
    ev = tpu_backend.evaluate(task, Candidate(task.id, (FORGED / name).read_text()), target="v5e")
    assert ev.status == EvalStatus.REJECTED and says in ev.reason, (ev.status, ev.reason)


WRITES_THEN_EXITS = '''
import json, os, struct, sys


def _write(header):
    blob = json.dumps({{**header, "arrays": []}}).encode()
    os.write(int(sys.argv[2]), struct.pack("<I", len(blob)) + blob)


deep = []
for _ in range(600):  # past the recursion a converter walking the count would need, within json's own
    deep = [deep]
work = {work}
_write({{"type": "check", "name": "integrity", "ok": True, "patched": [], "when": "import"}})
_write({{"type": "check", "name": "trace", "ok": True, "leftovers": [], "patched": [], "work": work}})
_write({{"type": "done"}})
os._exit(0)
'''


@pytest.mark.parametrize("work, says", [
    # a count with no kernel, its free-form part nested 600 deep: refused, never a RecursionError in the judge
    ('{"pallas_calls": 0, "callbacks": [], "glue_flops": 0, "glue_elementwise": 0, "kernels": [{"k": deep}]}',
     "no pallas_call"),
    # JSON's Infinity as a glue matmul's repeat count
    ('{"pallas_calls": 1, "callbacks": [], "glue_flops": 0, "glue_elementwise": 0, '
     '"glue_dots": [{"shape": "s", "flops": 1.0, "times": float("inf")}]}', "not finite"),
], ids=["nested-count", "infinite-count"])
def test_a_forged_count_is_refused_without_an_error_in_the_judge(tpu_backend, task_of, work, says):
    task = task_of("matmul")
    ev = tpu_backend.evaluate(task, Candidate(task.id, WRITES_THEN_EXITS.format(work=work)), target="v5e")
    assert ev.status == EvalStatus.REJECTED and says in ev.reason, (ev.status, ev.reason)


ABSURD_VMEM_LIMIT = '''
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _kernel(x_ref, y_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32).astype(o_ref.dtype)


def computation(x, y):
    return pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct((x.shape[0], y.shape[1]), x.dtype),
                          compiler_params=pltpu.CompilerParams(vmem_limit_bytes=10**400))(x, y)
'''


def test_a_kernel_description_the_cost_model_cannot_read_is_no_estimate_not_an_error(tpu_backend, task_of):
    """The checker's description carries the numbers the candidate's program chose: a VMEM limit past a float's
    range breaks the cost model, which leaves the verdict without an estimate, never the judge with an error."""
    task = task_of("matmul")
    ev = tpu_backend.evaluate(task, Candidate(task.id, ABSURD_VMEM_LIMIT), target="v5e")
    assert ev.status != EvalStatus.OK and ev.estimate is None, (ev.status, ev.reason)
    assert "cost model cannot read" in ev.details["no_estimate"], ev.details.get("no_estimate")
