"""Detects a candidate that patches libraries or the judge in its own process.

No verdict depends on this process any more (the checker recounts, compiles
and runs the exported program without the candidate), so a patch cannot fake
a pass; but a module that rebinds ``numpy.allclose``, swaps a function's
``__code__`` or rewrites a judge module is trying to, and is rejected outright
rather than given the benefit of the doubt. Identity of every callable and of
its code object is compared, for the libraries and for every module of the
judge itself (found by package, so a renamed module is never left unwatched).
"""

from __future__ import annotations

import sys

LIBRARIES = (
    "builtins", "time", "math", "os", "sys", "threading", "numpy", "numpy.testing", "jax", "jax.numpy", "jax.random",
    "jax.lax", "jax.export", "jax.profiler", "jax.experimental.pallas", "jax.experimental.pallas.tpu",
    "jax._src.core", "jax._src.export._export", "jax._src.pallas.pallas_call",
)
JUDGE_PACKAGES = ("maxkernel_pallas_judge",)
#: The judging backend's own packages and the libraries it lowers with (``Platform.watched``), set by the tracer
#: before the candidate is imported.
_platform_watched: list[str] = []
#: Whole packages whose functions decide what a traced program lowers to: Pallas itself, and the
#: exporter. A candidate rewriting how pallas_call lowers for the CPU would change the check program.
LOWERING_PACKAGES = ("jax._src.pallas", "jax._src.export", "jax._src.interpreters.mlir")


def watch(packages: tuple[str, ...]) -> None:
    """Also watch these packages (a platform's backend and lowering libraries), from the next snapshot on."""
    _platform_watched[:] = list(packages)


def _judge_packages() -> tuple[str, ...]:
    return JUDGE_PACKAGES + tuple(_platform_watched)


def _watched() -> list[str]:
    judge = [name for name in list(sys.modules) if name.startswith(_judge_packages() + LOWERING_PACKAGES)]
    return [*LIBRARIES, *sorted(judge)]


def _lowering_rules() -> dict[str, tuple[int, int]]:
    """Every registered lowering rule, by primitive (and platform): rebinding one changes the export."""
    mlir = sys.modules.get("jax._src.interpreters.mlir")
    ids = {}
    if mlir is None:
        return ids
    for prim, rule in list(getattr(mlir, "_lowerings", {}).items()):
        ids[f"lowering[{prim}]"] = _identity(rule)
    for platform, rules in list(getattr(mlir, "_platform_specific_lowerings", {}).items()):
        for prim, rule in list(rules.items()):
            ids[f"lowering[{platform}:{prim}]"] = _identity(rule)
    return ids


def _identity(value) -> tuple[int, int]:
    code = getattr(value, "__code__", None)
    func = getattr(value, "__func__", None)  # a bound or class method: its function's code
    code = code or getattr(func, "__code__", None)
    return id(value), id(code) if code is not None else 0


def snapshot() -> dict[str, tuple[int, int]]:
    """Identity of every callable attribute (and its code) of the watched modules."""
    ids = _lowering_rules()
    for mod_name in _watched():
        module = sys.modules.get(mod_name)
        if module is None:
            continue
        for name, value in list(vars(module).items()):
            if callable(value) and not name.startswith("__"):
                ids[f"{mod_name}.{name}"] = _identity(value)
                if isinstance(value, type) and mod_name.startswith(_judge_packages()):
                    for attr, member in list(vars(value).items()):
                        if callable(member) and not attr.startswith("__"):
                            ids[f"{mod_name}.{name}.{attr}"] = _identity(member)
    return ids


def changed(before: dict[str, tuple[int, int]]) -> list[str]:
    """Watched names now bound to a different object or code (or deleted) since ``before``."""
    after = snapshot()
    return sorted(name for name, ident in before.items() if after.get(name) != ident)
