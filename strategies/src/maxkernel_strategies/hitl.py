"""``hitl``: a person steers. Each plan is shown to approve, edit (in $EDITOR) or reject with feedback;
each candidate is shown as a diff against the previous one with its verdict and profile, to accept,
iterate with an instruction, or stop.

Every decision is written to the run store (``decisions``) before the run
moves on, so a stopped session resumes where it was. Scriptable: answers come
from the terminal, from standard input when it is not a terminal, or from a
file (``[strategy.hitl] answers = "answers.txt"``, one answer per line; an
edit is ``e`` followed by a line of JSON parameters).
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import attrs
import click
from maxkernel_core import Plan, Strategy, hookimpl
from maxkernel_core.errors import ConfigError

from .search import moves_from

PLAN_CHOICES = {"a": "approve", "e": "edit", "r": "reject"}
CANDIDATE_CHOICES = {"a": "accept", "i": "iterate", "s": "stop"}
HELP = {
    "approve": "implement this plan as it is and judge the kernel",
    "edit": "change the plan's parameters before it is implemented (JSON; $EDITOR at a terminal)",
    "reject": "drop this plan and tell the planner what you want instead (e.g. 'smaller blocks', '128 rows')",
    "accept": "end the run with this kernel as the result (if it was verified)",
    "iterate": "give an instruction for the next plan and go on",
    "stop": "end the run now; the best verified kernel so far is the result",
}


class Dialogue:
    """Questions to a person, answered at the terminal, on stdin, or from a file of answers."""

    def __init__(self, answers: list[str] | None = None) -> None:
        self.answers = answers

    def _next(self, prompt: str) -> str:
        if self.answers is not None:
            if not self.answers:
                raise ConfigError("the answers file ran out of answers; add more lines or answer interactively")
            answer = self.answers.pop(0)
            click.echo(f"{prompt} {answer}")
            return answer
        if not sys.stdin.isatty():
            line = sys.stdin.readline()
            if not line:
                raise ConfigError("standard input ended before the session did; give more answers")
            click.echo(f"{prompt} {line.strip()}")
            return line.strip()
        try:
            return click.prompt(prompt, prompt_suffix=" ", show_default=False)
        except click.Abort:  # Ctrl-C or Ctrl-D at the prompt: the run is interrupted, not failed
            raise KeyboardInterrupt from None

    def choose(self, question: str, choices: dict[str, str]) -> str:
        menu = " / ".join(f"[{k}]{v[1:]}" if v.startswith(k) else f"[{k}] {v}" for k, v in choices.items())
        while True:
            answer = self._next(f"{question} {menu} (? for help):").strip().lower()
            if answer in ("?", "h", "help"):
                click.echo("\n".join(f"  {k}  {v}: {HELP[v]}" for k, v in choices.items())
                           + "\n  Ctrl-C  interrupt; everything so far is stored and the run can be resumed")
                continue
            if answer[:1] in choices:
                return choices[answer[:1]]
            click.echo(f"please answer one of {', '.join(choices)} (or ? for help)")

    def text(self, question: str) -> str:
        return self._next(f"{question}:").strip()


def edit_in_editor(data: dict) -> dict:
    """Open the plan as JSON in $EDITOR and read it back."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(data, f, indent=2)
        path = f.name
    try:
        subprocess.run([*os.environ.get("EDITOR", "vi").split(), path], check=True)
        return json.loads(Path(path).read_text())
    finally:
        os.unlink(path)


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

    def run(self, session):
        talk = self.dialogue()
        feedback = session.ctx.feedback
        for d in session.store.decisions(session.run_id):  # resumed: earlier instructions still apply
            if d["kind"] in ("plan:reject", "candidate:iterate") and d["detail"]:
                feedback.append(d["detail"])
        last = session.history[-1].candidate if session.history else None
        while True:
            plan = session.plan(required=False) or self._move_plan(session)
            if plan is None:
                click.echo("The planner has nothing more to propose.")
                return session.finish()
            click.echo(f"\n--- plan {plan.id} ---\n{plan.summary}\nparameters: {json.dumps(plan.parameters)}")
            choice = talk.choose("Plan:", PLAN_CHOICES)
            if choice == "reject":
                why = talk.text("Feedback for the planner")
                session.store.add_decision(session.run_id, "plan:reject", "r", why)
                session.ctx.rejected.append(plan)
                if why:
                    feedback.append(why)
                continue
            if choice == "edit":
                edited = self._edit(talk, plan)
                session.store.add_decision(session.run_id, "plan:edit", "e", json.dumps(edited))
                plan = edited_plan(plan, edited)
                click.echo(f"plan as edited: {plan.summary}")
            else:
                session.store.add_decision(session.run_id, "plan:approve", "a")
            candidate = session.implement(plan)
            verdict = session.evaluate(candidate)
            if not verdict.ok:
                attempt = session.repair(candidate, verdict, session.config.debug_attempts)
                candidate, verdict = attempt.candidate, attempt.evaluation
            self._show(last, candidate, verdict)
            last = candidate
            choice = talk.choose("Candidate:", CANDIDATE_CHOICES)
            if choice == "accept":
                session.store.add_decision(session.run_id, "candidate:accept", "a", candidate.id)
                return session.finish(best_id=candidate.id if verdict.ok else None)
            if choice == "stop":
                session.store.add_decision(session.run_id, "candidate:stop", "s")
                return session.finish()
            instruction = talk.text("Instruction for the next iteration")
            session.store.add_decision(session.run_id, "candidate:iterate", "i", instruction)
            feedback.append(instruction)

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

    def _edit(self, talk: Dialogue, plan) -> dict:
        data = {"summary": plan.summary, "parameters": plan.parameters}
        if talk.answers is not None or not sys.stdin.isatty():
            try:
                return {**data, "parameters": json.loads(talk.text("Parameters as JSON"))}
            except ValueError as exc:
                raise ConfigError(f"an edited plan's parameters must be JSON: {exc}") from exc
        return edit_in_editor(data)

    @staticmethod
    def _show(previous, candidate, verdict) -> None:
        before = previous.code.splitlines() if previous else []
        diff = difflib.unified_diff(before, candidate.code.splitlines(), "previous", candidate.id, lineterm="", n=1)
        click.echo("\n".join(list(diff)[:80]) or "(same code as before)")
        click.echo(f"verdict: {verdict.status.value}: {verdict.reason}")
        if verdict.profile:
            kind = "estimate" if verdict.profile.estimated else "measured"
            click.echo(f"profile ({kind}): " + "; ".join(verdict.profile.diagnosis[:3]))


@hookimpl
def register_strategies(register):
    register(HumanInTheLoop)
