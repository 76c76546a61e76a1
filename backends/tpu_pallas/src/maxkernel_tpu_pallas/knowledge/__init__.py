"""The knowledge pack: what the models are told about Pallas on TPU, sized to a prompt budget.

Everything here is written for this project or read from the installed jax at
run time (chip figures, API signatures), so a prompt never cites an API or a
figure the user's installation does not have.
"""

from __future__ import annotations

import inspect
from importlib import resources

from ..costmodel.costmodel import generation_constants

#: (label, dotted name) of the APIs whose signatures go into prompts, most needed first.
APIS = (
    ("pl.pallas_call", "jax.experimental.pallas.pallas_call"),
    ("pl.BlockSpec", "jax.experimental.pallas.BlockSpec"),
    ("pltpu.CompilerParams", "jax.experimental.pallas.tpu.CompilerParams"),
    ("pltpu.VMEM", "jax.experimental.pallas.tpu.VMEM"),
    ("pl.when", "jax.experimental.pallas.when"),
    ("pl.program_id", "jax.experimental.pallas.program_id"),
    ("pl.num_programs", "jax.experimental.pallas.num_programs"),
    ("pl.cdiv", "jax.experimental.pallas.cdiv"),
    ("pltpu.PrefetchScalarGridSpec", "jax.experimental.pallas.tpu.PrefetchScalarGridSpec"),
    ("pl.Buffered", "jax.experimental.pallas.Buffered"),
)


def _resolve(dotted: str):
    import importlib

    module, _, attr = dotted.rpartition(".")
    return getattr(importlib.import_module(module), attr, None)


def api_signatures() -> str:
    """Signatures of the Pallas APIs as the installed jax defines them."""
    import jax

    lines = [f"## Pallas API of the installed jax {jax.__version__} (import jax.experimental.pallas as pl, "
             "jax.experimental.pallas.tpu as pltpu)"]
    for label, dotted in APIS:
        obj = _resolve(dotted)
        if obj is None:
            continue  # not in this version: never cite it
        try:
            sig = str(inspect.signature(obj))
        except (TypeError, ValueError):
            sig = "(...)"
        lines.append(f"- {label}{sig}")
    return "\n".join(lines)


def chip_facts(target: str) -> str:
    from ..targets import tpu_info

    info = tpu_info(target)
    limit = generation_constants(target)["vmem"]["default_scoped_limit_bytes"]
    return (f"## Target chip: TPU {target}\n"
            f"- VMEM {info.vmem_capacity_bytes / 2**20:.0f} MiB (default scoped limit {limit / 2**20:.0f} MiB), "
            f"HBM {info.hbm_capacity_bytes / 1e9:.0f} GB at {info.mem_bw_bytes_per_second / 1e9:.0f} GB/s\n"
            f"- bf16 peak {info.bf16_ops_per_second / 1e12:.0f} TFLOP/s on {info.num_mxus} MXUs of "
            f"{info.mxu_column_size}x{info.mxu_column_size}; vregs of {info.num_sublanes}x{info.num_lanes}\n"
            f"- ridge point ~{info.bf16_ops_per_second / info.mem_bw_bytes_per_second:.0f} FLOP/byte: below it a "
            "kernel is memory-bound")


def knowledge_pack(target: str, budget_chars: int) -> str:
    """Chip facts, rules, then API signatures, each included whole while it fits the budget."""
    from maxkernel_pallas_judge.knowledge import within_budget

    return within_budget([chip_facts(target), resources.files(__package__).joinpath("rules.md").read_text().strip(),
                          api_signatures()], budget_chars)
