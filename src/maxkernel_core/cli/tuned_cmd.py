"""``maxkernel tuned`` (the tuned-config table: list, export, import, check) and ``maxkernel tune`` (fill it)."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from ..errors import ConfigError
from ..speed import ratio_words
from .app import app_for
from .bench_cmd import bench_cmd
from .group import cli


@cli.group("tuned")
def tuned_group() -> None:
    """The tuned-config table: the best verified kernel per operator, shapes, chip and jax/libtpu version."""


def _entries(n: int) -> str:
    return f"{n} entr{'y' if n == 1 else 'ies'}"


def _rows(entries) -> Table:
    table = Table("task", "target", "shapes", "speed", "versions", "from run", title="tuned configs")
    for e in entries:
        kind = "estimated" if e.estimated else "measured"
        speed = f"{e.seconds * 1e6:,.1f} us {kind}" if e.seconds else "-"
        if e.speedup:
            speed += f", {ratio_words(e.speedup, kind)}"
        table.add_row(e.task_id, e.key.get("target", "?"), e.key.get("shapes", "?"), speed,
                      e.key.get("versions", "?"), e.run_id)
    return table


@tuned_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="The table as `tuned export` writes it.")
@click.pass_context
def tuned_list(ctx, as_json: bool) -> None:
    """The entries of this store's table."""
    store = app_for(ctx).store
    if as_json:
        click.echo(json.dumps(store.export_tuned(), indent=2, sort_keys=True))
        return
    entries = store.tuned_configs()
    if not entries:
        click.echo("The tuned-config table is empty: `maxkernel tune --suite S` fills it (so does every run).")
        return
    Console(soft_wrap=True).print(_rows(entries))


@tuned_group.command("export")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.pass_context
def tuned_export(ctx, path: Path) -> None:
    """Write the table as JSON to PATH (ship it beside the kernels)."""
    document = app_for(ctx).store.export_tuned()
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    click.echo(f"{_entries(len(document['entries']))} written to {path}")


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path} is not a tuned-config file ({exc}): make one with `maxkernel tuned export`") from None


@tuned_group.command("import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.pass_context
def tuned_import(ctx, path: Path) -> None:
    """Merge a file written by `tuned export` into this store's table (the faster entry per key stays)."""
    try:
        kept, skipped = app_for(ctx).store.import_tuned(_read(path))
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    click.echo(f"{_entries(kept)} kept, {skipped} skipped (this table had an entry as fast or faster)")


@tuned_group.command("check")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=False)
@click.pass_context
def tuned_check(ctx, path: Path | None) -> int:
    """Which entries (of PATH, else of this store) this installation would miss: exit 1 when any would.

    An entry is kept per jax/libtpu version; a new version is a miss, never a silent reuse. Run it in CI
    after upgrading jax, then `maxkernel tune` the tasks it names."""
    from ..records import TunedConfig
    from ..serialize import from_json

    app = app_for(ctx)
    entries = ([from_json(e, TunedConfig) for e in _read(path).get("entries", [])] if path
               else app.store.tuned_configs())
    installed_by_backend: dict[str, str | None] = {}
    misses = []
    for entry in entries:
        name = entry.key.get("backend", app.settings.run.backend)
        if name not in installed_by_backend:  # one backend instance per backend named, not per entry
            installed_by_backend[name] = app.pm.registries.get("backend", name).cls(app.settings).tuning_versions()
        installed = installed_by_backend[name]
        if installed is not None and entry.key.get("versions") != installed:
            misses.append(f"{entry.task_id} ({entry.key.get('target')}): tuned under {entry.key.get('versions')}, "
                          f"installed {installed}")
    for line in misses:
        click.echo(f"miss: {line}")
    click.echo(f"{len(entries) - len(misses)} of {_entries(len(entries))} match this installation")
    return 1 if misses else 0


@cli.command("tune", context_settings={"ignore_unknown_options": False})
@click.option("--suite", required=True, help="A registered suite or a folder of tasks.")
@click.option("--tasks", "pattern", default="*", show_default=True, help="Glob over task ids.")
@click.option("--strategy", help="Strategy that searches each task (default run.strategy).")
@click.option("--target", help="The chip to judge for: the backend's targets (TPU v4, v5e, v5p, v6e, 7x; GPU h100, h200).")
@click.option("--budget", type=int, help="At most this many evaluations per task.")
@click.option("--jobs", type=int, default=1, show_default=True, help="Tasks in flight at once.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("maxkernel-tune"),
              show_default=True, help="Output folder of the bench that does the tuning.")
@click.pass_context
def tune_cmd(ctx, suite, pattern, strategy, target, budget, jobs, out) -> int:
    """Search every task of a suite anew and keep each verified best in the tuned-config table."""
    code = ctx.invoke(bench_cmd, suite=suite, pattern=pattern, strategy=strategy, target=target, budget=budget,
                      jobs=jobs, out=out, tuned="refresh", provider=None, model=None, seed=None, kernels=None,
                      resume=None, executor=None, ray_address=None)
    entries = app_for(ctx).store.tuned_configs()
    click.echo(f"The tuned-config table holds {_entries(len(entries))} (`maxkernel tuned list`, "
               "`maxkernel tuned export FILE`).")
    return code
