"""Default planner, implementer and debugger: prompts from templates, answers parsed robustly.

Each role builds its prompt from a template in ``prompts/``, the task description
and the backend's knowledge pack (both from the backend, so nothing here is
TPU-specific), asks ``ctx.complete`` (retried, budgeted, logged), and turns the
reply into a record. A reply without usable code is an error with a reason,
never an empty candidate.
"""

from __future__ import annotations

import json
from importlib import resources
from string import Template

from maxkernel_core import Candidate, LLMMessage, LLMRequest, Plan, Provenance, hookimpl

from maxkernel_core.errors import UnusableReplies
from maxkernel_core.speed import phrase

from .codeblocks import NoUsableCode, extract_json, extract_module

KNOWLEDGE_BUDGET_CHARS = 12000
HISTORY_ITEMS = 6
PLAN_KEYS = ("tiling", "memory", "grid", "pipelining", "fusion")
REPLY_AGAIN = ("Your reply could not be used: {reason}. Answer again with the whole module in one ```python "
               "block (it must define computation(), or class ModelNew for a KernelBench-style task).")


def template(name: str) -> Template:
    return Template(resources.files(__package__).joinpath("prompts", f"{name}.md").read_text())


CACHE = "maxkernel-agents"


def _shared(task, ctx) -> dict[str, str]:
    """The task description and the backend's knowledge, computed once per run."""
    cache = ctx.cache(CACHE)
    if "task_prompt" not in cache:
        cache["task_prompt"] = ctx.backend.task_prompt(task)
        cache["knowledge"] = ctx.backend.knowledge(task, target=ctx.config.target, budget_chars=KNOWLEDGE_BUDGET_CHARS)
    return {"task": cache["task_prompt"], "knowledge": cache["knowledge"], "task_id": task.id}


def _ask(ctx, role: str, prompt: str, shared: dict[str, str]):
    system = template("system").safe_substitute(shared)
    request = LLMRequest((LLMMessage("system", system), LLMMessage("user", prompt)), role=role)
    return ctx.complete(request)


def _ask_for_code(ctx, role: str, prompt: str, shared: dict[str, str]):
    """(reply, module): a reply without usable code is answered with its parse error and asked again, up to
    ``ctx.reply_retries`` times (each a model call, within the run's LLM budget), and counted."""
    messages = [LLMMessage("system", template("system").safe_substitute(shared)), LLMMessage("user", prompt)]
    tries = ctx.reply_retries + 1
    for _ in range(tries):
        reply = ctx.complete(LLMRequest(tuple(messages), role=role))
        try:
            return reply, extract_module(reply.text)
        except NoUsableCode as exc:
            ctx.note_unusable_reply()
            reason = str(exc)
            messages += [LLMMessage("assistant", reply.text), LLMMessage("user", REPLY_AGAIN.format(reason=reason))]
    llm = ctx.llm_for(role)
    raise UnusableReplies(f"the {role} role's model ({llm.provider.name}:{reply.model or llm.model or '?'}) gave no "
                          f"usable code in {tries} replies (last: {reason}); `maxkernel logs --role {role}` "
                          "shows them; try a stronger model for this role ([llm.roles.{role}]) or raise "
                          "llm.reply_retries")


def _verdict_line(attempt) -> str:
    ev = attempt.evaluation
    speed = f", {phrase(ev.profile)}" if ev.profile and ev.profile.seconds else ""
    params = json.dumps(attempt.candidate.parameters) if attempt.candidate.parameters else "{}"
    return f"- {attempt.candidate.id} {params}: {ev.status.value}{speed}. {ev.reason[:300]}"


def _history(history) -> str:
    if not history:
        return "Nothing yet: this is the first kernel."
    return "\n".join(_verdict_line(a) for a in list(history)[-HISTORY_ITEMS:])


def _profile_text(profile) -> str:
    if profile is None:
        return "No profile yet."
    label = "ESTIMATE (static cost model)" if profile.estimated else f"MEASURED on {profile.chip or 'the device'}"
    bound = f", bound by {profile.bound}" if profile.bound else ""
    return f"{label}: {phrase(profile)}{bound}\n" + "\n".join(f"- {line}" for line in profile.diagnosis)


@hookimpl(trylast=True)
def agent_plan(task, history, ctx) -> Plan | None:
    shared = _shared(task, ctx)
    prompt = template("plan").safe_substitute(shared, history=_history(history), profile=_profile_text(ctx.profile))
    if ctx.feedback:  # a person's instructions (human-in-the-loop), newest last
        prompt += "\n\n# Instructions from the engineer (follow them)\n\n" + "\n".join(
            f"- {line}" for line in ctx.feedback)
    reply = _ask(ctx, "plan", prompt, shared)
    data = extract_json(reply.text) or {}
    prose = reply.text.split("```")[0].strip() or reply.text.strip()[:2000]
    decisions = {k: str(data[k]) for k in PLAN_KEYS if k in data}
    params = data.get("parameters") if isinstance(data.get("parameters"), dict) else {}
    return Plan(task.id, prose, decisions, params, author=f"{ctx.llm_for('plan').provider.name}:{reply.model}")


@hookimpl(trylast=True)
def agent_implement(task, plan, ctx) -> Candidate | None:
    shared = _shared(task, ctx)
    plan_text = plan.summary + ("\n\n" + "\n".join(f"- {k}: {v}" for k, v in plan.decisions.items())
                                if plan.decisions else "")
    prompt = template("implement").safe_substitute(shared, plan=plan_text, parameters=json.dumps(plan.parameters))
    reply, code = _ask_for_code(ctx, "implement", prompt, shared)
    return Candidate(task.id, code, dict(plan.parameters), provenance=Provenance(
        role="implement", provider=ctx.llm_for("implement").provider.name, model=reply.model,
        strategy=ctx.config.strategy, plan_id=plan.id))


def _checks_text(evaluation) -> str:
    lines = []
    for check in evaluation.checks:
        mark = "pass" if check.passed else "FAIL"
        lines.append(f"- {check.name}: {mark} {check.message[:600]}")
    estimate = evaluation.estimate
    if estimate is not None and estimate.diagnosis:
        lines.append("Cost model (estimate):")
        lines.extend(f"- {line}" for line in estimate.diagnosis)
    return "\n".join(lines)


@hookimpl(trylast=True)
def agent_debug(task, candidate, evaluation, attempts, ctx) -> Candidate | None:
    shared = _shared(task, ctx)
    earlier = ""
    previous = [a for a in attempts if a.candidate.id != candidate.id]
    if previous:
        earlier = "# Earlier fixes that did not work\n\n" + "\n".join(_verdict_line(a) for a in previous[-HISTORY_ITEMS:])
    prompt = template("debug").safe_substitute(
        shared, code=candidate.code, status=evaluation.status.value, reason=evaluation.reason,
        checks=_checks_text(evaluation), earlier=earlier)
    reply, code = _ask_for_code(ctx, "debug", prompt, shared)
    return Candidate(task.id, code, dict(candidate.parameters), parent_id=candidate.id, provenance=Provenance(
        role="debug", provider=ctx.llm_for("debug").provider.name, model=reply.model,
        strategy=ctx.config.strategy, transformation=f"fix {evaluation.status.value}"))
