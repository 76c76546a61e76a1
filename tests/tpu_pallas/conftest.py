from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

HERE = Path(__file__).parent
TASKS = HERE / "tasks"
KERNELS = HERE / "kernels"


EXPERTS = HERE / "experts"


def kernel_source(name: str, folder: Path = KERNELS) -> str:
    """A test kernel's source; ``# @include FILE as NAME`` pastes FILE in, its computation renamed NAME, and
    ``# @include FILE`` pastes it as it is (a shared kernel body, such as the experts' flash attention).

    Candidates are single self-contained modules, so a cheat that wraps the
    honest kernel carries a copy of it.
    """
    text = (folder / name).read_text()

    def include(match: re.Match) -> str:
        body = (folder / match[1]).read_text()
        return re.sub(r"^def computation\(", f"def {match[2]}(", body, flags=re.M) if match[2] else body

    return re.sub(r"^# @include (\S+)(?: as (\w+))?$", include, text, flags=re.M)


@pytest.fixture(scope="session")
def tpu_backend():
    from maxkernel_tpu_pallas.backend import TpuPallasBackend

    backend = TpuPallasBackend()
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def task_of(tpu_backend):
    cache = {}

    def load(name: str):
        if name not in cache:
            cache[name] = tpu_backend.load_task(TASKS / name)
        return cache[name]

    return load


# Tests that trace or compile in this process load libtpu beside the workers: no chip to guard here.
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
