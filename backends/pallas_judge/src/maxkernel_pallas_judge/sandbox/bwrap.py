"""The OS sandbox around every process that runs candidate code: bubblewrap (``bwrap``).

What each part stops (docs/evaluation.md has the whole threat model):

* ``--unshare-pid`` + ``--die-with-parent``: the worker is PID 1's child in a
  namespace of its own; when the worker's bwrap dies (the pool SIGKILLs it at
  the end of every job) the kernel kills everything left in that namespace, so
  a ``setsid`` daemon cannot outlive its evaluation. Its own ``/proc`` shows
  no other process: the orchestrator's environment, command line and files
  are out of sight.
* ``--unshare-net``: no network but a downed loopback.
* ``--unshare-ipc``, ``--unshare-uts``, ``--unshare-cgroup-try``, a user
  namespace where the caller is unprivileged, ``--cap-drop ALL``.
* the filesystem: a fresh tmpfs root with only the system folders, the Python
  installation and the import path bound read-only, a private ``/tmp``, and
  the worker's own scratch folder as the one writable place (HOME and TMPDIR
  point there). Other workers' scratch folders and ``$MAXKERNEL_HOME`` do not
  exist inside.
* no file descriptor but the two protocol pipes (``close_fds`` in the pool),
  an environment allowlist, and the rlimits the worker sets on itself.

Without bwrap (not installed, or the kernel refuses namespaces) workers run
with the weaker fallback the pool had before: a network namespace where
``unshare`` allows one, their own process group, a 0700 scratch folder. Each
evaluation records which sandbox judged it.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

#: Read-only system folders every Python process needs (those that exist are bound).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
#: Facts about the machine (read-only) that native libraries read at start-up.
CPU_FACTS = ("/sys/devices/system/cpu",)
#: What the fallback leaves open, said once to the user and kept in docs/evaluation.md.
FALLBACK_GAPS = ("no PID or mount namespace: a daemon a candidate starts can outlive its evaluation and read or "
                 "write any file this user can, and on a host with a chip reach the chip's device files")
INSTALL_HINT = "install bubblewrap (apt-get install bubblewrap, or `make`)"


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def _readonly_roots() -> list[str]:
    """Folders bound read-only: system, the interpreter, the venv and every folder on the import path."""
    roots = [d for d in SYSTEM_DIRS if os.path.isdir(d)]
    extra = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))]
    extra += [p for p in sys.path if p and os.path.isdir(p)]
    extra += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.isdir(p)]
    for path in extra:
        real = os.path.realpath(path)
        if not any(real == r or real.startswith(r.rstrip("/") + "/") for r in roots):
            roots.append(real)
    # a folder inside another is already bound with it
    return [r for r in roots if not any(r != o and r.startswith(o.rstrip("/") + "/") for o in roots)]


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _hidden(roots: list[str], extra: tuple[str, ...] = ()) -> list[str]:
    """Secrets that live inside a bound folder: covered by an empty tmpfs. The run store's home, and ``extra``
    (the judge's own folders: ``Limits.hidden``)."""
    hide = []
    home = os.environ.get("MAXKERNEL_HOME")
    candidates = [home] if home else []
    candidates += list(extra)
    candidates.append(os.path.expanduser("~/.local/share/maxkernel"))
    for path in candidates:
        real = os.path.realpath(path)
        if os.path.isdir(real) and any(real.startswith(r.rstrip("/") + "/") for r in roots):
            hide.append(real)
    return hide


def _devices(found: list[str]) -> list[str]:
    """The chip's device files (a TPU VM's /dev/accel* or /dev/vfio, a GPU's /dev/nvidia*: ``Platform.device_paths``)
    for a worker that runs on the device."""
    if not found:
        return []
    args = []
    for path in found:
        args += ["--dev-bind", path, path]
    if os.path.isdir("/sys"):
        args += ["--ro-bind", "/sys", "/sys"]  # libtpu and CUDA read the chips' PCI facts (untested: no chip here)
    return args


def command(argv: list[str], scratch: Path, *, devices: tuple[str, ...] = (), ro_paths: tuple[str, ...] = (),
            hidden: tuple[str, ...] = ()) -> list[str]:
    """``argv`` wrapped in bwrap, with ``scratch`` the only writable folder (``ro_paths``: more to read;
    ``hidden``: folders of the judge's to cover where a bound folder holds them)."""
    roots = _readonly_roots()
    roots += [os.path.realpath(p) for p in ro_paths if os.path.realpath(p) not in roots]
    # A folder holding the scratch folders (a TMPDIR, /tmp, /) would show every other worker's: never bound.
    scratch_parent = os.path.realpath(os.path.dirname(scratch))
    roots = [r for r in roots if not _inside(scratch_parent, r)]
    # Mounts stack in order: the private /tmp first, so that an installation under /tmp (a CI clone's
    # venv) is bound on top of it rather than hidden by it.
    args = [bwrap_path() or "bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--tmpfs", "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/run"]
    for root in roots:
        args += ["--ro-bind", root, root]
    for path in _hidden(roots, hidden):
        args += ["--tmpfs", path]
    for path in CPU_FACTS:  # libtpu's allocator counts CPUs here and aborts without it
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    args += _devices(list(devices))
    args += ["--bind", str(scratch), str(scratch), "--chdir", str(scratch), "--"]
    return args + argv


@functools.lru_cache(maxsize=1)
def probe() -> tuple[bool, str]:
    """(usable, why not): bwrap present and able to make its namespaces on this machine."""
    path = bwrap_path()
    if path is None:
        return False, f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}"
    scratch = Path(os.environ.get("TMPDIR") or "/tmp")
    try:
        done = subprocess.run(command([sys.executable, "-c", "print(1)"], scratch), capture_output=True,
                              text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"bwrap could not start: {exc}"
    if done.returncode != 0 or done.stdout.strip() != "1":
        why = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return False, f"bwrap cannot make its namespaces here ({why[:200]})"
    return True, ""


def sandbox_name() -> str:
    """What judges candidates on this machine: 'bwrap' or 'fallback'."""
    return "bwrap" if probe()[0] else "fallback"


def fallback_warning() -> str | None:
    """One line for the user when candidates would run with the weaker fallback, else None."""
    usable, why = probe()
    if usable:
        return None
    return f"maxkernel: candidates run with the weaker fallback sandbox: {why}; left open: {FALLBACK_GAPS}"
