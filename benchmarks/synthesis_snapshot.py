"""What the offline synthesizer decides for every task, as one JSON line each: the before/after record of a
change that must not change its behaviour (a layout move, a refactor).

    .venv/bin/python benchmarks/synthesis_snapshot.py --out FILE [--targets v5e,v6e,h100] [--tasks GLOB]
    .venv/bin/python benchmarks/synthesis_snapshot.py --compare BEFORE AFTER

Per task and target (TPU targets through the TPU templates, h100 through the GPU ones): the template (or the reason it declines), the ranked points with each one's estimated
seconds, and a digest of the module written for the best point. Nothing is judged: it is the synthesizer's
side of the sweep, in minutes rather than the sweep's half hour (run the sweep too for the verdicts).
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SUITES = [REPO / "jaxbench", REPO / "tests" / "tpu_pallas" / "tasks", REPO / "tests" / "offline" / "tasks"]


#: targets whose kernels the GPU templates write (the rest are TPU targets)
GPU_TARGETS = ("h100",)


def snapshot(task, target: str) -> dict:
    from maxkernel_core.errors import MaxKernelError

    if target in GPU_TARGETS:
        from maxkernel_gpu_offline.synthesis import synthesize
    else:
        from maxkernel_tpu_offline.synthesis import synthesize
    try:
        found = synthesize(task, target)
    except MaxKernelError as exc:  # the synthesizer declines the task, with its reason
        return {"task": task.id, "target": target, "declined": str(exc)}
    best = found.ranked[0][0] if found.ranked else {}
    module = found.module(task.id, best)
    return {"task": task.id, "target": target, "template": found.analysis.template,
            "dtype": getattr(found, "dtype", None),
            "ranked": [[point, round(est.seconds, 12)] for point, est in found.ranked],
            "module_sha256": hashlib.sha256(module.encode()).hexdigest()}


def take(args) -> int:
    from maxkernel_tpu_pallas.backend import TpuPallasBackend

    backend = TpuPallasBackend()
    folders = sorted(d for root in SUITES for d in root.iterdir()
                     if d.is_dir() and (d / "reference.py").exists() and fnmatch.fnmatch(d.name, args.tasks))
    start = time.monotonic()
    with args.out.open("w") as out:
        for folder in folders:
            task = backend.load_task(folder)
            for target in args.targets.split(","):
                out.write(json.dumps(snapshot(task, target), sort_keys=True) + "\n")
                out.flush()
    print(f"{len(folders)} tasks x {args.targets}: {time.monotonic() - start:.0f} s -> {args.out}")
    return 0


def compare(before: Path, after: Path) -> int:
    def read(path):
        return {(r["task"], r["target"]): r for r in map(json.loads, path.read_text().splitlines())}

    a, b = read(before), read(after)
    differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    for key in differ:
        print(f"differs: {key[0]} {key[1]}")
    print(f"{len(a)} records before, {len(b)} after, {len(differ)} differ")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--targets", default="v5e,v6e,h100")
    parser.add_argument("--tasks", default="*")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare)
    if args.out is None:
        parser.error("--out FILE (or --compare BEFORE AFTER)")
    return take(args)


if __name__ == "__main__":
    sys.exit(main())
