"""The sub-agents through the real litellm client and the core's retry loop, over HTTP to a local server."""

from __future__ import annotations

from maxkernel_core import RunConfig
from maxkernel_core.config import load_settings
from maxkernel_core.llm import RetryPolicy
from maxkernel_core.llm_roles import resolve_role_llms
from maxkernel_core.plugins import get_plugin_manager
from maxkernel_core.session import RunSession
from maxkernel_core.store import RunStore
from maxkernel_core.testing import FakeBackend

from ..agents.test_chain import PLAN_REPLY
from .fake_servers import error, text

HELPER = "def helper(x):\n    return x\n"
MODULE = "import jax\n\ndef computation(x):\n    return pallas_call_kernel(x)\n"
TWO_BLOCKS = f"A helper first:\n```python\n{HELPER}```\nand the module:\n```python\n{MODULE}```\n"


def test_plan_and_implement_over_http_with_a_rate_limit_on_the_way(openai_server, tmp_path):
    (tmp_path / "maxkernel.toml").write_text(
        f'[run]\nprovider = "litellm"\nmodel = "openai/local-coder"\n[llm]\napi_base = "{openai_server.url}/v1"\n'
        "timeout_s = 5\n")
    settings = load_settings(tmp_path, env={}).settings
    pm = get_plugin_manager()
    llms = resolve_role_llms(pm.registries, settings)  # a local api_base needs no key
    backend = FakeBackend()
    task = backend.load_task("fake_matmul")
    session = RunSession(pm, RunStore(tmp_path / "runs.db"), task, RunConfig(task.id, provider="litellm"), backend,
                         llms=llms, policy=RetryPolicy(max_retries=2, base_delay_s=0.01))
    session.ctx.cache("maxkernel-agents").update(task_prompt="Compute x.", knowledge="Pallas rules.")
    openai_server.enqueue(error(429, {"Retry-After": "0"}), text(PLAN_REPLY), text(TWO_BLOCKS))

    plan = session.plan()
    candidate = session.implement(plan)
    assert plan.parameters["BLOCK_M"] == 256
    assert candidate.code == MODULE  # the block that defines computation, not the helper
    assert len(openai_server.requests) == 3
    calls = session.store.llm_calls(session.run_id)
    assert [(c["role"], c["error"] is None) for c in calls] == [("plan", False), ("plan", True), ("implement", True)]
    assert calls[1]["input_tokens"] > 0 and "RateLimited" in calls[0]["error"]
    assert all("sk-" not in (c["prompt_json"] + (c["response"] or "")) for c in calls)
