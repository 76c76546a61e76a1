"""Task references kept across runs: what the trusted reference job sent back, stored once per task and judge.

A task's reference (its input sets, its outputs at the check size, its work, XLA's compile for the target) costs
4-18 s of a worker's time and is the same every time the same task is judged with the same code: a second
``maxkernel eval``, a resumed run, a bench run again, each test that judges the test tasks. The cache keeps the
reference job's messages, in the worker's own wire format (``sandbox/protocol.py``: JSON headers and raw arrays,
never pickle), under a key that changes with anything the messages depend on:

* the job as the evaluator would send it (its task record, target, sizes, tolerances, fresh sets), the task's
  module named within its folder, so a copy of the task elsewhere is the same task;
* the bytes of every file in the task's folder (its reference module, its spec, data it loads);
* the judge's own code, the core's and the platform's package (their ``.py`` files), which make the messages;
* the versions of the libraries that compute them (jax, jaxlib, libtpu, numpy, ml_dtypes, torch, torchax).

Only a reference computed on the CPU is kept: one put on the chip is held there and timed afresh. A reference
that failed is never kept. Only the judge writes the folder; candidates run in sandboxes that cannot reach it
(bubblewrap binds their scratch alone; the weaker fallback, which says so, leaves every file of the user open,
this one as much as the run store). A stored entry that does not read back is dropped and computed again.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from attrs import frozen

from ..sandbox import protocol

#: raised when what an entry holds changes meaning (its messages, its key's parts)
FORMAT = 1
#: a task folder past these is not hashed on every judge start: its references are computed each time
MAX_TASK_FILES, MAX_TASK_BYTES = 256, 64 << 20
#: an entry past this many bytes of arrays is not kept (the check sets of a task checked at full size on the CPU)
MAX_ENTRY_BYTES = 128 << 20
#: entries kept; past it the least recently used go (every judge change makes new keys, the old ones go unread)
MAX_ENTRIES = 256
_LIBRARIES = ("jax", "jaxlib", "libtpu", "numpy", "ml_dtypes", "torch", "torchax")

Message = tuple[dict[str, Any], list[np.ndarray]]


@frozen
class ReferenceCache:
    """The folder the references are kept in (made on first use)."""

    folder: Path

    def key(self, job_header: dict[str, Any], module: Path, platform_spec: str) -> str | None:
        """The entry's name for this job on this task, or None when the task's folder is too large to hash."""
        files = _task_files(module.parent)
        if files is None:
            return None
        # the module by its name in the folder whose files are hashed: a copy of the task elsewhere is the same task
        job = {**job_header, "task": {**job_header.get("task", {}), "module": module.name}}
        parts = {"format": FORMAT, "job": job, "task_files": files, "code": _code_digest(platform_spec),
                 "versions": _versions()}
        return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.msgs"

    def load(self, key: str) -> list[Message] | None:
        """The messages stored under ``key``, or None (none stored, or an entry that does not read back)."""
        path = self._path(key)
        try:
            with open(path, "rb") as stream:
                messages = []
                while True:
                    try:
                        messages.append(protocol.recv(stream))
                    except EOFError:
                        break
        except FileNotFoundError:
            return None
        except (OSError, protocol.ProtocolError, ValueError):
            path.unlink(missing_ok=True)
            return None
        if not messages:
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # used: the last to go when the folder is pruned
        return messages

    def store(self, key: str, messages: list[Message]) -> None:
        """Keep ``messages`` under ``key``, whole or not at all (another process reads the name only once it is
        complete); a folder that cannot be written leaves the references uncached, never the verdict failed."""
        if sum(a.nbytes for _, arrays in messages for a in arrays) > MAX_ENTRY_BYTES:
            return
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, scratch = tempfile.mkstemp(dir=path.parent, prefix=".part-")
            try:
                with os.fdopen(fd, "wb") as stream:
                    for header, arrays in messages:
                        header = {k: v for k, v in header.items() if k != "arrays"}  # send writes its own
                        protocol.send(stream, header, arrays)
                os.replace(scratch, path)
            finally:
                Path(scratch).unlink(missing_ok=True)
            self._prune()
        except OSError:
            return

    def _prune(self) -> None:
        entries = sorted(self.folder.glob("*/*.msgs"), key=lambda p: p.stat().st_mtime)
        for path in entries[:max(len(entries) - MAX_ENTRIES, 0)]:
            path.unlink(missing_ok=True)


def cache_folder(configured: str, home: Path) -> Path | None:
    """Where references are kept: ``configured`` (``[eval] reference_cache``), "off" for nowhere, else the
    ``references`` folder of the run store's home."""
    if configured.strip().lower() == "off":
        return None
    return Path(configured).expanduser() if configured.strip() else home / "references"


def _task_files(folder: Path) -> list[tuple[str, str]] | None:
    """(path, sha256) of each file under the task's folder (Python's caches left out); None past the caps,
    found before the whole of a large folder is walked."""
    found: list[Path] = []
    total = 0
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in names:
            path = Path(root) / name
            if not path.is_file():
                continue
            found.append(path)
            total += path.stat().st_size
            if len(found) > MAX_TASK_FILES or total > MAX_TASK_BYTES:
                return None
    return sorted((p.relative_to(folder).as_posix(), hashlib.sha256(p.read_bytes()).hexdigest()) for p in found)


@functools.cache
def _code_digest(platform_spec: str) -> str:
    """One digest of the ``.py`` files of the judge library, the core (its AST helpers read task code) and the
    platform's package."""
    packages = {Path(__file__).resolve().parents[1]}
    for name in ("maxkernel_core", platform_spec.partition(":")[0].split(".")[0]):
        spec = importlib.util.find_spec(name)
        packages.update(Path(p).resolve() for p in ((spec.submodule_search_locations or []) if spec else []))
    digest = hashlib.sha256()
    for package in sorted(packages):
        for path in sorted(package.rglob("*.py")):
            digest.update(path.relative_to(package.parent).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


@functools.cache
def _versions() -> dict[str, str | None]:
    def version(name: str) -> str | None:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return None

    return {"python": sys.version, **{name: version(name) for name in _LIBRARIES}}
