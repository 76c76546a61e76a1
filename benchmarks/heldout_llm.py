"""Judge the LLM-written Pallas kernels that JAXBench ran correctly on a TPU, as they were published; resumable.

Held-out honest kernels: JAXBench's pallas_eval (github.com/aryatschand/JAXBench, commit ebc95e6) asked two
models for Pallas versions of its KernelBench-in-JAX and priority workloads and ran each on a TPU v6e
(``pallas_eval/results/eval_<model>.json``). Every kernel it found correct is judged here against the very
module it answered (``jaxkernelbench/<level>/<name>.py``, read as a KernelBench-style task; a priority
workload's ``priority_kernels/<name>/baseline.py`` as a JAXBench one), for the chip it ran on. Nothing is
adapted by hand, and nothing here tunes the judge: a kernel the chip ran correctly and this judge refuses is
the judge's error unless the policies differ (work left outside Pallas, which JAXBench allows) or the refusal
names a real fault.

    git clone https://github.com/aryatschand/JAXBench CLONE   # (ebc95e6)
    python benchmarks/heldout_llm.py run --jaxbench CLONE --results FILE [--suites level2,priority]
    python benchmarks/heldout_llm.py report FILE

Each verdict is appended to FILE as soon as it is in, so a killed run continues where it stopped.
"""

from __future__ import annotations

import argparse
import collections
import fnmatch
import json
import sys
import time
from pathlib import Path

MODELS = ("gemini3", "gpt53")
SUITES = ("level1", "level2", "priority")
#: the share of honest kernels judged ok, where the two policies agree, that issue 44 asks for
TARGET_OK = 0.95
#: the check whose refusal is a difference of policy: work left outside Pallas kernels
POLICY_CHECK = "proof_of_kernel"


def published(clone: Path, models: list[str], suites: list[str]) -> list[dict]:
    """The kernels JAXBench found correct on its chip, each with its task module and its kernel file."""
    found = []
    for model in models:
        results = json.loads((clone / "pallas_eval" / "results" / f"eval_{model}.json").read_text())["results"]
        for r in results:
            suite = "priority" if r["suite"] == "priority_kernels" else r.get("level")
            if r.get("status") != "success" or not r.get("correct") or suite not in suites:
                continue
            if suite == "priority":
                task, folder = clone / "priority_kernels" / r["name"], "priority_kernels"  # <name>/baseline.py
            else:
                task, folder = clone / "jaxkernelbench" / suite / f"{r['name']}.py", f"jaxkernelbench_{suite}"
            kernel = clone / "pallas_eval" / "generated" / model / folder / f"{r['name']}.py"
            found.append({"key": f"{model}/{suite}/{r['name']}", "model": model, "suite": suite, "name": r["name"],
                          "task": task, "kernel": kernel, "published_max_diff": r.get("max_diff"),
                          "published_speedup": r.get("speedup")})
    return found


def done_keys(results: Path) -> set[str]:
    if not results.is_file():
        return set()
    return {json.loads(line)["key"] for line in results.read_text().splitlines() if line.strip()}


def verdict_line(entry: dict, ev, wall_s: float) -> dict:
    failed = next((c for c in ev.checks if not c.passed), None)
    policy = ev.status.value == "rejected" and any(
        not c.passed and c.name == POLICY_CHECK and "outside" in c.message for c in ev.checks)
    return {"key": entry["key"], "model": entry["model"], "suite": entry["suite"], "name": entry["name"],
            "status": ev.status.value, "failed_check": failed.name if failed else None, "policy": policy,
            "reason": ev.reason[:600], "wall_s": round(wall_s, 1),
            "published_max_diff": entry["published_max_diff"], "published_speedup": entry["published_speedup"]}


