"""What a verdict keeps beside the run store: a measured call's profiler trace (for XProf or TensorBoard), and
the program the verdict is about (by its digest: the run delivers it beside the kernel's source)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np


def keep_trace(candidate_id: str, payload: list[np.ndarray]) -> str | None:
    """Store the last timed call's .xplane.pb beside the run store, for XProf/TensorBoard."""
    if not payload:
        return None
    from maxkernel_core.store import default_home

    folder = default_home() / "traces" / candidate_id / "plugins" / "profile" / "maxkernel"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "device.xplane.pb"
    path.write_bytes(payload[0].tobytes())
    return str(path)


#: the name of the delivered program beside kernel.py: jax.export's serialization of the full-size program
ARTIFACT_NAME = "kernel.jaxexport"


def _artifacts() -> Path:
    from maxkernel_core.store import default_home

    return default_home() / "artifacts"


def keep_artifact(program: np.ndarray) -> str:
    """Store the full-size program the checker made, proved and compiled; its sha256 (the verdict's artifact)."""
    data = np.asarray(program, dtype=np.uint8).tobytes()
    digest = hashlib.sha256(data).hexdigest()
    path = _artifacts() / f"{digest}.jaxexport"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{digest[:8]}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    return digest


def artifact_bytes(digest: str) -> bytes | None:
    """A kept program by its digest, checked against it; None when this store does not hold it."""
    path = _artifacts() / f"{digest}.jaxexport"
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return data if hashlib.sha256(data).hexdigest() == digest else None
