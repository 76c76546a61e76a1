"""The ``maxkernel`` command: the group with the core's commands registered on it.

Errors a user can fix print one line on stderr (``Error: ...``) and exit 2
(1 when a candidate failed); anything else prints one line too and exits 1.
``--debug`` (or ``MAXKERNEL_DEBUG=1``) shows the traceback instead.

The process ends without the interpreter's teardown of modules: every result is
stored and every output flushed by then, and the native libraries a run loads
(XLA's clients, Ray's core worker and its gRPC threads) can crash while their
objects are destroyed, which turned a finished ``bench --executor ray`` into
exit -11 (SIGSEGV) after it had printed its report.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys

from . import bench_cmd, commands, logs_cmd, run_cmd, tuned_cmd  # noqa: F401  (each registers its commands on `cli`)
from .group import cli

__all__ = ["cli", "main"]


def main(argv: list[str] | None = None) -> None:
    """The process's entry point (the console script and ``python -m maxkernel_core``): it ends the process."""
    exit_code = {"code": 1}  # an exception that escapes click's own handling (none should) exits 1

    def leave() -> None:
        # Registered before the command imports JAX or Ray, so it runs after their exit handlers (last
        # registered runs first) and after Python has joined the non-daemon threads: nothing is left to do
        # but the teardown this skips.
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):  # a closed pipe: the reader is gone, nothing to keep
                stream.flush()
        os._exit(exit_code["code"])

    atexit.register(leave)
    try:
        cli.main(argv)
    except SystemExit as done:
        exit_code["code"] = _exit_status(done.code)
        raise


def _exit_status(code: object) -> int:
    """The status ``sys.exit(code)`` gives the process: None is 0, an int itself, anything else 1 (Python
    prints it on stderr before the exit handlers run)."""
    if code is None:
        return 0
    return code & 0xFF if isinstance(code, int) else 1
