"""How the CLI writes for people and for programs.

* ``NO_COLOR`` (any non-empty value, https://no-color.org) turns off every
  colour and weight (bold) sequence wherever the CLI writes; on a terminal the
  live line still moves the cursor to redraw itself.
* Tables never cut an id: on a terminal they wrap, and in a pipe they are
  printed as tab-separated lines (``print_rows``) that ``cut``/``awk`` read.
* Exit codes, the same for every command (docs/first-hour.md lists them):
"""

from __future__ import annotations

import os
import re
import sys

import click
from rich.console import Console

EXIT_OK = 0
EXIT_CANDIDATE_FAILED = 1  # no candidate passed (or the one judged did not)
EXIT_USAGE = 2  # bad flags, config, task or id: fix the input
EXIT_SERVICE = 3  # the LLM provider or the executor failed beyond its retries
EXIT_INTERRUPTED = 130  # Ctrl-C: what was evaluated is stored; the resume command is printed

EXIT_CODES = {EXIT_OK: "success", EXIT_CANDIDATE_FAILED: "no verified kernel (a candidate failed)",
              EXIT_USAGE: "usage or input error", EXIT_SERVICE: "provider or service failure",
              EXIT_INTERRUPTED: "interrupted (resumable)"}


def no_color() -> bool:
    return bool(os.environ.get("NO_COLOR"))


def console_for(stderr: bool = False) -> Console:
    """A rich console that honours NO_COLOR fully (no colour and no bold) and never cuts long lines."""
    if no_color():
        return Console(stderr=stderr, soft_wrap=True, color_system=None, no_color=True, highlight=False)
    return Console(stderr=stderr, soft_wrap=True)


def piped() -> bool:
    return not sys.stdout.isatty()


def print_rows(header: list[str], rows: list[list[str]]) -> None:
    """Tab-separated lines with a header: whole values, for a pipe."""
    click.echo("\t".join(header))
    for row in rows:
        click.echo("\t".join(str(v) for v in row))


def natural_key(text: str) -> list:
    """Sort key that orders "task2" before "task10" (digits compared as numbers)."""
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", text)]


def print_table(console: Console, header: list[str], rows: list[list[str]], title: str | None = None) -> None:
    """A table for a person on a terminal (wrapping, never cutting), tab-separated lines in a pipe."""
    if piped():
        print_rows(header, rows)
        return
    from rich.markup import escape
    from rich.table import Table

    table = Table(*header, title=title)
    table.columns[0].no_wrap = True  # the first column is an id: whole, so it can be copied
    for row in rows:
        table.add_row(*(escape(str(v)) for v in row))
    console.print(table)
