"""Where a measured call's profiler trace is kept: beside the run store, for XProf or TensorBoard."""

from __future__ import annotations

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
