"""``maxkernel bench``: a strategy (or a folder of ready kernels) over a suite of tasks, and its report."""

from .metrics import TaskResult, suite_metrics
from .runner import BenchConfig, BenchResult, run_bench

__all__ = ["BenchConfig", "BenchResult", "TaskResult", "run_bench", "suite_metrics"]
