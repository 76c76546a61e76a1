"""Task formats, read without running task code (the orchestrator never imports jax for this).

Two formats, as they are found in the wild:

1. **MaxKernel dataset**: a folder holding ``reference.py`` (``get_inputs(dtype=...)``
   returning ``(dynamic_args, static_args)`` or a list of such pairs, and
   ``computation(*dynamic_args, *static_args)``) and ``kernel_task.yaml``
   (``task_id``, ``description``, ``input_gen_code``, ``atol``, ``rtol``; a
   tolerance may be a list, one per output). Our extensions: ``get_inputs`` may
   take ``size="full"|"small"`` and ``seed=``, and may define ``get_flops()``;
   ``kernel_owns`` names the ``jax.named_scope`` of the reference whose work the
   kernel must own (the rest may stay in XLA, see judge/proof.py).
2. **JAXBench workload**: one module with ``CONFIG`` (a dict literal),
   ``create_inputs(dtype=...)``, ``workload(*inputs)`` and optionally ``get_flops()``,
   either a ``.py`` file or, as the published suite lays them out, a folder holding
   ``baseline.py`` (``<clone>/benchmark/8p_GEMM/baseline.py``; the task is named after the
   folder). Inputs are made as JAXBench's runner makes them: ``create_inputs(dtype=bfloat16)``
   when it takes a dtype; trailing inputs that are plain Python values (a size such as
   ``max_expert_size``) stay static instead of being traced.

3. **KernelBench-style module**: ``class Model``, ``get_inputs()``, ``get_init_inputs()``
   (kernelbench.py).

The code is parsed (``ast``), not imported: the functions it must define and the
parameters they take are checked here, and running it is the worker's job.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import yaml
from maxkernel_core import Task, TaskError, TaskRef, pyast

from .kernelbench import KERNELBENCH_FORMAT, load_kernelbench_task, looks_like_kernelbench, module_text

BACKEND = "tpu_pallas"
MAXKERNEL_FORMAT = "maxkernel"
JAXBENCH_FORMAT = "jaxbench"
#: The module a published JAXBench workload folder holds (``benchmark/<id>/baseline.py``).
JAXBENCH_BASELINE = "baseline.py"
#: JAXBench's runner calls ``create_inputs(dtype=jnp.bfloat16)`` whenever it takes a dtype.
JAXBENCH_RUN_DTYPE = "bfloat16"

#: Tolerances when a task gives none (JAXBench modules usually don't).
DEFAULT_TOLERANCE = {"bfloat16": 2e-2, "float16": 1e-2, "float32": 1e-4}


def _parse(path: Path) -> ast.Module:
    try:
        return pyast.parse(path.read_text(), filename=str(path))
    except SyntaxError as exc:
        raise TaskError(f"{path}: line {exc.lineno}: {exc.msg}") from exc
    except OSError as exc:
        raise TaskError(f"cannot read {path}: {exc.strerror}") from exc


def _functions(module: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in module.body if isinstance(n, ast.FunctionDef)}


def _param_names(fn: ast.FunctionDef) -> list[str]:
    a = fn.args
    return [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]


def _dtype_default(fn: ast.FunctionDef) -> str:
    """The default of a ``dtype`` parameter as written (``jnp.bfloat16`` -> ``bfloat16``)."""
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    defaults = dict(zip([p.arg for p in positional[len(positional) - len(a.defaults):]], a.defaults, strict=False))
    defaults.update({p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=False) if d is not None})
    node = defaults.get("dtype")
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return ""


def _number(value: Any) -> Any:
    """YAML 1.1 reads ``1e-4`` (no dot) as a string: a string that is a number is that number."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _tolerance(value: Any, key: str, where: Path) -> float | tuple[float, ...]:
    value = [_number(v) for v in value] if isinstance(value, list) else _number(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value)
    if isinstance(value, list) and value and all(isinstance(v, (int, float)) and v >= 0 for v in value):
        return tuple(float(v) for v in value)
    raise TaskError(f"{where}: {key} must be a non-negative number or a list of them (one per output), got {value!r}")


