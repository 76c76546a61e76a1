"""Identical code is judged once: what "identical" means, and the key a verdict is kept under.

A candidate's program is its code in canonical form (:func:`canonical_code`): lines
without trailing blanks, no blank lines around it, one final newline. The session
canonicalises every candidate before it is stored and judged, so the program the
judge runs *is* the canonical text, and two candidates with the same canonical text
are the same program (nothing the canonical form drops can be seen by the code).

A verdict is reused only under the same judge fingerprint (the backend's
:meth:`~maxkernel_core.interfaces.Backend.judge_fingerprint`: task files, target,
versions, settings, cost-model parameters) and only when it says something about
the code rather than the machine (a timeout or a crash is judged again).
"""

from __future__ import annotations

import hashlib

from .records import EvalStatus

#: Verdicts that follow from the code and the judge alone: safe to reuse for identical code.
REUSABLE = frozenset({EvalStatus.OK, EvalStatus.REJECTED, EvalStatus.COMPILE_ERROR, EvalStatus.INCORRECT,
                      EvalStatus.UNVERIFIED})


def canonical_code(code: str) -> str:
    """``code`` as the judge runs it: trailing blanks and surrounding blank lines dropped, one final newline."""
    return "\n".join(line.rstrip() for line in code.strip("\n").splitlines()).strip("\n") + "\n"


def code_hash(code: str) -> str:
    """The canonical program's sha256 (hex)."""
    return hashlib.sha256(canonical_code(code).encode()).hexdigest()


def verdict_key(fingerprint: str, code: str) -> str:
    """The cache key of a verdict on ``code`` under a judge with ``fingerprint``."""
    judge = hashlib.sha256(fingerprint.encode()).hexdigest()
    return f"{judge[:32]}:{code_hash(code)}"
