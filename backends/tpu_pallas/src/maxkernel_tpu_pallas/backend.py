"""The TPU Pallas backend: the shared Pallas judge with the TPU's Platform, targets and knowledge."""

from __future__ import annotations

from pathlib import Path

from maxkernel_core import Task
from maxkernel_pallas_judge.backend import PallasBackend

from .targets import DEFAULT_TARGET
from .targets import check_target as check_tpu_target


class TpuPallasBackend(PallasBackend):
    """JAX Pallas kernels for TPU: tasks in the MaxKernel or JAXBench format, judged in a sandbox."""

    name = "tpu_pallas"
    kernel_platform = "tpu"
    default_target = DEFAULT_TARGET

    def platform(self):
        from .tpu_platform import TPU

        return TPU

    def check_target(self, target: str) -> str:
        """``target`` when this backend judges for it; else a ConfigError naming the choices."""
        return check_tpu_target(target)

    def fingerprint_parts(self, target: str) -> dict[str, str]:
        """What of this backend changes a verdict or estimate: its source and shipped data, the calibration."""
        from maxkernel_pallas_judge.judge.fingerprint import file_digest, package_digest

        from .costmodel.user_calibration import calibration_path

        return {"backend": package_digest(Path(__file__).parent), "calibration": file_digest(calibration_path(target))}

    def knowledge(self, task: Task, *, target: str = DEFAULT_TARGET, budget_chars: int = 12000) -> str:
        from .knowledge import knowledge_pack

        return knowledge_pack(self.check_target(target), budget_chars)