def is_maxkernel_task(folder: Path) -> bool:
    return (folder / "kernel_task.yaml").is_file() or (
        (folder / "reference.py").is_file() and not (folder / "CONFIG").exists()
    )


def is_jaxbench_folder(folder: Path) -> bool:
    """A published JAXBench workload folder: ``baseline.py`` with CONFIG and a workload."""
    return not is_maxkernel_task(folder) and looks_like_jaxbench(folder / JAXBENCH_BASELINE)


def load_maxkernel_task(folder: Path) -> Task:
    folder = folder.resolve()
    meta_path, ref_path = folder / "kernel_task.yaml", folder / "reference.py"
    if not meta_path.is_file():
        raise TaskError(f"{folder}: a MaxKernel task folder needs kernel_task.yaml beside reference.py")
    if not ref_path.is_file():
        raise TaskError(f"{folder}: kernel_task.yaml is there but reference.py is missing")
    try:
        meta = yaml.safe_load(meta_path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise TaskError(f"{meta_path}: not valid YAML ({str(exc).splitlines()[0]})") from exc
    if not isinstance(meta, dict):
        raise TaskError(f"{meta_path}: expected a mapping of keys (task_id, description, atol, rtol)")
    missing = [k for k in ("task_id", "atol", "rtol") if k not in meta]
    if missing:
        raise TaskError(f"{meta_path}: missing key(s) {', '.join(missing)}")
    fns = _functions(_parse(ref_path))
    for name in ("get_inputs", "computation"):
        if name not in fns:
            raise TaskError(f"{ref_path}: defines no function {name}() (a MaxKernel reference needs get_inputs and computation)")
    params = _param_names(fns["get_inputs"])
    supports_size = "size" in params
    return Task(
        id=str(meta["task_id"]),
        backend=BACKEND,
        path=str(folder),
        description=str(meta.get("description", "")).strip(),
        format=MAXKERNEL_FORMAT,
        sizes=("full", "small") if supports_size else ("full",),
        dtype=str(meta.get("dtype") or _dtype_default(fns["get_inputs"])),
        atol=_tolerance(meta["atol"], "atol", meta_path),
        rtol=_tolerance(meta["rtol"], "rtol", meta_path),
        # A legitimate algebraic shortcut the task allows (reports recognise kernels that take it).
        notes=" ".join(str(meta.get("shortcut") or "").split()),
        metadata={
            "module": str(ref_path),
            "inputs_fn": "get_inputs",
            "entry": "computation",
            "supports_size": supports_size,
            "supports_seed": "seed" in params,
            "has_flops": "get_flops" in fns,
            "input_gen_code": meta.get("input_gen_code", ""),
            # The operation the kernel must own: a jax.named_scope of the reference (judge/proof.py).
            "kernel_owns": str(meta.get("kernel_owns") or ""),
            "source": " ".join(str(meta.get("source") or "").split()),
        },
    )


def _literal_config(module: ast.Module, path: Path) -> dict[str, Any] | None:
    for node in module.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "CONFIG" for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError as exc:
                raise TaskError(f"{path}: CONFIG must be a literal dict (no computed values): {exc}") from exc
            if not isinstance(value, dict):
                raise TaskError(f"{path}: CONFIG must be a dict")
            return value
    return None


def looks_like_jaxbench(path: Path) -> bool:
    text = module_text(path)
    return "CONFIG" in text and "def workload" in text


def load_jaxbench_task(path: Path) -> Task:
    path = path.resolve()
    module = _parse(path)
    config = _literal_config(module, path)
    if config is None:
        raise TaskError(f"{path}: a JAXBench workload needs a CONFIG dict")
    fns = _functions(module)
    for name in ("create_inputs", "workload"):
        if name not in fns:
            raise TaskError(f"{path}: defines no function {name}() (a JAXBench workload needs create_inputs and workload)")
    params = _param_names(fns["create_inputs"])
    run_dtype = JAXBENCH_RUN_DTYPE if "dtype" in params else ""
    dtype = str(config.get("dtype") or run_dtype or _dtype_default(fns["create_inputs"]))
    tol = config.get("atol", DEFAULT_TOLERANCE.get(dtype, 1e-3))
    return Task(
        # a published workload folder (<id>/baseline.py) is named after its folder, as JAXBench names it
        id=path.parent.name if path.name == JAXBENCH_BASELINE else str(config.get("name") or path.stem),
        backend=BACKEND,
        path=str(path),
        description=str(config.get("description", "")),
        format=JAXBENCH_FORMAT,
        sizes=("full", "small") if "size" in params else ("full",),
        dtype=dtype,
        atol=_tolerance(tol, "atol", path),
        rtol=_tolerance(config.get("rtol", tol), "rtol", path),
        metadata={
            "module": str(path),
            "inputs_fn": "create_inputs",
            "entry": "workload",
            "supports_size": "size" in params,
            "supports_seed": "seed" in params,
            "has_flops": "get_flops" in fns,
            "dtype_arg": run_dtype,
            "config": config,
        },
    )


def load_task_at(path: Path) -> Task:
    """Load the task at a folder (MaxKernel format, or a published JAXBench workload folder) or a ``.py``
    file (JAXBench format)."""
    if path.is_dir() and is_jaxbench_folder(path):
        return load_jaxbench_task(path / JAXBENCH_BASELINE)
    if path.is_dir():
        return load_maxkernel_task(path)
    if path.is_file() and path.suffix == ".py" and not looks_like_jaxbench(path) and looks_like_kernelbench(path):
        return load_kernelbench_task(path, _parse)
    if path.is_file() and path.suffix == ".py":
        return load_jaxbench_task(path)
    raise TaskError(f"{path}: not a task (expected a folder with kernel_task.yaml and reference.py, a JAXBench "
                    "workload folder with baseline.py, a JAXBench .py module, or a KernelBench-style module)")


def discover(root: Path) -> list[TaskRef]:
    """Every task directly in ``root`` (or ``root`` itself), each loaded or with the reason it cannot be."""
    root = Path(root)
    candidates: list[Path]
    if root.is_file() or (root.is_dir() and (is_maxkernel_task(root) or is_jaxbench_folder(root))):
        candidates = [root]
    elif root.is_dir():
        candidates = sorted(
            p for p in root.iterdir()
            if (p.is_dir() and (is_maxkernel_task(p) or is_jaxbench_folder(p)))
            or (p.is_file() and (looks_like_jaxbench(p) or looks_like_kernelbench(p)))
        )
    else:
        return []
    refs = []
    for path in candidates:
        try:
            task = load_task_at(path)
            refs.append(TaskRef(task.id, task.path, task.format, BACKEND, task.sizes, task.dtype))
        except TaskError as exc:
            fmt = (KERNELBENCH_FORMAT if path.is_file() and not looks_like_jaxbench(path) else
                   JAXBENCH_FORMAT if path.is_file() or is_jaxbench_folder(path) else MAXKERNEL_FORMAT)
            refs.append(TaskRef(path.stem, str(path), fmt, BACKEND, problem=str(exc)))
    return refs


def find_task(ref: str | Path, search_paths: tuple[Path, ...]) -> Task:
    """A task by path, or by id in ``search_paths`` (folder name, module stem or declared id)."""
    path = Path(ref).expanduser()
    if path.exists():
        return load_task_at(path)
    for root in search_paths:
        for found in discover(root):
            if str(ref) in (found.id, Path(found.path).stem, Path(found.path).name):
                if found.problem:
                    raise TaskError(found.problem)
                return load_task_at(Path(found.path))
    where = ", ".join(str(p) for p in search_paths) or "no task folders (set tasks.paths in maxkernel.toml)"
    raise TaskError(f"no task {str(ref)!r}: not a path, and no task with that id in {where}")
