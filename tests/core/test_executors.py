"""Executors: registered through register_executors, selected by config, and on the path every evaluation takes."""

from __future__ import annotations

import threading

import pytest

from maxkernel_core import Executor, hookimpl
from maxkernel_core.config import load_settings
from maxkernel_core.errors import ConfigError, PluginError, UnknownPluginError
from maxkernel_core.plugins import get_plugin_manager
from maxkernel_core.records import Candidate, RunConfig
from maxkernel_core.run import executor_for
from maxkernel_core.session import RunSession
from maxkernel_core.store import RunStore
from maxkernel_core.testing import FakeBackend, FakeTester, ScriptedAgents

GOOD = "def computation(x):\n    return pl.pallas_call(...)(x)\n"


class Recording(Executor):
    """Judges with the backend it is handed, and says which backend and target it was asked for."""

    name = "recording"
    calls: list = []

    def evaluate(self, backend, task, candidate, *, target):
        self.calls.append((backend.name, task.id, candidate.id, target))
        return backend.evaluate(task, candidate, target=target)


class RecordingPlugin:
    @hookimpl
    def register_executors(self, register):
        register(Recording)


def test_register_executors_collects_executor_classes_by_name(tmp_path):
    pm = get_plugin_manager(load_entrypoints=False)
    pm.register(RecordingPlugin(), name="recording-plugin")
    reg = pm.registries.executors["recording"]
    assert reg.cls is Recording and reg.plugin == "recording-plugin"
    with pytest.raises(UnknownPluginError, match=r"executor 'ray' is not installed \(installed: recording\).*maxkernel\[ray\]"):
        executor_for(load_settings(tmp_path, env={"MAXKERNEL_EXECUTOR_NAME": "ray"}).settings, pm)

    class NotAnExecutor:
        name = "bad"

    class BadPlugin:
        @hookimpl
        def register_executors(self, register):
            register(NotAnExecutor)

    pm.register(BadPlugin(), name="bad-plugin")
    with pytest.raises(PluginError, match="registered .*NotAnExecutor.* as a executor, but it is not a Executor"):
        pm.registries.executors


def test_the_local_executor_is_the_installed_default_and_judges_with_the_backend(tmp_path):
    settings = load_settings(tmp_path, env={}).settings
    assert settings.executor.name == "local"
    executor = executor_for(settings, get_plugin_manager())
    assert type(executor).__name__ == "LocalExecutor"
    backend = FakeBackend()
    task = backend.load_task("fake_matmul")
    verdict = executor.evaluate(backend, task, Candidate(task.id, GOOD), target="v6e")
    assert verdict.ok and verdict.target == "v6e" and len(backend.evaluated) == 1


def test_local_executor_concurrency_limits_evaluations_in_flight(tmp_path):
    settings = load_settings(tmp_path, env={"MAXKERNEL_EXECUTOR_CONCURRENCY": "1"}).settings
    executor = executor_for(settings, get_plugin_manager())
    assert executor.max_concurrency == 1
    inside, most = [0], [0]
    lock, release = threading.Lock(), threading.Event()

    def judge(task, candidate):
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        release.wait(0.2)
        with lock:
            inside[0] -= 1
        return FakeBackend.default_judge(task, candidate)

    backend = FakeBackend(judge=judge)
    task = backend.load_task("fake_matmul")
    threads = [threading.Thread(target=executor.evaluate, args=(backend, task, Candidate(task.id, GOOD)),
                                kwargs={"target": "v5e"}) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 1 and len(backend.evaluated) == 3


def test_session_evaluations_go_through_the_runs_executor(tmp_path):
    pm = get_plugin_manager(load_entrypoints=False)
    pm.register(ScriptedAgents().enqueue(GOOD), name="agents")
    pm.register(FakeTester(), name="tester")
    backend = FakeBackend()
    task = backend.load_task("fake_matmul")
    Recording.calls = []
    session = RunSession(pm, RunStore(tmp_path / "runs.db"), task, RunConfig(task.id, target="v5p"), backend,
                         executor=Recording())
    candidate = session.implement(session.plan())
    assert session.evaluate(candidate).ok
    assert Recording.calls == [("fake", "fake_matmul", candidate.id, "v5p")]
    # Without an executor (a session built by hand) the backend judges in this process, as before.
    plain = RunSession(pm, RunStore(tmp_path / "runs.db"), task, RunConfig(task.id), backend)
    assert plain.ctx.judge(task, Candidate(task.id, GOOD)).ok and len(backend.evaluated) == 2


def test_executor_settings_from_file_env_and_flags(tmp_path):
    (tmp_path / "maxkernel.toml").write_text(
        '[executor]\nname = "ray"\naddress = "auto"\nconcurrency = 8\n[executor.resources]\nTPU = 1\nCPU = 2\n')
    resolved = load_settings(tmp_path, env={"MAXKERNEL_EXECUTOR_MAX_RETRIES": "5"},
                             overrides={"executor.address": ("ray://head:10001", "--ray-address")})
    ex = resolved.settings.executor
    assert (ex.name, ex.address, ex.concurrency, ex.max_retries) == ("ray", "ray://head:10001", 8, 5)
    assert ex.resources == {"TPU": 1.0, "CPU": 2.0}
    assert resolved.sources["executor.address"] == "--ray-address"
    assert resolved.sources["executor.max_retries"] == "env MAXKERNEL_EXECUTOR_MAX_RETRIES"
    env = load_settings(tmp_path, env={"MAXKERNEL_EXECUTOR_RESOURCES": "TPU=4, memory=1e9"}).settings.executor
    assert env.resources == {"TPU": 4.0, "memory": 1e9}
    with pytest.raises(ConfigError, match=r"executor.resources.*must be a table of numbers.*got 'TPU'"):
        load_settings(tmp_path, env={"MAXKERNEL_EXECUTOR_RESOURCES": "TPU"})
    (tmp_path / "maxkernel.toml").write_text('[executor]\nresources = {TPU = "one"}\n')
    with pytest.raises(ConfigError, match="executor.resources"):
        load_settings(tmp_path, env={})
