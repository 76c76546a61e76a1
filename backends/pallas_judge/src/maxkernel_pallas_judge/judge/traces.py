"""What a verdict keeps beside the run store: a measured call's profiler trace (for XProf or TensorBoard), and
the program the verdict is about (by its digest: the run delivers it beside the kernel's source). ``home`` is
the run store's folder (``store.home``), the evaluator's."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import numpy as np


def keep_trace(candidate_id: str, payload: list[np.ndarray], home: Path) -> str | None:
    """Store the last timed call's .xplane.pb beside the run store, for XProf/TensorBoard."""
    if not payload:
        return None
    folder = home / "traces" / candidate_id / "plugins" / "profile" / "maxkernel"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "device.xplane.pb"
    path.write_bytes(payload[0].tobytes())
    return str(path)


#: the name of the delivered program beside kernel.py: jax.export's serialization of the full-size program
ARTIFACT_NAME = "kernel.jaxexport"


def keep_artifact(program: np.ndarray, home: Path) -> str:
    """Store the full-size program the checker made, proved and compiled; its sha256 (the verdict's artifact)."""
    data = np.asarray(program, dtype=np.uint8).tobytes()
    digest = hashlib.sha256(data).hexdigest()
    path = home / "artifacts" / f"{digest}.jaxexport"
    if not path.exists():  # a file of its own per writer: two verdicts on one program may keep it at once
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{digest[:8]}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    return digest


def artifact_bytes(digest: str, home: Path) -> bytes | None:
    """A kept program by its digest, checked against it; None when this store does not hold it."""
    path = home / "artifacts" / f"{digest}.jaxexport"
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return data if hashlib.sha256(data).hexdigest() == digest else None
