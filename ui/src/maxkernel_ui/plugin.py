"""The UI as a maxkernel plugin: the ``ui`` command, and the server beside ``maxkernel run --ui``."""

from __future__ import annotations

import os
import webbrowser

import click
from maxkernel_core import hookimpl


@click.command("ui")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Anything but loopback needs the token printed at start.")
@click.option("--port", type=int, default=None, help="Port (default 8765, or $MAXKERNEL_UI_PORT; 0: any free one).")
@click.option("--open", "open_browser", is_flag=True, help="Open the UI in a browser.")
@click.option("--token", envvar="MAXKERNEL_UI_TOKEN", help="The access token (default: a new one, on a "
              "non-loopback address).")
@click.option("--no-token", is_flag=True, help="No token (loopback only).")
@click.option("--trusted-host", multiple=True, metavar="NAME", help="A Host name to accept besides the bound "
              "address, e.g. an authenticating proxy's (repeatable).")
@click.option("--user-header", metavar="HEADER", help="Behind an authenticating proxy: the header naming the "
              "user, recorded with each decision (e.g. X-Forwarded-User).")
@click.pass_context
def ui_command(ctx, host, port, open_browser, token, no_token, trusted_host, user_header):
    """Serve the web UI over the run store: runs, live search graphs, candidates, benches, comparisons, and the
    questions of hitl runs started with `maxkernel run --ui`.

    It reads the store and can change one thing only: the answer to an open hitl question. It never runs
    candidate code."""
    from maxkernel_core.cli.app import app_for

    from .server import access_for, default_port, serve_forever

    settings = app_for(ctx).settings
    access = access_for(host, token, no_token, trusted_host, user_header)

    def announce(url: str) -> None:
        click.echo(f"maxkernel ui: {url}", err=True)
        if access.token:
            click.echo("Anyone with this URL can answer this store's hitl questions: keep the token private.",
                       err=True)
        if open_browser:
            webbrowser.open(url)

    serve_forever(settings.store.home, host, default_port() if port is None else port, access, announce)


@hookimpl
def register_commands(cli):
    cli.add_command(ui_command)


@hookimpl
def serve_ui(settings):
    from .server import in_background

    return in_background(settings.store.home, port=int(os.environ.get("MAXKERNEL_UI_PORT", "0")))
