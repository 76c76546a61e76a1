"""Settings: defaults, then a config file, then environment variables, then CLI flags.

The file is ``maxkernel.toml`` in the working directory, or else the
``[tool.maxkernel]`` table of ``pyproject.toml`` there (or the file given with
``--config``). Environment variables are ``MAXKERNEL_<SECTION>_<KEY>``, for
example ``MAXKERNEL_RUN_PROVIDER=synthesizer``; a few have short names
(:data:`ENV_ALIASES`). Every resolved value remembers where it came from, which
``maxkernel config show`` prints.

Unknown keys and wrong types are a :class:`~maxkernel_core.errors.ConfigError`
naming the key and the file: a misspelled key silently ignored costs a user an
afternoon.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
from attrs import define, field

from .config_values import coerce as _coerce
from .config_values import describe as _describe
from .errors import ConfigError
from .records import RunConfig

#: The run defaults have one home, the RunConfig record a run is stored with.
_RUN_DEFAULTS = {f.name: f.default for f in attrs.fields(RunConfig)}


@define
class RunSettings:
    """``[run]``: what ``maxkernel run`` does by default (a run's ``RunConfig`` is built from these once)."""

    strategy: str = _RUN_DEFAULTS["strategy"]
    provider: str = _RUN_DEFAULTS["provider"]
    model: str | None = _RUN_DEFAULTS["model"]
    backend: str = _RUN_DEFAULTS["backend"]
    target: str = _RUN_DEFAULTS["target"]
    budget: int | None = _RUN_DEFAULTS["budget"]
    seed: int = _RUN_DEFAULTS["seed"]
    #: the tuned-config table: use (start from a match), refresh (search anew and keep the best), off
    tuned: str = _RUN_DEFAULTS["tuned"]
    #: seconds of wall time after which a run starts no new evaluation (unset: no limit)
    time_limit_s: float | None = _RUN_DEFAULTS["time_limit_s"]
    out: str = "maxkernel-out"
    #: an interactive run's questions are answerable in a browser too (``maxkernel run --ui``); per process,
    #: not kept with the run: a run started with it resumes at the terminal unless asked again
    ui: bool = False


#: Keys that must be at least 1, with what they mean (said in the error).
POSITIVE_KEYS = {"run.budget": "the most evaluations a run may make (leave it unset for no limit)"}

ROLE_NAMES = ("plan", "implement", "debug")
ROLE_KEYS = {"provider": str, "model": str, "temperature": float, "max_output_tokens": int}


@define
class LLMSettings:
    #: Sampling temperature (None: the model's default).
    temperature: float | None = None
    max_output_tokens: int = 8192
    #: Seconds before a call is abandoned (and retried).
    timeout_s: float = 180.0
    max_retries: int = 5
    #: Model calls in flight at once across a run.
    concurrency: int = 4
    #: OpenAI-compatible endpoint for self-hosted models (litellm), e.g. http://localhost:8000/v1.
    api_base: str | None = None
    #: Per-run budget; the run stops cleanly when one is spent (None: unlimited).
    max_calls: int | None = None
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    #: Debugger attempts per failed candidate.
    debug_attempts: int = 6
    #: Times a role is asked again when its reply has no usable code (the parse error is the feedback); each
    #: is a model call, counted against llm.max_calls, and in the run's result.
    reply_retries: int = 2
    #: Record every model call of a run to this JSONL file (replay it with --provider replay).
    record: str | None = None
    #: Transcript played back by the replay provider.
    replay: str | None = None
    #: Per-role overrides: [llm.roles.plan] provider = "gemini", model = "gemini-2.5-pro".
    roles: dict[str, dict[str, Any]] = field(factory=dict)


@define
class TasksSettings:
    #: Extra folders searched for tasks by id, besides the bundled jaxbench suite.
    paths: list[str] = field(factory=list)


@define
class PluginSettings:
    #: Load only these entry points (None: all installed).
    load: list[str] | None = None
    disable: list[str] = field(factory=list)
    trace: bool = False


@define
class ExecutorSettings:
    #: Where evaluations run: "local" (this machine's worker pool) or an executor plugin ("ray").
    name: str = "local"
    #: The cluster to use: for ray, "auto" (the cluster this machine belongs to), "ray://HOST:10001"
    #: (Ray Client) or "HOST:6379"; unset: RAY_ADDRESS, else a cluster started on this machine.
    address: str | None = None
    #: Resources one evaluation holds, e.g. {TPU = 1} (default: TPU when the cluster has TPUs, else CPU).
    resources: dict[str, float] = field(factory=dict)
    #: Evaluations in flight at once (unset: local, no limit; ray, what the cluster's resources allow).
    concurrency: int | None = None
    #: Times an evaluation lost with its host is retried on another before the run stops.
    max_retries: int = 3


@define
class StoreSettings:
    #: Folder of the run store; default: the user data dir.
    home: str | None = None


@define
class Settings:
    run: RunSettings = field(factory=RunSettings)
    tasks: TasksSettings = field(factory=TasksSettings)
    llm: LLMSettings = field(factory=LLMSettings)
    plugins: PluginSettings = field(factory=PluginSettings)
    store: StoreSettings = field(factory=StoreSettings)
    executor: ExecutorSettings = field(factory=ExecutorSettings)
    #: Free-form options per strategy, ``[strategy.graph] beam_width = 3``; each
    #: strategy validates its own table.
    strategy: dict[str, dict[str, Any]] = field(factory=dict)
    #: The sections plugins declare (``register_settings``), by name, once bound to the loaded plugins.
    sections: dict[str, Any] = field(factory=dict)

    def section(self, name: str, default: type | None = None) -> Any:
        """A plugin's section (``settings.section("eval")``); ``default()`` when it was never bound
        (settings made in code, before any plugin manager)."""
        if name in self.sections:
            return self.sections[name]
        return default() if default is not None else None


FREE_FORM_SECTIONS = {"strategy"}
#: Fields of Settings that are not config sections.
NOT_SECTIONS = {"sections"}

ENV_ALIASES = {
    "MAXKERNEL_HOME": "store.home",
    "MAXKERNEL_LOAD_PLUGINS": "plugins.load",
    "MAXKERNEL_DISABLE_PLUGINS": "plugins.disable",
    "MAXKERNEL_TRACE_PLUGINS": "plugins.trace",
}


@define
class ResolvedSettings:
    """Merged settings plus, for each dotted key, where its value came from."""

    settings: Settings
    sources: dict[str, str]
    file: Path | None = None
    #: values for sections the core does not know: (dotted, raw, where, from_text, strict), checked when the
    #: plugins' sections are bound (``bind_sections``); ``strict`` is False for environment variables, which
    #: name no section unless a plugin declares it
    pending: list[tuple[str, Any, str, bool, bool]] = field(factory=list)

    def items(self) -> list[tuple[str, Any, str]]:
        rows = []
        for section in attrs.fields(Settings):
            if section.name in NOT_SECTIONS:
                continue
            value = getattr(self.settings, section.name)
            if section.name in FREE_FORM_SECTIONS:
                for name, table in value.items():
                    for key, v in table.items():
                        dotted = f"{section.name}.{name}.{key}"
                        rows.append((dotted, v, self.sources.get(dotted, "default")))
                continue
            for f in attrs.fields(type(value)):
                dotted = f"{section.name}.{f.name}"
                if dotted == "llm.roles":
                    for role, table in getattr(value, f.name).items():
                        for key, v in table.items():
                            rows.append((f"{dotted}.{role}.{key}", v, self.sources.get(f"{dotted}.{role}.{key}", "default")))
                    continue
                rows.append((dotted, getattr(value, f.name), self.sources.get(dotted, "default")))
        for name, value in sorted(self.settings.sections.items()):
            rows.extend((f"{name}.{f.name}", getattr(value, f.name), self.sources.get(f"{name}.{f.name}", "default"))
                        for f in attrs.fields(type(value)))
        return rows


def _section_types() -> dict[str, type]:
    attrs.resolve_types(Settings)
    return {f.name: f.type for f in attrs.fields(Settings) if f.name not in NOT_SECTIONS}


def _field_types(section_cls: type) -> dict[str, Any]:
    attrs.resolve_types(section_cls)
    return {f.name: f.type for f in attrs.fields(section_cls)}


def find_config_file(cwd: Path) -> tuple[Path, dict[str, Any]] | None:
    """The config file that applies in ``cwd`` and its maxkernel table, if any."""
    own = cwd / "maxkernel.toml"
    if own.is_file():
        return own, _read_toml(own)
    pyproject = cwd / "pyproject.toml"
    if pyproject.is_file():
        table = _read_toml(pyproject).get("tool", {}).get("maxkernel")
        if table is not None:
            return pyproject, table
    return None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc


def _apply(resolved: ResolvedSettings, dotted: str, raw: Any, *, where: str, from_text: bool,
           base_dir: Path | None = None, strict: bool = True) -> None:
    settings, sources = resolved.settings, resolved.sources
    section, _, key = dotted.partition(".")
    section_types = _section_types()
    if section not in section_types:  # perhaps a plugin's: checked when the plugins' sections are bound
        resolved.pending.append((dotted, raw, where, from_text, strict))
        return
    if section in FREE_FORM_SECTIONS:
        name, _, option = key.partition(".")
        if not name or not option:
            raise ConfigError(f"config key {dotted!r} in {where} must look like {section}.NAME.OPTION")
        getattr(settings, section).setdefault(name, {})[option] = raw
        sources[dotted] = where
        return
    types_ = _field_types(section_types[section])
    if dotted.startswith("llm.roles"):
        _apply_role(resolved, dotted, raw, where=where, from_text=from_text)
        return
    if key not in types_:
        raise ConfigError(
            f"unknown config key {dotted!r} in {where} (keys of [{section}]: {', '.join(types_)})"
        )
    try:
        value = _coerce(raw, types_[key], from_text=from_text)
    except (ValueError, TypeError):
        raise ConfigError(f"config key {dotted!r} in {where} must be {_describe(types_[key])}, got {raw!r}") from None
    if dotted in POSITIVE_KEYS and value is not None and value < 1:
        raise ConfigError(f"config key {dotted!r} in {where} must be at least 1, got {raw!r}: "
                          f"{POSITIVE_KEYS[dotted]}")
    if dotted == "tasks.paths" and base_dir is not None:
        value = [str((base_dir / p).resolve()) if not Path(p).is_absolute() else p for p in value]
    setattr(getattr(settings, section), key, value)
    sources[dotted] = where


def _apply_role(resolved: ResolvedSettings, dotted: str, raw: Any, *, where: str, from_text: bool) -> None:
    """``llm.roles.<role>.<key>``: a role's provider/model/sampling override."""
    parts = dotted.split(".")
    if len(parts) != 4 or parts[2] not in ROLE_NAMES or parts[3] not in ROLE_KEYS:
        raise ConfigError(f"unknown config key {dotted!r} in {where} (use llm.roles.ROLE.KEY with ROLE in "
                          f"{', '.join(ROLE_NAMES)} and KEY in {', '.join(ROLE_KEYS)})")
    try:
        value = _coerce(raw, ROLE_KEYS[parts[3]], from_text=from_text)
    except (ValueError, TypeError):
        raise ConfigError(f"config key {dotted!r} in {where} must be {_describe(ROLE_KEYS[parts[3]])}, "
                          f"got {raw!r}") from None
    resolved.settings.llm.roles.setdefault(parts[2], {})[parts[3]] = value
    resolved.sources[dotted] = where


def _flatten(table: Mapping[str, Any], where: str) -> list[tuple[str, Any]]:
    out = []
    for section, body in table.items():
        if not isinstance(body, Mapping):
            raise ConfigError(f"config entry {section!r} in {where} must be a [table] of keys")
        for key, value in body.items():
            if (section in FREE_FORM_SECTIONS or (section, key) == ("llm", "roles")) and isinstance(value, Mapping):
                for name, inner in value.items():
                    if isinstance(inner, Mapping):
                        out.extend((f"{section}.{key}.{name}.{k}", v) for k, v in inner.items())
                    else:
                        out.append((f"{section}.{key}.{name}", inner))
            else:
                out.append((f"{section}.{key}", value))
    return out


def env_key(name: str) -> str | None:
    """The dotted key an environment variable sets, or None if it is not a config variable."""
    if name in ENV_ALIASES:
        return ENV_ALIASES[name]
    if not name.startswith("MAXKERNEL_"):
        return None
    rest = name[len("MAXKERNEL_"):].lower()
    section, _, key = rest.partition("_")
    if section not in FREE_FORM_SECTIONS and key:  # a plugin's section is known only once plugins are loaded
        return f"{section}.{key}"
    return None


def load_settings(
    cwd: Path | None = None,
    *,
    config_file: Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, tuple[Any, str]] | None = None,
) -> ResolvedSettings:
    """Resolve settings in rising precedence: defaults, file, environment, ``overrides``.

    :param overrides: dotted key -> (value, label), e.g. ``{"run.provider": ("x", "--provider")}``.
    """
    cwd = cwd or Path.cwd()
    env = os.environ if env is None else env
    resolved = ResolvedSettings(Settings(), {})
    found = (config_file, _read_toml(config_file)) if config_file else find_config_file(cwd)
    if config_file and config_file.name == "pyproject.toml" and found:
        found = (config_file, found[1].get("tool", {}).get("maxkernel", {}))
    path = found[0] if found else None
    resolved.file = path
    if found:
        for dotted, raw in _flatten(found[1], str(path)):
            _apply(resolved, dotted, raw, where=str(path), from_text=False, base_dir=path.parent)
    for name in sorted(env):
        dotted = env_key(name)
        if dotted:
            _apply(resolved, dotted, env[name], where=f"env {name}", from_text=True, base_dir=cwd, strict=False)
    for dotted, (raw, label) in (overrides or {}).items():
        if raw is not None:
            _apply(resolved, dotted, raw, where=label, from_text=isinstance(raw, str), base_dir=cwd)
    return resolved


