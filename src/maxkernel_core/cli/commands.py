"""The core's own commands: plugins, config, runs, tasks, providers (``run`` is in run_cmd.py)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..errors import TaskError
from ..plugins import DISCOVERY_HOOKS
from ..serialize import to_json
from .app import App, app_for
from .group import cli
from .output import console_for, natural_key, print_table

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
    print_table(_console(), header, rows)  # in a pipe: whole ids, tab-separated (`| cut -f1` gives ids that work)


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
    refs, seen = [], set()
    # backends that read the same formats find the same tasks: each is listed once, as run.backend reads it
    backends = sorted(app.backends(), key=lambda b: b.name != app.settings.run.backend)
    for backend in backends:
        roots = [path] if path else app.task_roots(backend)
        for root in roots:
            for ref in backend.discover_tasks(Path(root)):
                if (ref.id, str(ref.path)) not in seen:
                    seen.add((ref.id, str(ref.path)))
                    refs.append(ref)
    refs.sort(key=lambda r: natural_key(r.id))
    if as_json:
        _echo_json([{"id": r.id, "format": r.format, "backend": r.backend, "sizes": list(r.sizes),
                     "dtype": r.dtype, "path": r.path, "problem": r.problem} for r in refs])
    elif refs:
        rows = [[r.id, r.format, ",".join(r.sizes), r.dtype or "-", f"cannot load: {r.problem}" if r.problem else "ok"]
                for r in refs]
        print_table(_console(), ["task", "format", "sizes", "dtype", "status"], rows)
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


@cli.command("doctor")
@click.option("--json", "as_json", is_flag=True)
def doctor_cmd(as_json: bool) -> None:
    """What each backend finds on this host: its chip (asked of the chip's runtime) and the sandbox candidates
    run in. Exits 1 when a check is not as it should be."""
    app = _app()
    rows = []
    for name, reg in app.pm.registries.backends.items():
        backend = reg.cls(app.settings)
        try:
            checks = backend.host_checks()
        finally:
            backend.close()
        rows += [{"backend": name, "check": c.name, "ok": c.ok, "message": c.message} for c in checks]
    if as_json:
        _echo_json(rows)
    else:
        table = Table("backend", "check", "", "found", title="maxkernel doctor")
        for row in rows:
            table.add_row(row["backend"], row["check"], "[green]ok[/]" if row["ok"] else "[yellow]attention[/]",
                          escape(row["message"]))
        _console().print(table)
    if not all(row["ok"] for row in rows):
        raise SystemExit(1)


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
