"""A real Ray cluster on this machine (a head and a second node, each its own raylet): graph search and a bench
run through ``--executor ray`` and match the local executor; an actor killed mid-evaluation costs a retry, not a
candidate."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from maxkernel_core.store import RunStore

from ..graph_run import BUDGET, GRAPH_TOML, SEED, uninterrupted_graph_run
from ..helpers import run_cli
from ..tpu_pallas.conftest import KERNELS, TASKS

pytestmark = pytest.mark.slow

RAY = Path(sys.executable).parent / "ray"
#: No drain on SIGTERM at teardown (Ray waits 30 s by default for Serve replicas we do not have).
NODE_ENV = {"RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0", "RAY_USAGE_STATS_ENABLED": "0"}
#: What a Ray worker process running an evaluation calls itself (Ray sets the title per method call).
EVALUATING = "ray::EvalHost.evaluate"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_count(address: str) -> int:
    status = subprocess.run([str(RAY), "status", f"--address={address}"], capture_output=True, text=True, timeout=60)
    return status.stdout.count(" node_") if status.returncode == 0 else 0


@pytest.fixture(scope="module")
def cluster():
    """``ray start --head`` and ``ray start --address`` on 127.0.0.1: 1 CPU and a 200 MB object store each."""
    temp = Path(tempfile.mkdtemp(prefix="mkray-", dir="/tmp"))  # Ray's socket paths must stay short
    address = f"127.0.0.1:{free_port()}"
    small = ["--block", "--node-ip-address=127.0.0.1", "--num-cpus=1", f"--object-store-memory={200 * 10**6}",
             "--disable-usage-stats", f"--dashboard-agent-listen-port={free_port()}",
             # no log monitors: each polled the session's log files at a quarter of a core for the whole module,
             # on a 2-core machine, to forward workers' prints no test reads
             "--include-log-monitor=False"]
    nodes = []

    def start(*args: str) -> None:
        log = open(temp / f"node{len(nodes)}.log", "wb")
        # its own process group: the teardown stops exactly these nodes and what they started
        nodes.append(subprocess.Popen([str(RAY), "start", *args, *small], stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True, env={**os.environ, **NODE_ENV}))

    try:
        start("--head", f"--port={address.split(':')[1]}", f"--temp-dir={temp}", "--include-dashboard=false",
              f"--ray-client-server-port={free_port()}")
        for want in (1, 2):
            deadline = time.monotonic() + 120
            while node_count(address) < want:
                assert all(n.poll() is None for n in nodes), (temp / f"node{want - 1}.log").read_text()[-3000:]
                assert time.monotonic() < deadline, f"the Ray cluster did not reach {want} nodes"
                time.sleep(1)
            if want == 1:
                start(f"--address={address}")
        yield {"address": address, "node_groups": [n.pid for n in nodes]}
    finally:
        for node in nodes:
            os.killpg(node.pid, signal.SIGTERM)  # drains, then stops raylet, GCS and the workers it started
        for node in nodes:
            try:
                node.wait(timeout=45)
            except subprocess.TimeoutExpired:
                os.killpg(node.pid, signal.SIGKILL)
                node.wait()
        shutil.rmtree(temp, ignore_errors=True)


def cli(tmp_path: Path, name: str, *args: str, executor: list[str] = ()) -> tuple[subprocess.CompletedProcess, RunStore]:
    home = tmp_path / name
    result = run_cli(*args, *executor, env={"MAXKERNEL_HOME": str(home)}, cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result, RunStore(home / "runs.db")


def graph_of(store: RunStore, run_id: str) -> list[tuple]:
    """The graph without ids or timings: each node's depth, move, parameters, verdict and reason, in stored order."""
    cands = {c.id: c for c in store.candidates(run_id)}
    verdicts = {e.candidate_id: e for e in store.evaluations(run_id)}
    moves = {e.child_id: e.transformation for e in store.edges(run_id)}
    return [(n.depth, moves.get(n.id, "root"), json.dumps(cands[n.candidate_id].parameters, sort_keys=True),
             verdicts[n.candidate_id].status.value, verdicts[n.candidate_id].reason, n.in_beam)
            for n in store.nodes(run_id)]


def evaluating_actors(node_groups: list[int]) -> list[int]:
    """Ray worker processes of this cluster (children of its raylets, in its nodes' process groups) running an evaluation right now."""
    ours = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
            stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ppid = int(stat[1])
        if cmdline.startswith(EVALUATING) and ppid > 0:
            try:
                parent_pgid = int((Path("/proc") / str(ppid) / "stat").read_text().rsplit(")", 1)[1].split()[2])
            except OSError:
                continue
            if parent_pgid in node_groups:
                ours.add(int(proc.name))
    return sorted(ours)


