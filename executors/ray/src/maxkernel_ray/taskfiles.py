"""A task's files, sent to a cluster host that has no copy of them (no shared filesystem is assumed).

The orchestrator packs the files under ``task.path`` (a task folder, or one
JAXBench module); a host writes them once into a folder named by their content
hash and gets the same Task with its paths pointing there. The paths a backend
keeps in ``task.metadata`` are rewritten the same way, whatever the backend.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

import attrs
from maxkernel_core import Task, TaskError

#: Tasks are a reference module and some metadata; anything near this is a mistake (a checkout, a dataset).
MAX_BYTES = 64 << 20


def pack(task: Task) -> dict[str, Any]:
    """``{"name", "kind", "digest", "files": {relative path: bytes}}`` for the file or folder at ``task.path``."""
    root = Path(task.path)
    if root.is_file():
        paths, base = [root], root.parent
    elif root.is_dir():
        paths = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.relative_to(root).parts
                       and not any(part.startswith(".") for part in p.relative_to(root).parts))
        base = root
    else:
        raise TaskError(f"task {task.id!r}: its path {root} is neither a file nor a folder, so it cannot be sent to a host")
    files = {str(p.relative_to(base)): p.read_bytes() for p in paths}
    size = sum(len(b) for b in files.values())
    if size > MAX_BYTES:
        raise TaskError(f"task {task.id!r}: {root} holds {size >> 20} MiB of files, more than the {MAX_BYTES >> 20} MiB "
                        "a task may send to a cluster host; keep data out of the task folder")
    digest = hashlib.sha256()
    for rel, data in sorted(files.items()):
        digest.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
    return {"name": root.name, "kind": "file" if root.is_file() else "folder", "digest": digest.hexdigest()[:24],
            "files": files}


def unpack(task: Task, bundle: dict[str, Any], cache: Path | None = None) -> Task:
    """Write the bundle under ``cache`` (once per content) and return ``task`` with its paths moved there."""
    cache = cache or Path(tempfile.gettempdir()) / "maxkernel-ray-tasks"
    folder = cache / bundle["digest"]
    if not folder.is_dir():
        # Several actors share a host: build in a private folder, then rename it into place atomically.
        cache.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(prefix=".building-", dir=cache))
        for rel, data in bundle["files"].items():
            target = building / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        try:
            os.rename(building, folder)
        except OSError:  # another actor got there first with the same content
            import shutil

            shutil.rmtree(building, ignore_errors=True)
    # A folder task becomes the folder itself; a one-module task, its module inside the folder.
    new = str(folder / bundle["name"] if bundle["kind"] == "file" else folder)
    return attrs.evolve(task, path=new, metadata=_moved(task.metadata, task.path, new))


def _moved(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str) and (value == old or value.startswith(old.rstrip("/") + "/")):
        return new + value[len(old):]
    if isinstance(value, dict):
        return {k: _moved(v, old, new) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_moved(v, old, new) for v in value)
    return value
