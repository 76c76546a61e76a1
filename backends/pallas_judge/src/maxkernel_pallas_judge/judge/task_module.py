"""A task's module as the workers import it: its own source, optionally with size constants replaced, and for
a KernelBench-style module the function of its inputs the judge calls.

A KernelBench-style module (``class Model`` with ``__init__(*get_init_inputs())`` and
``forward(*get_inputs())``) is not a function of its inputs: its weights live on the
instance. The judge makes it one, the way torchax's ``extract_jax`` makes a module a
function of (weights, inputs): the array attributes of ``Model(*get_init_inputs())``
become leading dynamic inputs, set on the instance before ``forward`` (in the shape the instance made its own
in, where that differs only by unit axes: an answer may keep a bias as (1, N)). Candidates get
those same values (they cannot bring their own weights), and weights a translation
left constant (JAXBench's zeros) are drawn at random, so a kernel that ignores them
fails. ``ENTRY_SOURCE`` is appended to the module's own code, so the reference, the
offline synthesizer's copy of it and a candidate's ``ModelNew`` all run the same entry.
"""

from __future__ import annotations

import ast
import sys
import types
from pathlib import Path
from typing import Any

from maxkernel_core import pyast

#: The entry and inputs function a KernelBench-style module gets (names no task defines).
KERNELBENCH_ENTRY = "_mk_computation"
KERNELBENCH_INPUTS = "_mk_inputs"
#: Candidate classes, in the order they are looked for (KernelBench names its answers ModelNew).
MODEL_CLASSES = ("ModelNew", "Model")

ENTRY_SOURCE = '''

# --- added by maxkernel: the module as a function of (weights, inputs) ---
def _mk_model(init):
    import jax as _jax

    cls = next((globals()[n] for n in ("ModelNew", "Model") if isinstance(globals().get(n), type)), None)
    if cls is None:
        raise NameError("the module defines no class Model (or ModelNew) with a forward method")
    # weights made in __init__ are values, not traced work; made on the host even while tracing for a TPU
    with _jax.ensure_compile_time_eval(), _jax.default_device(_jax.devices("cpu")[0]):
        return cls(*init)


def _mk_computation(*args):
    """Model(*init).forward(*inputs), with the weights named in ``names`` set from the leading arguments."""
    *dynamic, names, init = args
    model = _mk_model(init)
    for name, value in zip(names, dynamic):
        attr = name.replace(".", "_")  # a PyTorch task's "linear.weight" is linear_weight
        setattr(model, attr, _mk_as_own(value, getattr(model, attr, None)))
    return model.forward(*dynamic[len(names):])


def _mk_as_own(value, own):
    """The task's weight in the shape the model made its own in, where the two differ only by unit axes (a bias
    kept as (1, N) for a BlockSpec): the values stay the task's. ``set_weights`` is never called: JAXBench's
    convert PyTorch layouts, and these values are already the module's own."""
    shape = getattr(own, "shape", None)
    if shape is None or tuple(shape) == tuple(value.shape):
        return value
    if [d for d in shape if d != 1] == [d for d in value.shape if d != 1]:
        return value.reshape(shape)
    return value


def _mk_weight(value, rng):
    """A weight as an input: its own values when they vary, else random around the constant (JAXBench leaves
    many at zero, which every kernel would match): uniform +-1/sqrt(fan-in) for matrices and filters, +-0.1
    for vectors, so norms' ones stay positive."""
    import numpy as _np

    host = _np.asarray(value)
    if not _np.issubdtype(host.dtype, _np.floating) or host.size < 2 or float(host.std()) > 0:
        return value
    fan_in = host.size / max(host.shape) if host.ndim >= 2 else 100.0
    bound = 1.0 / _np.sqrt(max(fan_in, 1.0))
    noise = rng.uniform(-bound, bound, host.shape)
    return _np.asarray(host.astype(_np.float64) + noise).astype(host.dtype)


def _mk_inputs():
    """((*weights, *get_inputs()), (weight names, init inputs)): the weights are the instance's array attributes."""
    import numpy as _np

    init = tuple(get_init_inputs())
    model = _mk_model(init)
    names = tuple(n for n, v in vars(model).items() if hasattr(v, "shape") and hasattr(v, "dtype"))
    rng = _np.random.default_rng(0)
    weights = [_mk_weight(getattr(model, n), rng) for n in names]
    return (*weights, *get_inputs()), (names, init)
'''


