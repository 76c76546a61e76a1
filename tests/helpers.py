"""Shared helpers for the tests: run the CLI in a subprocess, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
            pythonpath: list[Path] = (), timeout: float = 120) -> subprocess.CompletedProcess:
    """``maxkernel ARGS`` in a fresh interpreter; extra ``pythonpath`` entries come first."""
    full_env = {**os.environ, **(env or {})}
    if pythonpath:
        full_env["PYTHONPATH"] = os.pathsep.join([*map(str, pythonpath), full_env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "maxkernel_core", *args],
        capture_output=True, text=True, env=full_env, cwd=cwd, timeout=timeout,
    )


def make_distribution(root: Path, dist: str, entry_points: dict[str, str], modules: dict[str, str],
                      version: str = "1.0") -> Path:
    """Lay out an installed distribution under ``root`` (a dist-info folder plus modules).

    This is what ``pip install`` leaves on disk, so importlib.metadata finds its
    ``maxkernel`` entry points exactly as it finds a real plugin's.
    """
    root.mkdir(parents=True, exist_ok=True)
    info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    lines = "\n".join(f"{name} = {target}" for name, target in entry_points.items())
    (info / "entry_points.txt").write_text(f"[maxkernel]\n{lines}\n")
    for name, source in modules.items():
        (root / f"{name}.py").write_text(source)
    return root


def run_until_killed(args: list[str], home: Path, enough, *, cwd: Path | None = None, timeout: float = 400):
    """Start ``maxkernel ARGS`` with MAXKERNEL_HOME=home, SIGKILL its process group as soon as
    ``enough(store, run_id)`` holds for the run it is writing; return (store, run_id)."""
    import signal
    import time

    from maxkernel_core.store import RunStore

    proc = subprocess.Popen([sys.executable, "-m", "maxkernel_core", *args], env={**os.environ, "MAXKERNEL_HOME": str(home)},
                            cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    store, deadline = None, time.time() + timeout
    while time.time() < deadline:
        time.sleep(0.5)
        if (home / "runs.db").exists():
            store = store or RunStore(home / "runs.db")
            runs = store.list_runs(1)
            if runs and enough(store, runs[0].id):
                break
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return store, store.list_runs(1)[0].id


def assert_close(got, want, *, rtol: float, atol: float, ulps: int = 2) -> None:
    """``got`` against ``want`` at ``rtol``/``atol``, widened to ``ulps`` units in the last place of the output's
    own dtype: a bfloat16 or float16 result cannot be compared at f32's resolution (one bfloat16 ulp is 2^-8
    relative), and a kernel that rounds once more than the reference legitimately differs by one."""
    import numpy as np

    dtype = np.asarray(got).dtype
    if np.issubdtype(dtype, np.floating) or dtype.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        import ml_dtypes

        eps = float(ml_dtypes.finfo(dtype).eps)
        rtol, atol = max(rtol, ulps * eps), max(atol, ulps * eps)
    np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=rtol, atol=atol)