def run(args) -> int:
    from maxkernel_tpu_pallas.backend import TpuPallasBackend

    from maxkernel_core import Candidate
    from maxkernel_core.errors import TaskError

    entries = [e for e in published(args.jaxbench, args.models.split(","), args.suites.split(","))
               if fnmatch.fnmatch(e["key"], args.only)]
    done = done_keys(args.results)
    backend = TpuPallasBackend()
    try:
        for entry in entries:
            if entry["key"] in done:
                continue
            t0 = time.monotonic()
            try:
                task = backend.load_task(entry["task"])
                ev = backend.evaluate(task, Candidate(entry["name"], entry["kernel"].read_text()), target=args.target)
            except TaskError as exc:  # the published reference itself could not be run here: named, kept
                line = {"key": entry["key"], "model": entry["model"], "suite": entry["suite"], "name": entry["name"],
                        "status": "task_error", "failed_check": None, "policy": False, "reason": str(exc)[:600],
                        "wall_s": round(time.monotonic() - t0, 1)}
            else:
                line = verdict_line(entry, ev, time.monotonic() - t0)
            with args.results.open("a") as f:
                f.write(json.dumps(line) + "\n")
            print(f"{entry['key']:70s} {line['status']:14s} {line['wall_s']:6.1f} s "
                  f"{'' if line['status'] == 'ok' else line['reason'][:100]}", flush=True)
    finally:
        backend.close()
    return 0


def kind(r: dict) -> str:
    """ok, policy (work left outside Pallas), jax_api (a name the installed jax no longer has: the kernel runs on
    no chip with this jax), task_error (the published reference itself failed here), or the verdict's status."""
    if r["policy"]:
        return "policy"
    if r["status"] == "compile_error" and "API of the installed jax" in r["reason"] and " has no " in r["reason"]:
        return "jax_api"
    return r["status"]


def _share(label: str, members: list[dict]) -> None:
    if members:
        ok = sum(r["status"] == "ok" for r in members)
        share = ok / len(members)
        print(f"{label}: {ok} of {len(members)} ok ({share:.0%}; target >= {TARGET_OK:.0%}: "
              f"{'PASS' if share >= TARGET_OK else 'MISS'})")


def report(args) -> int:
    lines = [json.loads(line) for path in args.results for line in path.read_text().splitlines() if line.strip()]
    counts = collections.Counter(kind(r) for r in lines)
    print(f"{len(lines)} kernels JAXBench ran correctly on a TPU v6e, judged here for v6e: "
          + ", ".join(f"{n} {k}" for k, n in counts.most_common()))
    agree = [r for r in lines if kind(r) not in ("policy", "task_error")]
    _share("where the policies agree", agree)
    _share("of those, where the installed jax has every name the kernel uses", [r for r in agree if kind(r) != "jax_api"])
    for r in sorted(lines, key=lambda r: r["key"]):
        if r["status"] != "ok" and (kind(r) != "policy" or args.all):
            print(f"  {kind(r):14s} {r['key']}: {(r.get('failed_check') or '-')}: {' '.join(r['reason'].split())[:220]}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    go = sub.add_parser("run", help="judge each published correct kernel; append one line per verdict")
    go.add_argument("--jaxbench", type=Path, required=True, help="a clone of aryatschand/JAXBench")
    go.add_argument("--results", type=Path, required=True)
    go.add_argument("--models", default=",".join(MODELS))
    go.add_argument("--suites", default=",".join(SUITES))
    go.add_argument("--only", default="*", help="a glob over MODEL/SUITE/NAME")
    go.add_argument("--target", default="v6e", help="the chip the verdicts are for (JAXBench ran on v6e)")
    shown = sub.add_parser("report", help="counts, the share ok where the policies agree, the refusals")
    shown.add_argument("results", type=Path, nargs="+")
    shown.add_argument("--all", action="store_true", help="list the policy refusals too")
    args = parser.parse_args()
    if args.command == "run" and not (args.jaxbench / "pallas_eval" / "results").is_dir():
        print(f"{args.jaxbench}: not a JAXBench clone (no pallas_eval/results): git clone "
              "https://github.com/aryatschand/JAXBench and pass its folder", file=sys.stderr)
        return 2
    return run(args) if args.command == "run" else report(args)


if __name__ == "__main__":
    sys.exit(main())
