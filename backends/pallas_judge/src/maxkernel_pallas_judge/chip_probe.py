"""Which accelerator this host has, asked of its runtime (JAX and libtpu or CUDA) in a short child process.

Device files say too little: a TPU VM shows ``/dev/accel*`` (v2-v4) or ``/dev/vfio/N`` (v5e and later), a
container host may show only ``/dev/vfio`` or nothing one can glob, and a file can exist with no driver behind
it. The runtime knows: a child process starts JAX on that platform alone (``JAX_PLATFORMS=<name>``) and lists
``jax.devices()``. A child, because one process at a time can hold a TPU: the orchestrator must never be the
process that holds it, and the judge's device worker opens it only after the probe has let go.

Starting a TPU's runtime takes seconds (about 15 s on a v5e), so a host's answer is kept on disk for the
life of its boot, keyed by everything that could change it (the interpreter, the import path, jax and libtpu
versions, ``/dev``'s names, the ``TPU_*``/``CUDA_*`` variables). A chip another process holds answers busy,
which still means attached, but only where the host shows a chip at all: libtpu takes its lock before it looks
for a device, so two probes at once on a host with none (two test processes, say) make one of them "busy".
A busy answer is asked again after a pause, and one that stays busy on a host that shows no chip (the
platform's ``shows_chip``: its device files, its runtime's settings) is no answer (not attached, asked again
next time).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from attrs import asdict, frozen

#: libtpu's words when another process holds the chip (its lock file, /tmp/libtpu_lockfile)
BUSY_MARKERS = ("already in use", "libtpu_lockfile", "Device or resource busy", "EBUSY")
PROBE_TIMEOUT_S = 120.0
#: part of the cache key: a changed probe asks again
PROBE_VERSION = 3
#: pauses before asking again while libtpu's lock is held: another probe lets go within seconds
BUSY_RETRIES_S = (1.0, 3.0, 6.0)
#: the child's program: argv[1] is the platform; one JSON line on stdout
_CHILD = """
import json, sys
try:
    import jax
    devices = jax.devices(sys.argv[1])
    print(json.dumps({"ok": True, "kinds": [d.device_kind for d in devices], "platform": devices[0].platform}))
except BaseException as exc:
    print(json.dumps({"ok": False, "error": (type(exc).__name__ + ": " + str(exc))[:600]}))
"""


@frozen
class ChipFound:
    """What the runtime reported: whether ``platform``'s chip is attached, its kind and count, and how we know."""

    platform: str
    attached: bool
    kind: str = ""
    count: int = 0
    #: one line: how it was found, or why none was
    how: str = ""
    #: another process held the chip when asked (attached all the same)
    busy: bool = False
    #: the runtime answered: it listed the chip, or said there is none (a timeout or a crash is no answer)
    definite: bool = True

    def line(self) -> str:
        """The sentence ``maxkernel doctor`` prints."""
        if not self.attached:
            return f"no {self.platform.upper()} attached: {self.how}"
        many = f"{self.count} x " if self.count > 1 else ""
        return f"{many}{self.kind or self.platform.upper()} attached ({self.how})"


_memo: dict[str, ChipFound] = {}
_lock = threading.Lock()


def found(platform: str, *, cache_dir: Path | None = None, refresh: bool = False,
          shows_chip: Callable[[], bool] | None = None) -> ChipFound:
    """The chip of ``platform`` ("tpu", "gpu") on this host, from the runtime (cached per boot). ``shows_chip``:
    whether the host shows signs of that chip, the evidence a busy answer needs (None: a busy answer stands)."""
    with _lock:
        if platform in _memo and not refresh:
            return _memo[platform]
        path = _cache_path(platform, cache_dir)
        answer = None if refresh else _read(path)
        if answer is None:
            answer = ask_runtime(platform, shows_chip=shows_chip)
            _write(path, answer)
        _memo[platform] = answer
        return answer


