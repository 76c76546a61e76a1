"""Run stores for the UI tests, written through the store's own API (as a run writes them)."""

from __future__ import annotations

from maxkernel_core import Candidate, EvalStatus, Evaluation, RunConfig
from maxkernel_core.interfaces import LLMMessage, LLMRequest, LLMResponse
from maxkernel_core.records import CheckResult, Profile, Provenance
from maxkernel_core.store import RunStore

XSS = '</pre><script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'


def xss_run(home) -> tuple[RunStore, str]:
    """A run whose every stored text (code, reason, check, model reply, decision, open question) holds markup."""
    store = RunStore(home / "runs.db")
    run_id = store.create_run(RunConfig("xss_task", "hitl", "litellm", target="v6e"))
    request = LLMRequest((LLMMessage("user", f"write it {XSS}"),), model="local-coder", role="implement")
    call = store.add_llm_call(run_id, provider="litellm", request=request,
                              response=LLMResponse(f"```python\n{XSS}\n```", "local-coder", 10, 20), latency_s=1.0)
    root = Candidate("xss_task", f"BLOCK = 8\n# {XSS}\n", {"BLOCK": 8}, id="cand-xssroot00001",
                     provenance=Provenance(role="implement", provider="litellm", model="local-coder",
                                           llm_call_ids=(call,)))
    child = Candidate("xss_task", f"BLOCK = 16\n# {XSS}\n", {"BLOCK": 16}, parent_id=root.id, id="cand-xsschild0001",
                      provenance=Provenance(transformation=f"double {XSS}"))
    store.add_candidate(run_id, root)
    store.add_evaluation(run_id, Evaluation(root.id, EvalStatus.OK, f"matches {XSS}",
                                            checks=(CheckResult("correctness", True, XSS),),
                                            profile=Profile(root.id, "cost_model", True, 2e-3, 3e-3,
                                                            diagnosis=(XSS,))))
    store.add_candidate(run_id, child)
    store.add_evaluation(run_id, Evaluation(child.id, EvalStatus.INCORRECT, f"differs {XSS}"))
    store.add_decision(run_id, "candidate:iterate", "i", XSS, who="terminal")
    store.ask(run_id, "plan", {"plan": "plan-x", "summary": f"a plan {XSS}", "parameters": {"BLOCK": XSS},
                               "question": "Plan:", "choices": {"a": "approve", "e": "edit", "r": "reject"},
                               "help": {"approve": XSS, "edit": "e", "reject": "r"}})
    return store, run_id
