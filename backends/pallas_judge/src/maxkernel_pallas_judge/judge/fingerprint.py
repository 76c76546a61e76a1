"""What a verdict of this judge depends on besides the candidate's code, as one string.

The core reuses a verdict for identical code only under an equal fingerprint
(:meth:`maxkernel_core.interfaces.Backend.judge_fingerprint`), so everything that could
change a verdict or its estimate is in it: the task's files and record, the target,
the ``[eval]`` settings, the versions of jax, jaxlib and libtpu, this package's own
source (an edited judge in an editable install is a different judge), the cost
model's parameters for the target (shipped or a user calibration) and the machine
(a TPU host measures where another estimates).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import platform
from pathlib import Path

from maxkernel_core import Task
from maxkernel_core.serialize import to_json

PACKAGE_DIR = Path(__file__).resolve().parents[1]
COMPILERS = ("jax", "jaxlib", "libtpu")


def distribution_version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def compiler_versions() -> str:
    """jax, jaxlib and libtpu as installed: a tuned kernel is kept per these (another version is a miss)."""
    return ", ".join(f"{dist} {distribution_version(dist)}" for dist in COMPILERS)


def _files_digest(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(str(path).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@functools.cache
def judge_source_digest() -> str:
    """This package's source and shipped data (chip parameters, calibration sets): one digest per process."""
    return _files_digest([p for p in PACKAGE_DIR.rglob("*") if p.is_file() and p.suffix in (".py", ".toml", ".json")])


def task_digest(task: Task) -> str:
    """The task's record and every file of its folder (or its one module)."""
    root = Path(task.path)
    files = [p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts] if root.is_dir() else [root]
    record = json.dumps(to_json(task), sort_keys=True, default=str)
    return hashlib.sha256(record.encode() + _files_digest([p for p in files if p.exists()]).encode()).hexdigest()


def file_digest(path: Path) -> str:
    """A file's digest, or "shipped" when it does not exist (a user calibration not made)."""
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "shipped"


def package_digest(folder: Path) -> str:
    """A backend package's own source and shipped data (its lowering, chip figures, cost model)."""
    return _files_digest([p for p in folder.rglob("*") if p.is_file() and p.suffix in (".py", ".toml", ".json")])


def judge_fingerprint(task: Task, target: str, eval_settings, backend_parts: dict[str, str]) -> str:
    """Everything that can change a verdict or its estimate; ``backend_parts``: the backend's own (its source
    digest, its model's calibration), which the shared judge cannot know."""
    parts = {
        "task": task_digest(task),
        "target": target,
        "eval": repr(eval_settings),
        "versions": f"{compiler_versions()}, maxkernel {distribution_version('maxkernel')}"
                    # a PyTorch task's reference is torchax's translation: another torch or torchax, another judge
                    + (f", torch {distribution_version('torch')}, torchax {distribution_version('torchax')}"
                       if task.metadata.get("wrap") == "pytorch" else ""),
        "judge": judge_source_digest(),
        "machine": platform.node(),
        **backend_parts,
    }
    return json.dumps(parts, sort_keys=True)