def test_graph_search_on_ray_matches_local_and_survives_a_killed_worker(cluster, tmp_path):
    local_folder = uninterrupted_graph_run()  # the session's graph run on the local executor
    local = RunStore(local_folder / "home" / "runs.db")
    local_run = local.list_runs(1)[0].id
    (tmp_path / "maxkernel.toml").write_text(GRAPH_TOML)
    args = ["run", "--task", str(TASKS / "rmsnorm"), "--strategy", "graph", "--provider", "offline", "--seed",
            str(SEED), "--budget", str(BUDGET)]

    home = tmp_path / "ray"
    proc = subprocess.Popen([sys.executable, "-m", "maxkernel_core", *args, "--out", str(tmp_path / "ray-out"),
                             "--executor", "ray", "--ray-address", cluster["address"]],
                            env={**os.environ, "MAXKERNEL_HOME": str(home)}, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        killed, seen, deadline = None, set(), time.monotonic() + 400
        while killed is None and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.3)
            store = RunStore(home / "runs.db") if (home / "runs.db").exists() else None
            runs = store.list_runs(1) if store else []
            if not runs or not store.evaluations(runs[0].id):
                continue  # mid-run: after the root's verdict, while the children are judged
            busy = set(evaluating_actors(cluster["node_groups"]))
            steady = busy & seen  # evaluating on two looks in a row: the call is in flight, not just returning
            if steady:
                killed = min(steady)
                os.kill(killed, signal.SIGKILL)
            seen = busy
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert killed is not None, "no evaluation was caught in flight on the cluster"
    assert proc.returncode == 0, err[-3000:]

    store = RunStore(home / "runs.db")
    run_id = store.list_runs(1)[0].id
    assert graph_of(store, run_id) == graph_of(local, local_run)  # same seed, same graph, same verdicts
    evaluations = store.evaluations(run_id)
    judged = sorted(e.candidate_id for e in evaluations)
    assert judged == sorted(c.id for c in store.candidates(run_id)) and len(set(judged)) == len(judged)
    where = [e.details["executor"] for e in evaluations]
    retried = [w for w in where if w["lost"]]
    assert len(retried) == 1 and retried[0]["attempts"] == 2  # the killed call, judged again on another actor
    lost = retried[0]["lost"][0]
    assert lost["pid"] == killed and "Error" in lost["error"] and retried[0]["host"]["pid"] != killed
    assert len({w["host"]["node"] for w in where}) == 2  # both nodes judged candidates
    assert (tmp_path / "ray-out" / "kernel.py").read_text().split('"""', 2)[2] == \
        (local_folder / "out" / "kernel.py").read_text().split('"""', 2)[2]  # the same best kernel


def test_bench_of_ready_kernels_on_ray_matches_local(cluster, tmp_path):
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    suite = tmp_path / "suite"  # two tasks: one per node (the f32 matmul's precision search is left to other tests)
    for folder, task_id, kernel in (("rmsnorm", "test_rmsnorm", "honest_rmsnorm.py"),
                                    ("matmul_bias_gelu", "test_matmul_bias_gelu", "honest_matmul_bias_gelu.py")):
        shutil.copytree(TASKS / folder, suite / folder)
        shutil.copy(KERNELS / kernel, kernels / f"{task_id}.py")
    args = ["bench", "--suite", str(suite), "--kernels", str(kernels)]
    _, local = cli(tmp_path, "local", *args, "--out", str(tmp_path / "local-out"))
    _, remote = cli(tmp_path, "ray", *args, "--out", str(tmp_path / "ray-out"),
                    executor=["--executor", "ray", "--ray-address", cluster["address"]])

    def rows(out: Path) -> dict[str, tuple]:
        data = json.loads((out / "results.json").read_text())
        return {t["task_id"]: (t["status"], t["correct"], t["compiled"], t["proof_of_kernel"], t["speedup"])
                for t in data["tasks"]}

    assert rows(tmp_path / "ray-out") == rows(tmp_path / "local-out")
    assert {status for status, *_ in rows(tmp_path / "ray-out").values()} == {"correct"}

    def verdicts(store: RunStore) -> dict[str, tuple]:
        return {r.task_id: [(e.status.value, e.reason) for e in store.evaluations(r.id)] for r in store.list_runs(10)}

    assert verdicts(remote) == verdicts(local)
    hosts = [e.details["executor"]["host"]["node"] for r in remote.list_runs(10) for e in remote.evaluations(r.id)]
    assert len(hosts) == 2 and len(set(hosts)) == 2  # one actor per node, each took work
    assert all("executor" not in e.details for r in local.list_runs(10) for e in local.evaluations(r.id))


def test_resources_the_cluster_lacks_are_named_before_any_work(cluster, tmp_path):
    result = run_cli("run", "--task", str(TASKS / "rmsnorm"), "--ray-address", cluster["address"],
                     env={"MAXKERNEL_HOME": str(tmp_path), "MAXKERNEL_EXECUTOR_RESOURCES": "TPU=1"}, cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "Error: the Ray cluster has no 'TPU' resource (it has: CPU," in result.stderr
    db = tmp_path / "runs.db"
    assert not db.exists() or RunStore(db).list_runs(5) == []  # no run was started
