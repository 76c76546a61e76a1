"""Task loading: both formats, lookup by id, and one clear line for every malformed task."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from maxkernel_core import TaskError

from maxkernel_pallas_judge import tasks

from ..helpers import run_cli
from .conftest import TASKS

JAXBENCH = Path(__file__).parent / "tasks_jaxbench"


def test_maxkernel_format_with_our_extensions():
    task = tasks.load_task_at(TASKS / "rmsnorm")
    assert (task.id, task.format, task.sizes, task.dtype) == ("test_rmsnorm", "maxkernel", ("full", "small"), "bfloat16")
    assert (task.atol, task.rtol) == (2e-2, 2e-2)
    assert task.metadata["supports_seed"] and not task.metadata["has_flops"]
    assert tasks.load_task_at(TASKS / "matmul").metadata["has_flops"]


def test_jaxbench_format():
    task = tasks.load_task_at(JAXBENCH / "softmax_workload.py")
    assert (task.id, task.format, task.sizes, task.dtype, task.atol) == ("jb_softmax", "jaxbench", ("full",), "float32", 1e-5)
    assert task.metadata["entry"] == "workload" and task.metadata["config"]["rows"] == 512


def test_find_by_id_in_search_paths_and_by_path():
    assert tasks.find_task("test_matmul", (TASKS,)).path == str((TASKS / "matmul").resolve())
    assert tasks.find_task("matmul", (TASKS,)).id == "test_matmul"  # folder name works too
    assert tasks.find_task("jb_softmax", (JAXBENCH,)).format == "jaxbench"
    with pytest.raises(TaskError, match="no task 'nope': not a path, and no task with that id in"):
        tasks.find_task("nope", (TASKS,))


def _folder(tmp_path, yaml_text=None, reference=None) -> Path:
    folder = tmp_path / "t"
    folder.mkdir()
    if yaml_text is not None:
        (folder / "kernel_task.yaml").write_text(yaml_text)
    if reference is not None:
        (folder / "reference.py").write_text(reference)
    return folder


GOOD_REF = "def get_inputs(dtype=None):\n    return (), ()\ndef computation():\n    return 0\n"
GOOD_YAML = "task_id: t\natol: 0.1\nrtol: 0.1\n"


@pytest.mark.parametrize("yaml_text, reference, message", [
    (None, GOOD_REF, "a MaxKernel task folder needs kernel_task.yaml"),
    (GOOD_YAML, None, "kernel_task.yaml is there but reference.py is missing"),
    ("task_id: [unclosed\n", GOOD_REF, "kernel_task.yaml: not valid YAML"),
    ("task_id: t\n", GOOD_REF, "kernel_task.yaml: missing key\\(s\\) atol, rtol"),
    ("task_id: t\natol: -1\nrtol: 0.1\n", GOOD_REF, "atol must be a non-negative number or a list"),
    (GOOD_YAML, "def get_inputs(:\n", r"reference.py: line 1: "),
    (GOOD_YAML, "def get_inputs():\n    pass\n", r"reference.py: defines no function computation\(\)"),
])
def test_malformed_maxkernel_task_is_one_line_naming_the_file(tmp_path, yaml_text, reference, message):
    folder = _folder(tmp_path, yaml_text, reference)
    with pytest.raises(TaskError, match=message) as info:
        tasks.load_task_at(folder)
    assert "\n" not in str(info.value) and str(folder) in str(info.value)


def test_malformed_jaxbench_module(tmp_path):
    bad = tmp_path / "w.py"
    bad.write_text("CONFIG = {'n': 2 * 3}\ndef create_inputs():\n    pass\ndef workload(x):\n    pass\n")
    with pytest.raises(TaskError, match="CONFIG must be a literal dict"):
        tasks.load_task_at(bad)
    bad.write_text("CONFIG = {}\ndef workload(x):\n    pass\n")
    with pytest.raises(TaskError, match=r"defines no function create_inputs\(\)"):
        tasks.load_task_at(bad)


def test_discover_reports_broken_tasks_beside_good_ones(tmp_path):
    good = tmp_path / "good"
    good.mkdir()
    (good / "kernel_task.yaml").write_text(GOOD_YAML)
    (good / "reference.py").write_text(GOOD_REF)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "kernel_task.yaml").write_text("task_id: b\n")
    (broken / "reference.py").write_text(GOOD_REF)
    (tmp_path / "notes.txt").write_text("not a task")
    refs = {r.id: r for r in tasks.discover(tmp_path)}
    assert set(refs) == {"t", "broken"}
    assert refs["t"].problem is None and "missing key(s) atol, rtol" in refs["broken"].problem


def test_maxkernel_tasks_cli_lists_both_formats(tmp_path):
    listed = json.loads(run_cli("tasks", str(TASKS), "--json").stdout)
    assert {t["id"] for t in listed} == {"test_matmul", "test_matmul_bias_gelu", "test_rmsnorm"}
    assert all(t["format"] == "maxkernel" and t["sizes"] == ["full", "small"] for t in listed)
    jb = json.loads(run_cli("tasks", str(JAXBENCH), "--json").stdout)
    assert [(t["id"], t["format"]) for t in jb] == [("jb_softmax", "jaxbench")]
    # configured folders are searched when no path is given
    (tmp_path / "maxkernel.toml").write_text(f'[tasks]\npaths = ["{JAXBENCH}"]\n')
    table = run_cli("tasks", cwd=tmp_path)
    assert "jb_softmax" in table.stdout and "jaxbench" in table.stdout
