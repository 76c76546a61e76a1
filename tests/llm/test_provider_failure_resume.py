"""A provider that fails mid-run leaves a resumable run: nothing evaluated is lost or judged again."""

from __future__ import annotations

import pytest
from maxkernel_core import optimize
from maxkernel_core.config import Settings
from maxkernel_core.llm import TransientError
from maxkernel_core.store import RunStore

from ..agents.test_chain import PLAN_REPLY
from ..tpu_pallas.conftest import TASKS, kernel_source
from .fake_servers import error, text

pytestmark = pytest.mark.slow


def settings_for(server, home) -> Settings:
    s = Settings()
    s.store.home = str(home)
    s.run.provider, s.run.model = "litellm", "openai/local-coder"
    s.llm.api_base, s.llm.timeout_s, s.llm.max_retries = f"{server.url}/v1", 5, 1
    s.strategy["auto"] = {"max_iterations": 2, "autotune_points": 1}
    return s


def test_run_survives_a_provider_outage_and_resumes(openai_server, tmp_path):
    kernel = f"```python\n{kernel_source('honest_rmsnorm.py')}```"
    openai_server.enqueue(text(PLAN_REPLY), text(kernel), error(500), error(503))  # 2nd plan: retries spent
    with pytest.raises(TransientError, match="gave up after 2 attempts"):
        optimize(TASKS / "rmsnorm", settings=settings_for(openai_server, tmp_path), strategy="auto",
                 out=tmp_path / "out")
    store = RunStore(tmp_path / "runs.db")
    (run,) = store.list_runs()
    assert run.status == "failed" and "TransientError" in run.result["error"]
    first = [e.candidate_id for e in store.evaluations(run.id)]
    assert len(first) == 1 and store.evaluations(run.id)[0].ok
    assert [c["error"] is None for c in store.llm_calls(run.id)] == [True, True, False, False]

    faster = kernel.replace("BLOCK_ROWS = 32", "BLOCK_ROWS = 64")
    openai_server.enqueue(text(PLAN_REPLY), text(faster))
    result = optimize(TASKS / "rmsnorm", settings=settings_for(openai_server, tmp_path), resume=run.id,
                      out=tmp_path / "out")
    assert result.status == "ok" and result.run_id == run.id
    evaluated = [e.candidate_id for e in store.evaluations(run.id)]
    assert evaluated[:1] == first and len(evaluated) >= 3  # the resumed iteration, autotune, the re-check
    assert store.get_run(run.id).status == "ok" and (tmp_path / "out" / "kernel.py").exists()
