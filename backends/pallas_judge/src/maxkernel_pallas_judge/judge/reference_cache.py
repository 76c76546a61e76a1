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
* the versions of the libraries that compute them (jax, jaxlib, libtpu, numpy, ml_dtypes, torch, torchax), and
  the environment the reference's worker is given (``JAX_*``, ``XLA_*``, ``LIBTPU_*``, ``PYTHONPATH``, ...).

What is not in the key: modules a task imports from elsewhere than its folder (beyond those libraries) and files
it reads outside its folder. Where a task does either, ``[eval] reference_cache = "off"``.

Only a reference computed on the CPU is kept: one put on the chip is held there and timed afresh. A reference
that failed is never kept, nor one that may have come out degraded by this host's moment (XLA's compile past
its time limit or out of memory, work counted from the jaxpr because the export failed, a set whose outputs
overflow with no widened arbiter beside them); and a reference is kept only if its key, made again after the
job, is unchanged (the task or the judge's code edited while it ran). Only the judge writes the folder; candidates run in sandboxes that cannot reach it
(bubblewrap binds their scratch alone; the weaker fallback, which says so, leaves every file of the user open,
this one as much as the run store). An entry ends with the digest of what it holds: one cut short, or
changed, is dropped and computed again, and any fault of the folder leaves the reference computed as before.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import io
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
from attrs import field, frozen

from ..sandbox import protocol
from ..sandbox.process import ENV_ALLOW
from .fingerprint import distribution_version

#: raised when what an entry holds changes meaning (its messages, its key's parts)
FORMAT = 2
#: a task folder past these is not hashed on every judge start: its references are computed each time
MAX_TASK_FILES, MAX_TASK_BYTES = 256, 64 << 20
#: an entry past this many bytes of arrays is not kept (the check sets of a task checked at full size on the CPU)
MAX_ENTRY_BYTES = 64 << 20
#: past either, the least recently used entries go (every judge change makes new keys, the old ones go unread)
MAX_ENTRIES, MAX_TOTAL_BYTES = 256, 2 << 30
_LIBRARIES = ("jax", "jaxlib", "libtpu", "numpy", "ml_dtypes", "torch", "torchax")
#: what ends an entry: this mark, then the sha256 of every byte before it
_TRAILER = b"MKREF2"

Message = tuple[dict[str, Any], list[np.ndarray]]


@frozen
class ReferenceCache:
    """The folder the references are kept in (the evaluator makes it when it starts); ``skip``: folders never hashed as a task's
    files (the run store's home, should a task's folder hold it)."""

    folder: Path
    skip: tuple[Path, ...] = field(default=(), converter=tuple)

    def key(self, job_header: dict[str, Any], module: Path, platform_spec: str) -> str | None:
        """The entry's name for this job on this task, or None: a task folder too large to hash, or unreadable."""
        try:
            files = _task_files(module.parent, (self.folder, *self.skip))
        except OSError:
            return None
        if files is None:
            return None
        # the module by its name in the folder whose files are hashed: a copy of the task elsewhere is the same task
        job = {**job_header, "task": {**job_header.get("task", {}), "module": module.name}}
        parts = {"format": FORMAT, "job": job, "task_files": files, "code": _code_digest(platform_spec),
                 "versions": _versions(), "environment": _worker_environment()}
        return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.msgs"

    def load(self, key: str) -> list[Message] | None:
        """The messages stored under ``key``, or None: none stored, or an entry that is not whole (dropped)."""
        path = self._path(key)
        try:
            data = path.read_bytes()
        except OSError:  # none stored, or a folder this process cannot read
            return None
        messages = _messages(data)
        if messages is None:
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # used: the last to go when the folder is pruned
        return messages

    def store(self, key: str, messages: list[Message]) -> None:
        """Keep ``messages`` under ``key``, whole or not at all (another process reads the name only once it is
        complete); a reference this host's moment degraded, or one too large, is not kept; a folder that cannot
        be written leaves the references uncached, never the verdict failed."""
        if not cacheable(messages) or sum(a.nbytes for _, arrays in messages for a in arrays) > MAX_ENTRY_BYTES:
            return
        path = self._path(key)
        buffer = io.BytesIO()
        for header, arrays in messages:
            protocol.send(buffer, {k: v for k, v in header.items() if k != "arrays"}, arrays)  # send writes its own
        data = buffer.getvalue()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, scratch = tempfile.mkstemp(dir=path.parent, prefix=".part-")
            try:
                with os.fdopen(fd, "wb") as stream:
                    for part in (data, _TRAILER, hashlib.sha256(data).digest()):  # no joined copy of the entry
                        stream.write(part)
                    stream.flush()
                    os.fsync(stream.fileno())
                os.replace(scratch, path)
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(scratch)
            self._prune()
        except OSError:
            return

    def _prune(self) -> None:
        entries = sorted(((p.stat(), p) for p in self.folder.glob("*/*.msgs")), key=lambda e: e[0].st_mtime,
                         reverse=True)
        total = 0
        for n, (stat, path) in enumerate(entries):
            total += stat.st_size
            if n >= MAX_ENTRIES or total > MAX_TOTAL_BYTES:
                path.unlink(missing_ok=True)


def cacheable(messages: list[Message]) -> bool:
    """Whether a reference job's messages are the task's reference as any run would compute it: not an error, XLA's
    compile not cut off by its time limit, each set whose outputs overflow with its widened arbiter beside it."""
    headers = [h for h, _ in messages]
    reference = next((h for h in headers if h.get("type") == "reference"), None)
    if reference is None or any(h.get("type") == "error" for h in headers):
        return False
    xla = reference.get("xla") or {}
    if xla.get("timed_out") or _out_of_memory(xla):
        return False
    if any("export failed" in str(work.get("note", "")) for work in reference.get("program_work") or []):
        return False  # counted from the jaxpr instead: kept only when the export works
    for header, arrays in messages:
        if header.get("type") != "reference_set":
            continue
        n, n_out = header.get("n_inputs", 0), header.get("n_outputs", 0)
        if len(arrays) == n + n_out and not all(_finite(a) for a in arrays[n:]):
            return False  # the arbiter was not made (it may be the memory of this moment): made again next time
    return True


def _out_of_memory(xla: dict[str, Any]) -> bool:
    """XLA's compile failed for want of memory: the host's (this moment's) or the target's (the reference does
    not fit: made again each time, which costs a compile, never a wrong figure)."""
    if xla.get("ok", True):
        return False
    error = xla.get("error") or {}
    text = f"{error.get('kind', '')} {error.get('type', '')} {error.get('message', '')}"
    return any(word in text for word in ("MemoryError", "RESOURCE_EXHAUSTED", "memory"))


def _finite(array: np.ndarray) -> bool:
    try:
        ml_dtypes.finfo(array.dtype)
    except (ValueError, TypeError):
        return True  # not floating: nothing to overflow
    return bool(np.isfinite(array.astype(np.float64)).all())


def _messages(data: bytes) -> list[Message] | None:
    """The messages of a whole entry, or None when it is cut short, changed or not messages."""
    body, mark, digest = data[:-38], data[-38:-32], data[-32:]
    if len(data) < 38 or mark != _TRAILER or hashlib.sha256(body).digest() != digest:
        return None
    stream, messages = io.BytesIO(body), []
    try:
        while True:
            try:
                messages.append(protocol.recv(stream, max_bytes=len(body)))
            except EOFError:
                break
    except (protocol.ProtocolError, ValueError):
        return None
    return messages or None


def cache_folder(configured: str, home: Path) -> Path | None:
    """Where references are kept: ``configured`` (``[eval] reference_cache``), "off" for nowhere, else the
    ``references`` folder of the run store's home."""
    if configured.strip().lower() == "off":
        return None
    return Path(configured).expanduser() if configured.strip() else home / "references"


def _task_files(folder: Path, skip: tuple[Path, ...]) -> list[tuple[str, str]] | None:
    """(path, sha256) of each file under the task's folder, through links (Python's caches and ``skip`` left
    out); None past the caps, found before the whole of a large folder is walked."""
    skipped = {os.path.realpath(p) for p in skip}
    found: list[Path] = []
    total = 0
    for root, dirs, names in os.walk(folder, followlinks=True):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and os.path.realpath(Path(root) / d) not in skipped)
        for name in names:
            path = Path(root) / name
            if not path.is_file() or name.startswith(".part-"):
                continue
            found.append(path)
            total += path.stat().st_size
            if len(found) > MAX_TASK_FILES or total > MAX_TASK_BYTES:
                return None
    return sorted((p.relative_to(folder).as_posix(), hashlib.sha256(p.read_bytes()).hexdigest()) for p in found)


