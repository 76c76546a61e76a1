"""The host's CPU standing in for an attached chip, so that the device path runs where no chip is.

Everything a TPU host does runs: the probe's answer, the one device worker that holds "the chip" across jobs,
the reference put there and timed, a candidate's full-size program run against XLA's outputs on the same
inputs, one profiler trace split into calls, the measured verdict and its wording. What differs is only what
no CPU can do: its "device program" is the CPU interpret-mode program, compiled for the CPU, and its trace
events are XLA's CPU threads. Its figures are CPU times of interpreted kernels: they test the path, and say
nothing of any TPU.
"""

from __future__ import annotations

import time

from maxkernel_pallas_judge.chip_probe import ChipFound
from maxkernel_pallas_judge.judge import program
from maxkernel_tpu_pallas.tpu_platform import TpuPlatform

KIND = "host CPU (test chip)"


class HostChipPlatform(TpuPlatform):
    name = "cpu"
    label = "host CPU"
    spec = "tests.tpu_pallas.host_chip:HOST_CHIP"
    timing_plane = "/host:CPU"
    kernel_functions = True  # its device program is the interpret-mode export: kernels are those functions

    def timing_lines(self, line: str) -> bool:
        return line.startswith("tf_XLA")  # XLA's CPU client threads run the program; Python's line is the host

    def found(self) -> ChipFound:
        return ChipFound("cpu", True, KIND, 1, "the tests' stand-in")

    def attached_target(self) -> str | None:
        return "v5e"

    def device_paths(self) -> list[str]:
        return []

    def export(self, closed, target: str) -> bytes:
        return program.export_cpu_interpret(closed)

    def compile_exported(self, exported, target: str) -> dict:
        import jax

        start = time.perf_counter()
        jax.jit(exported.call).lower(*exported.in_avals).compile()
        return {"ok": True, "seconds": time.perf_counter() - start, "device_kind": KIND,
                "summary": "compiled for the host CPU (the tests' stand-in chip)", "memory": {}, "cost": {}}


HOST_CHIP = HostChipPlatform()
