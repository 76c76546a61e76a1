"""``hitl``: a person steers. Each plan is shown to approve, edit (in $EDITOR) or reject with feedback;
each candidate is shown as a diff against the previous one with its verdict and profile, to accept,
iterate with an instruction, or stop.

Every decision is written to the run store (``decisions``, with who gave it) before the run moves on, so a
stopped session resumes where it was. Scriptable: answers come from the terminal, from standard input when it
is not a terminal, or from a file (``[strategy.hitl] answers = "answers.txt"``, one answer per line; an edit
is ``e`` followed by a line of JSON parameters). With ``maxkernel run --ui`` each question is also put in the
store, where a browser (``maxkernel ui``) can answer it (hitl_channels.py).
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path

import attrs
import click
from maxkernel_core import Plan, Strategy, hookimpl
from maxkernel_core.errors import ConfigError
from maxkernel_core.speed import phrase

from .hitl_channels import Dialogue, SharedChannel, TerminalChannel
from .search import moves_from

PLAN_CHOICES = {"a": "approve", "e": "edit", "r": "reject"}
CANDIDATE_CHOICES = {"a": "accept", "i": "iterate", "s": "stop"}


def edited_plan(plan: Plan, edited: dict) -> Plan:
    """The plan after a person's edit; when they changed parameters but not the prose, the prose says so
    (the planner's text names its own values, which no longer hold)."""
    parameters = edited.get("parameters", plan.parameters)
    summary = edited.get("summary", plan.summary)
    if parameters != plan.parameters and summary == plan.summary:
        changed = ", ".join(f"{k} {plan.parameters.get(k, '-')} -> {v}" for k, v in parameters.items()
                            if plan.parameters.get(k) != v)
        summary = (f"Edited by hand: {changed}. Parameters {json.dumps(parameters)}. (The planner had proposed "
                   f"{json.dumps(plan.parameters)}; its notes on that point no longer apply.)")
    return attrs.evolve(plan, summary=summary, parameters=parameters)


class HumanInTheLoop(Strategy):
    name = "hitl"
    description = "a person approves, edits or rejects each plan and accepts or redirects each candidate"
    interactive = True

    def dialogue(self) -> Dialogue:
        path = self.options.get("answers") or os.environ.get("MAXKERNEL_HITL_ANSWERS")
        if path:
            try:
                return Dialogue([line.rstrip("\n") for line in Path(path).read_text().splitlines()])
            except OSError as exc:
                raise ConfigError(f"strategy.hitl.answers: cannot read {path}: {exc.strerror}") from exc
        return Dialogue()

    def channel(self, session) -> TerminalChannel:
        if getattr(session.settings.run, "ui", False):
            return SharedChannel(self.dialogue(), session.store, session.run_id)
        return TerminalChannel(self.dialogue())

    def run(self, session):
        channel = self.channel(session)
        for d in session.store.decisions(session.run_id):  # resumed: earlier instructions still apply
            if d["kind"] in ("plan:reject", "candidate:iterate") and d["detail"]:
                session.ctx.feedback.append(d["detail"])
        try:
            return self._steer(session, channel)
        finally:
            channel.close()  # a question left open (interrupted) is closed: a browser cannot answer it any more

    def _steer(self, session, channel: TerminalChannel):
        store, run_id, feedback = session.store, session.run_id, session.ctx.feedback
        last = session.history[-1].candidate if session.history else None
        while True:
            plan = session.plan(required=False) or self._move_plan(session)
            if plan is None:
                click.echo("The planner has nothing more to propose.")
                return session.finish()
            click.echo(f"\n--- plan {plan.id} ---\n{plan.summary}\nparameters: {json.dumps(plan.parameters)}")
            answer = channel.decide("plan", "Plan:", PLAN_CHOICES,
                                    {"plan": plan.id, "summary": plan.summary, "parameters": plan.parameters})
            if answer.choice == "reject":
                store.add_decision(run_id, "plan:reject", "r", answer.detail, who=answer.who)
                session.ctx.rejected.append(plan)
                if answer.detail:
                    feedback.append(answer.detail)
                continue
            if answer.choice == "edit":
                edited = {"summary": plan.summary, "parameters": _parameters(answer.detail)}
                store.add_decision(run_id, "plan:edit", "e", json.dumps(edited), who=answer.who)
                plan = edited_plan(plan, edited)
                click.echo(f"plan as edited: {plan.summary}")
            else:
                store.add_decision(run_id, "plan:approve", "a", who=answer.who)
            candidate, verdict = self._judge(session, plan)
            shown = self._show(last, candidate, verdict)
            last = candidate
            answer = channel.decide("candidate", "Candidate:", CANDIDATE_CHOICES, shown)
            if answer.choice == "accept":
                store.add_decision(run_id, "candidate:accept", "a", candidate.id, who=answer.who)
                return session.finish(best_id=candidate.id if verdict.ok else None)
            if answer.choice == "stop":
                store.add_decision(run_id, "candidate:stop", "s", who=answer.who)
                return session.finish()
            store.add_decision(run_id, "candidate:iterate", "i", answer.detail, who=answer.who)
            feedback.append(answer.detail)

    @staticmethod
    def _judge(session, plan):
        candidate = session.implement(plan)
        verdict = session.evaluate(candidate)
        if not verdict.ok:
            attempt = session.repair(candidate, verdict, session.config.debug_attempts)
            candidate, verdict = attempt.candidate, attempt.evaluation
        return candidate, verdict

    @staticmethod
    def _move_plan(session) -> Plan | None:
        """When the planner has nothing more to propose: the best kernel's next move through its space, as a plan
        to approve, edit or reject like any other."""
        best = session.best()
        if best is None:
            return None
        moves, _ = moves_from(session, best.candidate)
        tried = {json.dumps(a.candidate.parameters, sort_keys=True) for a in session.history}
        for move in moves:
            if json.dumps({**best.candidate.parameters, **move.parameters}, sort_keys=True) not in tried:
                summary = f"Move {best.candidate.id}: {move.label}" + (f" ({move.note})" if move.note else "")
                return Plan(session.task.id, summary, {"move": move.label}, dict(move.parameters), author="hitl")
        return None

    @staticmethod
    def _show(previous, candidate, verdict) -> dict:
        """Print the candidate as a diff against the previous one with its verdict; the same, as a prompt's body."""
        before = previous.code.splitlines() if previous else []
        diff = "\n".join(list(difflib.unified_diff(before, candidate.code.splitlines(), "previous", candidate.id,
                                                   lineterm="", n=1))[:80]) or "(same code as before)"
        click.echo(diff)
        click.echo(f"verdict: {verdict.status.value}: {verdict.reason}")
        profile = ""
        if verdict.profile:
            profile = f"speed: {phrase(verdict.profile)}; " + "; ".join(verdict.profile.diagnosis[:3])
            click.echo(profile)
        return {"candidate": candidate.id, "diff": diff, "verdict": verdict.status.value, "reason": verdict.reason,
                "profile": profile}


def _parameters(detail: str) -> dict:
    """An edit's parameters: a JSON object, from the terminal, the answers file or the browser."""
    try:
        parameters = json.loads(detail)
    except ValueError as exc:
        raise ConfigError(f"an edited plan's parameters must be JSON: {exc}") from exc
    if not isinstance(parameters, dict):
        raise ConfigError(f"an edited plan's parameters must be a JSON object, not {detail!r}")
    return parameters


@hookimpl
def register_strategies(register):
    register(HumanInTheLoop)
