"""The GPU Pallas backend: the TPU backend's task formats and sandboxed judge, with the GPU's Platform."""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

from maxkernel_core import Task
from maxkernel_tpu_pallas.backend import TpuPallasBackend

from .targets import DEFAULT_TARGET
from .targets import check_target as check_gpu_target


@functools.cache
def _source_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.rglob("*")):
        if path.is_file() and path.suffix in (".py", ".md"):
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


class GpuPallasBackend(TpuPallasBackend):
    """JAX Pallas kernels for NVIDIA GPUs (Triton or Mosaic GPU lowering): the same task formats and the same
    one-program judge as the TPU backend; lowering, kernels, figures and the estimate are the GPU's."""

    name = "gpu_pallas"
    kernel_platform = "gpu"

    def check_target(self, target: str) -> str:
        return check_gpu_target(target)

    @property
    def evaluator(self):
        with self._lock:
            if self._evaluator is None:
                from maxkernel_tpu_pallas.judge.evaluator import evaluator_from_settings

                from .platform import GPU

                self._evaluator = evaluator_from_settings(self.settings, GPU, self.check_target)
            return self._evaluator

    def judge_fingerprint(self, task: Task, *, target: str = DEFAULT_TARGET) -> str:
        """The shared judge's fingerprint, plus this backend's own source (its lowering rules and estimate)."""
        parts = json.loads(super().judge_fingerprint(task, target=target))
        return json.dumps({**parts, "backend": self.name, "gpu_backend": _source_digest()}, sort_keys=True)

    def knowledge(self, task: Task, *, target: str = DEFAULT_TARGET, budget_chars: int = 12000) -> str:
        from .knowledge import knowledge_pack

        return knowledge_pack(self.check_target(target), budget_chars)
