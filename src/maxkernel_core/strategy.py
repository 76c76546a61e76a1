"""What a strategy must offer: it drives a run through the session (``session.py``), which it alone sees.

Apart from ``interfaces.py`` because a strategy is the one plugin class that takes the session: the session
uses the backends, executors and providers of ``interfaces``, so the two could not name each other otherwise.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from .session import RunResult, RunSession


class Strategy(abc.ABC):
    """Decides which roles to call in which order to find the best kernel."""

    name: ClassVar[str]
    #: One line for ``maxkernel plugins`` and ``--help``.
    description: ClassVar[str] = ""
    #: True for a strategy that talks to a person at the terminal (no live progress display over it).
    interactive: ClassVar[bool] = False

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        #: this strategy's ``[strategy.NAME]`` table from config
        self.options = dict(options or {})

    @abc.abstractmethod
    def run(self, session: RunSession) -> RunResult:
        """Drive one run through ``session`` and return its result."""
