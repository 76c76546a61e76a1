"""Planner -> implementer -> tester -> debugger on a real task, with scripted model replies."""

from __future__ import annotations

import pytest
from maxkernel_core import EvalStatus, RunConfig
from maxkernel_core.llm_roles import RoleLLM
from maxkernel_core.plugins import get_plugin_manager
from maxkernel_core.session import RunSession
from maxkernel_core.store import RunStore
from maxkernel_core.testing import FakeLLMProvider

from ..tpu_pallas.conftest import TASKS, kernel_source

PLAN_REPLY = """Tile M and N by 256 and K by 512, accumulate in f32 scratch.

```json
{"tiling": "256x256 output blocks, K in 512 steps", "memory": "f32 accumulator in VMEM scratch",
 "grid": "(M/256, N/256, K/512), K innermost", "pipelining": "x and y blocks double-buffered",
 "fusion": "none", "parameters": {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 512}}
```"""


def fenced(code: str) -> str:
    return f"Here is the module.\n\n```python\n{code}```\n"


@pytest.fixture
def session(tmp_path):
    pm = get_plugin_manager()
    backend = pm.registries.get("backend", "tpu_pallas").cls()
    fake = FakeLLMProvider()
    task = backend.load_task(TASKS / "matmul")
    llm = RoleLLM(fake, "scripted-model", 0.2, 4096)
    s = RunSession(pm, RunStore(tmp_path / "runs.db"), task, RunConfig(task.id, "test", "fake"), backend,
                   llms={"plan": llm, "implement": llm, "debug": llm})
    yield s, fake
    backend.close()


@pytest.mark.slow
def test_chain_produces_a_candidate_and_the_debugger_fixes_a_real_compile_error(session):
    s, fake = session
    fake.enqueue(PLAN_REPLY, fenced(kernel_source("compile_bad_block_shape.py")),
                 fenced(kernel_source("honest_matmul.py")))
    plan = s.plan()
    assert plan.decisions["grid"].startswith("(M/256") and plan.parameters["BLOCK_K"] == 512
    candidate = s.implement(plan)
    assert candidate.parameters == plan.parameters and candidate.provenance.plan_id == plan.id
    verdict = s.evaluate(candidate)
    assert verdict.status is EvalStatus.COMPILE_ERROR  # the real Mosaic block-shape error

    final = s.repair(candidate, verdict, max_attempts=6)
    assert final.evaluation.ok, final.evaluation.reason
    assert final.candidate.parent_id == candidate.id and final.candidate.provenance.role == "debug"

    plan_prompt, implement_prompt, debug_prompt = (r.messages[-1].content for r in fake.history)
    system = fake.history[0].messages[0].content
    assert "Pallas on TPU" in system and "TPU v5e" in system  # the backend's knowledge pack
    assert "def computation(x, y)" in plan_prompt and "atol=0.002" in plan_prompt  # the reference itself
    assert '"BLOCK_M": 256' in implement_prompt
    assert "divisible by 8 and 128" in debug_prompt and "BM, BN, BK = 256, 100, 512" in debug_prompt
    assert [r.role for r in fake.history] == ["plan", "implement", "debug"]
    assert all(r.model == "scripted-model" and r.max_output_tokens == 4096 for r in fake.history)
    calls = s.store.llm_calls(s.run_id)
    assert [c["role"] for c in calls] == ["plan", "implement", "debug"] and all(c["error"] is None for c in calls)
    assert [e.status for e in s.store.evaluations(s.run_id)] == [EvalStatus.COMPILE_ERROR, EvalStatus.OK]


def test_a_reply_without_code_is_asked_again_with_its_parse_error_and_counted(session):
    s, fake = session
    fake.enqueue(PLAN_REPLY, "I think 512 blocks would be best, but I will not write the code.",
                 fenced(kernel_source("honest_matmul.py")))
    candidate = s.implement(s.plan())
    assert "def computation" in candidate.code and s.ctx.unusable_replies == 1
    retry = fake.history[-1]
    assert retry.role == "implement" and retry.messages[-2].role == "assistant"  # the bad reply, then why
    assert "could not be used: the reply has no code block" in retry.messages[-1].content
    assert s.finish().unusable_replies == 1


def test_replies_without_code_past_the_retries_end_with_the_role_named(session):
    from maxkernel_core.errors import UnusableReplies

    s, fake = session
    fake.enqueue(PLAN_REPLY, *["No code today."] * 3)
    plan = s.plan()
    with pytest.raises(UnusableReplies, match=r"the implement role's model \(fake:scripted-model\) gave no usable "
                                              r"code in 3 replies \(last: the reply has no code block") as err:
        s.implement(plan)
    assert err.value.exit_code == 3 and s.ctx.unusable_replies == 3


def test_debugger_attempts_are_bounded(session):
    s, fake = session
    broken = kernel_source("cheat_no_pallas.py")
    fake.enqueue(PLAN_REPLY, fenced(broken), *[fenced(broken)] * 2)
    candidate = s.implement(s.plan())
    final = s.repair(candidate, s.evaluate(candidate), max_attempts=2)
    assert final.evaluation.status is EvalStatus.REJECTED
    assert len(s.store.evaluations(s.run_id)) == 3  # the first verdict plus two recorded attempts
    assert len([r for r in fake.history if r.role == "debug"]) == 2
