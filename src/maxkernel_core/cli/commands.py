"""The core's own commands: plugins, config, runs, tasks."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from ..errors import TaskError
from ..plugins import DISCOVERY_HOOKS
from ..serialize import to_json
from ..tuned import MODES as TUNED_MODES
from .app import App, app_for
from .group import cli
from ..activity import Activity
from .output import EXIT_INTERRUPTED, console_for, natural_key, piped, print_rows
from .progress import RunProgress
from .run_result import report_result, result_json

INTERNAL_PLUGIN_PREFIX = "maxkernel-role-log-"


def _console() -> Console:
    return console_for()


def _echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


def executor_options(command):
    """``--executor`` and ``--ray-address``, shared by ``run`` and ``bench``."""
    command = click.option("--ray-address", metavar="auto|ray://HOST:PORT",
                           help="The Ray cluster to judge on (executor.address); implies --executor ray.")(command)
    return click.option("--executor", metavar="NAME",
                        help="Where candidates are judged: local (this machine, the default) or ray "
                             "(executor.name; see docs/distributed.md).")(command)


def override_executor(app: App, executor: str | None, ray_address: str | None) -> None:
    if ray_address and not executor:
        executor = "ray"
    app.override(executor__name=(executor, "--executor"), executor__address=(ray_address, "--ray-address"))


def _app() -> App:
    return app_for(click.get_current_context())


def plugin_rows(app: App) -> list[dict[str, Any]]:
    """Each loaded plugin with its distribution, hooks, and what it registered."""
    pm = app.pm
    registered: dict[str, list[str]] = {}
    for kind, _base in DISCOVERY_HOOKS.values():
        for reg in pm.registries.all(kind).values():
            registered.setdefault(reg.plugin, []).append(f"{kind}:{reg.name}")
    rows = []
    for name, info in sorted(pm.plugin_info.items()):
        if name.startswith(INTERNAL_PLUGIN_PREFIX):
            continue
        plugin = pm.get_plugin(name)
        hooks = sorted(caller.name for caller in pm.get_hookcallers(plugin) or [])
        rows.append({
            "name": name,
            "distribution": info.distribution,
            "version": info.version,
            "module": info.module,
            "hooks": hooks,
            "registers": registered.get(name, []),
        })
    return rows


@cli.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON array.")
def plugins_cmd(as_json: bool) -> None:
    """List loaded plugins, their distributions and the hooks they implement."""
    rows = plugin_rows(_app())
    if as_json:
        _echo_json(rows)
        return
    if not rows:
        click.echo("No plugins loaded (check MAXKERNEL_LOAD_PLUGINS and --disable-plugin).")
        return
    table = Table("plugin", "distribution", "registers", "hooks", title="maxkernel plugins")
    for row in rows:
        dist = f"{row['distribution']} {row['version']}" if row["distribution"] else "(in-process)"
        table.add_row(row["name"], dist, "\n".join(row["registers"]) or "-", ", ".join(row["hooks"]))
    _console().print(table)


@cli.group("config")
def config_group() -> None:
    """Inspect settings."""


@config_group.command("show")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: key -> {value, source}.")
def config_show(as_json: bool) -> None:
    """Print the merged settings and where each value came from (the plugins' sections too)."""
    app = _app()
    app.pm  # noqa: B018  (loading the plugins binds and checks their sections)
    resolved = app.resolved
    rows = resolved.items()
    if as_json:
        _echo_json({key: {"value": value, "source": source} for key, value, source in rows})
        return
    click.echo(f"config file: {resolved.file or '(none found; using defaults)'}")
    table = Table("key", "value", "source")
    for key, value, source in rows:
        table.add_row(key, json.dumps(value), source)
    _console().print(table)


@cli.group("runs")
def runs_group() -> None:
    """Inspect the run store ($MAXKERNEL_HOME/runs.db)."""


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


@runs_group.command("list")
@click.option("--limit", default=20, show_default=True, help="Newest runs first.")
@click.option("--json", "as_json", is_flag=True)
def runs_list(limit: int, as_json: bool) -> None:
    """List recent runs."""
    store = _app().store
    runs = store.list_runs(limit)
    if as_json:
        _echo_json([{"id": r.id, "status": r.status, "task": r.task_id, "strategy": r.strategy,
                     "provider": r.provider, "created_at": r.created_at} for r in runs])
        return
    if not runs:
        click.echo(f"No runs yet in {store.path}.")
        return
    rows = [[r.id, _when(r.created_at), r.status, r.task_id, r.strategy, r.provider or "-"] for r in runs]
    header = ["run", "started", "status", "task", "strategy", "provider"]
    if piped():  # whole ids, tab-separated: `maxkernel runs list | cut -f1` gives ids that work
        print_rows(header, rows)
        return
    table = Table(*header)
    table.columns[0].no_wrap = True
    for row in rows:
        table.add_row(*row)
    _console().print(table)


@runs_group.command("show")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True)
def runs_show(run_id: str, as_json: bool) -> None:
    """Show one run (RUN_ID or a unique prefix of it): config, verdicts, LLM usage (`maxkernel logs` has the calls)."""
    summary = _app().store.run_summary(run_id)
    if as_json:
        _echo_json(summary)
        return
    click.echo(f"run {summary['id']}: {summary['status']}")
    click.echo(f"  task {summary['task']}, strategy {summary['strategy']}, provider {summary['provider']}")
    click.echo(f"  started {_when(summary['created_at'])}, last update {_when(summary['updated_at'])}")
    click.echo(f"  {summary['candidates']} candidates, {len(summary['evaluations'])} evaluations, "
               f"{summary['llm_calls']} LLM calls ({summary['tokens']} tokens), {summary['search_nodes']} search nodes")
    for e in summary["evaluations"]:
        click.echo(f"  - {e['candidate']}: {e['status']}" + (f" ({e['reason']})" if e["reason"] else ""))
    for u in summary["llm_usage"]:
        cost = f", ${u['cost_usd']:.4f}" if u["cost_usd"] is not None else ""
        click.echo(f"  LLM {u['provider']}:{u['model'] or '?'} ({u['role'] or '-'}): {u['calls']} calls, "
                   f"{u['errors']} failed, {u['input_tokens']:,} tokens in, {u['output_tokens']:,} out{cost}, "
                   f"{u['latency_s']:.1f} s")
    if summary["llm_calls"]:
        click.echo(f"  prompts and replies: maxkernel logs {summary['id']} --full")


