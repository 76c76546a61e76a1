"""How long the cost model takes on grids of up to a million steps (index maps evaluated vectorised).

    .venv/bin/python benchmarks/costmodel_speed.py

Target: well under a second for a million-step grid (extraction in the worker plus the model).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from maxkernel_tpu_pallas.costmodel.costmodel import estimate  # noqa: E402
from maxkernel_pallas_judge.profiling.extract import describe_kernels
from maxkernel_tpu_pallas.costmodel.chip import chip_figures  # noqa: E402
from tests.tpu_pallas.test_costmodel import matmul  # noqa: E402


def main() -> None:
    chip = chip_figures("v5e")
    print(f"{'grid':>18} {'steps':>10} {'extract s':>10} {'model s':>8} {'estimate':>12}")
    for size, block in ((8192, 256), (16384, 128), (32768, 256), (12800, 128)):
        shapes = (jax.ShapeDtypeStruct((size, size), jnp.bfloat16),) * 2
        jaxpr = jax.make_jaxpr(matmul(block, block, block))(*shapes)
        start = time.perf_counter()
        kernels = describe_kernels(jaxpr)
        mid = time.perf_counter()
        est = estimate(kernels, chip, "v5e")
        end = time.perf_counter()
        grid = tuple(kernels[0]["grid"])
        print(f"{str(grid):>18} {kernels[0]['steps']:>10,} {mid - start:10.3f} {end - mid:8.4f} {est.seconds * 1e3:10.2f} ms")


if __name__ == "__main__":
    main()
