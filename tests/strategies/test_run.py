"""`maxkernel run` with the auto strategy and the offline provider, end to end, as a user runs it."""

from __future__ import annotations

import json

import pytest

from ..helpers import run_cli, run_until_killed
from ..tpu_pallas.conftest import TASKS

pytestmark = pytest.mark.slow


def test_run_writes_a_kernel_that_eval_passes(tmp_path):
    env = {"MAXKERNEL_HOME": str(tmp_path / "home")}
    out = tmp_path / "out"
    result = run_cli("run", "--task", str(TASKS / "rmsnorm"), "--strategy", "auto", "--provider", "offline",
                     "--out", str(out), "--budget", "2", env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    assert f"Best kernel: {out / 'kernel.py'}" in result.stdout and "estimated by the backend's cost model" in result.stdout
    # no terminal on stderr: each verdict is a line as it is stored, not only the live line's last frame
    assert result.stderr.count(" -> ok") >= 1 and "  cand-" in result.stderr
    assert "report.html" in result.stdout and "<svg" in (out / "report.html").read_text()
    # the next command names the task as the run was given it (a path here): the id alone is found nowhere
    said = " ".join(result.stdout.split())
    assert f"maxkernel profile --task {TASKS / 'rmsnorm'} --kernel {out / 'kernel.py'} --target v5e" in said, said
    kernel = (out / "kernel.py").read_text()
    assert kernel.startswith('"""Best kernel of maxkernel run') and "us estimated for v5e" in kernel
    report = json.loads((out / "report.json").read_text())
    assert report["result"]["status"] == "ok" and 1 <= len(report["candidates"]) <= 3  # budget 2 + the re-check
    judged = run_cli("eval", "--task", str(TASKS / "rmsnorm"), "--kernel", str(out / "kernel.py"), env=env)
    assert judged.returncode == 0, judged.stdout
    # the program the verdict is about is delivered beside the source, by the digest the verdict names
    program = (out / "kernel.jaxexport").read_bytes()
    digest = __import__("hashlib").sha256(program).hexdigest()
    assert f"kernel.jaxexport beside this file (sha256 {digest})" in kernel
    assert digest in {row.get("artifact") for row in report["candidates"]}
    from jax import export

    exported = export.deserialize(bytearray(program))
    assert exported.platforms == ("tpu",) and [a.shape for a in exported.in_avals] == [(8192, 8192), (8192,)]


def test_no_valid_candidate_is_said_and_exit_1(tmp_path):
    task = tmp_path / "t"
    task.mkdir()
    # A running sum down the leading axis: no matmul, no row and no independent batch axis, so no template.
    (task / "kernel_task.yaml").write_text("task_id: prefix\natol: 0.01\nrtol: 0.01\n")
    (task / "reference.py").write_text(
        "import jax, jax.numpy as jnp\n"
        "def get_inputs(dtype=jnp.float32):\n"
        "    return (jax.random.normal(jax.random.key(0), (64, 16, 16), dtype),), ()\n"
        "def computation(x):\n    return jnp.cumsum(x, axis=0)\n")
    result = run_cli("run", "--task", str(task), "--provider", "offline", "--out", str(tmp_path / "out"),
                     env={"MAXKERNEL_HOME": str(tmp_path / "home")})
    assert result.returncode == 1
    error = [line for line in result.stderr.splitlines() if "no template" in line]
    assert error and error[0].startswith("Error: the offline synthesizer has no template for task prefix: "
                                         "the reference uses cumsum")  # on a line of its own
    assert not (tmp_path / "out" / "kernel.py").exists()


def test_killed_run_resumes_without_re_evaluating(tmp_path):
    home = tmp_path / "home"
    # (a budget of 3 is stored with the run and holds when it resumes: two verdicts before the kill, one after)
    args = ["run", "--task", str(TASKS / "rmsnorm"), "--provider", "offline", "--out", str(tmp_path / "out"),
            "--budget", "3"]
    # killed as soon as two verdicts are stored
    store, run_id = run_until_killed(args, home, lambda s, run: len(s.evaluations(run)) >= 2, timeout=300)
    before = [e.candidate_id for e in store.evaluations(run_id)]
    assert len(before) >= 2 and store.get_run(run_id).status == "running"

    result = run_cli("run", "--task", str(TASKS / "rmsnorm"), "--resume", run_id, "--out", str(tmp_path / "out"),
                     env={"MAXKERNEL_HOME": str(home)}, timeout=600)
    assert result.returncode == 0, result.stderr
    after = [e.candidate_id for e in store.evaluations(run_id)]
    assert after[:len(before)] == before  # nothing lost
    code_of = {c.id: c.code for c in store.candidates(run_id)}
    codes = [code_of[cid] for cid in after if not cid.endswith("-confirm")]
    assert len(codes) == len(set(codes))  # nothing evaluated twice (the final re-check aside)
    assert store.get_run(run_id).status == "ok" and len([c for c in after if not c.endswith("-confirm")]) <= 3
