"""The code health a reviewer checks, held by CI: lint clean, no module over 400 lines, no function over 80 lines
or cyclomatic complexity 25 outside the JaxBench references (which are the benchmark's own code)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys

import pytest

from ..helpers import REPO

MAX_LINES = 80
MAX_MODULE_LINES = 400
MAX_COMPLEXITY = 25
RUFF_RULES = "E4,E7,E9,F,B,UP,SIM"


def source_files() -> list:
    skip = (".venv", "tests", "docs", ".git", "build")
    return [p for p in REPO.rglob("*.py") if not p.relative_to(REPO).parts[0].startswith(skip)
            and not (p.parts[-3:-2] and p.name == "reference.py" and "jaxbench" in p.parts)
            and "egg-info" not in str(p)]


def test_no_module_is_longer_than_400_lines():
    """A module past 400 lines holds more than one thing: split it by what it holds."""
    tracked = subprocess.run(["git", "ls-files", "*.py"], capture_output=True, text=True, cwd=REPO).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout: the tracked modules are not known")
    files = {p for p in source_files()} & {REPO / name for name in tracked}
    long = [f"{path.relative_to(REPO)} ({n} lines)" for path in sorted(files)
            if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES]
    assert len(files) > 100 and not long, "\n".join(long)


def test_no_function_is_longer_than_80_lines():
    long = []
    for path in source_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_LINES:
                    long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, "\n".join(long)


def test_no_function_is_more_complex_than_25():
    from radon.complexity import cc_visit

    complex_ = []
    for path in source_files():
        for block in cc_visit(path.read_text()):
            if block.complexity > MAX_COMPLEXITY:
                complex_.append(f"{path.relative_to(REPO)}:{block.lineno} {block.name} (CC {block.complexity})")
    assert not complex_, "\n".join(complex_)


def test_lint_is_clean_outside_tests():
    ruff = shutil.which("ruff") or str(__import__("pathlib").Path(sys.executable).parent / "ruff")
    if not __import__("os").path.exists(ruff):
        pytest.fail("ruff is not installed: `make install-test` puts it in .venv (the [test] extra)")
    result = subprocess.run([ruff, "check", "--no-cache", "--select", RUFF_RULES, "--exclude", "tests",
                             "--exclude", ".venv", "--exclude", "docs/examples/*/build", str(REPO)],
                            capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stdout[-3000:]


def test_ast_conversions_go_through_the_lock():
    """``ast.parse`` and ``compile`` of a tree race in CPython 3.11's threads (maxkernel_core/pyast.py): the bench
    runs tasks in threads, so every one goes through ``pyast``. A call written the bare way is named here."""
    bare = []
    for path in source_files():
        if path.name == "pyast.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            fn = node.func
            parse = isinstance(fn, ast.Attribute) and fn.attr == "parse" and getattr(fn.value, "id", "") == "ast"
            tree = (isinstance(fn, ast.Name) and fn.id == "compile" and node.args
                    and isinstance(node.args[0], ast.Name) and node.args[0].id == "tree")
            if parse or tree:
                bare.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not bare, "\n".join(bare)
