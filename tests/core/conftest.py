"""What the core's session tests share: a plugin manager with scripted roles, a store, a fake backend."""

import pytest

from maxkernel_core.plugins import get_plugin_manager
from maxkernel_core.store import RunStore
from maxkernel_core.testing import FakeBackend, FakeTester, ScriptedAgents


@pytest.fixture
def parts(tmp_path):
    """(plugin manager, scripted agents, store, fake backend, its task), nothing judged yet."""
    pm = get_plugin_manager(load_entrypoints=False)
    agents = ScriptedAgents()
    pm.register(agents, name="agents")
    pm.register(FakeTester(), name="tester")
    store = RunStore(tmp_path / "runs.db")
    backend = FakeBackend()
    task = backend.load_task("fake_matmul")
    return pm, agents, store, backend, task
