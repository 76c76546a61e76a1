"""Print the suite as a Markdown table (``python -m maxkernel_jaxbench.table``): docs/jaxbench.md holds its output.

Shapes are read with ``jax.eval_shape``, so the full size is described without
allocating it; the FLOPs are each task's own ``get_flops()``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent


def _module(folder: Path):
    spec = importlib.util.spec_from_file_location(f"jaxbench_{folder.name}", folder / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _shapes(module, size: str) -> str:
    import jax

    def dynamic():
        return module.get_inputs(size=size)[0]

    shapes = jax.eval_shape(dynamic)
    return ", ".join("×".join(map(str, s.shape)) or "scalar" for s in shapes)


def task_folders() -> list[Path]:
    key = lambda p: int("".join(ch for ch in p.name.split("_")[0] if ch.isdigit()))  # noqa: E731
    return sorted((p for p in ROOT.iterdir() if (p / "kernel_task.yaml").exists()), key=key)


def rows() -> list[str]:
    out = ["| id | dtype | full-size inputs | small inputs | GFLOP (full) | source of the dimensions |",
           "|---|---|---|---|---|---|"]
    for folder in task_folders():
        meta = yaml.safe_load((folder / "kernel_task.yaml").read_text())
        module = _module(folder)
        dtype = module.get_inputs.__defaults__[0].__name__ if hasattr(module.get_inputs.__defaults__[0], "__name__") \
            else str(module.get_inputs.__defaults__[0])
        source = " ".join(str(meta.get("source", "")).split()).replace("|", "/")
        out.append(f"| {folder.name} | {dtype} | {_shapes(module, 'full')} | {_shapes(module, 'small')} "
                   f"| {module.get_flops() / 1e9:,.1f} | {source} |")
    return out


if __name__ == "__main__":
    sys.stdout.write("\n".join(rows()) + "\n")
