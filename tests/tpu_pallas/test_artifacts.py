"""The program a verdict is about is kept by its digest, also when several verdicts on it are made at once (a
graph search judges candidates in threads, and two may compile to one program)."""

from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np


def test_one_program_kept_by_many_verdicts_at_once(tmp_path):
    from maxkernel_pallas_judge.judge.traces import artifact_bytes, keep_artifact

    program = np.frombuffer(np.random.default_rng(0).bytes(1 << 20), dtype=np.uint8)
    for _ in range(5):  # each round: eight writers race for a file none has written yet
        for kept in (tmp_path / "artifacts").glob("*"):
            kept.unlink()
        with ThreadPoolExecutor(8) as pool:
            digests = set(pool.map(lambda _: keep_artifact(program, tmp_path), range(8)))
        assert digests == {hashlib.sha256(program.tobytes()).hexdigest()}
        assert artifact_bytes(digests.pop(), tmp_path) == program.tobytes()
    assert not list((tmp_path / "artifacts").glob("*.tmp"))


def test_programs_and_traces_are_kept_in_the_run_stores_own_folder(tmp_path):
    """A store configured as ``store.home`` keeps its verdicts' programs beside it, not in the default folder
    (where every run on the machine, and every test process, would share them)."""
    from maxkernel_core.config import Settings
    from maxkernel_tpu_pallas.backend import TpuPallasBackend

    settings = Settings()
    settings.store.home = str(tmp_path / "store")
    backend = TpuPallasBackend(settings)
    assert backend.evaluator.home == tmp_path / "store"
    backend.close()
