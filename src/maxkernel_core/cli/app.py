"""The state one CLI invocation shares between commands: settings, plugins, store.

Built lazily from the root group's flags, so ``maxkernel --help`` loads no
plugin it does not need and a bad config only fails the commands that read it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..config import ResolvedSettings, bind_sections, load_settings
from ..interfaces import Backend
from ..plugins import MaxKernelPluginManager, get_plugin_manager
from ..store import RunStore

_META_KEY = "maxkernel.app"


class App:
    def __init__(self, config_file: Path | None = None, disable: tuple[str, ...] = (), debug: bool = False,
                 overrides: dict[str, tuple[Any, str]] | None = None) -> None:
        self.config_file = config_file
        self.disable = disable
        self.debug = debug
        self.overrides = dict(overrides or {})
        self._resolved: ResolvedSettings | None = None
        self._pm: MaxKernelPluginManager | None = None
        self._store: RunStore | None = None

    def override(self, **flags: tuple[Any, str]) -> None:
        """Apply a subcommand's flags (``run.provider=(value, "--provider")``) before settings are read."""
        for dotted, pair in flags.items():
            self.overrides[dotted.replace("__", ".")] = pair
        self._resolved = None

    @property
    def resolved(self) -> ResolvedSettings:
        if self._resolved is None:
            overrides = dict(self.overrides)
            if self.disable:
                overrides["plugins.disable"] = (list(self.disable), "--disable-plugin")
            self._resolved = load_settings(config_file=self.config_file, overrides=overrides)
            if self._pm is not None:  # re-read after a subcommand's flags: the plugins' sections again
                bind_sections(self._resolved, self._pm.registries.settings_sections())
        return self._resolved

    @property
    def settings(self):
        return self.resolved.settings

    @property
    def pm(self) -> MaxKernelPluginManager:
        if self._pm is None:
            plugins = self.settings.plugins
            pm = get_plugin_manager(only=plugins.load, disable=plugins.disable, trace=plugins.trace or None)
            bind_sections(self.resolved, pm.registries.settings_sections())  # the plugins' own sections
            self._pm = pm
        return self._pm

    @property
    def store(self) -> RunStore:
        if self._store is None:
            self._store = RunStore.open(self.settings.store.home)
        return self._store

    def backends(self) -> list[Backend]:
        return [reg.cls(settings=self.settings) for reg in self.pm.registries.backends.values()]

    def backend(self, name: str | None = None) -> Backend:
        reg = self.pm.registries.get("backend", name or self.settings.run.backend)
        return reg.cls(settings=self.settings)

    def task_roots(self, backend: Backend) -> list[Path]:
        """Configured task folders first, then the suites the backend bundles or plugins register."""
        from ..run import task_search_paths

        return list(task_search_paths(self.settings, self.pm, backend))


def app_for(ctx: click.Context) -> App:
    """The App of this invocation, made from the root group's flags on first use."""
    root = ctx.find_root()
    app = root.meta.get(_META_KEY)
    if app is None:
        params = root.params
        app = App(
            config_file=params.get("config_file"),
            disable=tuple(params.get("disable_plugin") or ()),
            debug=bool(params.get("debug")),
        )
        root.meta[_META_KEY] = app
    return app
