"""Every hook is documented with its exact signature and exercised by at least one test (as datasette does)."""

import inspect
import re
from pathlib import Path

import pytest

from maxkernel_core import hookspecs

from ..helpers import REPO

HOOKS = sorted(
    name for name, fn in vars(hookspecs).items()
    if inspect.isfunction(fn) and hasattr(fn, f"{hookspecs.PROJECT_NAME}_spec")
)


def signature_line(name: str) -> str:
    """``def name(a: T, ...) -> R`` from the spec, annotations as written in the source."""
    sig = inspect.signature(getattr(hookspecs, name))
    params = ", ".join(f"{p.name}: {p.annotation}" for p in sig.parameters.values())
    return f"def {name}({params}) -> {sig.return_annotation}"


def test_there_are_discovery_and_role_hooks():
    assert {"register_backends", "register_strategies", "register_llm_providers", "register_commands"} <= set(HOOKS)
    assert {f"agent_{r}" for r in ("plan", "implement", "debug", "test", "profile")} <= set(HOOKS)


@pytest.mark.parametrize("name", HOOKS)
def test_hook_is_documented_with_its_exact_signature(name):
    doc = (REPO / "docs" / "plugins.md").read_text()
    assert signature_line(name) in doc, f"docs/plugins.md lacks `{signature_line(name)}`"
    spec = getattr(hookspecs, name)
    assert ":returns:" in spec.__doc__ and (":param" in spec.__doc__)


@pytest.mark.parametrize("name", HOOKS)
def test_hook_has_a_test(name):
    this = Path(__file__).resolve()
    sources = [p.read_text() for p in (REPO / "tests").rglob("test_*.py") if p.resolve() != this]
    assert any(re.search(rf"\b{name}\b", s) for s in sources), f"no test mentions hook {name}"
