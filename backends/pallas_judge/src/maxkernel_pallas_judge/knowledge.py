"""The knowledge pack's budget rule every Pallas backend's pack follows."""

from __future__ import annotations


def within_budget(sections: list[str], budget_chars: int) -> str:
    """The knowledge pack's sections in order, each included whole while it fits the budget."""
    out, used = [], 0
    for section in sections:
        if used + len(section) + 2 > budget_chars:
            continue
        out.append(section)
        used += len(section) + 2
    return "\n\n".join(out)
