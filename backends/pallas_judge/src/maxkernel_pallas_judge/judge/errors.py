"""A compiler's or lowering's error as a person (or model) acts on it: the message that matters, its kind, and
the candidate's line; and a compiled program's memory figures. Shared by every platform's compile."""

from __future__ import annotations

import re
import traceback
from typing import Any

MAX_MESSAGE = 1500


def memory_figures(compiled) -> dict[str, int]:
    stats = compiled.memory_analysis()
    names = ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes",
             "alias_size_in_bytes", "generated_code_size_in_bytes")
    return {n: int(getattr(stats, n)) for n in names if stats is not None and hasattr(stats, n)}


def _chain(exc: BaseException) -> list[BaseException]:
    """The error and its causes: JAX attaches the traced op's own stack (the kernel line) as the cause of a
    lowering error (Pallas's Triton lowering refusing a tile, say)."""
    chain: list[BaseException] = []
    while exc is not None and exc not in chain and len(chain) < 8:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    return list(reversed(chain))  # the innermost frame of the deepest cause last


def trim_error(exc: BaseException, source_file: str) -> dict[str, Any]:
    """The part of a compiler error a person (or model) acts on, and the kernel line it points at."""
    # the scratch path means nothing to a reader (and names where a worker lives)
    text = re.sub(r"[^\s'\"(]*/candidate\.py", "candidate.py", str(exc).replace(source_file, "candidate.py"))
    kind = "compile"
    if "Ran out of memory in memory space vmem" in text or "vmem" in text.lower() and "exceeded" in text.lower():
        kind = "vmem_overflow"
        keep = [ln for ln in text.splitlines()
                if ln.strip().startswith(("XLA:TPU", "Program vmem", "Shape:", "Tag:", "1.", "2.", "3."))
                or "Ran out of memory" in ln or "Used " in ln]
        message = "\n".join(ln.strip() for ln in keep[:12]) or text
    elif "divisible by 8 and 128" in text or "block shape" in text.lower():
        kind = "block_shape"
        message = text.split("\nSee details")[0]
    else:
        message = "\n".join(ln for ln in text.splitlines() if ln.strip())[:MAX_MESSAGE]
    return {"kind": kind, "type": type(exc).__name__, "message": message[:MAX_MESSAGE],
            "line": _candidate_line(exc, text, source_file)}


def _candidate_line(exc: BaseException, text: str, source_file: str) -> int | None:
    """The candidate's line: from the error's own traceback, else the line its message names (Mosaic's), else
    the traced op's stack JAX attaches as the cause (a Triton lowering refusal)."""
    own = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == source_file]
    if own:
        return own[-1].lineno
    found = re.findall(r"candidate\.py:(\d+)", text)
    if found:
        return int(found[-1])
    causes = [f for e in _chain(exc)[:-1] for f in traceback.extract_tb(e.__traceback__) if f.filename == source_file]
    return causes[-1].lineno if causes else None
