"""A run recorded with llm.record and replayed with the replay provider writes the same candidates."""

from __future__ import annotations

import pytest
from maxkernel_core import RunConfig
from maxkernel_core.config import load_settings
from maxkernel_core.llm_roles import RoleLLM, TranscriptRecorder, resolve_role_llms
from maxkernel_core.plugins import get_plugin_manager
from maxkernel_core.session import RunSession
from maxkernel_core.store import RunStore
from maxkernel_core.testing import FakeBackend, FakeLLMProvider, FakeTester

from maxkernel_llm_providers.replay import ReplayExhausted

from .test_chain import PLAN_REPLY, fenced

CODES = ["def computation(x):\n    return pallas_call_v1(x)\n", "def computation(x):\n    return pallas_call_v2(x)\n"]


def _session(tmp_path, llms, **options):
    pm = get_plugin_manager()
    pm.register(FakeTester(), name="fake-tester")
    backend = FakeBackend()
    task = backend.load_task("fake_matmul")
    return RunSession(pm, RunStore(tmp_path / "runs.db"), task, RunConfig(task.id), backend, llms=llms, **options)


def _two_rounds(session):
    return [session.implement(session.plan()).code for _ in range(2)]


def test_replay_reproduces_the_recorded_candidates(tmp_path):
    transcript = tmp_path / "run.jsonl"
    fake = FakeLLMProvider().enqueue(PLAN_REPLY, fenced(CODES[0]), PLAN_REPLY, fenced(CODES[1]))
    llm = RoleLLM(fake, "m", None, 100)
    recorded = _two_rounds(_session(tmp_path, {r: llm for r in ("plan", "implement", "debug")},
                                    recorder=TranscriptRecorder(transcript)))
    assert recorded == CODES and len(transcript.read_text().splitlines()) == 4

    (tmp_path / "maxkernel.toml").write_text(f'[run]\nprovider = "replay"\n[llm]\nreplay = "{transcript}"\n')
    settings = load_settings(tmp_path, env={}).settings
    llms = resolve_role_llms(get_plugin_manager().registries, settings)  # switching provider: config only
    session = _session(tmp_path, llms)
    assert _two_rounds(session) == recorded
    with pytest.raises(ReplayExhausted, match="no more 'plan' replies"):
        session.plan()


def test_replay_without_a_transcript_is_not_ready(tmp_path):
    settings = load_settings(tmp_path, env={}).settings
    settings.run.provider = "replay"
    from maxkernel_core.errors import ProviderError

    with pytest.raises(ProviderError, match="set llm.replay \\(or MAXKERNEL_LLM_REPLAY\\)"):
        resolve_role_llms(get_plugin_manager().registries, settings)
