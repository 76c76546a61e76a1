"""Expensive results built once per test session and shared by every test process that asks for them.

``make test`` runs two xdist workers that share the session's scratch folder (``MAXKERNEL_TEST_SCRATCH``, made
by the controller before the workers start). A result several test files read (one graph run, say) is built by
whichever worker asks first, under a file lock; the other waits and reads the same folder. Readers must not
write into it: a test that changes a run copies it first.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path


def once(name: str, build: Callable[[Path], None]) -> Path:
    """The folder ``build(folder)`` filled for ``name`` in this test session: built now if no process has yet."""
    # the run's id, the same in each worker (xdist sets it), so a scratch folder given from outside is never
    # read as holding this session's results
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid{os.getpid()}"
    root = Path(os.environ["MAXKERNEL_TEST_SCRATCH"]) / "once" / run
    root.mkdir(parents=True, exist_ok=True)
    folder, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, even if build raises
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # a build that failed in another process starts afresh
            folder.mkdir()
            build(folder)
            done.touch()
    return folder