def _worker_environment() -> dict[str, str]:
    """The variables the reference's worker is given from this process (``sandbox/process.py``), but the platform,
    which the worker sets itself."""
    return {k: v for k, v in os.environ.items() if ENV_ALLOW.match(k) and k != "JAX_PLATFORMS"}


def _code_digest(platform_spec: str) -> str:
    """One digest of the ``.py`` files of the judge library, the core (its AST helpers read task code) and the
    platform's package, as they are on disk now (the next worker imports them from there): each file's bytes are
    read again only when its size or time changed."""
    packages = {Path(__file__).resolve().parents[1]}
    for name in ("maxkernel_core", platform_spec.partition(":")[0].split(".")[0]):
        spec = importlib.util.find_spec(name)
        packages.update(Path(p).resolve() for p in ((spec.submodule_search_locations or []) if spec else []))
    digest = hashlib.sha256()
    for package in sorted(packages):
        for path in sorted(package.rglob("*.py")):
            stat = path.stat()
            digest.update(path.relative_to(package.parent).as_posix().encode() + b"\0" +
                          _file_digest(str(path), stat.st_size, stat.st_mtime_ns))
    return digest.hexdigest()


@functools.lru_cache(maxsize=4096)
def _file_digest(path: str, size: int, mtime_ns: int) -> bytes:
    return hashlib.sha256(Path(path).read_bytes()).digest()


@functools.cache
def _versions() -> dict[str, str]:
    return {"python": sys.version, **{name: distribution_version(name) for name in _LIBRARIES}}
