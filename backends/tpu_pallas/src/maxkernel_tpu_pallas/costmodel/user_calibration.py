"""A user's own calibration: model parameters fitted on their TPU by ``maxkernel calibrate``, kept per chip.

``$MAXKERNEL_HOME/calibration/<target>.toml`` holds the fitted values, the
device they were measured on, when, and how well the fit went. While it exists,
every estimate for that target on this machine uses it and says so
(``params.model_params``); delete it to go back to the shipped parameters.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any


def calibration_dir() -> Path:
    from maxkernel_core.store import default_home

    return default_home() / "calibration"


def calibration_path(target: str) -> Path:
    return calibration_dir() / f"{target}.toml"


def load_user_calibration(target: str) -> dict[str, Any] | None:
    """The stored calibration for ``target``: ``values``, ``measured_on``, ``path``; None when there is none."""
    path = calibration_path(target)
    if not path.is_file():
        return None
    try:
        raw = tomllib.loads(path.read_text())
        values = {k: float(v) for k, v in raw["values"].items()}
        measured_on = str(raw["measured_on"])
    except (tomllib.TOMLDecodeError, KeyError, TypeError, ValueError) as exc:
        from maxkernel_core import ConfigError

        raise ConfigError(f"{path} is not a maxkernel calibration ({exc}): delete it or run maxkernel calibrate "
                          "again") from None
    return {"values": values, "measured_on": measured_on, "path": str(path), "fit": raw.get("fit", {})}


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def save_user_calibration(target: str, values: dict[str, float], measured_on: str, fit: dict[str, Any]) -> Path:
    """Write ``values`` (fitted parameters) for ``target``; returns the file's path."""
    path = calibration_path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"# maxkernel calibrate: model parameters measured on {measured_on}. Delete this file to go back to",
             "# the shipped parameters (chips/*.toml).", f"measured_on = {_toml_value(measured_on)}", "", "[values]"]
    lines += [f"{k} = {_toml_value(float(v))}" for k, v in sorted(values.items())]
    lines += ["", "[fit]"] + [f"{k} = {_toml_value(v)}" for k, v in sorted(fit.items())
                              if isinstance(v, (int, float, str, bool))]
    path.write_text("\n".join(lines) + "\n")
    return path
