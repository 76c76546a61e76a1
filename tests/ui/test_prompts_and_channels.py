"""The store's question channel (first answer wins) and the hitl channel that waits on it; run --ui without
a plugin that serves a UI."""

from __future__ import annotations

import threading
import time

from maxkernel_core import RunConfig
from maxkernel_core.store import RunStore
from maxkernel_strategies.hitl_channels import Dialogue, SharedChannel

from ..helpers import run_cli
from ..tpu_pallas.conftest import TASKS

CHOICES = {"a": "approve", "e": "edit", "r": "reject"}


def test_a_question_takes_one_answer_and_a_new_question_closes_the_old(tmp_path):
    store = RunStore(tmp_path / "runs.db")
    run_id = store.create_run(RunConfig("t", "hitl", "offline"))
    first = store.ask(run_id, "plan", {"summary": "s"})
    assert [p["id"] for p in store.open_prompts()] == [first]
    assert store.answer_prompt(first, "approve", "", "local") is True
    assert store.answer_prompt(first, "reject", "late", "terminal") is False  # someone else was first
    assert store.prompt(first)["choice"] == "approve" and store.prompt(first)["who"] == "local"
    second, third = store.ask(run_id, "plan", {}), store.ask(run_id, "candidate", {})
    assert store.prompt(second)["state"] == "closed" and store.open_prompts(run_id)[0]["id"] == third
    store.close_prompts(run_id)
    assert store.open_prompts() == [] and store.answer_prompt(third, "stop") is False


def test_shared_channel_takes_the_browsers_answer_while_stdin_is_not_a_terminal(tmp_path, monkeypatch):
    monkeypatch.setattr("sys.stdin", open("/dev/null"))  # noqa: SIM115  (not a tty: only the store answers)
    store = RunStore(tmp_path / "runs.db")
    run_id = store.create_run(RunConfig("t", "hitl", "offline"))

    def browser():
        while not store.open_prompts(run_id):
            time.sleep(0.05)
        store.answer_prompt(store.open_prompts(run_id)[0]["id"], "edit", '{"BLOCK": 64}', "token:ab12cd34")

    threading.Thread(target=browser, daemon=True).start()
    answer = SharedChannel(Dialogue(), store, run_id).decide("plan", "Plan:", CHOICES, {"summary": "s"})
    assert (answer.choice, answer.detail, answer.who) == ("edit", '{"BLOCK": 64}', "token:ab12cd34")
    asked = store.prompt(1)["body"]
    assert asked["choices"] == CHOICES and asked["help"]["edit"].startswith("change the plan's parameters")


def test_shared_channel_with_an_answers_file_records_who_answered(tmp_path):
    store = RunStore(tmp_path / "runs.db")
    run_id = store.create_run(RunConfig("t", "hitl", "offline"))
    channel = SharedChannel(Dialogue(["r", "smaller blocks"]), store, run_id)
    answer = channel.decide("plan", "Plan:", CHOICES, {})
    assert (answer.choice, answer.detail, answer.who) == ("reject", "smaller blocks", "answers file")
    assert store.prompt(1)["state"] == "answered" and store.prompt(1)["who"] == "answers file"


def test_run_ui_without_a_plugin_that_serves_one_is_one_line(tmp_path):
    """serve_ui: with the ui plugin disabled no implementation answers, and run --ui says what to install."""
    result = run_cli("--disable-plugin", "ui", "run", "--task", str(TASKS / "rmsnorm"), "--strategy", "hitl",
                     "--provider", "offline", "--ui", env={"MAXKERNEL_HOME": str(tmp_path)})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "Error: --ui: no installed plugin serves a web UI; install it with pip install 'maxkernel[ui]'"]


def test_a_big_search_graph_is_drawn_compactly_with_every_node_linked():
    from maxkernel_ui.graph import COMPACT_FROM, graph_svg

    nodes = [{"id": f"c{i}", "parent": f"c{(i - 1) // 2}" if i else None, "status": "ok" if i % 3 else "incorrect",
              "label": f"{i} us", "edge": "move"} for i in range(COMPACT_FROM + 50)]
    svg = graph_svg(nodes, {"c0", "c1", "c3"}, href=lambda c: f"/runs/r/candidates/{c}")
    assert "compact" in svg and svg.count('<a class="node"') == len(nodes)
    assert 'href="/runs/r/candidates/c249"' in svg and svg.count("<title>") == len(nodes)
    assert 'class="best-path" d="M' in svg and len(svg) < 200 * len(nodes)  # ~2,000 nodes in a few hundred KB
    small = graph_svg(nodes[:5], {"c0"}, href=lambda c: c)
    assert "compact" not in small and small.count('<g class="node"') == 5
