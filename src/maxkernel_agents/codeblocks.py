"""Getting code and structured data out of a model's reply, whatever it wrapped them in.

Models answer with fenced blocks (```python, ```py, ``` bare), sometimes several
(a helper, then the module; or a "before" and an "after"), sometimes with prose
around them, sometimes cut off mid-block. The rules: prefer blocks that define
``computation`` (or ``class ModelNew``, KernelBench's answer to a KernelBench-style task); among those, the last complete one (models put the final
version last); an unterminated block counts only if it parses; never return
something that does not parse.
"""

from __future__ import annotations

import ast
import json
import re

from maxkernel_core import pyast
from maxkernel_core.errors import MaxKernelError

FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)


class NoUsableCode(MaxKernelError):
    """The reply holds no Python module defining ``computation``: the role failed, with the reason."""

    exit_code = 1


def _parses(code: str) -> bool:
    try:
        pyast.parse(code)
        return True
    except SyntaxError:
        return False


def _defines_computation(code: str) -> bool:
    try:
        tree = pyast.parse(code)
    except SyntaxError:
        return False
    return any((isinstance(n, ast.FunctionDef) and n.name == "computation")
               or (isinstance(n, ast.ClassDef) and n.name == "ModelNew") for n in tree.body)


def code_blocks(text: str) -> list[tuple[str, str, bool]]:
    """(language, code, complete) for each fenced block, in order."""
    blocks = []
    for match in FENCE.finditer(text):
        lang = match.group(1).lower()
        complete = match.group(0).rstrip().endswith("```") and match.end() <= len(text)
        blocks.append((lang, match.group(2).strip("\n"), complete))
    return blocks


def extract_module(text: str, entry: str = "computation") -> str:
    """The candidate module in a reply; :class:`NoUsableCode` with the reason when there is none."""
    blocks = [(lang, code, done) for lang, code, done in code_blocks(text) if lang in ("", "python", "py", "python3")]
    defining = [code for _, code, _ in blocks if _defines_computation(code)]
    if defining:
        return defining[-1].strip() + "\n"
    if not blocks and _defines_computation(text):
        return text.strip() + "\n"  # a bare module with no fences at all
    if blocks and any(not done for *_, done in blocks) and not any(_parses(c) for _, c, _ in blocks):
        raise NoUsableCode("the reply was cut off inside its code block (no complete module to use); "
                           "raise llm.max_output_tokens or ask for a shorter kernel")
    if blocks:
        raise NoUsableCode(f"none of the reply's {len(blocks)} code block(s) is a Python module defining "
                           f"{entry}() that parses")
    raise NoUsableCode(f"the reply has no code block: expected one ```python block defining {entry}()")


def extract_json(text: str) -> dict | None:
    """The last ```json block (or bare {...}) that parses to an object, else None."""
    for lang, code, _ in reversed(code_blocks(text)):
        if lang in ("json", ""):
            try:
                value = json.loads(code)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if match:
        try:
            value = json.loads(match.group(0))
            return value if isinstance(value, dict) else None
        except ValueError:
            return None
    return None
