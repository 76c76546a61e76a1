"""TPU generations a candidate can be compiled for, and how to reach each through libtpu.

Chip figures (VMEM, bandwidth, FLOP/s, MXU size) are never copied here: they
come from ``pltpu.get_tpu_info_for_chip`` for the generation named below.
"""

from __future__ import annotations

from maxkernel_core import ConfigError

#: target -> (deviceless topology name for libtpu, ChipVersion value for get_tpu_info_for_chip)
TARGETS: dict[str, tuple[str, str]] = {
    "v4": ("v4:2x2x1", "v4"),
    "v5e": ("v5e:2x2", "v5e"),
    "v5p": ("v5p:2x2x1", "v5p"),
    "v6e": ("v6e:2x2", "v6e"),
    "7x": ("tpu7x:2x2x1", "7x"),
}
DEFAULT_TARGET = "v5e"
#: Device kinds as jax names them (``jax.devices()[0].device_kind``) -> our target names.
DEVICE_KINDS = {"TPU v4": "v4", "TPU v5 lite": "v5e", "TPU v5e": "v5e", "TPU v5": "v5p", "TPU v5p": "v5p",
                "TPU v6 lite": "v6e", "TPU v6e": "v6e", "TPU7x": "7x", "TPU 7x": "7x"}


def target_of_kind(kind: str) -> str | None:
    """Our target name for a device kind jax reports; None for a chip we do not model."""
    return DEVICE_KINDS.get(kind.strip())


def check_target(target: str) -> str:
    if target not in TARGETS:
        raise ConfigError(f"unknown TPU target {target!r}: use one of {', '.join(TARGETS)} (--target or run.target)")
    return target


def topology_name(target: str) -> str:
    return TARGETS[check_target(target)][0]


def tpu_info(target: str):
    """The chip's figures from the installed jax (imports jax: worker side only)."""
    from jax._src.pallas.mosaic.tpu_info import ChipVersion
    from jax.experimental.pallas import tpu as pltpu

    return pltpu.get_tpu_info_for_chip(ChipVersion(TARGETS[check_target(target)][1]), 1)
