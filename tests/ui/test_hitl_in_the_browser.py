"""A hitl run steered from a browser and from its terminal: started with --ui in a real terminal (pexpect),
its plan approved in chromium, the candidate appearing live, stopped with Ctrl-C, resumed at the terminal."""

from __future__ import annotations

import signal
import sys

import pytest
from maxkernel_core.store import RunStore

from ..browser import shot
from ..tpu_pallas.conftest import TASKS

pytestmark = pytest.mark.slow
pytest.importorskip("maxkernel_ui", reason="pip install -e ui/ (the ui extra)")


def _spawn(pexpect, tmp_path, *extra):
    return pexpect.spawn(sys.executable, ["-m", "maxkernel_core", "run", "--task", str(TASKS / "rmsnorm"),
                                          "--strategy", "hitl", "--provider", "offline", "--out", str(tmp_path / "out"),
                                          *extra],
                         env={"MAXKERNEL_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin", "TERM": "dumb",
                              "PYTHONPATH": ":".join(sys.path), "TMPDIR": str(tmp_path)},
                         encoding="utf-8", timeout=300, preexec_fn=_interruptible)


def _interruptible():
    """^C at its terminal stops the run only where SIGINT is neither ignored nor blocked: a disposition and a
    signal mask are inherited, and this test's runner may carry either from an earlier test's libraries."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def test_approved_in_the_browser_watched_live_stopped_and_resumed_at_the_terminal(page, tmp_path):
    pexpect = pytest.importorskip("pexpect")
    child = _spawn(pexpect, tmp_path, "--ui")
    child.expect(r"Web UI: (http://127\.0\.0\.1:\d+/)")
    url = child.match.group(1)
    child.expect(r"Plan: \[a\]pprove .*\(or answer in the browser\)")
    child.sendline("x")  # the terminal still answers while the browser may: not an answer, asked again
    child.expect("please answer one of a, e, r")
    child.sendline("help")
    child.expect("r  reject: drop this plan")

    page.goto(url)
    page.click(".waiting a")
    page.wait_for_selector("#prompt")
    assert "BLOCK_ROWS" in page.locator("#prompt").inner_text()
    shot(page, "ui-hitl-plan")
    page.check("input[value=approve]")
    page.click("#answer")
    child.expect("answered in the browser by local: approve")
    run_id = page.url.rstrip("/").split("/")[-1]
    page.evaluate("window.sameDocument = true")  # gone if anything below reloaded the page
    page.wait_for_selector("table.cands tbody tr[id^=cand-]", timeout=240_000)  # the verdict arrives live
    page.wait_for_selector("#prompt h2:has-text('candidate')", timeout=60_000)  # and the next question
    assert page.evaluate("window.sameDocument") is True
    shot(page, "ui-hitl-candidate")
    assert page.locator("table.decisions").inner_text().count("local") == 1

    child.expect(r"Candidate: \[a\]ccept")
    child.sendintr()  # stop it at its terminal: interrupted, resumable
    child.expect(rf"Interrupted\. run {run_id} is marked interrupted")
    child.expect(f"--resume {run_id}")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130
    store = RunStore(tmp_path / "home" / "runs.db")
    assert store.get_run(run_id).status == "interrupted" and store.open_prompts(run_id) == []

    child = _spawn(pexpect, tmp_path, "--resume", run_id[4:9])  # from the terminal, by a prefix of the id
    child.expect(r"Plan: \[a\]pprove")
    child.sendline("a")
    child.expect(r"Candidate: \[a\]ccept")
    child.sendline("s")
    child.expect("Best kernel")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    decided = [(d["kind"], d["who"]) for d in store.decisions(run_id)]
    assert decided == [("plan:approve", "local"), ("plan:approve", "terminal"), ("candidate:stop", "terminal")]
    assert store.get_run(run_id).status == "ok" and len(store.list_runs()) == 1
