"""Task code in the worker: import the reference, make input sets, describe full-size inputs.

Runs inside a worker process (imports jax).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import jax
import numpy as np

FRESH_SEED_BASE = 1000


def load_module(path: str | Path, name: str):
    """Import a module from a file, its folder first on sys.path so sibling imports work."""
    path = Path(path)
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _pairs(result: Any) -> list[tuple[tuple, tuple]]:
    """Normalise get_inputs/create_inputs results to a list of (dynamic, static) pairs."""
    if isinstance(result, list) and result and all(_is_pair(r) for r in result):
        return [(tuple(d), tuple(s)) for d, s in result]
    if _is_pair(result):
        return [(tuple(result[0]), tuple(result[1]))]
    if isinstance(result, (tuple, list)):
        return [_split_static(tuple(result))]  # JAXBench: arrays, then any plain Python values
    return [((result,), ())]


def _is_array(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype")


def _split_static(inputs: tuple) -> tuple[tuple, tuple]:
    """A JAXBench input tuple as (arrays, trailing Python values): a size such as ``max_expert_size`` is used
    as a Python int by the workload, so it must stay static (traced, it fails with ``__index__``)."""
    arrays = [i for i, v in enumerate(inputs) if _is_array(v)]
    first_static = len(arrays)
    if arrays != list(range(first_static)):
        where = next(i for i in range(len(inputs)) if not _is_array(inputs[i]))
        raise TypeError(f"input {where} ({type(inputs[where]).__name__}) is not an array but array inputs follow it: "
                        "put plain Python values (static sizes) after every array input")
    return inputs[:first_static], inputs[first_static:]


def _is_pair(value: Any) -> bool:
    return (isinstance(value, (tuple, list)) and len(value) == 2
            and isinstance(value[0], (tuple, list)) and isinstance(value[1], (tuple, list)))


def call_inputs(module, meta: dict[str, Any], *, size: str, seed: int | None) -> list[tuple[tuple, tuple]]:
    kwargs: dict[str, Any] = {}
    if meta.get("dtype_arg"):  # JAXBench's runner: create_inputs(dtype=jnp.bfloat16)
        kwargs["dtype"] = jax.numpy.dtype(meta["dtype_arg"])
    if meta.get("supports_size"):
        kwargs["size"] = size
    if meta.get("supports_seed") and seed is not None:
        kwargs["seed"] = seed
    return _pairs(getattr(module, meta["inputs_fn"])(**kwargs))


def abstract_full(module, meta: dict[str, Any], size: str = "full") -> tuple[list[jax.ShapeDtypeStruct], tuple]:
    """Input shapes at ``size`` without materialising them (get_inputs runs under eval_shape)."""
    captured: dict[str, tuple] = {}

    def dynamic_only():
        (dyn, static), *_ = call_inputs(module, meta, size=size, seed=None)
        captured["static"] = static
        return dyn

    shapes = jax.eval_shape(dynamic_only)
    return [jax.ShapeDtypeStruct(s.shape, s.dtype) for s in shapes], captured["static"]


def regenerate_like(arrays: tuple, seed: int) -> tuple:
    """New floating-point values with the same shape, dtype and spread; integers kept as they are.

    For tasks whose input function takes no seed: indices, lengths and page
    tables must stay valid, so only floating-point inputs change.
    """
    rng = np.random.default_rng(seed)
    out = []
    for a in arrays:
        host = np.asarray(a)
        if np.issubdtype(host.dtype, np.floating) or host.dtype.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
            ref = host.astype(np.float32)
            mean, std = float(ref.mean()) if ref.size else 0.0, float(ref.std()) if ref.size else 1.0
            new = rng.standard_normal(host.shape, dtype=np.float32) * (std or 1.0) + mean
            out.append(new.astype(host.dtype))
        else:
            out.append(host)
    return tuple(out)


def input_sets(module, meta: dict[str, Any], *, fresh: int, size: str) -> list[dict[str, Any]]:
    """The task's own input sets plus ``fresh`` new ones (new seeds, or regenerated values)."""
    own = call_inputs(module, meta, size=size, seed=None)
    sets = [{"dynamic": d, "static": s, "how": "task"} for d, s in own]
    for i in range(fresh):
        seed = FRESH_SEED_BASE + i
        if meta.get("supports_seed"):
            d, s = call_inputs(module, meta, size=size, seed=seed)[0]
            sets.append({"dynamic": d, "static": s, "how": f"seed {seed}"})
        else:
            d, s = own[0]
            sets.append({"dynamic": regenerate_like(d, seed), "static": s, "how": f"regenerated floats, rng {seed}"})
    return sets


def encode_static(value: Any) -> Any:
    """Static arguments as tagged JSON, so the candidate worker gets exactly these values."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tuple):
        return {"__tuple__": [encode_static(v) for v in value]}
    if isinstance(value, list):
        return [encode_static(v) for v in value]
    try:
        return {"__dtype__": np.dtype(value).name}
    except TypeError:
        raise TypeError(f"static argument {value!r} of type {type(value).__name__} cannot be sent to a worker") from None


def decode_static(value: Any) -> Any:
    if isinstance(value, dict) and "__tuple__" in value:
        return tuple(decode_static(v) for v in value["__tuple__"])
    if isinstance(value, dict) and "__dtype__" in value:
        import jax.numpy as jnp

        return jnp.dtype(value["__dtype__"])
    if isinstance(value, list):
        return [decode_static(v) for v in value]
    return value
