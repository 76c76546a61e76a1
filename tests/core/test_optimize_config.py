"""``optimize()`` reads settings as the CLI does (maxkernel.toml, then MAXKERNEL_*), and never changes the caller's."""

from __future__ import annotations

import pytest

from maxkernel_core import optimize
from maxkernel_core.config import Settings
from maxkernel_core.errors import ConfigError
from maxkernel_core.testing import FakeBackend, FakeTester, ScriptedAgents


class FakeBackendPlugin:
    from maxkernel_core import hookimpl

    @hookimpl
    def register_backends(self, register):
        register(FakeBackend)

    @hookimpl
    def agent_profile(self, candidate):
        from maxkernel_core import Profile

        return Profile(candidate.id, "fake", True, 1e-3)


@pytest.fixture
def pm(mk_pm):
    mk_pm.register(FakeBackendPlugin(), name="fake-backend")
    mk_pm.register(FakeTester(), name="tester")
    agents = ScriptedAgents().enqueue("pallas_call = 1", "pallas_call = 2", "pallas_call = 3")
    mk_pm.register(agents, name="scripted")
    return mk_pm


def test_the_project_config_and_environment_apply_from_python(pm, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "maxkernel.toml").write_text('[run]\nbackend = "fake"\nstrategy = "auto"\nbudget = 1\n'
                                            '[strategy.auto]\nmax_iterations = 3\n')
    monkeypatch.setenv("MAXKERNEL_RUN_SEED", "7")
    result = optimize("fake_matmul", pm=pm, out=tmp_path / "out")
    assert result.status == "ok" and result.evaluations == 1  # the toml's budget, not the default's none
    from maxkernel_core.store import RunStore

    config = RunStore.open(None).get_run(result.run_id).config
    assert (config.backend, config.budget, config.seed, config.options) == ("fake", 1, 7, {"max_iterations": 3})


def test_settings_given_are_used_as_given_and_never_changed(pm, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "maxkernel.toml").write_text('[run]\nbudget = 1\n')  # not read: the caller's settings win
    settings = Settings()
    settings.run.backend = "fake"
    result = optimize("fake_matmul", settings=settings, pm=pm, out=tmp_path / "out", budget=2, strategy="auto")
    assert result.evaluations == 2
    assert (settings.run.budget, settings.run.strategy) == (None, "auto") and settings.sections == {}


def test_a_bad_strategy_option_fails_before_the_run_is_stored(pm, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "maxkernel.toml").write_text('[run]\nbackend = "fake"\n[strategy.auto]\nmax_iterations = -1\n')
    with pytest.raises(ConfigError, match=r"strategy.auto.max_iterations must be at least 0, got -1"):
        optimize("fake_matmul", pm=pm, out=tmp_path / "out")
    from maxkernel_core.store import RunStore

    assert RunStore.open(None).list_runs(5) == []