TORCH_SOURCE = '''

# --- added by maxkernel: the PyTorch module as a JAX function of (weights and buffers, inputs), via torchax ---
_mk_models = {}


def _mk_torch_model(init):
    """(module, its state as JAX arrays, the JAX function of (state, inputs)); seeded, built once per size."""
    key = repr(init)
    if key not in _mk_models:
        import jax as _jax
        import torch as _torch
        import torchax as _torchax

        _torch.manual_seed(0)
        module = Model(*init)
        # the state as values on the host, even when first asked for under a trace
        with _jax.ensure_compile_time_eval(), _jax.default_device(_jax.devices("cpu")[0]):
            states, fn = _torchax.extract_jax(module)
        _mk_models[key] = (module, states, fn)
    return _mk_models[key]


def _mk_computation(*args):
    *dynamic, names, init = args
    _module, _states, fn = _mk_torch_model(init)
    return fn(dict(zip(names, dynamic)), tuple(dynamic[len(names):]))


def _mk_to_jax(value, abstract):
    import jax.numpy as _jnp
    import torch as _torch

    if not isinstance(value, _torch.Tensor):
        return value
    dtype = _jnp.dtype(str(value.dtype).replace("torch.", ""))
    if abstract:  # only the shape is wanted: nothing is allocated
        return _jnp.zeros(tuple(value.shape), dtype)
    return _jnp.asarray(value.detach().float().numpy() if value.dtype == _torch.bfloat16 else value.detach().numpy(),
                        dtype)


def _mk_inputs():
    """((*state, *get_inputs()), (state names, init inputs)), the inputs converted to JAX arrays."""
    import jax as _jax
    import jax.numpy as _jnp
    import torch as _torch

    init = tuple(get_init_inputs())
    _module, states, _fn = _mk_torch_model(init)
    abstract = isinstance(_jnp.zeros(()), _jax.core.Tracer)  # under eval_shape: shapes only
    _torch.manual_seed(1)
    with _torch.device("meta") if abstract else _torch.device("cpu"):
        inputs = [_mk_to_jax(t, abstract) for t in get_inputs()]
    names = tuple(states)
    return (*[states[n] for n in names], *inputs), (names, init)


def _mk_torch_outputs(*args):
    """PyTorch's own outputs for these (state, inputs), as numpy arrays: the translation check."""
    import jax as _jax
    import numpy as _np
    import torch as _torch

    *dynamic, names, init = args
    module, _states, _fn = _mk_torch_model(init)

    def tensor(a):
        host = _np.asarray(a)
        return _torch.from_numpy(host.astype(_np.float32).copy()).to(_torch.bfloat16) if host.dtype.name == "bfloat16" \\
            else _torch.from_numpy(host.copy())

    module.load_state_dict({n: tensor(v) for n, v in zip(names, dynamic)}, strict=False)
    with _torch.no_grad():
        out = module(*[tensor(a) for a in dynamic[len(names):]])
    leaves = _jax.tree_util.tree_leaves(out, is_leaf=lambda x: isinstance(x, _torch.Tensor))
    return [t.detach().float().numpy() if t.dtype == _torch.bfloat16 else t.detach().numpy() for t in leaves]
'''


#: Integer arithmetic a size may be written in (``N = 2048 * 2``), folded without running the module.
_INT_OPS = {ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Mult: int.__mul__, ast.FloorDiv: int.__floordiv__,
            ast.LShift: int.__lshift__}
#: Folded values are sizes: past this the folding stops (no 2 << 10**9 is ever built)
_FOLD_LIMIT = 1 << 48


