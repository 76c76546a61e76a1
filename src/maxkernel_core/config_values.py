"""Checking one config value against its declared type: text from the environment and flags is parsed first.

Shared by the core's sections and the sections plugins declare (``register_settings``).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import Any

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off", "")


def describe(tp: Any) -> str:
    """What a value of type ``tp`` must look like, for an error message."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    origin = typing.get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        return describe(args[0]) + " (or unset)"
    if origin is list:
        return "a list of strings"
    if origin is dict:
        return "a table of numbers (NAME=N,... in an environment variable or flag)"
    return {str: "a string", int: "an integer", float: "a number", bool: "true or false"}.get(tp, str(tp))


def coerce(value: Any, tp: Any, *, from_text: bool) -> Any:
    """``value`` checked against ``tp`` (parsed first when it is text from env/flags). Raises ValueError."""
    origin = typing.get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        if value is None or (from_text and value == ""):
            return None
        (inner,) = [a for a in typing.get_args(tp) if a is not type(None)]
        return coerce(value, inner, from_text=from_text)
    check = _CHECKS.get(origin or tp)
    if check is None:
        raise ValueError
    return check(value, from_text)


def _string_list(value: Any, from_text: bool) -> list[str]:
    if from_text and isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError
    return list(value)


def _number_table(value: Any, from_text: bool) -> dict[str, float]:
    """A table of numbers: ``[executor.resources] TPU = 1``, or ``"TPU=1,CPU=2"`` as text."""
    if from_text and isinstance(value, str):
        pairs = [p.partition("=") for p in value.split(",") if p.strip()]
        if any(not sep for _, sep, _ in pairs):
            raise ValueError
        value = {k.strip(): float(v) for k, _, v in pairs}
    if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and _is_number(v) for k, v in value.items()):
        raise ValueError
    return {k: float(v) for k, v in value.items()}


def _boolean(value: Any, from_text: bool) -> bool:
    if from_text and isinstance(value, str):
        low = value.strip().lower()
        if low in TRUE_WORDS + FALSE_WORDS:
            return low in TRUE_WORDS
    if not isinstance(value, bool):
        raise ValueError
    return value


def _integer(value: Any, from_text: bool) -> int:
    if from_text and isinstance(value, str):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError
    return value


def _number(value: Any, from_text: bool) -> float:
    if from_text and isinstance(value, str):
        value = float(value)
    if not _is_number(value):
        raise ValueError
    return float(value)


def _string(value: Any, from_text: bool) -> str:
    if not isinstance(value, str):
        raise ValueError
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_CHECKS = {list: _string_list, dict: _number_table, bool: _boolean, int: _integer, float: _number, str: _string}


def options_record(cls: type, table: Mapping[str, Any], where: str) -> Any:
    """A frozen attrs record of options from a config table, checked once: unknown keys, wrong types and
    values under a field's ``metadata["min"]`` are one-line ``ConfigError``\\ s naming ``where.KEY``.

    ``cls``'s fields say each option's type and default (``[strategy.NAME]`` tables use this).
    """
    import attrs

    from .errors import ConfigError

    attrs.resolve_types(cls)
    fields = {f.name: f for f in attrs.fields(cls)}
    unknown = sorted(set(table) - set(fields))
    if unknown:
        raise ConfigError(f"unknown option(s) {', '.join(f'{where}.{k}' for k in unknown)} "
                          f"(options: {', '.join(fields)})")
    values = {}
    for key, raw in table.items():
        f = fields[key]
        try:
            value = coerce(raw, f.type, from_text=False)
        except (ValueError, TypeError):
            raise ConfigError(f"{where}.{key} must be {describe(f.type)}, got {raw!r}") from None
        low = f.metadata.get("min")
        if low is not None and value is not None and value < low:
            raise ConfigError(f"{where}.{key} must be at least {low}, got {raw!r}")
        values[key] = value
    return cls(**values)
