"""The web UI over stores written through the store's API: what a person sees in a real browser, and what
the server refuses (a missing token, a foreign Host, a POST without the page's CSRF token)."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import httpx
import pytest
from maxkernel_core import RunConfig
from maxkernel_core.store import RunStore

from ..browser import shot
from ..helpers import run_cli
from .stores import xss_run

maxkernel_ui = pytest.importorskip("maxkernel_ui", reason="pip install -e ui/ (the ui extra)")
from maxkernel_ui.server import in_background  # noqa: E402


@pytest.fixture
def xss(tmp_path):
    store, run_id = xss_run(tmp_path)
    with in_background(str(tmp_path)) as url:
        yield url, store, run_id


INERT = "() => [window.pwned, document.querySelectorAll('main script, main img').length]"


def test_store_text_renders_as_text_everywhere(page, xss):
    url, store, run_id = xss
    reply = httpx.get(url)
    assert "script-src 'self'" in reply.headers["content-security-policy"]
    page.goto(url)
    assert page.locator(".waiting").inner_text().count(run_id) == 1  # the open question is listed
    page.click(f"a[href='/runs/{run_id}']")
    page.wait_for_selector("#prompt")
    assert "<script>window.pwned = 1</script>" in page.locator("#prompt .summary").inner_text()
    assert "<script>" in page.locator("table.decisions").inner_text()
    assert page.evaluate(INERT) == [None, 0]
    page.click("g.node a >> nth=0")  # the graph links to the candidate
    page.wait_for_selector("#code")
    assert "<script>window.pwned = 1</script>" in page.locator("#code").inner_text()
    page.click("details.call summary")
    assert "```python\n" + "</pre><script>" in page.locator("pre.reply").inner_text()
    assert "<img src=x" in page.locator("table.checks").inner_text()
    assert page.evaluate(INERT) == [None, 0] and page.dialogs == []


def test_a_post_without_the_pages_csrf_token_or_from_another_origin_is_refused(xss):
    url, store, run_id = xss
    (prompt,) = store.open_prompts(run_id)
    csrf = re.search(r'name="csrf" value="([^"]+)"', httpx.get(f"{url}runs/{run_id}").text).group(1)
    target = f"{url}prompts/{prompt['id']}"
    assert httpx.post(target, data={"choice": "approve"}).status_code == 403
    assert httpx.post(target, data={"choice": "approve", "csrf": csrf},
                      headers={"Origin": "http://evil.example"}).status_code == 403
    assert httpx.get(url, headers={"Host": "evil.example"}).status_code == 400  # DNS rebinding
    assert httpx.post(target, data={"choice": "launch", "csrf": csrf}).status_code == 400
    bad_edit = httpx.post(target, data={"choice": "edit", "parameters": "[1]", "csrf": csrf})
    assert bad_edit.status_code == 400 and "JSON object" in bad_edit.text
    assert store.prompt(prompt["id"])["state"] == "open"  # nothing above answered it
    assert httpx.post(target, data={"choice": "reject", "feedback": "smaller", "csrf": csrf}).status_code == 303
    assert httpx.post(target, data={"choice": "approve", "csrf": csrf}).status_code == 409  # answered once
    answered = store.prompt(prompt["id"])
    assert (answered["choice"], answered["detail"], answered["who"]) == ("reject", "smaller", "local")
    assert "question 1 (plan): reject \"smaller\" by local" in (store.path.parent / "ui-audit.log").read_text()
    # the only routes that change anything answer questions: no other method is served
    assert httpx.post(f"{url}runs/{run_id}", data={"csrf": csrf}).status_code == 405


def test_a_non_loopback_bind_needs_its_token(tmp_path):
    refused = run_cli("ui", "--host", "0.0.0.0", "--no-token", env={"MAXKERNEL_HOME": str(tmp_path)})
    assert refused.returncode == 2 and "refusing to serve 0.0.0.0 without a token" in refused.stderr
    RunStore(tmp_path / "runs.db").create_run(RunConfig("t", "auto", "offline"))
    proc = subprocess.Popen([sys.executable, "-m", "maxkernel_core", "ui", "--host", "0.0.0.0", "--port", "0"],
                            env={**__import__("os").environ, "MAXKERNEL_HOME": str(tmp_path)},
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        url = re.search(r"(http://\S+)", line).group(1)
        base, token = url.split("?token=")
        assert len(token) >= 20
        assert httpx.get(base).status_code == 401
        assert httpx.get(base, headers={"Authorization": "Bearer wrong"}).status_code == 401
        with httpx.Client() as client:
            first = client.get(url)  # the token in the URL becomes a cookie and leaves the address bar
            assert first.status_code == 303 and "token" not in first.headers["location"]
            assert "HttpOnly" in first.headers["set-cookie"]
            page = client.get(base)
            assert page.status_code == 200 and "token:" in page.text  # decisions will be recorded as the token's
        stale = httpx.get(url, cookies={"maxkernel_ui_token": "from-another-server"})
        assert stale.status_code == 303  # a fresh token in the URL wins over a stale cookie
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_bench_figures_link_tasks_and_compare_diffs_two_candidates(page, tmp_path):
    store, run_id = xss_run(tmp_path)
    bench = store.create_bench({"suite": "demo"})
    speedups = [1.4, 0.7, 2.5, 1.1, 0.9, 1.0, 3.1, 1.2, 0.5]
    for i, speedup in enumerate([*speedups, None]):
        store.set_bench_task(bench, f"{i + 1}p_task", "correct" if speedup else "failed",
                             run_id=run_id if i == 0 else None,
                             result={"speedup": speedup, "speedup_kind": "estimated", "correct": bool(speedup),
                                     "reason": "" if speedup else "no kernel", "roofline_fraction": 0.1 * (i + 1),
                                     "arithmetic_intensity": 10.0 ** (i % 4)})
    with in_background(str(tmp_path)) as url:
        page.goto(f"{url}bench/{bench}")
        bars = page.locator("svg.bench-chart[data-kind=estimated] g.bar")
        assert bars.count() == len(speedups)  # a task without a correct kernel is not drawn as a speedup
        hist = page.locator("svg.bench-hist[data-kind=estimated] rect title").all_text_contents()
        assert sorted(", ".join(hist).replace("none", "").replace(",", " ").split()) == sorted(
            f"{i + 1}p_task" for i in range(len(speedups)))  # every correct task in exactly one bin
        assert page.locator("svg.bench-roofline g.point").count() == len(speedups)
        shot(page, "ui-bench")
        page.click("th:has-text('speedup')")  # sortable
        assert page.locator("table.tasks tbody tr").first.get_attribute("id") == "task-10p_task"
        page.click("svg.bench-roofline g.point[data-task='1p_task'] a")
        page.wait_for_url(f"**/runs/{run_id}")
        page.go_back()
        page.click("g.bar[data-task='1p_task'] a")
        page.wait_for_url(f"**/runs/{run_id}")
        page.goto(f"{url}compare?a={run_id}/cand-xssroot00001&b={run_id}/cand-xsschild0001")
        diff = page.locator("pre.diff").inner_text()
        assert "-BLOCK = 8" in diff and "+BLOCK = 16" in diff
        assert page.locator("table.compare").inner_text().count("xss_task") == 2
        shot(page, "ui-compare")


def test_several_hitl_runs_wait_at_once_and_each_answer_goes_to_its_own(tmp_path):
    store = RunStore(tmp_path / "runs.db")
    runs = [store.create_run(RunConfig(f"task{i}", "hitl", "offline")) for i in range(2)]
    asked = [store.ask(r, "plan", {"summary": f"plan of {r}", "parameters": {}, "question": "Plan:",
                                   "choices": {"a": "approve", "r": "reject"}, "help": {"approve": "", "reject": ""}})
             for r in runs]
    with in_background(str(tmp_path)) as url:
        waiting = httpx.get(url).text
        assert all(f'href="/runs/{r}#prompt"' in waiting for r in runs)
        page = httpx.get(f"{url}runs/{runs[1]}").text
        csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
        assert f'action="/prompts/{asked[1]}"' in page and f"plan of {runs[1]}" in page
        assert httpx.post(f"{url}prompts/{asked[1]}", data={"choice": "approve", "csrf": csrf}).status_code == 303
        assert [p["run_id"] for p in store.open_prompts()] == [runs[0]]  # the other run still waits
        assert f'href="/runs/{runs[1]}#prompt"' not in httpx.get(url).text