def _folded(node: ast.expr) -> int | None:
    """An int written as literal arithmetic (``2048 * 2``, ``1 << 14``, ``2**12``), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp):
        left, right = _folded(node.left), _folded(node.right)
        if left is None or right is None or abs(left) > _FOLD_LIMIT or not 0 <= right <= _FOLD_LIMIT:
            return None
        if isinstance(node.op, ast.Pow) and right <= 64 and abs(left) <= 1 << 16:
            value = left**right
        elif isinstance(node.op, ast.LShift) and right > 48 or isinstance(node.op, ast.FloorDiv) and right == 0:
            return None
        elif type(node.op) in _INT_OPS:
            value = _INT_OPS[type(node.op)](left, right)
        else:
            return None
        return value if abs(value) <= _FOLD_LIMIT else None
    return None


def _constant(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        if isinstance(node, ast.Tuple):
            items = [_folded(e) for e in node.elts]
            return None if None in items else tuple(items)
        return _folded(node)


def size_constants(source: str) -> dict[str, Any]:
    """The module-level size constants a small size may change: ``NAME = int`` or a tuple of ints, and the int
    values of a ``CONFIG`` dict literal (named ``CONFIG[key]``). Bools and floats are never sizes."""
    found: dict[str, Any] = {}
    for node in pyast.parse(source).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name, value = node.targets[0].id, _constant(node.value)
        if name == "CONFIG" and isinstance(value, dict):
            found.update({f"CONFIG[{k!r}]": v for k, v in value.items() if _is_size(v)})
        elif _is_size(value):
            found[name] = value
    return found


#: Functions that only make inputs: the constants they read are sizes a small size may change.
INPUT_FUNCTIONS = frozenset({"get_inputs", "get_init_inputs", "create_inputs", "get_flops"})
#: Where a task's computation starts, in the formats read (JAXBench's workload, KernelBench's classes, ours).
ENTRY_NAMES = ("workload", "Model", "ModelNew", "computation")


def _loads(node: ast.AST) -> set[str]:
    """Module-level names (and ``CONFIG['key']`` reads) a definition reads: not its own parameters or locals."""
    names: set[str] = set()
    for fn in [n for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.Lambda))]:
        local = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
        local |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        for inner in ast.walk(fn):
            if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Load) and inner.id not in local:
                names.add(inner.id)
            elif (isinstance(inner, ast.Subscript) and isinstance(inner.value, ast.Name)
                  and inner.value.id == "CONFIG" and isinstance(inner.slice, ast.Constant)):
                names.add(f"CONFIG[{inner.slice.value!r}]")
    return names


def read_by_computation(source: str) -> set[str]:
    """Module constants the computation itself reads (``groups`` in a forward, ``CONFIG['num_heads']`` in a
    workload): part of what it computes, not only of its input sizes. A copy of the reference inside a
    candidate keeps their full-size values, so a small size must keep them too. The computation is its entry
    and the module's functions and classes it reaches: a ``benchmark()`` beside it that reads every size is
    not part of it. A function's own parameters and locals are not module constants."""
    defs = {n.name: n for n in pyast.parse(source).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    todo = [n for n in ENTRY_NAMES if n in defs] or [n for n in defs if n not in INPUT_FUNCTIONS]
    seen: set[str] = set()
    names: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or name in INPUT_FUNCTIONS:
            continue
        seen.add(name)
        read = _loads(defs[name])
        names |= read
        todo.extend(n for n in read if n in defs)
    return names


def _is_size(value: Any) -> bool:
    if isinstance(value, tuple):
        return bool(value) and all(_is_size(v) for v in value)
    return isinstance(value, int) and not isinstance(value, bool)


def _replace(tree: ast.Module, overrides: dict[str, Any]) -> None:
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name = node.targets[0].id
        if name in overrides:
            node.value = ast.copy_location(ast.Constant(overrides[name]) if isinstance(overrides[name], int)
                                           else pyast.parse(repr(overrides[name]), mode="eval").body, node.value)
        elif name == "CONFIG" and isinstance(node.value, ast.Dict):
            for i, key in enumerate(node.value.keys):
                label = f"CONFIG[{_constant(key)!r}]" if key is not None else None
                if label in overrides:
                    node.value.values[i] = ast.copy_location(ast.Constant(overrides[label]), node.value.values[i])
    ast.fix_missing_locations(tree)


def module_source(meta: dict[str, Any]) -> str:
    """The text the workers run for the task's module (a KernelBench module gets its entry appended)."""
    text = Path(meta["module"]).read_text()
    return text + {"kernelbench": ENTRY_SOURCE, "pytorch": TORCH_SOURCE}.get(meta.get("wrap", ""), "")


def load_task_module(meta: dict[str, Any], name: str, overrides: dict[str, Any] | None = None):
    """Import the task's module from its file (its folder first on sys.path, so sibling imports work), with its
    entry appended where the format needs one and any size constants replaced."""
    path = Path(meta["module"])
    tree = pyast.parse(module_source(meta), filename=str(path))
    if overrides:
        _replace(tree, overrides)
    return exec_module(tree, path, name)


def exec_module(tree: ast.Module | str, path: Path, name: str):
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module
    exec(pyast.compile_tree(tree, str(path)), module.__dict__)
    return module


def add_kernelbench_entry(module) -> Any:
    """Give an imported KernelBench-style candidate the judge's entry (run in its own namespace), or None when it
    defines no Model/ModelNew class."""
    if not any(isinstance(getattr(module, n, None), type) for n in MODEL_CLASSES):
        return None
    exec(compile(ENTRY_SOURCE, "<maxkernel entry>", "exec"), module.__dict__)
    return getattr(module, KERNELBENCH_ENTRY)
