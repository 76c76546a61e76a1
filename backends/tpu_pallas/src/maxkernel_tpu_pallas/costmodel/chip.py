"""The TPU generation's figures the cost model reads, from the installed jax's chip table."""

from __future__ import annotations

from typing import Any

import jax

CHIP_FIELDS = ("generation", "num_cores", "num_lanes", "num_sublanes", "mxu_column_size", "num_mxus",
               "vmem_capacity_bytes", "smem_capacity_bytes", "hbm_capacity_bytes", "mem_bw_bytes_per_second",
               "bf16_ops_per_second", "int8_ops_per_second", "fp8_ops_per_second")


def chip_figures(target: str) -> dict[str, Any]:
    """The installed jax's chip table for ``target``, plus the topology's cores per device."""
    from ..platform.compile import target_device
    from ..targets import tpu_info

    info = tpu_info(target)
    figures = {name: int(getattr(info, name)) for name in CHIP_FIELDS if hasattr(info, name)}
    device = target_device(target)
    figures["cores_per_device"] = int(getattr(device, "num_cores", 1) or 1)
    figures["device_kind"] = device.device_kind
    figures["source"] = f"jax {jax.__version__} pltpu.get_tpu_info_for_chip({target!r})"
    return figures
