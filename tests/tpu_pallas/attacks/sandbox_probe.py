"""Looks around from inside the sandbox and reports what it saw in its error message: other processes and
their environment and command line, other workers' folders, the run store, the network."""
import glob
import json
import os
import socket

HOME = "__MAXKERNEL_HOME__"
PORT = int("__PORT__")


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode(errors="replace")
    except OSError as exc:
        return f"<{type(exc).__name__}>"


def _connect():
    try:
        with socket.create_connection(("127.0.0.1", PORT), timeout=1):
            return "connected"
    except OSError as exc:
        return type(exc).__name__


pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
others = [p for p in pids if p != os.getpid()]
findings = {
    "pids": pids,
    "secrets": "sekrit-orchestrator-key" in "".join(_read(f"/proc/{p}/environ") + _read(f"/proc/{p}/cmdline")
                                                     for p in others),
    "parent_environ": _read(f"/proc/{os.getppid()}/environ")[:60],
    "workers": len([p for p in glob.glob("/tmp/maxkernel-worker-*") + glob.glob(
        os.path.join(os.path.dirname(os.getcwd()), "maxkernel-worker-*")) if os.path.realpath(p) != os.getcwd()]),
    "home": os.path.exists(HOME) and bool(os.listdir(HOME)) if os.path.isdir(HOME) else False,
    "net": _connect(),
    "env_keys": sorted(k for k in os.environ if "KEY" in k or "TOKEN" in k),
}
raise RuntimeError("PROBE" + json.dumps(findings) + "PROBE")
