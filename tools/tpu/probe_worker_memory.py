"""On a TPU host: how much address space a CPU-side judge worker maps before any job, stage by stage, and
whether it can then allocate what a full-size reference needs under the worker's address-space limit.

    tools/tpu/run.sh python3 tools/tpu/probe_worker_memory.py

Prints one JSON line per stage. The judge's CPU workers run with ``JAX_PLATFORMS=cpu`` and
``ALLOW_MULTIPLE_LIBTPU_LOAD=1`` (they compile for the TPU deviceless and never open the chip); libtpu, once
loaded, can reserve address space an RLIMIT_AS counts although it is never touched.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys


def vm() -> dict[str, int]:
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmSize", "VmPeak", "VmRSS", "VmData")):
                name, value = line.split(":")
                fields[name] = int(value.split()[0]) >> 10  # MiB
    return fields


def stages(limit_mb: int) -> None:
    print(json.dumps({"stage": "start", **vm()}), flush=True)
    import jax  # noqa: F401  (its address space is what this stage measures)
    from jax.experimental import pallas  # noqa: F401
    print(json.dumps({"stage": "import jax, pallas", "platforms": os.environ.get("JAX_PLATFORMS"), **vm()}), flush=True)
    from maxkernel_tpu_pallas.platform.compile import target_device
    print(json.dumps({"stage": "deviceless v5e device", "device": str(target_device("v5e")), **vm()}), flush=True)
    import jax.numpy as jnp
    print(json.dumps({"stage": "cpu op", "sum": float(jnp.ones(1024).sum()), **vm()}), flush=True)
    if limit_mb:
        base = vm()["VmSize"]
        resource.setrlimit(resource.RLIMIT_AS, ((base + limit_mb) << 20,) * 2)
    for mb in (256, 1024, 4096):
        try:
            x = jnp.ones((mb << 18,), jnp.float32)
            x.block_until_ready()
            print(json.dumps({"stage": f"allocate {mb} MiB", "ok": True, **vm()}), flush=True)
            del x
        except Exception as exc:  # noqa: BLE001
            print(json.dumps({"stage": f"allocate {mb} MiB", "ok": False, "error": str(exc)[:200], **vm()}), flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        stages(int(sys.argv[1]))
    else:
        env = {**os.environ, "JAX_PLATFORMS": "cpu", "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}
        for limit in ("0", "8192"):
            print(f"# a CPU-side worker's process, RLIMIT_AS {'none' if limit == '0' else 'VmSize after warm-up + ' + limit + ' MiB'}", flush=True)
            subprocess.run([sys.executable, __file__, limit], env=env, check=False)
