"""Task references kept across runs (``judge/reference_cache.py``): the same reference read back, never a stale one."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
from maxkernel_core import Candidate, EvalStatus
from maxkernel_pallas_judge.judge.evaluator import Evaluator
from maxkernel_pallas_judge.judge import reference_cache
from maxkernel_pallas_judge.judge.reference_cache import ReferenceCache, cache_folder
from maxkernel_pallas_judge.sandbox.records import JobOutcome, Limits
from maxkernel_pallas_judge.settings import EvalSettings
from maxkernel_tpu_pallas.backend import TpuPallasBackend
from maxkernel_tpu_pallas.tpu_platform import TPU

from .conftest import TASKS, kernel_source


def evaluator(folder) -> Evaluator:
    return Evaluator(Limits(platform=TPU.spec), home=folder / "home", reference_cache=str(folder / "refs"))


def same_reference(a, b) -> None:
    """The same reference, but for how long XLA's compile took (made again, it takes another time)."""
    def xla(ref):
        return {k: v for k, v in (ref.xla or {}).items() if k != "seconds"}

    assert (a.full_shapes, a.work, a.sets, xla(a), a.program_work, a.check_sizes, a.signature) == \
           (b.full_shapes, b.work, b.sets, xla(b), b.program_work, b.check_sizes, b.signature)
    for got, want in zip(a.inputs + a.outputs, b.inputs + b.outputs, strict=True):
        for x, y in zip(got, want, strict=True):
            assert x.dtype == y.dtype and np.array_equal(x, y)


