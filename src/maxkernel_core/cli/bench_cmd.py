"""``maxkernel bench``: a suite of tasks through a strategy (or ready kernels), with a progress bar and a report."""

from __future__ import annotations

import os
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..tuned import MODES as TUNED_MODES
from ..report_html import clip
from ..speed import ratio_words
from .app import app_for
from .commands import executor_options, override_executor
from .group import cli
from .output import console_for


@cli.command("bench")
@click.option("--suite", default="jaxbench", show_default=True,
              help="A registered suite (maxkernel plugins) or a folder of tasks (MaxKernel folders or JAXBench modules).")
@click.option("--tasks", "pattern", default="*", show_default=True, help="Glob over task ids, e.g. '*p_*' or '1?k_*'.")
@click.option("--strategy", help="Strategy for each task (default run.strategy).")
@click.option("--provider", help="LLM provider (default run.provider; synthesizer needs no key).")
@click.option("--model", help="Model name for the provider.")
@click.option("--backend", help="The kernel backend for every task (default run.backend; see maxkernel plugins).")
@click.option("--target", help="The chip to judge for: the backend's targets (TPU v4, v5e, v5p, v6e, 7x; GPU h100, h200).")
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
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (the suite's figures and every task's "
              "result, or the comparison) on stdout; progress stays on stderr.")
@click.option("-q", "--quiet", is_flag=True, help="No progress; print only the report's path (or errors).")
@click.option("-v", "--verbose", is_flag=True, help="Each task's line with its whole reason.")
@executor_options
@click.pass_context
def bench_cmd(ctx, suite, pattern, strategy, provider, model, backend, target, budget, seed, kernels, jobs, time_limit, resume,
              tuned, out, as_json, quiet, verbose, executor, ray_address, compare=None) -> int:
    """Run every task of a suite and report compile/correctness rates, speedups and fast_p.

    Exit codes: 0 the bench ran (its report says how each task did), 2 usage or input error, 3 provider or
    service failure, 130 interrupted (the resume command is printed)."""
    from ..bench import BenchConfig, run_bench

    app = app_for(ctx)
    override_executor(app, executor, ray_address)  # not part of the bench's config: a resume may move hosts
    console = console_for(stderr=True)
    if quiet:
        console.quiet = True
    config = BenchConfig(suite, pattern, strategy, provider, model, target, budget, seed,
                         str(kernels.resolve()) if kernels else None, jobs, tuned, time_limit, backend)
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
        speed = f" {ratio_words(result.speedup, result.speedup_kind or 'estimated')}" if result.speedup else ""
        why = result.reason if verbose else clip(result.reason, 150)
        progress.console.print(f"  {ref.id}: {mark}{speed}" + ("" if result.correct else f" - {escape(why)}"))
        progress.advance(bar)

    def on_tasks(refs) -> None:  # the bar appears once the suite is known to be good
        progress.reset(bar, total=len(refs), description="running")  # a comparison: once per arm
        progress.start()

    try:
        try:
            if compare:
                return _compare(app, config, compare, resume, out, dict(progress=on_task, on_start=started,
                                                                          on_tasks=on_tasks), as_json, quiet)
            result = run_bench(app.settings, app.pm, None if resume else config, resume=resume, out=out,
                               progress=on_task, on_start=started, on_tasks=on_tasks)
        finally:
            progress.stop()
    except KeyboardInterrupt:
        console.print(f"Interrupted. Finished tasks are stored; continue with: "
                      f"maxkernel bench --resume {state['bench'] or 'BENCH_ID'} --out {out}")
        os._exit(130)  # task threads may still be inside a run; their results are stored as they finish
    if as_json:
        click.echo((out / "results.json").read_text())
    if quiet:
        click.echo(str(out / "report.html"))
    else:
        _print_summary(console, result, to_stdout=not as_json)
    return 0


def _compare(app, config, compare: str, resume, out: Path, callbacks, as_json: bool = False,
             quiet: bool = False) -> int:
    from ..bench.compare import parse_compare, run_compare
    from ..errors import ConfigError

    if resume or config.kernels:
        raise ConfigError("--compare runs a strategy per value: drop --resume (run the same command again to "
                          "continue, every verdict made is reused) and --kernels")
    key, values = parse_compare(compare)
    document = run_compare(app.settings, app.pm, config, key, values, out, **callbacks)
    if as_json or quiet:
        click.echo((out / "compare.json").read_text() if as_json else str(out / "compare.html"))
        return 0
    click.echo((out / "compare.md").read_text())
    click.echo(f"Comparison: {out / 'compare.html'} (and compare.md, compare.json); wins: "
               + ", ".join(f"{arm} {n}" for arm, n in document["wins"].items()))
    return 0


def _print_summary(console: Console, result, to_stdout: bool = True) -> None:
    """The task table (stderr) and the suite's figures (stdout, or stderr when stdout carries --json)."""
    from ..bench.report import summary_lines

    table = Table("task", "status", "vs XLA", "reason", title=f"bench {result.bench_id}", show_lines=False)
    for r in result.results:
        speed = ratio_words(r.speedup, r.speedup_kind or "estimated") or "-"
        table.add_row(escape(r.task_id), r.status, speed, "" if r.correct else escape(clip(r.reason, 90)))
    console.print(table)
    for line in [*summary_lines(result), f"Report: {result.out / 'report.html'} (and report.md, results.json, "
                                          "results.csv, and each task's report under tasks/)"]:
        click.echo(line, err=not to_stdout)
