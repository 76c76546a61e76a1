"""The orchestrator's own JAX stays on the host's CPU: the judge's device worker is the one process that opens
the chip, and one process at a time can hold a TPU.

The process that runs a Pallas backend (``maxkernel run``, ``bench``, ``eval``, a user's script) traces
references and reads tasks with JAX, and never runs a kernel: before that first use, its JAX is set to the CPU
alone. Nothing is set when the backend's module is imported or a plugin is loaded, and nothing a person chose
is overridden: a ``JAX_PLATFORMS`` or ``jax_platforms`` already set, or a JAX that has already started its
backends (a notebook that ran on the TPU), is left as it is, and the chip probe then finds the chip held.
"""

from __future__ import annotations

import os


def keep_off_the_chip() -> str:
    """Set this process's JAX to the CPU unless someone chose otherwise or it has started; what was done."""
    import jax

    if os.environ.get("JAX_PLATFORMS") or jax.config.jax_platforms:
        return f"left as chosen: {os.environ.get('JAX_PLATFORMS') or jax.config.jax_platforms}"
    try:
        from jax._src import xla_bridge

        started = xla_bridge.backends_are_initialized()
    except (ImportError, AttributeError):  # a jax without it: setting the platform before its start is harmless
        started = False
    if started:
        return "left as started: this process's JAX already chose its devices"
    jax.config.update("jax_platforms", "cpu")
    # Deviceless TPU compiles in this process (none on the judge's path) must not take the chip's lock either.
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    return "cpu"
