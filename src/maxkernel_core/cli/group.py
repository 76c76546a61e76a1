"""The ``maxkernel`` click group: core commands register on it, plugin commands load on demand.

Errors a user can fix print one line on stderr (``Error: ...``) and exit 2
(1 when a candidate failed); anything else prints one line too and exits 1.
``--debug`` (or ``MAXKERNEL_DEBUG=1``) shows the traceback instead.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ..errors import MaxKernelError, PluginError
from .app import app_for

_PLUGIN_CMDS = "maxkernel.plugin_commands"


class MaxKernelGroup(click.Group):
    """Core commands are attributes of the group; plugin commands are collected per invocation."""

    def _plugin_commands(self, ctx: click.Context) -> dict[str, click.Command]:
        root = ctx.find_root()
        if _PLUGIN_CMDS not in root.meta:
            # A throwaway group per invocation: commands of a disabled plugin never stick.
            collector = click.Group()
            app_for(ctx).pm.hook.register_commands(cli=collector)
            clash = set(collector.commands) & set(self.commands)
            if clash:
                raise PluginError(f"a plugin registers command(s) {', '.join(sorted(clash))}, which the core owns")
            root.meta[_PLUGIN_CMDS] = collector.commands
        return root.meta[_PLUGIN_CMDS]

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(self._plugin_commands(ctx)))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self.commands.get(cmd_name) or self._plugin_commands(ctx).get(cmd_name)

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        argv = list(sys.argv[1:] if args is None else args)
        debug = "--debug" in argv or os.environ.get("MAXKERNEL_DEBUG", "") not in ("", "0")
        try:
            rv = super().main(argv, prog_name or "maxkernel", complete_var, standalone_mode=False, **extra)
        except MaxKernelError as exc:
            if debug:
                raise
            click.echo(f"Error: {exc}", err=True)
            code = exc.exit_code
        except click.ClickException as exc:
            exc.show()
            code = exc.exit_code
        except (click.Abort, KeyboardInterrupt):
            click.echo("Aborted.", err=True)
            code = 130
        except Exception as exc:  # a bug, not bad input: still one line unless --debug
            if debug:
                raise
            click.echo(
                f"Error: internal error ({type(exc).__name__}: {exc}); rerun with --debug for the traceback",
                err=True,
            )
            code = 1
        else:
            code = rv if isinstance(rv, int) else 0
        if not standalone_mode:
            return code
        sys.exit(code)


@click.group(cls=MaxKernelGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="maxkernel", prog_name="maxkernel")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.option(
    "--config", "config_file", type=click.Path(dir_okay=False, path_type=Path),
    help="Config file to use instead of ./maxkernel.toml or ./pyproject.toml.",
)
@click.option("--disable-plugin", multiple=True, metavar="NAME", help="Do not load this plugin (repeatable).")
@click.pass_context
def cli(ctx: click.Context, debug: bool, config_file: Path | None, disable_plugin: tuple[str, ...]) -> None:
    """MaxKernel: LLM agents that write, test, profile and optimize JAX/Pallas kernels.

    Settings come from maxkernel.toml (or [tool.maxkernel] in pyproject.toml),
    then MAXKERNEL_* environment variables, then flags. `maxkernel config show`
    prints what is in force and where each value came from.
    """
    app_for(ctx)
