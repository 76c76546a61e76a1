"""``maxkernel bench``: a suite of tasks through a strategy (or ready kernels), with a progress bar and a report."""

from __future__ import annotations

import os
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..tuned import MODES as TUNED_MODES
from .app import app_for
from .commands import executor_options, override_executor
from .group import cli


@cli.command("bench")
@click.option("--suite", default="jaxbench", show_default=True,
              help="A registered suite (maxkernel plugins) or a folder of tasks (MaxKernel folders or JAXBench modules).")
@click.option("--tasks", "pattern", default="*", show_default=True, help="Glob over task ids, e.g. '*p_*' or '1?k_*'.")
@click.option("--strategy", help="Strategy for each task (default run.strategy).")
@click.option("--provider", help="LLM provider (default run.provider; offline needs no key).")
@click.option("--model", help="Model name for the provider.")
@click.option("--target", help="TPU generation: v4, v5e, v5p, v6e, 7x.")
@click.option("--budget", type=int, help="At most this many evaluations per task.")
@click.option("--seed", type=int)
@click.option("--kernels", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Judge ready kernels (ID.py or ID/kernel.py per task) instead of running a strategy.")
@click.option("--jobs", type=int, default=1, show_default=True, help="Tasks in flight at once.")
@click.option("--time-limit", "time_limit", type=click.FloatRange(min=1), metavar="SECONDS",
              help="Per task: no new evaluation starts past this many seconds of its run (default run.time_limit_s).")
@click.option("--resume", metavar="BENCH_ID", help="Continue a stopped or killed bench.")
@click.option("--tuned", type=click.Choice(TUNED_MODES),
              help="The tuned-config table for each task's run: use, refresh (search anew), off (default run.tuned).")
@click.option("--compare", metavar="KEY=V1,V2",
              help="Run the suite once per value (strategy, provider, model, target, budget, seed, tuned) and "
                   "write one side-by-side report (compare.md/.html/.json), e.g. strategy=auto,graph.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("maxkernel-bench"),
              show_default=True, help="Output folder: results.json/.csv, report.md, report.html, tasks/ID/.")
@executor_options
@click.pass_context
def bench_cmd(ctx, suite, pattern, strategy, provider, model, target, budget, seed, kernels, jobs, time_limit, resume,
              tuned, out, executor, ray_address, compare=None) -> int:
    """Run every task of a suite and report compile/correctness rates, speedups and fast_p."""
    from ..bench import BenchConfig, run_bench

    app = app_for(ctx)
    override_executor(app, executor, ray_address)  # not part of the bench's config: a resume may move hosts
    console = Console(stderr=True)
    config = BenchConfig(suite, pattern, strategy, provider, model, target, budget, seed,
                         str(kernels.resolve()) if kernels else None, jobs, tuned, time_limit)
    state = {"bench": resume}
    progress = Progress(TextColumn("[bold]bench[/] {task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=console, transient=False)
    bar = progress.add_task("starting", total=None)

    def started(bench_id: str) -> None:
        state["bench"] = bench_id
        console.print(f"bench {bench_id} (resume with: maxkernel bench --resume {bench_id} --out {out})")

    def on_task(event: str, ref, result) -> None:
        if event == "start":
            progress.update(bar, description=f"{ref.id} ...")
            return
        mark = {"correct": "[green]correct[/]", "failed": "[yellow]failed[/]", "error": "[red]error[/]"}[result.status]
        speed = f" {result.speedup:.2f}x ({result.speedup_kind})" if result.speedup else ""
        progress.console.print(f"  {ref.id}: {mark}{speed}" + ("" if result.correct else f" - {result.reason[:150]}"))
        progress.advance(bar)

    def on_tasks(refs) -> None:  # the bar appears once the suite is known to be good
        progress.reset(bar, total=len(refs), description="running")  # a comparison: once per arm
        progress.start()

    try:
        try:
            if compare:
                return _compare(app, config, compare, resume, out, dict(progress=on_task, on_start=started,
                                                                          on_tasks=on_tasks))
            result = run_bench(app.settings, app.pm, None if resume else config, resume=resume, out=out,
                               progress=on_task, on_start=started, on_tasks=on_tasks)
        finally:
            progress.stop()
    except KeyboardInterrupt:
        console.print(f"Interrupted. Finished tasks are stored; continue with: "
                      f"maxkernel bench --resume {state['bench'] or 'BENCH_ID'} --out {out}")
        os._exit(130)  # task threads may still be inside a run; their results are stored as they finish
    _print_summary(console, result)
    return 0


def _compare(app, config, compare: str, resume, out: Path, callbacks) -> int:
    from ..bench.compare import parse_compare, run_compare
    from ..errors import ConfigError

    if resume or config.kernels:
        raise ConfigError("--compare runs a strategy per value: drop --resume (run the same command again to "
                          "continue, every verdict made is reused) and --kernels")
    key, values = parse_compare(compare)
    document = run_compare(app.settings, app.pm, config, key, values, out, **callbacks)
    click.echo((out / "compare.md").read_text())
    click.echo(f"Comparison: {out / 'compare.html'} (and compare.md, compare.json); wins: "
               + ", ".join(f"{arm} {n}" for arm, n in document["wins"].items()))
    return 0


def _print_summary(console: Console, result) -> None:
    from ..bench.report import summary_lines

    table = Table("task", "status", "speedup", "reason", title=f"bench {result.bench_id}", show_lines=False)
    for r in result.results:
        speed = f"{r.speedup:.2f}x {'est.' if r.speedup_kind == 'estimated' else 'meas.'}" if r.speedup else "-"
        table.add_row(r.task_id, r.status, speed, "" if r.correct else r.reason[:90])
    console.print(table)
    for line in summary_lines(result):
        click.echo(line)
    click.echo(f"Report: {result.out / 'report.html'} (and report.md, results.json, results.csv)")
