"""Where a hitl run's questions are answered: the terminal (or stdin, or a file of answers), and with
``maxkernel run --ui`` the run store too, so that a browser (``maxkernel ui``) can answer them.

Every question is one :meth:`Channel.decide`: a choice, and for some choices a detail (the feedback of a
rejection, the instruction of an iteration, the parameters of an edit as JSON). The answer says who gave it,
which the decision's audit line keeps.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import attrs
import click
from maxkernel_core.errors import ConfigError

HELP = {
    "approve": "implement this plan as it is and judge the kernel",
    "edit": "change the plan's parameters before it is implemented (JSON; $EDITOR at a terminal)",
    "reject": "drop this plan and tell the planner what you want instead (e.g. 'smaller blocks', '128 rows')",
    "accept": "end the run with this kernel as the result (if it was verified)",
    "iterate": "give an instruction for the next plan and go on",
    "stop": "end the run now; the best verified kernel so far is the result",
}
#: what a choice asks for next, as the terminal asks it
DETAIL_QUESTIONS = {"reject": "Feedback for the planner", "iterate": "Instruction for the next iteration",
                    "edit": "Parameters as JSON"}
#: seconds between looks at the store for an answer from the browser
POLL_S = 0.2


@attrs.frozen
class Answer:
    choice: str
    detail: str = ""
    who: str = "terminal"


class Dialogue:
    """Questions to a person, answered at the terminal, on stdin, or from a file of answers."""

    def __init__(self, answers: list[str] | None = None) -> None:
        self.answers = answers

    @property
    def scripted(self) -> bool:
        return self.answers is not None or not sys.stdin.isatty()

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

    @staticmethod
    def menu(question: str, choices: dict[str, str]) -> str:
        return question + " " + " / ".join(f"[{k}]{v[1:]}" if v.startswith(k) else f"[{k}] {v}"
                                           for k, v in choices.items()) + " (? for help):"

    @staticmethod
    def parse(answer: str, choices: dict[str, str]) -> str | None:
        """The choice a typed answer names; prints the help (and returns None) for ``?``."""
        answer = answer.strip().lower()
        if answer in ("?", "h", "help"):
            click.echo("\n".join(f"  {k}  {v}: {HELP[v]}" for k, v in choices.items())
                       + "\n  Ctrl-C  interrupt; everything so far is stored and the run can be resumed")
            return None
        if answer[:1] in choices:
            return choices[answer[:1]]
        click.echo(f"please answer one of {', '.join(choices)} (or ? for help)")
        return None

    def choose(self, question: str, choices: dict[str, str]) -> str:
        while True:
            choice = self.parse(self._next(self.menu(question, choices)), choices)
            if choice:
                return choice

    def text(self, question: str) -> str:
        return self._next(f"{question}:").strip()

    def detail(self, choice: str, body: dict) -> str:
        """The detail a choice needs: feedback, an instruction, or (edit) the parameters as JSON."""
        if choice not in DETAIL_QUESTIONS:
            return ""
        if choice == "edit" and not self.scripted:
            return json.dumps(edit_in_editor({"summary": body.get("summary", ""),
                                              "parameters": body.get("parameters", {})}))
        return self.text(DETAIL_QUESTIONS[choice])


def edit_in_editor(data: dict) -> dict:
    """Open the plan as JSON in $EDITOR and read its parameters back."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(data, f, indent=2)
        path = f.name
    try:
        subprocess.run([*os.environ.get("EDITOR", "vi").split(), path], check=True)
        return json.loads(Path(path).read_text()).get("parameters", {})
    finally:
        os.unlink(path)


class TerminalChannel:
    """Questions answered here only (the terminal, stdin, or the answers file)."""

    def __init__(self, dialogue: Dialogue) -> None:
        self.dialogue = dialogue

    def who(self) -> str:
        return "answers file" if self.dialogue.answers is not None else "terminal"

    def decide(self, kind: str, question: str, choices: dict[str, str], body: dict) -> Answer:
        choice = self.dialogue.choose(question, choices)
        return Answer(choice, self.dialogue.detail(choice, body), self.who())

    def close(self) -> None:
        pass


class SharedChannel(TerminalChannel):
    """Questions put in the run store as well, answered by whichever comes first: a browser over the store, or
    this terminal (a tty is watched beside the store; an answers file is read as usual). With stdin neither a
    tty nor a file of answers, only the browser answers."""

    def __init__(self, dialogue: Dialogue, store, run_id: str) -> None:
        super().__init__(dialogue)
        self.store, self.run_id = store, run_id

    def decide(self, kind: str, question: str, choices: dict[str, str], body: dict) -> Answer:
        prompt_id = self.store.ask(self.run_id, kind, {**body, "question": question, "choices": choices,
                                                       "help": {v: HELP[v] for v in choices.values()}})
        if self.dialogue.answers is not None:  # scripted: the file answers, and the prompt shows what it said
            answer = super().decide(kind, question, choices, body)
            return self._settle(prompt_id, answer)
        tty = sys.stdin.isatty()
        click.echo(self.dialogue.menu(question, choices) + (" (or answer in the browser)" if tty else
                                                            " (answer in the browser)"))
        while True:
            stored = self.store.prompt(prompt_id)
            if stored["state"] != "open":
                click.echo(f"answered in the browser by {stored['who']}: {stored['choice']}"
                           + (f": {stored['detail']}" if stored["detail"] else ""))
                return Answer(stored["choice"], stored["detail"] or "", stored["who"] or "browser")
            if not tty:
                time.sleep(POLL_S)
                continue
            ready, _, _ = select.select([sys.stdin], [], [], POLL_S)
            if ready:
                choice = self.dialogue.parse(sys.stdin.readline(), choices)
                if choice:
                    return self._settle(prompt_id, Answer(choice, self.dialogue.detail(choice, body), "terminal"))

    def _settle(self, prompt_id: int, answer: Answer) -> Answer:
        """Record a terminal answer on the prompt, unless the browser answered first (then its answer holds)."""
        if self.store.answer_prompt(prompt_id, answer.choice, answer.detail, answer.who):
            return answer
        stored = self.store.prompt(prompt_id)
        click.echo(f"the browser answered first ({stored['who']}): {stored['choice']}")
        return Answer(stored["choice"], stored["detail"] or "", stored["who"] or "browser")

    def close(self) -> None:
        self.store.close_prompts(self.run_id)
