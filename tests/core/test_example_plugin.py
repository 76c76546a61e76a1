"""The worked example in docs/examples is installed like any third-party plugin and works."""

import json
import subprocess
import sys
import textwrap

import pytest

from ..helpers import run_cli

RUN_IT = textwrap.dedent('''
    import sys
    from maxkernel_core.plugins import get_plugin_manager
    from maxkernel_core.records import RunConfig
    from maxkernel_core.session import RunSession
    from maxkernel_core.store import RunStore
    from maxkernel_core.testing import FakeBackend, FakeTester, ScriptedAgents

    pm = get_plugin_manager()
    Strategy = pm.registries.get("strategy", "best_of_n").cls   # selected by name
    agents = ScriptedAgents().enqueue("x = 1", "pallas_call = 1").enqueue_fix("still broken")
    pm.register(agents, name="scripted-agents"); pm.register(FakeTester(), name="tester")
    backend = FakeBackend()
    task = backend.load_task("fake_matmul")
    session = RunSession(pm, RunStore(sys.argv[1]), task, RunConfig(task.id, "best_of_n"), backend)
    result = Strategy({"samples": 2, "debug_tries": 1}).run(session)
    print(result.status, result.evaluations, result.best.candidate.code)
''')


def test_example_plugin_is_listed_with_its_distribution(example_plugin_dir):
    result = run_cli("plugins", "--json", pythonpath=[example_plugin_dir])
    assert result.returncode == 0, result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert rows["best_of_n"]["distribution"] == "maxkernel-best-of-n"
    assert rows["best_of_n"]["registers"] == ["strategy:best_of_n"]


def test_example_strategy_is_selectable_by_name_and_runs(example_plugin_dir, tmp_path):
    env_path = f"{example_plugin_dir}"
    result = subprocess.run([sys.executable, "-c", RUN_IT, str(tmp_path / "runs.db")], capture_output=True,
                            text=True, env={**__import__("os").environ, "PYTHONPATH": env_path})
    assert result.returncode == 0, result.stderr
    # sample 1 fails, its one debug try fails too; sample 2 passes: 3 evaluations, best is sample 2
    assert result.stdout.strip() == "ok 3 pallas_call = 1"


def test_example_strategy_can_be_disabled(example_plugin_dir):
    result = run_cli("--disable-plugin", "best_of_n", "plugins", "--json", pythonpath=[example_plugin_dir])
    assert "best_of_n" not in [row["name"] for row in json.loads(result.stdout)]


@pytest.mark.slow
def test_example_strategy_runs_through_maxkernel_run(example_plugin_dir, tmp_path):
    """A third party's strategy gets the same command and the same outputs as the built-ins."""
    from ..tpu_pallas.conftest import TASKS

    (tmp_path / "maxkernel.toml").write_text("[strategy.best_of_n]\nsamples = 2\ndebug_tries = 1\n")
    result = run_cli("run", "--task", str(TASKS / "rmsnorm"), "--strategy", "best_of_n", "--provider", "offline",
                     "--out", str(tmp_path / "out"), cwd=tmp_path, pythonpath=[example_plugin_dir],
                     env={"MAXKERNEL_HOME": str(tmp_path / "home")}, timeout=600)
    assert result.returncode == 0, result.stderr
    for name in ("kernel.py", "report.json", "report.html"):
        assert (tmp_path / "out" / name).exists()
    assert json.loads((tmp_path / "out" / "report.json").read_text())["run"]["strategy"] == "best_of_n"
