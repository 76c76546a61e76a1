"""Fixtures for testing maxkernel plugins; installed as a pytest plugin through ``pytest11``.

* ``mk_home``: an empty ``$MAXKERNEL_HOME`` for the test (the run store lives there).
* ``mk_pm``: a fresh plugin manager with the installed plugins.
* ``fake_llm`` / ``fake_backend``: scripted fakes (:mod:`maxkernel_core.testing.fakes`).
* ``hook_recorder``: records the hook calls made through ``mk_pm``.
"""

from __future__ import annotations

import pytest

from ..plugins import get_plugin_manager
from .fakes import FakeBackend, FakeLLMProvider, HookRecorder


@pytest.fixture
def mk_home(tmp_path, monkeypatch):
    home = tmp_path / "maxkernel-home"
    home.mkdir()
    monkeypatch.setenv("MAXKERNEL_HOME", str(home))
    return home


@pytest.fixture
def mk_pm(mk_home):
    return get_plugin_manager()


@pytest.fixture
def fake_llm():
    return FakeLLMProvider()


@pytest.fixture
def fake_backend():
    return FakeBackend()


@pytest.fixture
def hook_recorder(mk_pm):
    with HookRecorder(mk_pm) as recorder:
        yield recorder
