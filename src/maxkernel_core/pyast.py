"""Python's ``ast`` conversions under one lock, for code that parses in threads.

CPython 3.11 keeps the recursion depth of its AST object conversion (C tree <-> ``ast`` objects) in state
shared by the interpreter's threads, so two threads converting at once can fail with ``SystemError: AST
constructor recursion depth mismatch`` (python/cpython#106905). ``maxkernel bench --jobs N`` runs tasks
in threads, and a sweep lost a task to it. Every ``ast.parse`` and every ``compile`` of a tree in maxkernel
goes through here.
"""

from __future__ import annotations

import ast
import threading
from types import CodeType

_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """``ast.parse``, one thread at a time."""
    with _LOCK:
        return ast.parse(source, filename=filename, mode=mode)


def compile_tree(tree: ast.AST | str, filename: str, mode: str = "exec") -> CodeType:
    """``compile`` of a tree (or of source), one thread at a time."""
    with _LOCK:
        return compile(tree, filename, mode)
