"""How fast arrays move on this host: between two processes (the judge's pipe protocol, a larger pipe, a file)
and between the host and the chip. Prints one JSON line per figure (docs/tpu.md: where an evaluation's time
goes on the lent TPU host). Usage: python probe_transfer.py [MiB]"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from maxkernel_pallas_judge.sandbox import protocol

F_SETPIPE_SZ = 1031
CHILD = """
import sys, numpy as np, os
from maxkernel_pallas_judge.sandbox import protocol
a = np.ones(int(sys.argv[1]) << 20, dtype=np.uint8)
out = os.fdopen(int(sys.argv[2]), "wb")
protocol.send(out, {"type": "ready"})
protocol.send(out, {"type": "x"}, [a])
out.close()
"""


def _pipe(mib: int, big: bool) -> float:
    r, w = os.pipe()
    if big:
        fcntl.fcntl(w, F_SETPIPE_SZ, 1 << 20)
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(mib), str(w)], pass_fds=(w,))
    os.close(w)
    with os.fdopen(r, "rb") as stream:
        protocol.recv(stream)  # the child is started and its array made
        start = time.perf_counter()
        _, arrays = protocol.recv(stream)
    seconds = time.perf_counter() - start
    child.wait()
    assert arrays[0].nbytes == mib << 20
    return seconds


def _file(mib: int) -> float:
    a = np.ones(mib << 20, dtype=np.uint8)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "a.bin")
        start = time.perf_counter()
        a.tofile(path)
        b = np.fromfile(path, dtype=np.uint8)
        seconds = time.perf_counter() - start
    assert b.nbytes == a.nbytes
    return seconds


def _chip(mib: int) -> dict[str, float]:
    import jax

    a = np.ones(mib << 20, dtype=np.uint8)
    start = time.perf_counter()
    x = jax.block_until_ready(jax.device_put(a))
    h2d = time.perf_counter() - start
    start = time.perf_counter()
    np.asarray(x)
    d2h = time.perf_counter() - start
    return {"host_to_chip_s": h2d, "chip_to_host_s": d2h}


def main() -> None:
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 512
    for name, fn in [("pipe", lambda: _pipe(mib, False)), ("pipe 1 MiB", lambda: _pipe(mib, True)),
                     ("file", lambda: _file(mib))]:
        seconds = fn()
        print(json.dumps({"how": name, "mib": mib, "seconds": round(seconds, 3), "mib_s": round(mib / seconds)}),
              flush=True)
    figures = _chip(mib)
    print(json.dumps({"how": "chip", "mib": mib, **{k: round(v, 3) for k, v in figures.items()},
                      "h2d_mib_s": round(mib / figures["host_to_chip_s"]),
                      "d2h_mib_s": round(mib / figures["chip_to_host_s"])}), flush=True)


if __name__ == "__main__":
    main()
