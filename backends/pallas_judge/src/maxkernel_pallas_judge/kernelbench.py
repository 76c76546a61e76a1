"""KernelBench-style task modules, read without running them (as tasks.py reads the other formats).

The format of KernelBench and of JAXBench's ``jaxkernelbench/`` suite (KernelBench levels 1
and 2 in JAX), and the one models answer in: ``class Model`` with ``__init__(*get_init_inputs())``
and ``forward(*get_inputs())``, module-level size constants, ``get_inputs()`` and
``get_init_inputs()``. The judge calls it as a function of (weights, inputs)
(judge/task_module.py). A PyTorch module in the same format (KernelBench's own, ``nn.Module``)
becomes a task through torchax (PyTorch run on JAX), when torch and torchax are installed
(``maxkernel[torch]``, which ``make install-test`` installs with torch's CPU build); its translation is checked against PyTorch's own output when the
reference first runs.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

from maxkernel_core import Task, TaskError

from .judge.task_module import KERNELBENCH_ENTRY, KERNELBENCH_INPUTS

KERNELBENCH_FORMAT = "kernelbench"
PYTORCH_FORMAT = "pytorch"
#: KernelBench's own correctness check: allclose with atol = rtol = 1e-2.
KERNELBENCH_TOLERANCE = 1e-2
_TORCH = re.compile(r"^\s*(import torch|from torch\b)", re.M)


def module_text(path: Path) -> str:
    """A task module's text, or "" for what cannot be one (not a .py file, private, unreadable)."""
    if path.suffix != ".py" or path.name.startswith("_") or not path.is_file():
        return ""
    try:
        return path.read_text()
    except OSError:
        return ""


def looks_like_kernelbench(path: Path) -> bool:
    text = module_text(path)
    return "class Model" in text and "def get_inputs" in text and "def get_init_inputs" in text


def _classes(module: ast.Module) -> dict[str, ast.ClassDef]:
    return {n.name: n for n in module.body if isinstance(n, ast.ClassDef)}


def _module_tolerance(module: ast.Module, name: str) -> float | None:
    for node in module.body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, (int, float))):
            return float(node.value.value)
    return None


def load_kernelbench_task(path: Path, parse) -> Task:
    """A KernelBench-style JAX module as a task: its reference is ``Model(*get_init_inputs()).forward``.
    ``ATOL``/``RTOL`` module constants override KernelBench's 1e-2."""
    path = path.resolve()
    text = path.read_text()
    torch = bool(_TORCH.search(text))
    missing_libs = [n for n in ("torch", "torchax") if torch and importlib.util.find_spec(n) is None]
    if missing_libs:
        raise TaskError(f"{path}: a PyTorch module needs {' and '.join(missing_libs)} to become a task (PyTorch run "
                        "on JAX): pip install 'maxkernel[torch]' after torch's CPU build (make install-test does both)")
    module = parse(path)
    fns = {n.name for n in module.body if isinstance(n, ast.FunctionDef)}
    model = _classes(module).get("Model")
    missing = [f"{n}()" for n in ("get_inputs", "get_init_inputs") if n not in fns]
    if model is None:
        missing.insert(0, "class Model")
    elif not any(isinstance(n, ast.FunctionDef) and n.name == "forward" for n in model.body):
        missing.insert(0, "Model.forward")
    if missing:
        raise TaskError(f"{path}: a KernelBench-style module needs class Model with forward, get_inputs() and "
                        f"get_init_inputs(); missing: {', '.join(missing)}")
    atol = _module_tolerance(module, "ATOL")
    rtol = _module_tolerance(module, "RTOL")
    doc = " ".join(part for part in (ast.get_docstring(module), ast.get_docstring(model)) if part)
    return Task(
        id=path.stem,
        backend="tpu_pallas",
        path=str(path),
        description=" ".join(doc.split()) or f"KernelBench-style module {path.stem}",
        format=PYTORCH_FORMAT if torch else KERNELBENCH_FORMAT,
        sizes=("full",),
        dtype="bfloat16" if "bfloat16" in text else "float32",
        atol=KERNELBENCH_TOLERANCE if atol is None else atol,
        rtol=KERNELBENCH_TOLERANCE if rtol is None else rtol,
        metadata={
            "module": str(path),
            "inputs_fn": KERNELBENCH_INPUTS,
            "entry": KERNELBENCH_ENTRY,
            "wrap": PYTORCH_FORMAT if torch else KERNELBENCH_FORMAT,
            "supports_size": False,
            "supports_seed": False,
            "has_flops": "get_flops" in fns,
        },
    )
