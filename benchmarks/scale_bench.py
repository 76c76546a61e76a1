"""The scale bench: `maxkernel bench` over ~250-300 tasks in one go, offline, and its figures.

    python benchmarks/scale_bench.py [--jobs 2] [--budget 2] [--time-limit 300] [--only kernelbench]
                                     [--maxkernel-dataset PATH] [--home DIR] [--out DIR] [--resume BENCH_ID]

The suite is one folder of links: the 203 KernelBench-style held-out tasks
(benchmarks/kernelbench_style/generate.py), the 50 jaxbench/ tasks and, when given, the
MaxKernel dataset's task folders. It runs the real CLI (`maxkernel bench`, offline provider,
tuned table off) and prints: tasks, how many loaded, verified kernels, unverified, failures,
errors, the wall time, and the same per source. A killed bench continues with --resume.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks" / "kernelbench_style"))


def build_suite(folder: Path, only: str, dataset: Path | None) -> dict[str, str]:
    """Link every task into ``folder``; returns task file/folder name -> its source."""
    import generate

    held_out = folder / "_kernelbench_style"
    generate.main(held_out)
    sources = {}
    for path in sorted(held_out.glob("*.py")):
        (folder / path.name).symlink_to(path)
        sources[path.stem] = "kernelbench-style"
    if only == "all":
        for path in sorted((ROOT / "jaxbench").iterdir()):
            if path.is_dir():
                (folder / path.name).symlink_to(path)
                sources[path.name] = "jaxbench"
        for path in sorted(dataset.iterdir()) if dataset else []:
            if path.is_dir() and (path / "reference.py").exists():
                (folder / f"mk_{path.name}").symlink_to(path)
                sources[f"mk_{path.name}"] = "maxkernel-dataset"
    return sources


def summarise(results: list[dict], sources: dict[str, str], wall_s: float) -> None:
    def line(label: str, rows: list[dict]) -> str:
        n = len(rows)
        count = Counter(r["status"] for r in rows)
        loaded = n - sum(1 for r in rows if r["reason"].startswith("the task cannot load"))
        pct = (lambda k: f"{100 * k / n:.0f}%") if n else (lambda k: "-")
        return (f"{label:<20} {n:>5} tasks | loaded {loaded} ({pct(loaded)}) | verified {count['correct']} "
                f"({pct(count['correct'])}) | unverified {count['unverified']} | failed {count['failed']} | "
                f"errors {count['error']}")

    print(line("all", results))
    by_source: dict[str, list[dict]] = {}
    for r in results:
        by_source.setdefault(_source(r["task_id"], sources), []).append(r)
    for source, rows in sorted(by_source.items()):
        print(line(source, rows))
    print(f"wall time: {wall_s / 60:.1f} min ({wall_s / max(len(results), 1):.1f} s per task)")
    from maxkernel_core.bench import TaskResult
    from maxkernel_core.bench.report import reason_counts

    print("most common reasons without a verified kernel:")
    failures = [TaskResult.from_dict(r) for r in results if r["status"] != "correct"]
    for (status, reason), n in reason_counts(failures)[:10]:
        print(f"  {n:>4}  {status}: {reason}")


def _source(task_id: str, sources: dict[str, str]) -> str:
    return next((s for name, s in sources.items() if task_id == name or name.endswith(task_id)), "other")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--budget", type=int, default=2)
    parser.add_argument("--time-limit", type=float, default=300.0, help="per task, seconds")
    parser.add_argument("--only", choices=("kernelbench", "all"), default="all")
    parser.add_argument("--maxkernel-dataset", type=Path, help="a folder of MaxKernel dataset task folders")
    parser.add_argument("--home", type=Path, help="MAXKERNEL_HOME for the bench's store (default: a scratch one)")
    parser.add_argument("--out", type=Path, default=Path("scale-bench"))
    parser.add_argument("--resume", metavar="BENCH_ID")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="maxkernel-scale-"))
    suite = scratch / "suite"
    suite.mkdir()
    sources = build_suite(suite, args.only, args.maxkernel_dataset)
    home = args.home or scratch / "home"
    command = [sys.executable, "-m", "maxkernel_core", "bench", "--provider", "offline", "--tuned", "off",
               "--jobs", str(args.jobs), "--budget", str(args.budget), "--time-limit", str(args.time_limit),
               "--out", str(args.out)]
    command += ["--resume", args.resume] if args.resume else ["--suite", str(suite)]
    print(f"{len(sources)} tasks; store {home}; {' '.join(command[1:])}", flush=True)
    start = time.monotonic()
    env = {**__import__("os").environ, "MAXKERNEL_HOME": str(home), "TMPDIR": str(scratch)}
    code = subprocess.call(command, env=env)
    wall = time.monotonic() - start
    results_file = args.out / "results.json"
    if not results_file.exists():
        print(f"the bench wrote no results (exit {code})")
        return 1
    summarise(json.loads(results_file.read_text())["tasks"], sources, wall)
    return 0


if __name__ == "__main__":
    sys.exit(main())
