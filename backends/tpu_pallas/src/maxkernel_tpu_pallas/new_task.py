"""``maxkernel new-task``: a working task folder, from a template or from a user's own (jitted) function.

The folder is the MaxKernel task format (tasks.py): ``reference.py`` with
``get_inputs(dtype, size, seed)`` returning ``(dynamic_args, static_args)`` at
"full" (the size that is compiled and estimated) and "small" (the size the
correctness check runs at on a CPU), ``computation(*args)`` and
``get_flops()``; and ``kernel_task.yaml`` with the id, description, the name
of the input generator (``input_gen_code``) and the tolerances.
"""

from __future__ import annotations

import inspect
import math
import re
from pathlib import Path

import attrs
from attrs import frozen

from maxkernel_pallas_judge.tasks import DEFAULT_TOLERANCE

#: a correctness check's input set stays under this at the small size (as judge/small_size.py's levels)
SMALL_SET_BYTES = 4 << 20
ARG = re.compile(r"^\s*(\w+)\[([\d,\s]*)\]\s*$")
DTYPE_NAMES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16", "i32": "int32", "float32": "float32",
               "bfloat16": "bfloat16", "float16": "float16", "int32": "int32"}


@frozen
class ArgSpec:
    dtype: str
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * (2 if self.dtype in ("bfloat16", "float16") else 4)

    def text(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.shape))}]"


def parse_args(text: str) -> list[ArgSpec]:
    """``"f32[4096,1024] bf16[1024]"`` (spaces or ``;`` between arguments) -> the argument specs."""
    specs = []
    for part in re.split(r"[;\s]+(?=[a-z])", text.strip()):
        m = ARG.match(part)
        if not m or m.group(1) not in DTYPE_NAMES:
            raise ValueError(f"cannot read {part!r} as an argument: write dtype[dims], e.g. f32[4096,1024] or "
                             f"bf16[8,128]; dtypes: {', '.join(sorted(DTYPE_NAMES))}")
        dims = tuple(int(d) for d in m.group(2).replace(" ", "").split(",") if d)
        specs.append(ArgSpec(DTYPE_NAMES[m.group(1)], dims))
    return specs


def small_specs(specs: list[ArgSpec]) -> list[ArgSpec]:
    """The same arguments scaled down until one set is under SMALL_SET_BYTES: every dimension divisible by
    the factor is divided by it, so equal dimensions stay equal (a matmul's K still matches) and multiples
    of 8 and 128 stay multiples where they can."""
    factor, small = 1, list(specs)
    while sum(s.nbytes for s in small) > SMALL_SET_BYTES and factor < 1 << 12:
        factor *= 2
        small = [attrs.evolve(s, shape=tuple(d // factor if d % factor == 0 and d // factor >= 8 else d
                                             for d in s.shape)) for s in specs]
    return small


def tolerance(specs: list[ArgSpec]) -> float:
    """The loosest default tolerance of the arguments' float dtypes (a bf16 input rounds everything after it)."""
    return max((DEFAULT_TOLERANCE.get(s.dtype, 1e-4) for s in specs), default=1e-4)


INPUTS_SOURCE = '''

# --- written by `maxkernel new-task`: the inputs at both sizes, the entry point and the FLOP count ---
import jax as _jax
import jax.numpy as _jnp

SIZES = {sizes!r}  # per size: (dtype, shape) of each argument


def get_inputs(dtype=None, size="full", seed=0):
    """(dynamic arguments, static arguments); ``dtype`` overrides the float arguments' dtype."""
    keys = _jax.random.split(_jax.random.key(seed), len(SIZES[size]))
    args = []
    for key, (name, shape) in zip(keys, SIZES[size]):
        kind = _jnp.dtype(name)
        if _jnp.issubdtype(kind, _jnp.integer):
            args.append(_jax.random.randint(key, shape, 0, 16, kind))
        else:
            args.append(_jax.random.normal(key, shape, dtype or kind))
    return tuple(args), ()


def computation(*args):
    return {entry}(*args)


def get_flops():
    return {flops}  # XLA's cost analysis of the full size, counted when the task was written
'''


def inputs_source(entry: str, full: list[ArgSpec], small: list[ArgSpec], flops: int) -> str:
    sizes = {"full": [(s.dtype, s.shape) for s in full], "small": [(s.dtype, s.shape) for s in small]}
    return INPUTS_SOURCE.format(sizes=sizes, entry=entry, flops=flops)


def count_flops(fn, specs: list[ArgSpec]) -> int:
    """XLA's FLOP count of ``fn`` at these shapes (compiled for this machine's CPU: counting, not timing)."""
    import jax

    structs = [jax.ShapeDtypeStruct(s.shape, s.dtype) for s in specs]
    analysis = jax.jit(fn).lower(*structs).compile().cost_analysis()
    if isinstance(analysis, list):
        analysis = analysis[0] if analysis else {}
    return int((analysis or {}).get("flops", 0))


def function_source(fn) -> tuple[str, str]:
    """(the source of the module that defines ``fn``, the name to call it by): the whole module travels, so
    helpers and constants it uses come along; a jitted function is called as it is."""
    inner = inspect.unwrap(fn)
    module = inspect.getmodule(inner)
    if module is None or not getattr(module, "__file__", None):
        raise ValueError(f"{fn!r} has no source file to copy (define it in a .py module)")
    return Path(module.__file__).read_text(), getattr(fn, "__name__", inner.__name__)


def yaml_text(task_id: str, description: str, tol: float) -> str:
    return (f"task_id: {task_id}\ndescription: {description!r}\n"
            "# the function in reference.py that makes the inputs: get_inputs(dtype, size, seed) returns\n"
            "# (dynamic_args, static_args) at size 'full' (compiled, estimated) or 'small' (checked on CPU)\n"
            "input_gen_code: get_inputs in reference.py\n"
            f"# a candidate's outputs must match the reference within atol + rtol * |reference|\n"
            f"atol: {tol!r}\nrtol: {tol!r}\n")
