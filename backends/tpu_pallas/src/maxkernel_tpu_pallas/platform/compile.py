"""Compile for a real TPU generation with no TPU attached (libtpu deviceless AOT), in a worker.

``get_topology_desc`` gives TPU devices that exist only as a description;
lowering with ``SingleDeviceSharding`` on one of them and calling
``.compile()`` runs the real Mosaic and XLA:TPU compilers, so the errors (block
shape rules, VMEM overflow) and the memory figures are the compiler's own.

Every program is compiled with the device's default layouts pinned on its
arguments and results (``device_jit``), as ``jax.jit`` compiles on an attached
TPU, where arguments arrive, and results must leave, in the default layout.
A deviceless compile left alone lets XLA choose them: a transpose at either
end of the program then costs nothing (18k's NHWC-to-NCHW output transpose
became a layout), which no program on a real device gets.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from typing import Any

import jax
from jax import export
from jax.experimental import topologies
from jax.extend import core as jex_core
from jax.experimental.layout import Format, Layout
from jax.sharding import SingleDeviceSharding

from maxkernel_pallas_judge.judge.errors import memory_figures, trim_error

from ..targets import topology_name

_devices: dict[str, Any] = {}


def target_device(target: str):
    if target not in _devices:
        topo = topologies.get_topology_desc(platform="tpu", topology_name=topology_name(target))
        _devices[target] = topo.devices[0]
    return _devices[target]


def _device_format(aval, sharding):
    """The layout an array has on a device (row-major, the compiler's tiling); a PRNG key array keeps its
    sharding alone (JAX lays out its key data itself)."""
    if jax.dtypes.issubdtype(aval.dtype, jax.dtypes.extended):
        return sharding
    return Format(Layout(major_to_minor=tuple(range(len(aval.shape)))), sharding)


def device_jit(fn, args: list[jax.ShapeDtypeStruct], sharding):
    """``jax.jit(fn)`` with the default device layouts pinned on its arguments and results (see above)."""
    outs = jax.eval_shape(fn, *args)
    return jax.jit(fn, in_shardings=tuple(_device_format(a, sharding) for a in args),
                   out_shardings=jax.tree_util.tree_map(lambda o: _device_format(o, sharding), outs))


def compile_exported(exported, target: str) -> dict[str, Any]:
    """A candidate's exported program compiled for ``target`` (its figures, or the compiler's error)."""
    start = time.monotonic()
    try:
        device = target_device(target)
        sharding = SingleDeviceSharding(device)
        args = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding) for a in exported.in_avals]
        with jax.default_device(device):
            compiled = device_jit(exported.call, args, sharding).lower(*args).compile()
    except Exception as exc:
        return {"ok": False, "seconds": time.monotonic() - start, "error": trim_error(exc, "candidate.py")}
    return compiled_figures(compiled, device, start)


def start_compile(fn, shapes: list[jax.ShapeDtypeStruct], target: str, source_file: str, *,
                  precision: str = "default", glue_only: bool = True):
    """Lower ``fn`` here (candidate Python runs in this thread), compile in the background. ``precision`` is the
    default matmul precision XLA compiles at (a reference's, see ``costmodel/precision.py``).

    The compile is pure C++ that releases the GIL, so it overlaps the
    correctness runs; call ``.result()`` on the returned future for the figures.
    """
    start = time.monotonic()
    future: concurrent.futures.Future = concurrent.futures.Future()
    try:
        device = target_device(target)
        sharding = SingleDeviceSharding(device)
        args = [jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding) for s in shapes]
        with jax.default_device(device), jax.default_matmul_precision(precision):
            lowered = device_jit(fn, args, sharding).lower(*args)  # Mosaic asks the default device which chip it lowers for
    except Exception as exc:  # the compiler's verdict, reported not raised
        future.set_result({"ok": False, "seconds": time.monotonic() - start, "error": trim_error(exc, source_file)})
        return future

    def work() -> None:
        try:
            future.set_result(compiled_figures(lowered.compile(), device, start, glue_only=glue_only))
        except Exception as exc:
            future.set_result({"ok": False, "seconds": time.monotonic() - start, "error": trim_error(exc, source_file)})

    threading.Thread(target=work, daemon=True, name="tpu-compile").start()
    return future


def compile_for_target(fn, shapes: list[jax.ShapeDtypeStruct], target: str, source_file: str,
                       timeout_s: float | None = None, *, precision: str = "default",
                       glue_only: bool = True) -> dict[str, Any]:
    """Lower and compile ``fn`` at ``shapes`` for ``target``; a dict of figures or of the error. Past
    ``timeout_s`` the figures are given up (``timed_out``); the compile thread cannot be stopped, and ends
    with the process (a reference job's worker is never reused)."""
    future = start_compile(fn, shapes, target, source_file, precision=precision, glue_only=glue_only)
    try:
        return future.result(timeout=timeout_s)
    except concurrent.futures.TimeoutError:
        return {"ok": False, "timed_out": True, "seconds": timeout_s,
                "error": {"kind": "timeout", "type": "Timeout", "line": None,
                          "message": f"XLA's compile for {target} ran past {timeout_s:g} s"}}


def program_figures(compiled, *, glue_only: bool) -> dict[str, Any]:
    """The compiled program's ops with their work, for the XLA side of the speed model (``hlo_program``):
    every op of a reference; only the code around the kernels of a candidate (``glue_only``), whose kernels the
    model takes from its trace and whose loops of unknown length are charged the judge's worst case."""
    from ..costmodel.hlo_program import describe_program
    from maxkernel_pallas_judge.judge.hlo_values import UNBOUNDED_TRIPS

    try:
        return describe_program(compiled.as_text(), skip_kernels=glue_only,
                                unknown_trips=UNBOUNDED_TRIPS if glue_only else 1)
    except Exception as exc:  # noqa: BLE001 - no description is no estimate, never a failed compile
        return {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}


def compiled_figures(compiled, device, start: float, *, glue_only: bool = True) -> dict[str, Any]:
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) and cost else cost
    return {
        "ok": True,
        "seconds": time.monotonic() - start,
        "device_kind": device.device_kind,
        "memory": memory_figures(compiled),
        "cost": {k: float(v) for k, v in (cost or {}).items() if isinstance(v, (int, float))},
        "program": program_figures(compiled, glue_only=glue_only),
    }


def export_tpu(closed, target: str) -> bytes:
    """The captured program lowered for ``target`` (Mosaic kernels), serialized."""
    avals = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in closed.jaxpr.invars]
    with jax.default_device(target_device(target)):  # Mosaic asks the default device which chip it lowers for
        exported = export.export(jax.jit(jex_core.jaxpr_as_fun(closed)), platforms=["tpu"])(*avals)
    return bytes(exported.serialize())
