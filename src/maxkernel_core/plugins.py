"""The plugin manager: finds plugins through entry points and collects what they register.

Nothing is loaded at import time: call :func:`get_plugin_manager`. Built-in
plugins and third-party plugins are found the same way, through the
``maxkernel`` entry-point group.

Environment:

* ``MAXKERNEL_LOAD_PLUGINS=a,b``: load only these entry points (empty: none).
* ``MAXKERNEL_DISABLE_PLUGINS=a,b``: skip these (same as ``--disable-plugin``).
* ``MAXKERNEL_TRACE_PLUGINS=1``: print every hook call and result to stderr.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterable
from functools import cached_property
import tomllib
from importlib import resources
from importlib.metadata import EntryPoint, entry_points
from typing import Any

import pluggy
from attrs import frozen

from . import hookspecs
from .errors import PluginError, UnknownPluginError
from .interfaces import Backend, Executor, LLMProvider, SettingsSection, TaskSuite
from .strategy import Strategy

ENTRY_POINT_GROUP = "maxkernel"

#: hook name -> (kind shown to users, base class a registered class must extend)
DISCOVERY_HOOKS: dict[str, tuple[str, type]] = {
    "register_backends": ("backend", Backend),
    "register_strategies": ("strategy", Strategy),
    "register_llm_providers": ("llm_provider", LLMProvider),
    "register_task_suites": ("task_suite", TaskSuite),
    "register_executors": ("executor", Executor),
    "register_settings": ("settings_section", SettingsSection),
}


@frozen
class PluginInfo:
    """Where a loaded plugin came from."""

    name: str
    module: str
    distribution: str | None = None
    version: str | None = None

    @property
    def origin(self) -> str:
        if self.distribution:
            return f"{self.distribution} {self.version}"
        return "registered in-process"


@frozen
class Registration:
    """One backend, strategy or provider class and the plugin that registered it."""

    kind: str
    name: str
    cls: type
    plugin: str


class Registries:
    """Everything the plugins registered, by kind and name; names are unique per kind."""

    def __init__(self, pm: MaxKernelPluginManager) -> None:
        self._by_kind: dict[str, dict[str, Registration]] = {}
        self._aliases: dict[str, dict[str, str]] = {}  # kind -> alias -> name
        for hook_name, (kind, base) in DISCOVERY_HOOKS.items():
            found: dict[str, Registration] = {}
            aliases: dict[str, str] = {}
            impls = getattr(pm.hook, hook_name).get_hookimpls()
            for impl in impls:
                plugin = impl.plugin_name

                def register(cls: type, _plugin: str = plugin, _kind: str = kind, _base: type = base,
                             found: dict[str, Registration] = found, aliases: dict[str, str] = aliases) -> None:
                    name = getattr(cls, "name", None)
                    if not (isinstance(cls, type) and issubclass(cls, _base)) or not isinstance(name, str):
                        raise PluginError(
                            f"plugin {_plugin!r} registered {cls!r} as a {_kind}, but it is not a "
                            f"{_base.__name__} subclass with a string `name`"
                        )
                    if name in found:
                        raise PluginError(
                            f"{_kind} name {name!r} is registered by both plugin {found[name].plugin!r} "
                            f"and plugin {_plugin!r}: uninstall or --disable-plugin one of them"
                        )
                    found[name] = Registration(_kind, name, cls, _plugin)
                    for alias in getattr(cls, "aliases", ()):
                        if alias in aliases:
                            raise PluginError(f"{_kind} alias {alias!r} is claimed by both {aliases[alias]!r} and "
                                              f"{name!r}: uninstall or --disable-plugin one of them")
                        aliases[alias] = name

                # Call one plugin at a time (so `register` knows who calls it), still through
                # pluggy so that tracing and call monitoring see it.
                others = [i.plugin for i in impls if i is not impl]
                pm.subset_hook_caller(hook_name, remove_plugins=others)(register=register)
            self._by_kind[kind] = dict(sorted(found.items()))
            clashes = sorted(set(aliases) & set(found))
            if clashes:
                raise PluginError(f"{kind} name {clashes[0]!r} is both registered and another's alias "
                                  f"(of {aliases[clashes[0]]!r}): uninstall or --disable-plugin one of them")
            self._aliases[kind] = aliases

    def all(self, kind: str) -> dict[str, Registration]:
        return self._by_kind[kind]

    def get(self, kind: str, name: str) -> Registration:
        """The registration ``name`` (or one of its aliases) selects."""
        found = self._by_kind[kind]
        name = self._aliases.get(kind, {}).get(name, name)
        if name not in found:
            known = ", ".join(found) or "none"
            listed = plugin_directory().get(kind, {}).get(name)
            if listed:  # a known plugin that is not installed (or was disabled): say how to get it
                raise UnknownPluginError(
                    f"{kind.replace('_', ' ')} {name!r} is not installed (installed: {known}); it comes with "
                    f"{listed['distribution']}: {listed['install']}"
                )
            raise UnknownPluginError(
                f"unknown {kind.replace('_', ' ')} {name!r} (installed: {known}); "
                "`maxkernel plugins` lists what is installed"
            )
        return found[name]

    @property
    def backends(self) -> dict[str, Registration]:
        return self.all("backend")

    @property
    def strategies(self) -> dict[str, Registration]:
        return self.all("strategy")

    @property
    def llm_providers(self) -> dict[str, Registration]:
        return self.all("llm_provider")

    @property
    def task_suites(self) -> dict[str, Registration]:
        return self.all("task_suite")

    @property
    def executors(self) -> dict[str, Registration]:
        return self.all("executor")

    def settings_sections(self) -> dict[str, type]:
        """The config sections plugins declare, by name (for :func:`maxkernel_core.config.bind_sections`)."""
        return {name: reg.cls for name, reg in self.all("settings_section").items()}

    def suite_roots(self, backend: str | None) -> list:
        """The folders of the suites registered for ``backend`` (None: every suite's), by suite name."""
        return [reg.cls.root() for reg in self.task_suites.values() if backend is None or reg.cls.backend == backend]


class MaxKernelPluginManager(pluggy.PluginManager):
    """A pluggy manager that remembers each plugin's distribution and its registrations."""

    def __init__(self) -> None:
        super().__init__(hookspecs.PROJECT_NAME)
        self.add_hookspecs(hookspecs)
        self.plugin_info: dict[str, PluginInfo] = {}

    def register(self, plugin: Any, name: str | None = None, info: PluginInfo | None = None) -> str | None:
        registered = super().register(plugin, name)
        if registered is not None:
            self.plugin_info[registered] = info or PluginInfo(registered, getattr(plugin, "__name__", repr(plugin)))
            self.__dict__.pop("registries", None)  # registrations change with the plugin set
        return registered

    def unregister(self, plugin: Any = None, name: str | None = None) -> Any:
        result = super().unregister(plugin, name)
        if result is not None:
            self.plugin_info.pop(name or self.get_name(result) or "", None)
            self.plugin_info = {n: i for n, i in self.plugin_info.items() if self.has_plugin(n)}
            self.__dict__.pop("registries", None)
        return result

    @cached_property
    def registries(self) -> Registries:
        return Registries(self)

    def check(self) -> None:
        """``check_pending`` with a message that names the plugin and the bad hook."""
        try:
            self.check_pending()
        except pluggy.PluginValidationError as exc:
            raise PluginError(
                f"plugin {self.get_name(exc.plugin)!r} implements an unknown hook: {exc} "
                "(check the function name against maxkernel_core/hookspecs.py)"
            ) from exc


def _names_from_env(var: str) -> set[str] | None:
    value = os.environ.get(var)
    if value is None:
        return None
    return {n.strip() for n in value.split(",") if n.strip()}


def _dist_label(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return f"{dist.name} {dist.version}" if dist else ep.value


def _load_entry_point(ep: EntryPoint) -> tuple[Any, PluginInfo]:
    dist = getattr(ep, "dist", None)
    info = PluginInfo(
        name=ep.name,
        module=ep.value,
        distribution=dist.name if dist else None,
        version=dist.version if dist else None,
    )
    try:
        return ep.load(), info
    except Exception as exc:  # any import-time failure of third-party code
        raise PluginError(
            f"plugin {ep.name!r} from distribution {info.origin!r} failed to import "
            f"({type(exc).__name__}: {exc}); reinstall it or skip it with --disable-plugin {ep.name}"
        ) from exc


def get_plugin_manager(
    *,
    load_entrypoints: bool = True,
    only: Iterable[str] | None = None,
    disable: Iterable[str] = (),
    trace: bool | None = None,
) -> MaxKernelPluginManager:
    """Make a fresh plugin manager with the installed plugins loaded and checked.

    :param load_entrypoints: load plugins from the ``maxkernel`` entry-point group.
    :param only: load just these entry points (default: ``$MAXKERNEL_LOAD_PLUGINS``, else all).
    :param disable: entry points to skip, added to ``$MAXKERNEL_DISABLE_PLUGINS``.
    :param trace: print hook calls to stderr (default: ``$MAXKERNEL_TRACE_PLUGINS``).
    :raises PluginError: a plugin failed to import, clashes by name, implements an
        unknown hook, or a name in ``only``/``disable`` matches no installed plugin.
    """
    pm = MaxKernelPluginManager()
    if load_entrypoints:
        available: dict[str, EntryPoint] = {}
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if ep.name in available and available[ep.name].value != ep.value:
                raise PluginError(
                    f"plugin name {ep.name!r} is claimed by both {_dist_label(available[ep.name])!r} "
                    f"and {_dist_label(ep)!r}: uninstall one of them"
                )
            available[ep.name] = ep
        allowed = set(only) if only is not None else _names_from_env("MAXKERNEL_LOAD_PLUGINS")
        skipped = set(disable) | (_names_from_env("MAXKERNEL_DISABLE_PLUGINS") or set())
        unknown = ((allowed or set()) | skipped) - set(available)
        if unknown:
            raise PluginError(
                f"no installed plugin is named {', '.join(sorted(unknown))} "
                f"(installed: {', '.join(sorted(available)) or 'none'})"
            )
        for name, ep in sorted(available.items()):
            if name in skipped or (allowed is not None and name not in allowed):
                continue
            plugin, info = _load_entry_point(ep)
            if pm.has_plugin(name) or pm.is_registered(plugin):
                raise PluginError(f"plugin {name!r} from {info.origin!r} is registered twice")
            pm.register(plugin, name=name, info=info)
    pm.check()
    if trace if trace is not None else os.environ.get("MAXKERNEL_TRACE_PLUGINS", "") not in ("", "0"):
        pm.trace.root.setwriter(sys.stderr.write)
        pm.enable_tracing()
    return pm


@functools.cache
def plugin_directory() -> dict[str, dict[str, dict[str, str]]]:
    """Known plugins by kind and name, with the distribution and install line (``plugin_directory.toml``)."""
    text = resources.files(__package__).joinpath("plugin_directory.toml").read_text()
    return tomllib.loads(text)
