"""What the installed jax offers instead, when a candidate uses a name or a signature it does not have.

Models write Pallas from whatever jax version they learned (``pltpu.repeat``, ``pltpu.ANY`` for
``pl.ANY``, a ``pallas_call`` keyword that moved). The bare ``AttributeError`` does not say what
to write instead; this looks it up in the installed jax by introspection (``dir``, ``inspect``),
never from a hand-made list, so it stays right as jax changes. Runs in the tracer, after the
candidate failed; a hint never decides a verdict.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import re

#: Where a moved name is looked for, with the alias models use for each.
NAMESPACES = (
    ("jax.experimental.pallas", "pl"),
    ("jax.experimental.pallas.tpu", "pltpu"),
    ("jax.numpy", "jnp"),
    ("jax.lax", "jax.lax"),
    ("jax", "jax"),
)
_IMPORT = re.compile(r"cannot import name '(\w+)' from '([\w.]+)'")
_KEYWORD = re.compile(r"(\w+)(?:\.__init__)?\(\) got an unexpected keyword argument '(\w+)'")
_ARITY = re.compile(r"(\w+)(?:\.__init__)?\(\) (?:takes|missing) ")


def _modules():
    for name, alias in NAMESPACES:
        try:
            yield importlib.import_module(name), alias
        except Exception:  # an optional part of jax missing here: nothing to suggest from it
            continue


def _version() -> str:
    import jax

    return f"jax {jax.__version__}"


def _missing_name(module_name: str, name: str) -> str:
    alias = dict(NAMESPACES).get(module_name, module_name)
    elsewhere = [f"{a}.{name}" for m, a in _modules() if m.__name__ != module_name and hasattr(m, name)]
    try:
        module = importlib.import_module(module_name)
        close = difflib.get_close_matches(name, [n for n in dir(module) if not n.startswith("_")], n=3, cutoff=0.6)
    except Exception:
        close = []
    offers = []
    if elsewhere:
        # a name is not a meaning: pltpu.repeat tiled, jnp.repeat repeats each element
        offers.append(f"the same name exists as {' and '.join(elsewhere)} (check it computes the same)")
    if close:
        offers.append(f"closest in {alias}: {', '.join(close)}")
    return (f"{_version()} has no {alias}.{name}" + (f"; {'; '.join(offers)}" if offers else
                                                      f"; nothing close in {alias} or the other jax namespaces"))


def _signature(function: str, keyword: str = "") -> str | None:
    for module, alias in _modules():
        fn = getattr(module, function, None)
        if callable(fn):
            try:
                sig = inspect.signature(fn)
            except (TypeError, ValueError):
                return None
            close = difflib.get_close_matches(keyword, list(sig.parameters), n=1, cutoff=0.5) if keyword else []
            return f"{alias}.{function}{sig}" + (f" (did you mean {close[0]}=?)" if close else "")
    return None


def hint(exc: BaseException) -> str:
    """One line on what the installed jax offers instead, or "" when the error is not about jax's API."""
    module = getattr(exc, "obj", None) if isinstance(exc, AttributeError) else None
    if inspect.ismodule(module) and exc.name and module.__name__.split(".")[0] == "jax":
        return _missing_name(module.__name__, exc.name)
    if isinstance(exc, ImportError) and (m := _IMPORT.search(str(exc))) and m.group(2).startswith("jax"):
        return _missing_name(m.group(2), m.group(1))
    if isinstance(exc, TypeError):
        found = _KEYWORD.search(str(exc)) or _ARITY.search(str(exc))
        keyword = found.group(2) if found and found.re is _KEYWORD else ""
        signature = _signature(found.group(1), keyword) if found else None
        if signature:
            return f"in {_version()} the signature is {signature}"
    return ""
