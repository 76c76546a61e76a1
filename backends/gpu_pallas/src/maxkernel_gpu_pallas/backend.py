"""The GPU Pallas backend: the shared Pallas judge with the GPU's Platform, targets and knowledge."""

from __future__ import annotations

from pathlib import Path

from maxkernel_core import Task
from maxkernel_pallas_judge.backend import PallasBackend

from .targets import DEFAULT_TARGET
from .targets import check_target as check_gpu_target

#: jax's CUDA plugins: on a GPU host they compile and run the program (a new one, another judge).
CUDA_DISTRIBUTIONS = ("jax-cuda13-plugin", "jax-cuda13-pjrt", "jax-cuda12-plugin", "jax-cuda12-pjrt")


class GpuPallasBackend(PallasBackend):
    """JAX Pallas kernels for NVIDIA GPUs (Triton or Mosaic GPU lowering): the same task formats and the same
    one-program judge as the TPU backend; lowering, kernels, figures and the estimate are the GPU's."""

    name = "gpu_pallas"
    kernel_platform = "gpu"
    default_target = DEFAULT_TARGET

    def platform(self):
        from .platform import GPU

        return GPU

    def check_target(self, target: str) -> str:
        return check_gpu_target(target)

    def fingerprint_parts(self, target: str) -> dict[str, str]:
        """This backend's source and shipped data (its lowering rules, datasheet figures, roofline)."""
        from maxkernel_pallas_judge.judge.fingerprint import distribution_version, package_digest

        cuda = ", ".join(f"{d} {distribution_version(d)}" for d in CUDA_DISTRIBUTIONS)  # the GPU compiler a GPU host uses
        return {"backend": f"{self.name}:{package_digest(Path(__file__).parent)}", "cuda": cuda}

    def knowledge(self, task: Task, *, target: str = DEFAULT_TARGET, budget_chars: int = 12000) -> str:
        from .knowledge import knowledge_pack

        return knowledge_pack(self.check_target(target), budget_chars)
