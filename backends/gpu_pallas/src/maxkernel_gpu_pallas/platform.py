"""The GPU facts of the shared judge: CUDA lowering (Triton or Mosaic GPU) of the one traced program, which
custom calls are kernels, the compile on a GPU host, datasheet figures and the Hopper roofline estimate.

On a CPU-only host (all of CI) the program is lowered for CUDA, which runs
Pallas's whole GPU lowering: a block shape Triton refuses, an op Mosaic GPU
does not lower, come back as the compile error with the candidate's line.
Turning that into machine code needs a GPU (XLA's CUDA compiler is not in a
CPU jaxlib): there the check says "lowered for CUDA, not compiled". On a GPU
host the checker compiles and runs the same program and times it from
``jax.profiler`` device events (the TPU path's trace parsing); that path is
written for real and has not run on a GPU yet (docs/gpu.md).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from maxkernel_pallas_judge.judge.platform import Platform

from .targets import chip_figures

#: Triton's custom call has no export compatibility guarantee; the export never leaves this jax version
#: (the tracer and the checker run the same installation), so that check is not needed.
UNSTABLE_CALLS = ("__gpu$xla.gpu.triton",)


def _on_gpu() -> bool:
    import jax

    return jax.default_backend() == "gpu"


def _lowered_only(start: float) -> dict[str, Any]:
    return {"ok": True, "lowered_only": True, "seconds": time.monotonic() - start, "device_kind": "CUDA",
            "summary": "lowered for CUDA (Pallas's GPU lowering ran); not compiled to machine code: no GPU on this "
                       "host (XLA's CUDA compiler needs one)"}


class GpuPlatform(Platform):
    name = "gpu"
    label = "GPU"
    compile_check = "gpu_compile"
    spec = "maxkernel_gpu_pallas.platform:GPU"
    watched = ("maxkernel_gpu_pallas", "jax.experimental.pallas.triton", "jax.experimental.pallas.mosaic_gpu")
    memory_name = "shared memory"
    memory_headroom = 1.0
    limit_digits = 2
    estimate_basis = ("the program was lowered for CUDA and modelled from datasheet figures (a roofline never held "
                      "against a GPU), not compiled or run on a GPU")
    reference_basis = "XLA's reference, by the same roofline and credited with perfect fusion,"

    def found(self):
        """No NVIDIA device file, no GPU (CUDA's runtime is not started to say so); with one, what CUDA reports."""
        if not (Path("/dev/nvidia0").exists() or Path("/dev/nvidiactl").exists()):
            from maxkernel_pallas_judge.chip_probe import ChipFound

            return ChipFound("gpu", False, how="no /dev/nvidia* device file")
        return super().found()

    def attached_target(self) -> str | None:
        """The target whose name the attached GPU's kind holds ("NVIDIA H100 80GB HBM3" -> h100); None for a
        GPU this backend has no figures for. (The device path is tested on the CPU with a stand-in chip; no GPU
        has run it.)"""
        from .targets import TARGETS

        chip = self.found()
        words = chip.kind.lower().split() if chip.attached else []  # "NVIDIA H100 80GB HBM3": a word names it
        return next((target for target in TARGETS if target in words), None)

    def device_paths(self) -> list[str]:
        dev = Path("/dev")
        return sorted(str(p) for p in dev.glob("nvidia*")) + ([str(dev / "dri")] if (dev / "dri").is_dir() else [])

    def warm_up(self) -> None:
        import jax
        import jax.numpy as jnp
        from jax.experimental import pallas as pl
        from jax.experimental.pallas import triton  # noqa: F401  (the Triton lowering's module)

        def double(x_ref, o_ref):
            o_ref[...] = x_ref[...] * 2.0

        def kernel(x):
            return pl.pallas_call(double, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=not _on_gpu())(x)

        jax.block_until_ready(jax.jit(kernel)(jnp.ones((16, 128), jnp.float32)))

    def export(self, closed, target: str) -> bytes:
        import jax
        from jax import export
        from jax.extend import core as jex_core

        avals = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in closed.jaxpr.invars]
        checks = [export.DisabledSafetyCheck.custom_call(name) for name in UNSTABLE_CALLS]
        exported = export.export(jax.jit(jex_core.jaxpr_as_fun(closed)), platforms=["cuda"],
                                 disabled_checks=checks)(*avals)
        return bytes(exported.serialize())

    def kernel_work(self, call_target: str, op) -> dict[str, Any] | None:
        from .kernel_work import kernel_work

        return kernel_work(call_target, op)

    def compile_exported(self, exported, target: str) -> dict[str, Any]:
        start = time.monotonic()
        if not _on_gpu():
            return _lowered_only(start)
        import jax
        from maxkernel_pallas_judge.judge.errors import memory_figures, trim_error

        try:
            device = jax.devices("gpu")[0]
            compiled = jax.jit(exported.call).lower(*exported.in_avals).compile()
        except Exception as exc:
            return {"ok": False, "seconds": time.monotonic() - start, "error": trim_error(exc, "candidate.py")}
        return {"ok": True, "seconds": time.monotonic() - start, "device_kind": device.device_kind,
                "memory": memory_figures(compiled)}

    def compile_reference(self, fn, shapes, target: str, source_file: str, *, timeout_s: float | None,
                          precision: str) -> dict[str, Any]:
        """XLA's HLO cost analysis of the reference lowered for CUDA (FLOPs, transcendentals), its inputs' and
        outputs' bytes and its dots: what the roofline credits XLA with. No GPU is needed for any of it."""
        import jax
        import numpy as np

        start = time.monotonic()
        try:
            traced = jax.jit(fn).trace(*shapes)
            cost = traced.lower(lowering_platforms=("cuda",)).cost_analysis() or {}
        except Exception as exc:
            from maxkernel_pallas_judge.judge.errors import trim_error

            return {"ok": False, "seconds": time.monotonic() - start, "error": trim_error(exc, source_file)}
        outs = jax.tree_util.tree_leaves(traced.out_info)
        nbytes = sum(int(np.prod(s.shape)) * np.dtype(s.dtype).itemsize for s in [*shapes, *outs])
        dots = sum(1 for eqn in traced.jaxpr.jaxpr.eqns if eqn.primitive.name in ("dot_general", "conv_general_dilated"))
        return {"ok": True, "lowered_only": not _on_gpu(), "seconds": time.monotonic() - start,
                "flops": float(cost.get("flops", 0.0)), "transcendentals": float(cost.get("transcendentals", 0.0)),
                "bytes": nbytes, "dots": dots, "dtype": np.dtype(shapes[0].dtype).name if shapes else "float32"}

    def chip(self, target: str) -> dict[str, Any]:
        return chip_figures(target)

    def estimate(self, kernels, chip, target, *, reference_flops, ideal_f32_passes):
        from .costmodel import estimate

        return estimate(kernels, chip, target)

    def xla_estimate(self, xla: dict[str, Any], target: str):
        if not xla or not xla.get("ok") or "flops" not in xla:
            return None
        from .costmodel import xla_roofline

        return xla_roofline(xla, xla.get("chip") or chip_figures(target))

    def diagnose(self, est) -> list[str]:
        from .diagnosis import diagnose

        return diagnose(est)


#: The one instance workers load by ``GpuPlatform.spec``.
GPU = GpuPlatform()