def bind_sections(resolved: ResolvedSettings, declared: Mapping[str, type]) -> Settings:
    """Give the plugins' declared sections (name -> attrs class) their values, checked like the core's.

    A value for a section no plugin declares is an error naming it and where it was set; an environment
    variable that names no declared section is not config and is left alone.
    """
    settings = resolved.settings
    for name, cls in declared.items():
        settings.sections.setdefault(name, cls())
    known = sorted([*_section_types(), *declared])
    for dotted, raw, where, from_text, strict in resolved.pending:
        section, _, key = dotted.partition(".")
        if section not in declared:
            if strict:
                raise ConfigError(f"unknown config section [{section}] in {where} (known: {', '.join(known)})")
            continue
        types_ = _field_types(declared[section])
        if key not in types_:
            raise ConfigError(f"unknown config key {dotted!r} in {where} (keys of [{section}]: {', '.join(types_)})")
        try:
            value = _coerce(raw, types_[key], from_text=from_text)
        except (ValueError, TypeError):
            raise ConfigError(f"config key {dotted!r} in {where} must be {_describe(types_[key])}, "
                              f"got {raw!r}") from None
        setattr(settings.sections[section], key, value)
        resolved.sources[dotted] = where
    resolved.pending = [p for p in resolved.pending if p[0].partition(".")[0] not in declared]
    return settings
