"""Settings: defaults, then a config file, then environment variables, then CLI flags.

The file is ``maxkernel.toml`` in the working directory, or else the
``[tool.maxkernel]`` table of ``pyproject.toml`` there (or the file given with
``--config``). Environment variables are ``MAXKERNEL_<SECTION>_<KEY>``, for
example ``MAXKERNEL_RUN_PROVIDER=offline``; a few have short names
(:data:`ENV_ALIASES`). Every resolved value remembers where it came from, which
``maxkernel config show`` prints.

Unknown keys and wrong types are a :class:`~maxkernel_core.errors.ConfigError`
naming the key and the file: a misspelled key silently ignored costs a user an
afternoon.
"""

from __future__ import annotations

import os
import tomllib
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
from attrs import define, field

from .errors import ConfigError


@define
class RunSettings:
    strategy: str = "auto"
    provider: str = "offline"
    model: str | None = None
    backend: str = "tpu_pallas"
    target: str = "v5e"
    budget: int | None = None
    seed: int = 0
    out: str = "maxkernel-out"


@define
class EvalSettings:
    #: Wall-clock limit for judging one candidate (the worker is killed past it).
    timeout_s: float = 300.0
    #: Address-space limit of a worker process, MiB (JAX alone maps about 2 GiB).
    memory_mb: int = 8192
    #: Input sets checked besides the task's own (new seeds, or regenerated values).
    fresh_inputs: int = 3
    #: Pre-warmed worker processes kept ready.
    spares: int = 1
    #: "auto" (a TPU when one is attached, else CPU interpret mode), "cpu" or "tpu".
    device: str = "auto"


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
    eval: EvalSettings = field(factory=EvalSettings)
    llm: LLMSettings = field(factory=LLMSettings)
    plugins: PluginSettings = field(factory=PluginSettings)
    store: StoreSettings = field(factory=StoreSettings)
    executor: ExecutorSettings = field(factory=ExecutorSettings)
    #: Free-form options per strategy, ``[strategy.graph] beam_width = 3``; each
    #: strategy validates its own table.
    strategy: dict[str, dict[str, Any]] = field(factory=dict)


FREE_FORM_SECTIONS = {"strategy"}

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

    def items(self) -> list[tuple[str, Any, str]]:
        rows = []
        for section in attrs.fields(Settings):
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
        return rows


def _section_types() -> dict[str, type]:
    attrs.resolve_types(Settings)
    return {f.name: f.type for f in attrs.fields(Settings)}


def _field_types(section_cls: type) -> dict[str, Any]:
    attrs.resolve_types(section_cls)
    return {f.name: f.type for f in attrs.fields(section_cls)}


def _describe(tp: Any) -> str:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    origin = typing.get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        return _describe(args[0]) + " (or unset)"
    if origin is list:
        return "a list of strings"
    if origin is dict:
        return "a table of numbers (NAME=N,... in an environment variable or flag)"
    return {str: "a string", int: "an integer", float: "a number", bool: "true or false"}.get(tp, str(tp))


def _coerce(value: Any, tp: Any, *, from_text: bool) -> Any:
    """Check ``value`` against ``tp``; text from env/flags is parsed first. Raises ValueError."""
    origin = typing.get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        if value is None or (from_text and value == ""):
            return None
        (inner,) = [a for a in typing.get_args(tp) if a is not type(None)]
        return _coerce(value, inner, from_text=from_text)
    if origin is list:
        if from_text and isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError
        return list(value)
    if origin is dict:  # a table of numbers: [executor.resources] TPU = 1, or "TPU=1,CPU=2" as text
        if from_text and isinstance(value, str):
            pairs = [p.partition("=") for p in value.split(",") if p.strip()]
            if any(not sep for _, sep, _ in pairs):
                raise ValueError
            value = {k.strip(): float(v) for k, _, v in pairs}
        if not isinstance(value, Mapping) or not all(
                isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) for k, v in value.items()):
            raise ValueError
        return {k: float(v) for k, v in value.items()}
    if tp is bool:
        if from_text and isinstance(value, str):
            low = value.strip().lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off", ""):
                return False
        if not isinstance(value, bool):
            raise ValueError
        return value
    if tp is int:
        if from_text and isinstance(value, str):
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError
        return value
    if tp is float:
        if from_text and isinstance(value, str):
            value = float(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ValueError
        return value
    raise ValueError


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


def _apply(settings: Settings, sources: dict[str, str], dotted: str, raw: Any, *, where: str, from_text: bool,
           base_dir: Path | None = None) -> None:
    section, _, key = dotted.partition(".")
    section_types = _section_types()
    if section not in section_types:
        raise ConfigError(f"unknown config section [{section}] in {where} (known: {', '.join(section_types)})")
    if section in FREE_FORM_SECTIONS:
        name, _, option = key.partition(".")
        if not name or not option:
            raise ConfigError(f"config key {dotted!r} in {where} must look like {section}.NAME.OPTION")
        getattr(settings, section).setdefault(name, {})[option] = raw
        sources[dotted] = where
        return
    types_ = _field_types(section_types[section])
    if dotted.startswith("llm.roles"):
        _apply_role(settings, sources, dotted, raw, where=where, from_text=from_text)
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


def _apply_role(settings: Settings, sources: dict[str, str], dotted: str, raw: Any, *, where: str,
                from_text: bool) -> None:
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
    settings.llm.roles.setdefault(parts[2], {})[parts[3]] = value
    sources[dotted] = where


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
    if section in _section_types() and section not in FREE_FORM_SECTIONS and key:
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
    settings, sources = Settings(), {}
    found = (config_file, _read_toml(config_file)) if config_file else find_config_file(cwd)
    if config_file and config_file.name == "pyproject.toml" and found:
        found = (config_file, found[1].get("tool", {}).get("maxkernel", {}))
    path = found[0] if found else None
    if found:
        for dotted, raw in _flatten(found[1], str(path)):
            _apply(settings, sources, dotted, raw, where=str(path), from_text=False, base_dir=path.parent)
    for name in sorted(env):
        dotted = env_key(name)
        if dotted:
            _apply(settings, sources, dotted, env[name], where=f"env {name}", from_text=True, base_dir=cwd)
    for dotted, (raw, label) in (overrides or {}).items():
        if raw is not None:
            _apply(settings, sources, dotted, raw, where=label, from_text=isinstance(raw, str), base_dir=cwd)
    return ResolvedSettings(settings, sources, path)
