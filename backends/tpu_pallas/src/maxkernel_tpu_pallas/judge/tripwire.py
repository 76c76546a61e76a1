"""Detects a candidate that patches libraries or the harness (comparisons, timers, jax itself).

The verdict never depends on code in the candidate's process (outputs are
compared and clocks kept in the parent), so a patch cannot fake a pass; but a
module that patches ``numpy.allclose`` or ``time.perf_counter`` is trying to,
and is rejected outright rather than given the benefit of the doubt.
"""

from __future__ import annotations

import sys

WATCHED = (
    "builtins", "time", "math", "os", "numpy", "numpy.testing", "jax", "jax.numpy", "jax.random", "jax.lax",
    "jax.profiler", "jax.experimental.pallas", "jax.experimental.pallas.tpu",
    "maxkernel_tpu_pallas.sandbox.protocol", "maxkernel_tpu_pallas.sandbox.worker",
    "maxkernel_tpu_pallas.judge.candidate_job", "maxkernel_tpu_pallas.judge.work",
    "maxkernel_tpu_pallas.judge.compile", "maxkernel_tpu_pallas.judge.timing",
)


def snapshot() -> dict[str, int]:
    """Identity of every callable attribute of the watched modules."""
    ids = {}
    for mod_name in WATCHED:
        module = sys.modules.get(mod_name)
        if module is None:
            continue
        for name, value in list(vars(module).items()):
            if callable(value) and not name.startswith("__"):
                ids[f"{mod_name}.{name}"] = id(value)
    return ids


def changed(before: dict[str, int]) -> list[str]:
    """Watched names now bound to a different object (or deleted) since ``before``."""
    after = snapshot()
    return sorted(name for name, ident in before.items() if after.get(name) != ident)