@pytest.mark.slow
def test_a_second_evaluator_reads_the_reference_the_first_computed_and_judges_the_same(tmp_path, monkeypatch):
    """One reference job for two evaluators (two processes' worth: nothing shared in memory); the same data,
    the same verdict; an entry that does not read back is computed again, never trusted."""
    task = TpuPallasBackend().load_task(TASKS / "rmsnorm")
    candidate = Candidate(task.id, kernel_source("honest_rmsnorm.py"))
    first = evaluator(tmp_path)
    try:
        computed = first.reference(task, "v5e")
        verdict = first.evaluate(task, candidate, target="v5e")
    finally:
        first.close()
    assert verdict.status is EvalStatus.OK, verdict.reason
    second = evaluator(tmp_path)
    try:
        monkeypatch.setattr(second.pool, "run_trusted", lambda *a, **k: pytest.fail("the reference ran again"))
        kept = second.reference(task, "v5e")
        again = second.evaluate(task, candidate, target="v5e")
    finally:
        second.close()
    same_reference(kept, computed)
    assert kept.xla == computed.xla  # read back, its compile's seconds too
    assert (again.status, again.reason, again.estimate) == (verdict.status, verdict.reason, verdict.estimate)
    [entry] = (tmp_path / "refs").glob("*/*.msgs")
    whole = entry.read_bytes()
    entry.write_bytes(whole[:len(whole) * 2 // 3])  # cut short between two messages' bytes: a shorter reference
    third = evaluator(tmp_path)
    try:
        ran = []
        real = third.pool.run_trusted
        monkeypatch.setattr(third.pool, "run_trusted", lambda *a, **k: ran.append(1) or real(*a, **k))
        same_reference(third.reference(task, "v5e"), computed)
    finally:
        third.close()
    assert ran == [1] and entry.stat().st_size > len(whole) * 2 // 3  # computed again and kept whole


class _FakePool:
    """Answers a reference job with a fixed outcome and counts the jobs it ran."""

    def __init__(self, outcome: JobOutcome):
        self.outcome, self.ran = outcome, 0

    def run_trusted(self, job, timeout):
        self.ran += 1
        return self.outcome


DONE = JobOutcome("done", [({"type": "reference", "x": 1}, [np.arange(6, dtype=np.float32).reshape(2, 3)])])


def _job_twice(tmp_path, outcome, *, device=False, edit=None, folder=None):
    """The evaluator's reference job run twice on a copy of the rmsnorm task: how many times it ran, and what the
    second call returned. ``edit(folder)`` changes the task between the two."""
    from maxkernel_pallas_judge.judge.job_records import ReferenceJob

    task_dir = shutil.copytree(TASKS / "rmsnorm", tmp_path / "task")
    ev = Evaluator.__new__(Evaluator)  # only its reference cache and pool: no worker started
    ev.references, ev.reference_timeout_s = ReferenceCache(folder or tmp_path / "refs"), 1.0
    ev.pool = _FakePool(outcome)
    job = ReferenceJob(platform=TPU.spec, task={"module": str(task_dir / "reference.py")}, target="v5e",
                       size="small", fresh=1, max_full_input_bytes=1, device=device)
    ev._reference_job(job, task_dir / "reference.py")
    if edit:
        edit(task_dir)
    second = ev._reference_job(job, task_dir / "reference.py")
    return ev.pool.ran, second


def test_the_messages_read_back_as_they_came(tmp_path):
    ran, second = _job_twice(tmp_path, DONE)
    assert ran == 1 and second.status == "done"
    [(header, [array])] = second.messages
    assert header["type"] == "reference" and header["x"] == 1 and np.array_equal(array, DONE.messages[0][1][0])


def _set(outputs, wide=()):
    inputs = [np.ones(4, np.float32)]
    return ({"type": "reference_set", "n_inputs": 1, "n_outputs": len(outputs)}, [*inputs, *outputs, *wide])


OVERFLOWS = np.array([1.0, np.inf], dtype=np.float32)


@pytest.mark.parametrize("case", ["a task file changed", "a task file added", "on the chip", "failed", "timed out",
                                  "XLA's compile timed out", "overflow without its arbiter", "another XLA_FLAGS",
                                  "XLA's compile out of memory", "work counted from the jaxpr", "a cache fault"])
def test_what_is_not_the_same_reference_runs_again(tmp_path, monkeypatch, case):
    outcome = {
        "failed": JobOutcome("done", [({"type": "error", "message": "boom"}, []), *DONE.messages]),
        "timed out": JobOutcome("timeout", DONE.messages),
        "XLA's compile timed out": JobOutcome("done", [({"type": "reference", "xla": {"ok": False, "timed_out": True}},
                                                       [])]),
        "overflow without its arbiter": JobOutcome("done", [*DONE.messages, _set([OVERFLOWS])]),
        "XLA's compile out of memory": JobOutcome("done", [({"type": "reference", "xla": {
            "ok": False, "error": {"kind": "compile", "type": "MemoryError", "message": ""}}}, [])]),
        "work counted from the jaxpr": JobOutcome("done", [({"type": "reference", "program_work": [
            {"glue_flops": 1, "note": "counted from the jaxpr: export failed (MemoryError)"}]}, [])]),
    }.get(case, DONE)
    edit = {"a task file changed": lambda d: (d / "reference.py").write_text((d / "reference.py").read_text() + "\n#"),
            "a task file added": lambda d: (d / "data.npy").write_bytes(b"\x00"),
            "another XLA_FLAGS": lambda d: monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=true")}.get(case)
    if case == "a cache fault":  # any exception of the cache's: the reference is computed, as without one
        monkeypatch.setattr(reference_cache, "_code_digest", lambda spec: 1 / 0)
    ran, _ = _job_twice(tmp_path, outcome, device=case == "on the chip", edit=edit)
    assert ran == 2


def test_an_overflow_with_its_arbiter_is_kept(tmp_path):
    ran, second = _job_twice(tmp_path, JobOutcome("done", [*DONE.messages, _set([OVERFLOWS], [np.ones(2, np.float32)])]))
    assert ran == 1 and np.array_equal(second.all("reference_set")[0][1][1], OVERFLOWS)


def test_an_entry_that_is_not_whole_is_dropped_and_made_again(tmp_path):
    _job_twice(tmp_path, DONE)
    [entry] = (tmp_path / "refs").glob("*/*.msgs")
    whole = entry.read_bytes()
    cache = ReferenceCache(tmp_path / "refs")
    key = entry.stem
    for broken in [whole[:n] for n in range(0, len(whole), max(len(whole) // 9, 1))] + \
                  [whole[:-40] + bytes([whole[-40] ^ 1]) + whole[-39:]]:  # an array's byte: still parses
        entry.write_bytes(broken)
        assert cache.load(key) is None and not entry.exists()


@pytest.mark.parametrize("fault", ["the folder is a file", "the entry is a folder", "the folder cannot be read"])
def test_a_fault_of_the_cache_folder_leaves_the_reference_computed(tmp_path, fault):
    folder = tmp_path / "refs"
    if fault == "the folder is a file":
        folder.write_text("")
    else:
        _job_twice(tmp_path / "first", DONE, folder=folder)
        [entry] = folder.glob("*/*.msgs")
        if fault == "the entry is a folder":
            entry.unlink()
            entry.mkdir()
        else:
            entry.chmod(0)
            if os.access(entry, os.R_OK):  # root reads it anyway
                pytest.skip("this user reads a file whatever its mode")
    ran, second = _job_twice(tmp_path, DONE, folder=folder)
    assert ran >= 1 and second.status == "done"


def test_the_cache_folder_inside_the_task_is_not_the_task(tmp_path):
    task = shutil.copytree(TASKS / "rmsnorm", tmp_path / "task")
    cache = ReferenceCache(task / "refs", skip=(task / "home",))
    header = {"task": {"module": "reference.py"}, "target": "v5e"}
    before = cache.key(header, task / "reference.py", TPU.spec)
    cache.store(before, DONE.messages)
    (task / "home").mkdir()
    (task / "home" / "runs.db").write_bytes(b"a run")
    assert cache.key(header, task / "reference.py", TPU.spec) == before and cache.load(before) is not None


def test_a_copy_of_the_task_elsewhere_is_the_same_task(tmp_path):
    cache = ReferenceCache(tmp_path / "refs")
    copies = [shutil.copytree(TASKS / "rmsnorm", tmp_path / name) for name in ("one", "two")]

    def key(folder):
        module = folder / "reference.py"
        return cache.key({"task": {"module": str(module), "entry": "computation"}, "target": "v5e"}, module, TPU.spec)

    assert key(copies[0]) == key(copies[1])
    (copies[1] / "reference.py").write_text((copies[1] / "reference.py").read_text().replace("1e-6", "2e-6"))
    assert key(copies[0]) != key(copies[1])


def test_where_references_are_kept(tmp_path, monkeypatch):
    assert cache_folder("off", tmp_path) is None and cache_folder(" OFF ", tmp_path) is None
    assert cache_folder("", tmp_path) == tmp_path / "references"
    assert cache_folder(str(tmp_path / "elsewhere"), tmp_path) == tmp_path / "elsewhere"
    monkeypatch.setenv("MAXKERNEL_EVAL_REFERENCE_CACHE", "off")
    assert EvalSettings().reference_cache == "off"  # the variable reaches an evaluator made in code too


def test_a_task_edited_while_its_reference_ran_is_not_kept(tmp_path):
    task = shutil.copytree(TASKS / "rmsnorm", tmp_path / "task")

    class Editing(_FakePool):
        def run_trusted(self, job, timeout):
            (task / "reference.py").write_text((task / "reference.py").read_text() + "\n# edited")
            return super().run_trusted(job, timeout)

    ev = Evaluator.__new__(Evaluator)
    ev.references, ev.reference_timeout_s, ev.pool = ReferenceCache(tmp_path / "refs"), 1.0, Editing(DONE)
    from maxkernel_pallas_judge.judge.job_records import ReferenceJob

    job = ReferenceJob(platform=TPU.spec, task={"module": str(task / "reference.py")}, target="v5e", size="small",
                       fresh=1, max_full_input_bytes=1)
    assert ev._reference_job(job, task / "reference.py").status == "done"
    assert not list((tmp_path / "refs").glob("*/*.msgs"))


def test_the_evaluator_makes_its_folder_and_hides_it_from_candidates(tmp_path):
    from maxkernel_pallas_judge.sandbox import bwrap

    ev = Evaluator(Limits(platform=TPU.spec), spares=0, home=tmp_path / "home", reference_cache=str(tmp_path / "b" / "refs"))
    try:
        folder = tmp_path / "b" / "refs"
        assert folder.is_dir() and str(folder) in ev.limits.hidden and ev.references.skip == (tmp_path / "home",)
        (tmp_path / "a").mkdir()
        args = bwrap.command(["true"], tmp_path / "a" / "w", ro_paths=(str(tmp_path / "b"),), hidden=ev.limits.hidden)
        assert ["--tmpfs", os.path.realpath(folder)] == args[args.index(os.path.realpath(folder)) - 1:][:2]
    finally:
        ev.close()
