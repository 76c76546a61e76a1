"""The traced program as bytes a process that never imported the candidate can read back: the candidate's
jaxpr crosses from its tracer to the checker, which lowers, exports, counts, compiles and runs it itself.

Lowering and export run rules registered in the process that does them: in the tracer, a candidate could add
a primitive whose lowering runs during export, or patch how export works, and hand over a program other than
the one it traced. Moving the jaxpr instead, the candidate's Python runs only to trace; every program judged
is made from that jaxpr in the checker, by the judge's own code.

The bytes are a pickle, read by an unpickler that builds nothing but what is on ``ALLOWED``: the record
classes a jaxpr is made of (jaxprs, equations, variables, avals, Pallas' grid and block mappings, numpy
arrays). A primitive crosses as its name and is read back as the one the checker's jax registered under that
name, so a primitive the candidate defines cannot cross at all. A function in a parameter (a custom_jvp's
rule, a remat policy: nothing the forward program runs) crosses as a placeholder that raises if called.
An equation's source location crosses as the candidate's file and line alone (a compiler's error names it).
"""

from __future__ import annotations

import gc
import io
from typing import Any
import pickle
import types

import jax
import numpy as np
from jax._src import core, source_info_util
from jax._src.literals import TypedNdArray

#: (module, name) the checker may build while reading a program; anything else is refused, never imported
ALLOWED: frozenset[tuple[str, str]] = frozenset({
    ("builtins", "frozenset"), ("builtins", "set"), ("builtins", "slice"), ("builtins", "complex"),
    ("collections", "OrderedDict"), ("copyreg", "_reconstructor"), ("builtins", "object"),
    ("numpy", "dtype"), ("numpy", "ndarray"), ("numpy._core.numeric", "_frombuffer"),
    ("numpy._core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "scalar"),
    ("jax._src.core", "ClosedJaxpr"), ("jax._src.core", "Jaxpr"), ("jax._src.core", "JaxprEqn"),
    ("jax._src.core", "JaxprEqnContext"), ("jax._src.core", "Literal"), ("jax._src.core", "Var"),
    ("jax._src.core", "ShapedArray"), ("jax._src.core", "DShapedArray"), ("jax._src.core", "AbstractToken"),
    ("jax._src.core", "ManualAxisType"), ("jax._src.core", "MemorySpace"), ("jax._src.core", "DropVar"),
    ("jax._src.linear_util", "DebugInfo"), ("jax._src.mesh", "AbstractMesh"), ("jax._src.mesh", "AxisType"),
    ("jax._src.named_sharding", "_unpickle_named_sharding"), ("jax._src.partition_spec", "PartitionSpec"),
    ("jax._src.literals", "TypedInt"), ("jax._src.literals", "TypedFloat"), ("jax._src.literals", "TypedComplex"),
    ("jax._src.tree_util", "default_registry"), ("jaxlib._jax.pytree", "PyTreeDef"),
    ("jax._src.state.types", "AbstractRef"), ("jax._src.state.types", "ReadEffect"),
    ("jax._src.state.types", "WriteEffect"), ("jax._src.state.types", "AccumEffect"),
    ("jax._src.state.types", "RefBitcaster"), ("jax._src.state.types", "RefReshaper"),
    ("jax._src.state.indexing", "NDIndexer"), ("jax._src.state.indexing", "Slice"),
    ("jax._src.pallas.core", "GridMapping"), ("jax._src.pallas.core", "BlockMapping"),
    ("jax._src.pallas.core", "Blocked"), ("jax._src.pallas.core", "Element"), ("jax._src.pallas.core", "Squeezed"),
    ("jax._src.pallas.core", "BoundedSlice"), ("jax._src.pallas.core", "MemorySpace"),
    ("jax._src.pallas.core", "MemoryRef"), ("jax._src.pallas.core", "AbstractMemoryRef"),
    ("jax._src.pallas.core", "Buffered"), ("jax._src.pallas.core", "NameAndSrcInfo"),
    ("jax._src.pallas.core", "CostEstimate"), ("jax._src.pallas.core", "ScratchShape"),
    ("jax._src.pallas.core", "CoreType"), ("jax._src.pallas.core", "PallasGridContext"),
    ("jax._src.pallas.mosaic.core", "CompilerParams"), ("jax._src.pallas.mosaic.core", "MemorySpace"),
    ("jax._src.pallas.mosaic.core", "GridDimensionSemantics"), ("jax._src.pallas.mosaic.core", "SemaphoreType"),
    ("jax._src.pallas.mosaic.core", "AbstractSemaphore"), ("jax._src.pallas.mosaic.core", "MemoryRef"),
    ("jax._src.pallas.mosaic.core", "KernelType"), ("jax._src.pallas.mosaic.core", "PrefetchScalarGridSpec"),
    ("jax._src.pallas.mosaic.core", "TPUMemorySpace"), ("jax._src.pallas.mosaic.core", "dma_semaphore"),
    ("jax._src.pallas.mosaic.core", "semaphore"), ("jax._src.pallas.mosaic.core", "barrier_semaphore"),
    ("jax._src.lax.lax", "Precision"), ("jax._src.lax.lax", "DotAlgorithm"),
    ("jax._src.lax.lax", "DotAlgorithmPreset"), ("jax._src.lax.lax", "RoundingMethod"),
    ("jax._src.lax.lax", "AccuracyMode"), ("jax._src.lax.convolution", "ConvDimensionNumbers"),
    ("jax._src.lax.slicing", "GatherDimensionNumbers"), ("jax._src.lax.slicing", "ScatterDimensionNumbers"),
    ("jax._src.lax.slicing", "GatherScatterMode"), ("jax._src.lax.parallel", "ReduceScatterParams"),
    ("jax._src.ad_util", "SymbolicZero"), ("jax._src.effects", "JaxprInputEffect"),
    ("jax._src.pallas.triton.core", "CompilerParams"), ("jax._src.pallas.mosaic_gpu.core", "CompilerParams"),
    ("jax", "P"), ("jax._src.indexing", "Slice"), ("jax._src.mesh", "Mesh"),
    ("jax._src.named_sharding", "UnspecifiedValue"), ("jax._src.pallas.core", "DynamicGridDim"),
    ("jax._src.pallas.mosaic.core", "DMASemaphore"), ("jax._src.pallas.primitives", "DeviceIdType"),
    ("jax._src.state.types", "TransformedRef"), ("jax._src.tree_util", "tracing_registry"),
    ("ml_dtypes", "bfloat16"), ("ml_dtypes", "float8_e4m3fn"), ("ml_dtypes", "float8_e5m2"),
    ("ml_dtypes", "int4"), ("ml_dtypes", "uint4"),
    ("maxkernel_pallas_judge.judge.jaxpr_wire", "_primitive"),
    ("maxkernel_pallas_judge.judge.jaxpr_wire", "_source"),
    ("maxkernel_pallas_judge.judge.jaxpr_wire", "_typed_ndarray"),
    ("maxkernel_pallas_judge.judge.jaxpr_wire", "_placeholder"),
    ("maxkernel_pallas_judge.judge.jaxpr_wire", "_singleton"),
    ("maxkernel_pallas_judge.judge.jaxpr_wire", "_device_array"),
    ("maxkernel_pallas_judge.judge.jaxpr_wire", "_key_array"),
    ("maxkernel_pallas_judge.judge.jaxpr_wire", "_prng_impl"),
    ("maxkernel_pallas_judge.judge.jaxpr_wire", "_key_type"),
})


class WireError(ValueError):
    """A program the checker will not read: what it holds, in a sentence."""


def _primitive(name: str):
    """The primitive this process's jax registered under ``name`` (only jax's own: ``known_primitives``)."""
    found = _primitives().get(name)
    if found is None:  # one a platform's modules define, imported since the table was made (Triton's)
        _PRIMITIVES.clear()
        found = _primitives().get(name)
    if found is None:
        raise WireError(f"the program uses a primitive {name!r} that jax does not define: a candidate may not add "
                        "primitives (or lowering rules) of its own")
    return found


#: the highest line a location may name
MAX_LINE = 1_000_000
_TRACEBACKS: dict[tuple[str, int], Any] = {}


def _traceback_at(name: str, line: int):
    """A real traceback whose innermost frame is ``name``:``line`` (jax's lowering reads and extends tracebacks
    as its own objects): made by running a line that only asks for the traceback, compiled to sit at that line
    of a file of that name. Nothing of the candidate's runs; the file is not read."""
    key = (str(name)[:200], min(max(int(line), 1), MAX_LINE))
    if key not in _TRACEBACKS:
        from jax._src.lib import xla_client

        space: dict[str, Any] = {"_get": xla_client.Traceback.get_traceback}
        exec(compile("\n" * (key[1] - 1) + "tb = _get()", key[0], "exec"), space)  # noqa: S102 (a fixed line)
        _TRACEBACKS[key] = space["tb"]
    return _TRACEBACKS[key]


def _source(frames: tuple[tuple[str, int], ...]):
    """An equation's source: where the candidate's code traced it (its innermost frame), for error messages."""
    traceback = _traceback_at(*frames[0]) if frames else None
    return source_info_util.SourceInfo(traceback, source_info_util.NameStack())


def _frames_of(info) -> tuple[tuple[str, int], ...]:
    """The candidate's own frames of an equation's traceback (its scratch path read as candidate.py)."""
    frames = []
    for frame in source_info_util.user_frames(info.traceback):
        if frame.file_name.endswith("candidate.py"):
            frames.append(("candidate.py", frame.start_line))
    return tuple(frames[:1])


#: jax objects its code tells apart by identity (``x is dynamic_grid_dim``): read back as the checker's own
SINGLETONS = {"dynamic_grid_dim": ("jax._src.pallas.core", "dynamic_grid_dim"),
              "unspecified": ("jax._src.named_sharding", "UNSPECIFIED"),
              "abstract_token": ("jax._src.core", "abstract_token")}


def _singleton(name: str):
    import importlib

    module, attribute = SINGLETONS[name]
    return getattr(importlib.import_module(module), attribute)


def _singleton_name(obj) -> str | None:
    import sys

    for name, (module, attribute) in SINGLETONS.items():
        loaded = sys.modules.get(module)
        if loaded is not None and getattr(loaded, attribute, None) is obj:
            return name
    return None


def _device_array(value: np.ndarray):
    return jax.numpy.asarray(value)


def _key_array(data: np.ndarray, impl: str):
    return jax.random.wrap_key_data(data, impl=impl)


def _prng_impl(name: str):
    """A PRNG implementation jax registered (threefry, rbg...), by its name: its functions are jax's own."""
    from jax._src.random import prng

    if name not in prng.prngs:
        raise WireError(f"the program uses a PRNG implementation {name!r} jax does not register")
    return prng.prngs[name]


def _key_type(name: str):
    from jax._src.random import prng

    return prng.KeyTy(_prng_impl(name))


def _typed_ndarray(value: np.ndarray, aval):
    return TypedNdArray(value, aval)


class _Named:
    def __init__(self, name: str) -> None:
        self.func_name = name


class _Placeholder:
    """A function a parameter held in the tracer (a custom_jvp rule, a remat policy): the forward program
    never calls it, and the checker has none of the candidate's code to run if it did."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.debug_info = _Named(name)  # what jax's printing of a custom_jvp or custom_vjp call reads

    def __call__(self, *args, **kwargs):
        raise WireError(f"the program calls {self.name}, a function of the candidate's process: the checker "
                        "runs only what the program itself holds")

    def __repr__(self) -> str:
        return f"<placeholder for {self.name}>"


def _placeholder(name: str) -> _Placeholder:
    return _Placeholder(name)


_PRIMITIVES: dict[str, core.Primitive] = {}


def _primitives() -> dict[str, core.Primitive]:
    """Every primitive jax and Pallas define, by name, found once in this process before any program is read."""
    if not _PRIMITIVES:
        import jax.experimental.pallas  # noqa: F401  (their primitives exist once these are imported)
        import jax.experimental.pallas.tpu  # noqa: F401

        for obj in gc.get_objects():
            if isinstance(obj, core.Primitive) and type(obj).__module__.startswith(("jax.", "jaxlib.")):
                _PRIMITIVES.setdefault(obj.name, obj)
    return _PRIMITIVES


def known_primitives() -> frozenset[str]:
    return frozenset(_primitives())


class _Writer(pickle.Pickler):
    def reducer_override(self, obj):
        if isinstance(obj, core.Primitive):
            return (_primitive, (obj.name,))
        if isinstance(obj, source_info_util.SourceInfo):
            return (_source, (_frames_of(obj),))
        singleton = _singleton_name(obj)
        if singleton is not None:
            return (_singleton, (singleton,))
        if isinstance(obj, TypedNdArray):
            return (_typed_ndarray, (obj.view(np.ndarray), obj.aval))
        from jax._src.random import prng

        if isinstance(obj, prng.PRNGImpl):  # a key's implementation: by name, rebuilt from jax's registry
            return (_prng_impl, (obj.name,))
        if isinstance(obj, prng.KeyTy):
            return (_key_type, (obj._impl.name,))
        if isinstance(obj, jax.Array):  # a constant of the program (a module's weights): its values cross
            if jax.dtypes.issubdtype(obj.dtype, jax.dtypes.prng_key):
                return (_key_array, (np.asarray(jax.random.key_data(obj)), str(jax.random.key_impl(obj))))
            return (_device_array, (np.asarray(obj),))
        if isinstance(obj, (types.FunctionType, types.MethodType, types.BuiltinFunctionType)) or _wrapped_fun(obj):
            if (getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)) in ALLOWED:
                return NotImplemented  # a reader's own reconstructor: crosses by name
            return (_placeholder, (getattr(obj, "__qualname__", type(obj).__name__),))
        return NotImplemented


def _wrapped_fun(obj) -> bool:
    name = type(obj).__name__
    return name in ("WrappedFun", "partial", "HashableFunction") and not isinstance(obj, type)


def dumps(closed) -> bytes:
    """A traced program as bytes (in the tracer: the candidate's process)."""
    buffer = io.BytesIO()
    _Writer(buffer, protocol=5).dump(closed)
    return buffer.getvalue()


class _Reader(pickle._Unpickler):
    """The pure-Python unpickler (its opcodes can be overridden, the C one's cannot), with every global checked
    against ``ALLOWED`` and no BUILD on a global: a slot state set on a class or a module-level object (a
    pickle's ``BUILD``, which calls ``setattr``) would change the checker's jax for every program after this
    one, and the checker is kept across candidates."""

    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(self, file) -> None:
        super().__init__(file)
        self._globals: set[int] = set()

    def find_class(self, module: str, name: str):
        if (module, name) not in ALLOWED:
            raise WireError(f"the program holds {module}.{name}, which the judge does not read")
        found = super().find_class(module, name)
        self._globals.add(id(found))
        return found

    def _fresh(self, target, opcode: str) -> None:
        """Refuse an opcode that changes ``target`` in place when it is not an object this program made."""
        if id(target) in self._globals or isinstance(target, (type, types.ModuleType, types.FunctionType,
                                                               types.BuiltinFunctionType)):
            raise WireError(f"the program changes {getattr(target, '__qualname__', type(target).__name__)} in "
                            f"place (a pickle {opcode} on a class or a global), which the judge's own code uses")

    def load_build(self) -> None:  # setattr / __dict__.update / __setstate__ on stack[-2]
        self._fresh(self.stack[-2], "BUILD")
        pickle._Unpickler.load_build(self)

    def load_setitem(self) -> None:
        self._fresh(self.stack[-3], "SETITEM")
        pickle._Unpickler.load_setitem(self)

    def load_append(self) -> None:
        self._fresh(self.stack[-2], "APPEND")
        pickle._Unpickler.load_append(self)

    def _marked(opcode: str, base):  # SETITEMS, APPENDS, ADDITEMS: the target sits under the mark
        def load(self) -> None:
            self._fresh(self.metastack[-1][-1], opcode)
            base(self)
        return load

    dispatch[pickle.BUILD[0]] = load_build
    dispatch[pickle.SETITEM[0]] = load_setitem
    dispatch[pickle.APPEND[0]] = load_append
    dispatch[pickle.SETITEMS[0]] = _marked("SETITEMS", pickle._Unpickler.load_setitems)
    dispatch[pickle.APPENDS[0]] = _marked("APPENDS", pickle._Unpickler.load_appends)
    dispatch[pickle.ADDITEMS[0]] = _marked("ADDITEMS", pickle._Unpickler.load_additems)


def loads(data: bytes):
    """A program the tracer sent, built from ``ALLOWED`` alone (in the checker); WireError when it is not one."""
    _primitives()  # found before any byte of the program is read
    try:
        closed = _Reader(io.BytesIO(data)).load()
    except WireError:
        raise
    except Exception as exc:
        raise WireError(f"the program's bytes are not a readable program ({type(exc).__name__}: {exc})"[:400]) from exc
    if not isinstance(closed, core.ClosedJaxpr):
        raise WireError(f"the program's bytes hold a {type(closed).__name__}, not a program")
    return closed

