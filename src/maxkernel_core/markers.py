"""The hook markers: ``hookimpl`` marks a plugin's hook implementations, ``hookspec`` the core's specs.

Apart from ``hookspecs.py`` so that the core's own implementations (the session's wrappers) can be marked
without importing the specs, whose signatures name the session.
"""

from __future__ import annotations

import pluggy

PROJECT_NAME = "maxkernel"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
