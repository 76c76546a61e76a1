"""The speed model's free parameters for one TPU generation, and where each value came from.

Chip facts (bandwidth, peak FLOP/s, MXU size) come from the installed jax's
table and are never parameters. What the table does not say is here: the cost
of a grid step, the share of HBM bandwidth a DMA stream gets, the VPU and EUP
rates, the passes of an f32 matmul, how the MXU pads a contraction, how much
of the slower units' time hides under the slowest, the launch cost of an XLA
op. Their values live in ``chips/<target>.toml`` (``[model]``, each with its
source under ``[model.source]``): fitted by ``benchmarks/calibrate_fit.py`` on
public TPU measurements, or an assumption said to be one. A user who ran
``maxkernel calibrate`` on a TPU has a file of their own
(``$MAXKERNEL_HOME/calibration/<target>.toml``) whose values take precedence;
every estimate names which set it used.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from attrs import evolve, fields, frozen

from .user_calibration import calibration_path, load_user_calibration

CHIPS_DIR = Path(__file__).parent / "chips"

#: The parameters a fit may set (the rest of the record is bookkeeping).
FITTED = ("step_overhead_s", "dma_efficiency", "mxu_efficiency", "elementwise_per_cycle", "transcendental_per_cycle",
          "f32_passes", "mxu_pad_k", "mxu_pad_n", "compute_serial", "xla_op_overhead_s")


@frozen
class ModelParams:
    """One generation's model parameters; ``source`` says which set they are, ``sources`` where each came from."""

    target: str
    default_scoped_limit_bytes: int
    step_overhead_s: float
    dma_efficiency: float
    mxu_efficiency: float
    elementwise_per_cycle: float
    transcendental_per_cycle: float
    f32_passes: float
    #: a contraction (K) and an output width (N) are padded to these multiples on the MXU (0: the MXU's width)
    mxu_pad_k: int
    mxu_pad_n: int
    #: share of the non-binding units' time (of MXU, VPU, EUP) that does not hide under the binding one
    compute_serial: float
    #: the fixed cost of launching one XLA op (a fusion, a copy, a custom call) of a compiled program
    xla_op_overhead_s: float
    source: str = ""
    sources: dict[str, str] = {}

    def with_values(self, values: dict[str, float], source: str, why: str) -> ModelParams:
        """These parameters with ``values`` in place (a fit's or a user's calibration), each sourced to ``why``."""
        known = {f.name for f in fields(ModelParams)}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"unknown model parameter(s): {', '.join(sorted(unknown))}")
        cast = {k: (int(round(v)) if k in ("mxu_pad_k", "mxu_pad_n") else float(v)) for k, v in values.items()}
        return evolve(self, **cast, source=source, sources={**self.sources, **dict.fromkeys(values, why)})

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in ("target", *FITTED)} | {"source": self.source}


def generation_constants(target: str) -> dict[str, Any]:
    """The raw figures of ``chips/<target>.toml``."""
    return tomllib.loads((CHIPS_DIR / f"{target}.toml").read_text())


def estimate_accuracy(target: str) -> str:
    """How wrong the model's estimates for ``target`` have been against measurements, in a clause with its
    source (``chips/<target>.toml``, ``[accuracy]``): every estimate quotes it."""
    accuracy = generation_constants(target).get("accuracy") or {}
    text = accuracy.get("against_measurements", "never held against a measurement on this chip")
    return f"{text} (source: {accuracy['source']})." if accuracy.get("source") else f"{text}."


def shipped_params(target: str) -> ModelParams:
    """The parameters shipped with maxkernel for ``target`` (fitted on public data, or assumptions)."""
    raw = generation_constants(target)
    model = {k: v for k, v in raw["model"].items() if k != "source"}
    return ModelParams(target=target, default_scoped_limit_bytes=int(raw["vmem"]["default_scoped_limit_bytes"]),
                       source=f"shipped (chips/{target}.toml)", sources=dict(raw["model"].get("source", {})),
                       **{k: (int(v) if k in ("mxu_pad_k", "mxu_pad_n") else float(v)) for k, v in model.items()})


#: (target, shipped file's mtime, user file's path and mtime) -> parameters: an estimate is asked for thousands of
#: times in a search, and a file is read again only when it changed.
_CACHE: dict[tuple, ModelParams] = {}


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


def model_params(target: str) -> ModelParams:
    """The parameters every estimate for ``target`` uses on this machine: a user calibration when one is stored
    (``maxkernel calibrate``), else the shipped ones."""
    user_path = calibration_path(target)
    key = (target, _mtime(CHIPS_DIR / f"{target}.toml"), str(user_path), _mtime(user_path))
    if key in _CACHE:
        return _CACHE[key]
    params = shipped_params(target)
    user = load_user_calibration(target)
    if user is not None:
        params = params.with_values(user["values"], f"user calibration ({user['path']}, {user['measured_on']})",
                                    f"measured by maxkernel calibrate on {user['measured_on']}")
    _CACHE[key] = params
    return params
