"""The run and bench reports as a person sees them: opened in headless chromium and checked element by element."""

from __future__ import annotations

import random
import types

from maxkernel_core import Candidate, EvalStatus, Evaluation, RunConfig
from maxkernel_core.bench.metrics import TaskResult, suite_metrics
from maxkernel_core.bench.report import html_report
from maxkernel_core.bench.runner import BenchConfig, BenchResult
from maxkernel_core.interfaces import LLMMessage, LLMRequest, LLMResponse
from maxkernel_core.records import Attempt, Profile, Provenance
from maxkernel_core.run import write_outputs
from maxkernel_core.session import RunResult
from maxkernel_core.store import RunStore

LONG = ("the output differs from the reference at 1,024 of 65,536 elements; the first is at row 17 column 3 where "
        "the kernel wrote 0.5 and the reference has 0.75, which is what a block that skips the last partial tile "
        "of the reduction would produce <script>alert(1)</script> when the grid rounds down instead of up")
XSS_CODE = 'BLOCK_M = 512\n"""</pre><script>window.pwned = 1</script>"""\ndef computation(x):\n    return x\n'


def _code(block: int) -> str:
    return f"BLOCK_M = {block}\n\ndef computation(x):\n    return x\n"


def _profile(cid: str, us: float) -> Profile:
    return Profile(cid, "cost_model", True, us * 1e-6, 1500e-6, reference_note="XLA runs at default precision.")


def _write_run(tmp_path):
    """A run with a root, a failed child (compile error) with its own fix, and a faster child that wins."""
    store = RunStore(tmp_path / "runs.db")
    run_id = store.create_run(RunConfig("demo_task", "graph", "litellm", target="v6e"))
    made = Provenance(role="implement", provider="litellm", model="local-coder")
    root = Candidate("demo_task", _code(256), {"BLOCK_M": 256}, provenance=made, id="cand-root00000001")
    broken = Candidate("demo_task", _code(4096), {"BLOCK_M": 4096}, parent_id=root.id, id="cand-broken000001",
                       provenance=Provenance(transformation="quadruple BLOCK_M"))
    fixed = Candidate("demo_task", _code(2048), {"BLOCK_M": 2048}, parent_id=broken.id, id="cand-fixed0000001",
                      provenance=Provenance(role="debug", transformation="fix compile_error"))
    best = Candidate("demo_task", XSS_CODE, {"BLOCK_M": 512}, parent_id=root.id, id="cand-best00000001",
                     provenance=Provenance(transformation="double BLOCK_M"))
    verdicts = [Evaluation(root.id, EvalStatus.OK, "4 input sets match", profile=_profile(root.id, 1300)),
                Evaluation(broken.id, EvalStatus.COMPILE_ERROR, "VMEM overflow: 176 MiB of blocks"),
                Evaluation(fixed.id, EvalStatus.INCORRECT, LONG),
                Evaluation(best.id, EvalStatus.OK, "4 input sets match", profile=_profile(best.id, 1000))]
    for cand, verdict in zip((root, broken, fixed, best), verdicts, strict=True):
        store.add_candidate(run_id, cand)
        store.add_evaluation(run_id, verdict)
    request = LLMRequest((LLMMessage("user", "write it"),), model="local-coder", role="implement")
    store.add_llm_call(run_id, provider="litellm", request=request,
                       response=LLMResponse("```python\n...```", "local-coder", 1200, 340), latency_s=2.5)
    store.add_decision(run_id, "plan:reject", "r", '<img src=x onerror="alert(2)"> smaller blocks')
    result = RunResult(run_id, "demo_task", "ok", Attempt(best, verdicts[3]), 4)
    store.set_run_status(run_id, "ok")
    out = tmp_path / "out"
    write_outputs(result, types.SimpleNamespace(id="demo_task"), store.get_run(run_id).config, store, out)
    return out / "report.html", (root, broken, fixed, best)


CROSSINGS = """() => {
  const boxes = [...document.querySelectorAll('g.node')].map(g => [g.id.slice(5), g.querySelector('rect')]);
  const out = [];
  for (const edge of document.querySelectorAll('path.edge')) {
    const ends = [edge.dataset.parent, edge.dataset.child];
    for (let t = 0; t <= edge.getTotalLength(); t += 2) {
      const p = edge.getPointAtLength(t);
      for (const [id, r] of boxes) {
        const x = +r.getAttribute('x'), y = +r.getAttribute('y'), w = +r.getAttribute('width'), h = +r.getAttribute('height');
        if (!ends.includes(id) && p.x > x && p.x < x + w && p.y > y && p.y < y + h) out.push([ends, id]);
      }
    }
  }
  return out;
}"""


