"""Which public data fits which parameter of which chip, and where a chip with no data takes its values from.

The plan is data so the fit script, the docs and the shipped ``chips/*.toml``
say the same thing: each stage fits some parameters of one generation on named
sources; every other parameter of every generation is either transferred from
a fitted one (said so in its source line) or stays an assumption.
"""

from __future__ import annotations

import re

from pathlib import Path
from typing import Any

from attrs import frozen

from ..params import CHIPS_DIR, FITTED


@frozen
class Stage:
    target: str
    sources: tuple[str, ...]
    names: tuple[str, ...]
    nuisance: dict[str, float]
    discrete: dict[str, list[int]]


#: Where every fit starts (and what an unfitted parameter of a fitted stage is, until a transfer says otherwise):
#: so a refit gives the same values whatever chips/*.toml holds now.
START = {"step_overhead_s": 3.5e-7, "dma_efficiency": 0.9, "mxu_efficiency": 0.95, "elementwise_per_cycle": 1024.0,
         "transcendental_per_cycle": 256.0, "f32_passes": 3.0, "mxu_pad_k": 0, "mxu_pad_n": 0, "compute_serial": 0.0,
         "xla_op_overhead_s": 1e-6}

STAGES = (
    # tokamax's flash attention on v6e: VPU/EUP-bound softmax steps, f32 p @ v, head widths 64 to 256.
    Stage("v6e", ("tokamax_flash_attention_v6e",),
          ("step_overhead_s", "dma_efficiency", "mxu_efficiency", "elementwise_per_cycle", "transcendental_per_cycle",
           "f32_passes", "compute_serial"), {"scheduler_factor": 0.85}, {"mxu_pad_k": [128, 256],
                                                                         "mxu_pad_n": [128, 256]}),
    # The Pallas matmul guide's block sizes (step overhead against MXU-bound blocks) and tokamax's megablox timings
    # (HBM streams of grouped matmuls) on v5e; its VPU/EUP figures come from the v6e stage (TRANSFERS).
    Stage("v5e", ("pallas_matmul_guide_v5e", "tokamax_ragged_dot_v5e"),
          ("step_overhead_s", "dma_efficiency", "mxu_efficiency"), {"dispatch_s": 1e-4}, {}),
)

#: Parameters a generation takes from another's fit: (target, parameter) -> (from target, why).
TRANSFERS = {
    **{("v5e", name): ("v6e", "per cycle, as fitted on v6e: no public v5e measurement is VPU/EUP-bound")
       for name in ("elementwise_per_cycle", "transcendental_per_cycle", "compute_serial")},
    ("v5e", "f32_passes"): ("v6e", "as fitted on v6e (Mosaic's default f32 matmul): no public v5e f32 timing"),
    **{("v5p", name): ("v5e", "as fitted on v5e (same 128-wide MXU generation): no public v5p measurement")
       for name in FITTED if name != "xla_op_overhead_s"},
    **{("v4", name): ("v5e", "as fitted on v5e (128-wide MXU): no public v4 measurement")
       for name in FITTED if name != "xla_op_overhead_s"},
    **{("7x", name): ("v6e", "as fitted on v6e (256-wide MXU): no public 7x measurement")
       for name in FITTED if name != "xla_op_overhead_s"},
}


def write_model_section(target: str, values: dict[str, Any], sources: dict[str, str],
                        chips_dir: Path = CHIPS_DIR) -> Path:
    """Rewrite ``[model]`` and ``[model.source]`` of ``chips/<target>.toml`` (the rest of the file, before and
    after them, is kept)."""
    path = chips_dir / f"{target}.toml"
    text = path.read_text()
    head = text[:text.index("[model]")] if "[model]" in text else text.rstrip() + "\n\n"
    after = re.search(r"^\[(?!model[.\]])", text[len(head):], re.MULTILINE) if "[model]" in text else None
    tail = "\n" + text[len(head) + after.start():] if after else ""
    lines = ["[model]",
             "# The speed model's free parameters (costmodel/params.py says what each means), written by",
             "# `benchmarks/calibrate_fit.py --write`; [model.source] says where each value came from."]
    for name in FITTED:
        value = values[name]
        lines.append(f"{name} = {int(value) if name in ('mxu_pad_k', 'mxu_pad_n') else float(f'{value:.4g}')!r}")
    lines += ["", "[model.source]"]
    lines += [f'{name} = "{sources[name]}"' for name in FITTED]
    path.write_text(head + "\n".join(lines) + "\n" + tail)
    return path
