"""Task suites are registered through register_task_suites, like any other plugin kind."""

from __future__ import annotations

from pathlib import Path

import pytest
from maxkernel_core import PluginError, TaskSuite, hookimpl

from ..helpers import REPO, run_cli


def _suite(name: str, root: Path, backend: str = "tpu_pallas"):
    class Suite(TaskSuite):
        description = "a test suite"

        @classmethod
        def root(cls) -> Path:
            return root

    Suite.name, Suite.backend = name, backend

    class Plugin:
        @hookimpl
        def register_task_suites(self, register):
            register(Suite)

    return Plugin()


def test_a_registered_suite_is_listed_and_gives_its_roots(mk_pm, tmp_path):
    pm = mk_pm
    pm.register(_suite("mine", tmp_path), name="mine-plugin")
    assert pm.registries.task_suites["mine"].cls.root() == tmp_path
    assert tmp_path in pm.registries.suite_roots("tpu_pallas")
    assert tmp_path not in pm.registries.suite_roots("another_backend")


def test_a_task_id_is_looked_up_in_every_suite_the_backends_own_first(mk_pm, tmp_path):
    from types import SimpleNamespace

    from maxkernel_core.config import Settings
    from maxkernel_core.run import task_search_paths

    pm = mk_pm
    theirs, ours = tmp_path / "tpu_suite", tmp_path / "gpu_suite"
    pm.register(_suite("tpu_one", theirs), name="tpu-plugin")
    pm.register(_suite("gpu_one", ours, backend="gpu_pallas"), name="gpu-plugin")
    gpu = SimpleNamespace(name="gpu_pallas", task_roots=lambda: [])
    paths = task_search_paths(Settings(), pm, gpu)
    assert theirs in paths and ours in paths and paths.index(ours) < paths.index(theirs)


def test_two_suites_with_one_name_fail_naming_both(mk_pm, tmp_path):
    pm = mk_pm
    pm.register(_suite("dup", tmp_path), name="a")
    pm.register(_suite("dup", tmp_path), name="b")
    with pytest.raises(PluginError, match="task_suite name 'dup' is registered by both"):
        pm.registries.task_suites


def test_the_builtin_jaxbench_suite_is_a_plugin_found_by_entry_point():
    result = run_cli("plugins", "--json")
    rows = {r["name"]: r for r in __import__("json").loads(result.stdout)}
    assert rows["jaxbench"]["distribution"] == "maxkernel-jaxbench"
    assert rows["jaxbench"]["registers"] == ["task_suite:jaxbench"]
    assert "register_task_suites" in rows["jaxbench"]["hooks"]


def test_run_finds_a_suite_task_by_id(mk_home):
    result = run_cli("tasks", "--json")
    ids = {t["id"]: t for t in __import__("json").loads(result.stdout)}
    assert Path(ids["8p_GEMM"]["path"]) == REPO / "jaxbench" / "8p_GEMM"


def test_a_tasks_shortcut_is_a_typed_note_for_its_reports():
    """What a reader of a task's results should know travels as ``Task.notes``, not a metadata key."""
    from maxkernel_tpu_pallas.backend import TpuPallasBackend

    task = TpuPallasBackend().load_task(REPO / "jaxbench" / "21k_Gemm_Divide_Sum_Scaling")
    assert "sum" in task.notes.lower() and "shortcut" not in task.metadata
