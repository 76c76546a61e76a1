"""``python -m maxkernel_tpu_pallas.costmodel.calibration.device_run OUT TRACES``: time the calibration micro-suite
on the attached TPU in this process and write {benchmark: median device seconds} to OUT.

``maxkernel calibrate`` starts it as a child with ``JAX_PLATFORMS=tpu``: the command's own process has loaded
the plugins and stays on the CPU, and one process at a time can hold a TPU.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    import jax

    from .microbench import time_suite

    if jax.default_backend() != "tpu":
        print(f"no TPU here: jax's backend is {jax.default_backend()!r}", file=sys.stderr)
        return 2
    seconds = time_suite(Path(argv[1]), log=lambda line: print(line, flush=True))
    Path(argv[0]).write_text(json.dumps(seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
