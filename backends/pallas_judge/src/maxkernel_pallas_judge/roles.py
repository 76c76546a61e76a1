"""The tester and profiler roles every Pallas backend's plugin answers the same way, and the knowledge pack's
budget rule; each backend's plugin calls these for its own backend class."""

from __future__ import annotations

#: How many verdicts a run's cache keeps for the profiler role.
KEPT_VERDICTS = 256


def judge_and_keep(task, candidate, ctx, cache: str):
    """The tester role: the sandboxed evaluation cascade on the run's executor; the verdict (and its estimate)
    is kept for the profiler, whether judged here or on another host."""
    evaluation = ctx.judge(task, candidate)
    verdicts = ctx.cache(cache).setdefault("verdicts", {})
    verdicts[candidate.id] = evaluation
    while len(verdicts) > KEPT_VERDICTS:
        verdicts.pop(next(iter(verdicts)))
    return evaluation


def profile_from_verdict(task, candidate, ctx, cache: str):
    """The profiler role: device time where the chip is attached, else the cost model's estimate (labelled one),
    from the candidate's verdict: its evaluation traced the kernel at full size already."""
    evaluation = ctx.cache(cache).get("verdicts", {}).get(candidate.id) or ctx.judge(task, candidate)
    return evaluation.profile or evaluation.estimate


def within_budget(sections: list[str], budget_chars: int) -> str:
    """The knowledge pack's sections in order, each included whole while it fits the budget."""
    out, used = [], 0
    for section in sections:
        if used + len(section) + 2 > budget_chars:
            continue
        out.append(section)
        used += len(section) + 2
    return "\n\n".join(out)
