"""The ``maxkernel`` command: the group with the core's commands registered on it.

Errors a user can fix print one line on stderr (``Error: ...``) and exit 2
(1 when a candidate failed); anything else prints one line too and exits 1.
``--debug`` (or ``MAXKERNEL_DEBUG=1``) shows the traceback instead.
"""

from __future__ import annotations

from . import bench_cmd, commands, logs_cmd, run_cmd, tuned_cmd  # noqa: F401  (each registers its commands on `cli`)
from .group import cli

__all__ = ["cli", "main"]


def main(argv: list[str] | None = None) -> None:
    cli.main(argv)