@cli.command("tasks")
@click.argument("path", required=False, type=click.Path(exists=True, path_type=Path))
@click.option("--json", "as_json", is_flag=True)
def tasks_cmd(path: Path | None, as_json: bool) -> None:
    """List the tasks in PATH, or in the configured and bundled task folders."""
    app = _app()
    refs = []
    for backend in app.backends():
        roots = [path] if path else app.task_roots(backend)
        for root in roots:
            refs.extend(backend.discover_tasks(Path(root)))
    refs.sort(key=lambda r: natural_key(r.id))
    if as_json:
        _echo_json([{"id": r.id, "format": r.format, "backend": r.backend, "sizes": list(r.sizes),
                     "dtype": r.dtype, "path": r.path, "problem": r.problem} for r in refs])
    elif refs:
        rows = [[r.id, r.format, ",".join(r.sizes), r.dtype or "-", f"cannot load: {r.problem}" if r.problem else "ok"]
                for r in refs]
        if piped():
            print_rows(["task", "format", "sizes", "dtype", "status"], rows)
        else:
            table = Table("task", "format", "sizes", "dtype", "status")
            table.columns[0].no_wrap = True
            for row in rows:
                table.add_row(*row)
            _console().print(table)
    if not app.pm.registries.backends:
        raise TaskError("no backend plugin is loaded, so no task format is known; see `maxkernel plugins`")
    loaded = [r for r in refs if not r.problem]
    if not loaded:
        where = path or "the configured folders (tasks.paths) or bundled suites"
        raise TaskError(f"no task loads from {where}" + (f" ({len(refs)} found, none loads: see above)" if refs else
                        ": a task is a folder with task.yaml, a JAXBench-style .py, or a KernelBench-style module; "
                        "`maxkernel new-task NAME` writes one"))


def record_json(record: Any) -> str:
    """A record as pretty JSON, as `--json` flags print them."""
    return json.dumps(to_json(record), indent=2, sort_keys=True, default=str)


@cli.command("providers")
@click.option("--json", "as_json", is_flag=True)
def providers_cmd(as_json: bool) -> None:
    """List LLM providers and whether each is ready (keys set) for use now."""
    app = _app()
    rows = []
    for name, reg in app.pm.registries.llm_providers.items():
        ready = reg.cls(app.settings).readiness()
        rows.append({"name": name, "plugin": reg.plugin, "ready": ready.ready, "message": ready.message,
                     "selected": name == app.settings.run.provider
                     or any(t.get("provider") == name for t in app.settings.llm.roles.values())})
    if as_json:
        _echo_json(rows)
        return
    if not rows:
        click.echo("No LLM provider is installed (see `maxkernel plugins`).")
        return
    table = Table("provider", "plugin", "status", "", title="LLM providers")
    for row in rows:
        status = "[green]ready[/]" if row["ready"] else f"[yellow]not ready[/]: {row['message']}"
        table.add_row(row["name"], row["plugin"], status, "selected" if row["selected"] else "")
    _console().print(table)


@cli.command("run")
@click.option("--task", "task_ref", required=True, help="Task id (searched in tasks.paths) or path.")
@click.option("--strategy", help="auto, or any installed strategy (maxkernel plugins).")
@click.option("--provider", help="offline (no key), gemini, litellm, replay, ...")
@click.option("--model", help="Model name for the provider.")
@click.option("--target", help="TPU generation: v4, v5e, v5p, v6e, 7x.")
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
@click.option("-v", "--verbose", is_flag=True, help="Print each verdict as it is stored, above the live line.")
@executor_options
def run_cmd(task_ref, strategy, provider, model, target, budget, seed, out, resume, tuned, time_limit, as_json, quiet,
            verbose, executor, ray_address) -> int:
    """Optimize a kernel for TASK; writes kernel.py, report.json and report.html to --out.

    Exit codes: 0 a verified kernel, 1 none verified, 2 usage or input error, 3 provider or service failure,
    130 interrupted (the resume command is printed)."""
    from ..run import executor_for

    app = _app()
    app.override(run__strategy=(strategy, "--strategy"), run__provider=(provider, "--provider"),
                 run__model=(model, "--model"), run__target=(target, "--target"), run__budget=(budget, "--budget"),
                 run__seed=(seed, "--seed"), run__out=(str(out) if out else None, "--out"),
                 run__tuned=(tuned, "--tuned"), run__time_limit_s=(time_limit, "--time-limit"))
    override_executor(app, executor, ray_address)
    settings = app.settings
    console = console_for(stderr=True)
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
            report_result(result, out_dir, console, settings.run.target)
        return data["exit_code"]
    return report_result(result, out_dir, console_for(), settings.run.target, quiet=quiet)


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
