"""``maxkernel run``: one optimization, under a live line, with closing lines for a person or JSON for a program."""

from __future__ import annotations

import contextlib
from pathlib import Path

import click

from ..activity import Activity
from ..errors import ConfigError
from ..tuned import MODES as TUNED_MODES
from .app import App
from .commands import _app, _echo_json, executor_options, override_executor
from .group import cli
from .output import EXIT_INTERRUPTED, console_for
from .progress import RunProgress
from .run_result import report_result, result_json


@cli.command("run")
@click.option("--task", "task_ref", required=True, help="Task id (searched in tasks.paths) or path.")
@click.option("--strategy", help="auto, or any installed strategy (maxkernel plugins).")
@click.option("--provider", help="synthesizer (the offline synthesizer: no model, no key; alias offline), gemini, litellm, replay, ...")
@click.option("--model", help="Model name for the provider.")
@click.option("--backend", help="The kernel backend (run.backend): any installed backend (maxkernel plugins).")
@click.option("--target", help="The chip to judge for: the backend's targets (TPU v4, v5e, v5p, v6e, 7x; GPU h100, h200).")
@click.option("--budget", type=int, help="At most this many evaluations.")
@click.option("--seed", type=int)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), help="Output folder (default run.out).")
@click.option("--resume", "resume", metavar="RUN_ID", help="Continue a stopped or killed run (a unique id prefix will do).")
@click.option("--tuned", type=click.Choice(TUNED_MODES),
              help="The tuned-config table: use (start from a matching entry), refresh (search anew), off.")
@click.option("--time-limit", "time_limit", type=click.FloatRange(min=1), metavar="SECONDS",
              help="No new evaluation starts past this many seconds (run.time_limit_s).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with the result on stdout "
              "(progress stays on stderr).")
@click.option("-q", "--quiet", is_flag=True, help="No live line; print only the kernel's path (or errors).")
@click.option("-v", "--verbose", is_flag=True,
              help="Print each verdict as it is stored, above the live line (always when stderr is not a terminal).")
@click.option("--ui", is_flag=True, default=None, help="Serve the web UI while this runs (needs maxkernel[ui]); an "
              "interactive run's questions are answerable in the browser as well as here.")
@executor_options
def run_cmd(task_ref, strategy, provider, model, backend, target, budget, seed, out, resume, tuned, time_limit, as_json, quiet,
            verbose, ui, executor, ray_address) -> int:
    """Optimize a kernel for TASK; writes kernel.py, report.json and report.html to --out.

    Exit codes: 0 a verified kernel, 1 none verified, 2 usage or input error, 3 provider or service failure,
    130 interrupted (the resume command is printed)."""
    app = _app()
    app.override(run__strategy=(strategy, "--strategy"), run__provider=(provider, "--provider"),
                 run__model=(model, "--model"), run__backend=(backend, "--backend"), run__target=(target, "--target"), run__budget=(budget, "--budget"),
                 run__seed=(seed, "--seed"), run__out=(str(out) if out else None, "--out"),
                 run__tuned=(tuned, "--tuned"), run__time_limit_s=(time_limit, "--time-limit"),
                 run__ui=(ui, "--ui"))
    override_executor(app, executor, ray_address)
    with _served(app):
        return _run_and_report(app, task_ref, resume, as_json, quiet, verbose)


@contextlib.contextmanager
def _served(app: App):
    """The web UI beside the run (``--ui``), from whichever plugin serves one."""
    if not app.settings.run.ui:
        yield None
        return
    server = app.pm.hook.serve_ui(settings=app.settings)
    if server is None:
        raise ConfigError("--ui: no installed plugin serves a web UI; install it with pip install 'maxkernel[ui]'")
    with server as url:
        click.echo(f"Web UI: {url} (this run's questions can be answered there as well as here)", err=True)
        yield url


def _run_and_report(app: App, task_ref: str, resume: str | None, as_json: bool, quiet: bool, verbose: bool) -> int:
    from ..run import executor_for

    settings = app.settings
    console = console_for(stderr=True)
    # Into a pipe or a log the live line is drawn once, when the run ends: a line per verdict says it is alive
    verbose = verbose or not console.is_terminal
    progress = RunProgress(settings, Activity(), console, verbose=verbose and not quiet)
    interactive = app.pm.registries.get("strategy", settings.run.strategy).cls.interactive
    # Started before the display: a missing extra or an unreachable cluster is one plain line.
    executor = executor_for(settings, app.pm)
    result = _optimize_live(app, task_ref, resume, progress, executor, console, live=not (interactive or quiet))
    if isinstance(result, int):
        return result
    out_dir = Path(settings.run.out)
    if as_json:
        data = result_json(result, out_dir, settings.run.target)
        _echo_json(data)
        if not quiet:
            report_result(result, out_dir, console, settings.run.target, task_ref=task_ref)
        return data["exit_code"]
    return report_result(result, out_dir, console_for(), settings.run.target, quiet=quiet, task_ref=task_ref)


def _optimize_live(app: App, task_ref: str, resume: str | None, progress: RunProgress, executor, console, live: bool):
    """The run under its live line; the exit code instead of a result when interrupted."""
    from rich.live import Live

    from ..run import optimize

    started = {"run": resume}
    display = Live(progress, console=console, refresh_per_second=4, transient=False) if live \
        else contextlib.nullcontext(None)
    try:
        with display as shown, contextlib.closing(executor):
            try:
                result = optimize(task_ref, settings=app.settings, pm=app.pm, resume=resume,
                                  observers=(progress.observe,), executor=executor, activity=progress.activity,
                                  on_start=lambda rid: started.update(run=rid))
            except KeyboardInterrupt:
                if shown is not None:
                    shown.stop()
                rid = started["run"]
                where = f"run {rid} is marked interrupted; " if rid else ""
                console.print(f"Interrupted. {where}everything evaluated so far is stored; continue with: "
                              f"maxkernel run --task {task_ref} --resume {rid or 'RUN_ID'}")
                return EXIT_INTERRUPTED
    except Exception:
        console.line()  # the progress line has no newline of its own: the error starts a line
        raise
    if live:
        console.line()
    return result
