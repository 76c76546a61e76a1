"""The Ray executor before any cluster work: how it says what is missing, and how a task travels to a host."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from maxkernel_core import TaskError
from maxkernel_core.store import RunStore

from ..helpers import run_cli
from ..tpu_pallas.conftest import TASKS

#: ``maxkernel`` in a fresh interpreter where ``import ray`` fails, as on a machine without Ray.
WITHOUT_RAY = "import sys; sys.modules['ray'] = None; from maxkernel_core.cli.main import main; main()"


def cli_without_ray(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT_RAY, *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120, env={**__import__("os").environ, "MAXKERNEL_HOME": str(cwd / "home")})


@pytest.mark.parametrize("command", [
    ["run", "--task", str(TASKS / "rmsnorm"), "--executor", "ray"],
    ["bench", "--suite", str(TASKS), "--kernels", str(TASKS), "--ray-address", "auto"],
])
def test_without_ray_the_executor_says_how_to_install_it(tmp_path, command):
    result = cli_without_ray(*command, cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines[-1] == ("Error: the ray executor needs Ray, which is not installed here: "
                         "pip install 'maxkernel[ray]' (in a checkout: make install-test)")
    assert "Traceback" not in result.stderr
    db = tmp_path / "home" / "runs.db"
    assert not db.exists() or RunStore(db).list_runs(5) == []  # it failed before any run was started


def test_without_the_plugin_the_unknown_executor_error_names_the_extra(tmp_path):
    result = run_cli("--disable-plugin", "ray", "run", "--task", str(TASKS / "rmsnorm"), "--executor", "ray",
                     env={"MAXKERNEL_HOME": str(tmp_path)}, cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().endswith(
        "Error: executor 'ray' is not installed (installed: local); it comes with maxkernel-ray: "
        "pip install 'maxkernel[ray]'")


def test_an_unreachable_cluster_fails_in_seconds_not_minutes(tmp_path):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.monotonic()
    result = run_cli("run", "--task", str(TASKS / "rmsnorm"), "--ray-address", f"127.0.0.1:{port}",
                     env={"MAXKERNEL_HOME": str(tmp_path)}, cwd=tmp_path, timeout=60)
    assert result.returncode == 3 and time.monotonic() - start < 30  # a service failure, not a usage error
    assert f"Error: cannot reach the Ray cluster at 127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr


def test_task_files_travel_to_a_host_and_the_task_points_at_them(tmp_path):
    from maxkernel_ray import taskfiles
    from maxkernel_tpu_pallas.backend import TpuPallasBackend

    backend = TpuPallasBackend()
    for ref in (TASKS / "rmsnorm", TASKS.parent / "tasks_jaxbench" / "softmax_workload.py"):
        task = backend.load_task(ref)
        bundle = taskfiles.pack(task)
        moved = taskfiles.unpack(task, bundle, cache=tmp_path / "host")
        assert moved.path.startswith(str(tmp_path / "host")) and moved.id == task.id
        module = moved.metadata["module"]
        assert module.startswith(str(tmp_path / "host"))
        assert open(module).read() == open(task.metadata["module"]).read()
        # the host's copy is a task the backend loads as the same task
        again = backend.load_task(moved.path)
        assert (again.id, again.sizes, again.atol, again.rtol) == (task.id, task.sizes, task.atol, task.rtol)
        # the same content is written once: a second unpack reuses the folder
        assert taskfiles.unpack(task, bundle, cache=tmp_path / "host").path == moved.path
    (tmp_path / "big").mkdir()
    (tmp_path / "big" / "data.bin").write_bytes(b"\0" * (taskfiles.MAX_BYTES + 1))
    with pytest.raises(TaskError, match="more than the 64 MiB"):
        taskfiles.pack(task.__class__(task.id, task.backend, str(tmp_path / "big")))