def ask_runtime(platform: str, timeout_s: float = PROBE_TIMEOUT_S, *,
                shows_chip: Callable[[], bool] | None = None) -> ChipFound:
    """Start JAX on ``platform`` alone in a child process and read what it lists; while another process holds
    the runtime's lock, ask again after a pause, and where it stays held on a host that does not show the chip
    (``shows_chip``), there is no answer."""
    answer = _ask_once(platform, timeout_s)
    for pause in BUSY_RETRIES_S:
        if not answer.busy:
            return answer
        time.sleep(pause)
        answer = _ask_once(platform, timeout_s)
    if answer.busy and shows_chip is not None and not shows_chip():
        return ChipFound(platform, False, how=f"{answer.how.split(':')[0]}: the runtime's lock stayed held by "
                                              f"another process, and this host shows no {platform.upper()} "
                                              "(no device file, no runtime setting)", definite=False)
    return answer


def _ask_once(platform: str, timeout_s: float) -> ChipFound:
    env = {k: v for k, v in os.environ.items() if k != "ALLOW_MULTIPLE_LIBTPU_LOAD"}
    env["JAX_PLATFORMS"] = platform  # the parent may have set cpu for itself: the child asks for the chip alone
    how = f"jax.devices({platform!r}) in a child process"
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD, platform], capture_output=True, text=True, env=env,
                              timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return ChipFound(platform, False, how=f"{how} did not answer within {timeout_s:g} s", definite=False)
    except OSError as exc:
        return ChipFound(platform, False, how=f"{how} could not start: {exc}", definite=False)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    try:
        reply = json.loads(lines[-1])
    except (IndexError, ValueError):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
        return ChipFound(platform, False, how=f"{how} exited with code {done.returncode}: {tail}", definite=False)
    if reply["ok"]:
        kinds = sorted(set(reply["kinds"]))
        return ChipFound(platform, True, ", ".join(kinds), len(reply["kinds"]), how)
    error = reply["error"]
    if any(marker in error + done.stderr for marker in BUSY_MARKERS):
        return ChipFound(platform, True, "", 0, f"{how}: held by another process", busy=True)
    first = error.splitlines()[0].split(" (set JAX_PLATFORMS")[0]  # jax's own hint is about another setting
    return ChipFound(platform, False, how=f"{how}: {first[:300]}")


def _cache_key(platform: str) -> str:
    """Everything that could change the answer within one boot."""
    try:
        dev = sorted(os.listdir("/dev"))
    except OSError:
        dev = []
    env = sorted((k, v) for k, v in os.environ.items()
                 if k.startswith(("TPU_", "CUDA_", "NVIDIA_", "LIBTPU_")) or k in ("PYTHONPATH", "JAX_PLATFORMS"))
    versions = []
    for dist in ("jax", "jaxlib", "libtpu", "jax-cuda12-plugin", "jax-cuda13-plugin"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions.append(f"{dist} {importlib.metadata.version(dist)}")
    parts = [str(PROBE_VERSION), platform, sys.executable, repr(sys.path), repr(dev), repr(env), repr(versions), _boot_id()]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown-boot"


def _cache_path(platform: str, cache_dir: Path | None) -> Path:
    if cache_dir is None:
        import platformdirs

        cache_dir = Path(os.environ.get("MAXKERNEL_CACHE") or platformdirs.user_cache_dir("maxkernel"))
    return cache_dir / "chips" / f"{platform}-{_cache_key(platform)}.json"


def _read(path: Path) -> ChipFound | None:
    try:
        return ChipFound(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _write(path: Path, answer: ChipFound) -> None:
    if (answer.busy and not answer.kind) or not answer.definite:
        return  # asked again next time: when the chip is free to tell its kind, or the runtime answers at all
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(asdict(answer)))
        tmp.replace(path)
    except OSError:
        pass  # a read-only home: asked again by the next process