def test_run_report_explains_draws_by_parent_and_renders_store_text_inert(page, tmp_path):
    report, (root, broken, fixed, best) = _write_run(tmp_path)
    page.goto(report.as_uri())
    headline = page.locator("#headline").inner_text()
    assert "1.50x faster than XLA" in headline and "estimated by the backend's cost model" in headline
    assert "XLA runs at default precision." in headline

    # The tree by parent: the fix hangs under the compile error, the winner under the root.
    edges = {(p.get_attribute("data-parent"), p.get_attribute("data-child")) for p in page.locator("path.edge").all()}
    assert edges == {(root.id, broken.id), (broken.id, fixed.id), (root.id, best.id)}
    crossings = page.evaluate(CROSSINGS)  # points of each edge that fall inside a box it does not join
    assert crossings == [], crossings
    assert page.locator(f"path.edge[data-child='{best.id}']").get_attribute("stroke-width") == "3"  # the best path

    # Failed candidates are crosses under the time axis, never points at 0 us.
    ok_y = [c.bounding_box()["y"] for c in page.locator("svg.progress circle.point").all()]
    failed_y = [g.bounding_box()["y"] for g in page.locator("svg.progress g.failed").all()]
    assert len(ok_y) == 2 and len(failed_y) == 2 and min(failed_y) > max(ok_y)

    row = page.locator(f"tr#cand-{fixed.id}")
    assert "BLOCK_M=2048" in row.inner_text() and broken.id in row.inner_text()
    summary = row.locator("details summary").inner_text()
    shown = summary.removesuffix(" …")
    assert summary.endswith("…") and LONG.startswith(shown) and LONG[len(shown)] == " "  # cut between words
    assert "<script>alert(1)</script>" in row.text_content()  # store text renders as text
    assert page.locator("script").count() == 0 and page.locator("img").count() == 0  # and never as elements

    diff = page.locator("details.diff_parent")
    diff.locator("summary").click()
    assert "-BLOCK_M = 256" in diff.inner_text() and "+BLOCK_M = 512" in diff.inner_text()
    assert page.evaluate("window.pwned") is None and page.dialogs == []  # the code and decision stayed inert
    assert "local-coder" in page.locator("body").inner_text() and "1,200" in page.locator("body").inner_text()
    assert "plan:reject" in page.locator("body").inner_text()
    page.locator(f"g#node-{fixed.id} a").click()
    assert page.url.endswith(f"#cand-{fixed.id}")


def _bench(tmp_path, n: int) -> BenchResult:
    rng = random.Random(n)
    results = []
    for i in range(n):
        ok = i % 7 != 3
        results.append(TaskResult(f"{i}k_task_{i}", "correct" if ok else "failed", "r", compiled=True, correct=ok,
                                  speedup=2 ** rng.gauss(0, 1) if ok else None, speedup_kind="estimated" if ok else None,
                                  roofline_fraction=rng.random() if ok else None,
                                  arithmetic_intensity=10 ** rng.uniform(0, 3) if ok else None))
    out = tmp_path / f"bench{n}"
    page_dir = out / "tasks" / results[0].task_id
    page_dir.mkdir(parents=True)
    (page_dir / "report.html").write_text("<title>task report</title><h1>the task's own report</h1>")
    bench = BenchResult("bench-demo", BenchConfig(suite="demo"), results, suite_metrics(results), out, "v6e")
    (out / "report.html").write_text(html_report(bench))
    return bench


def test_bench_report_reads_at_2_and_200_tasks_and_links_each_tasks_report(page, tmp_path):
    for n in (2, 200):
        bench = _bench(tmp_path, n)
        page.goto((bench.out / "report.html").as_uri())
        figures = page.locator("figure svg").all()
        assert figures and all(f.bounding_box()["width"] <= 1100 for f in figures)  # no 3,000 px strip
        text = page.locator("figure").first.inner_text()
        assert "1x" in text and "2x" in text  # log2 axes written as speedups
        captions = " ".join(c.inner_text() for c in page.locator("figcaption").all())
        if n == 2:
            assert "distribution" not in captions  # two tasks make no histogram
        else:
            assert "Speedup distribution" in captions and "without a correct kernel are not drawn" in captions
        assert page.locator("table tr").count() > n  # every task in the table
    page.locator("a", has_text="0k_task_0").click()
    assert page.locator("h1").inner_text() == "the task's own report"
