"""Tuned configs as data: kept per key, a repeat run is one confirmation, a new version is a miss, JSON in and out."""

import json

import pytest

from maxkernel_core.records import EvalStatus, Evaluation, Profile, RunConfig, TunedConfig
from maxkernel_core.session import RunSession
from maxkernel_core.store import RunStore
from maxkernel_core.tuned import keep_best, start_from_table

from ..helpers import run_cli

GOOD = "def computation(x):\n    return pl.pallas_call(...)(x)\n"
FASTER = "def computation(x):\n    return pl.pallas_call(...)(x)  # faster\n"


def ok(seconds):
    return Evaluation("x", EvalStatus.OK, profile=Profile("x", "cost_model", True, seconds=seconds, reference_seconds=1.5 * seconds))


@pytest.fixture
def parts(parts):
    """The shared parts, with a backend that says what its verdicts (and tuned kernels) depend on."""
    parts[3].fingerprint = "judge"
    parts[3].tuning = {"signature": "abc", "versions": "jax 1"}
    return parts


def searched(parts, code, verdict, tuned="use"):
    """A run that searched and found ``code`` (judged ``verdict``), its best offered to the table."""
    pm, agents, store, backend, task = parts
    session = RunSession(pm, store, task, RunConfig(task.id, tuned=tuned), backend)
    assert start_from_table(session) is None
    backend.enqueue(verdict)
    agents.enqueue(code)
    session.evaluate(session.implement(session.plan()))
    result = session.finish()
    return result, keep_best(session, result)


def test_a_repeat_run_is_one_confirmation_evaluation(parts):
    pm, agents, store, backend, task = parts
    first, kept = searched(parts, GOOD, ok(2e-6))
    assert kept and store.tuned(backend.tuning_key(task, target="v5e")).candidate_id == first.best.candidate.id
    judged = len(backend.evaluated)
    repeat = RunSession(pm, store, task, RunConfig(task.id), backend)
    result = start_from_table(repeat)
    assert result is not None and result.status == "ok" and result.evaluations == 1
    assert len(backend.evaluated) == judged + 1  # judged afresh, although the verdict cache had this code
    assert result.best.candidate.provenance.role == "tuned" and "started from the tuned table" in result.message


def test_the_faster_kernel_stays_and_refresh_searches_anew(parts):
    pm, agents, store, backend, task = parts
    searched(parts, GOOD, ok(2e-6))
    _, kept = searched(parts, FASTER, ok(1e-6), tuned="refresh")  # refresh: no start from the table
    assert kept and store.tuned(backend.tuning_key(task, target="v5e")).seconds == 1e-6
    _, kept = searched(parts, FASTER.replace("faster", "slower"), ok(3e-6), tuned="refresh")
    assert not kept and store.tuned(backend.tuning_key(task, target="v5e")).seconds == 1e-6


def test_a_new_jax_version_is_a_miss_and_off_neither_reads_nor_writes(parts):
    pm, agents, store, backend, task = parts
    searched(parts, GOOD, ok(2e-6))
    backend.tuning = {**backend.tuning, "versions": "jax 2"}
    _, kept = searched(parts, FASTER, ok(3e-6), tuned="off")  # the search ran (no start), nothing was kept
    assert not kept and len(store.tuned_configs()) == 1


def test_a_tuned_kernel_that_fails_now_hands_over_to_the_search(parts):
    pm, agents, store, backend, task = parts
    searched(parts, GOOD, ok(2e-6))
    backend.enqueue(Evaluation("x", EvalStatus.INCORRECT, "wrong on this install"))
    session = RunSession(pm, store, task, RunConfig(task.id), backend)
    assert start_from_table(session) is None and not session.history[-1].evaluation.ok


def test_export_import_and_check_through_the_cli(tmp_path):
    from maxkernel_pallas_judge.judge.fingerprint import compiler_versions

    home = tmp_path / "home"
    store = RunStore(home / "runs.db")
    for versions, task in ((compiler_versions(), "matmul"), ("jax 0.0.1, jaxlib 0.0.1, libtpu absent", "old")):
        key = {"backend": "tpu_pallas", "signature": task, "shapes": "float32[8,8]", "target": "v5e",
               "versions": versions}
        store.keep_tuned(TunedConfig(key, task, GOOD, seconds=1e-6, run_id="run-1"))
    env = {"MAXKERNEL_HOME": str(home)}
    exported = tmp_path / "tuned.json"
    assert run_cli("tuned", "export", str(exported), env=env).returncode == 0
    check = run_cli("tuned", "check", str(exported), env=env)
    assert check.returncode == 1 and "miss: old (v5e)" in check.stdout and "1 of 2 entries match" in check.stdout
    other = {"MAXKERNEL_HOME": str(tmp_path / "other")}
    imported = run_cli("tuned", "import", str(exported), env=other)
    assert imported.returncode == 0 and "2 entries kept" in imported.stdout
    listed = json.loads(run_cli("tuned", "list", "--json", env=other).stdout)
    assert sorted(e["task_id"] for e in listed["entries"]) == ["matmul", "old"]
    (tmp_path / "bad.json").write_text("{}")
    bad = run_cli("tuned", "import", str(tmp_path / "bad.json"), env=other)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "tuned export" in bad.stderr


def test_a_confirmed_entry_takes_the_figure_its_kernel_is_judged_at_now(parts):
    """The table's kernel judged again (after a cost-model change, say) replaces its entry's figure even when
    the old figure was faster: the two were not made by the same judge."""
    pm, agents, store, backend, task = parts
    key = backend.tuning_key(task, target="v5e")
    searched(parts, GOOD, ok(1e-6))
    repeat = RunSession(pm, store, task, RunConfig(task.id), backend)
    backend.enqueue(ok(2e-6))
    result = start_from_table(repeat)
    assert result.status == "ok" and keep_best(repeat, result)
    assert store.tuned(key).seconds == 2e-6 and store.tuned(key).run_id == result.run_id
