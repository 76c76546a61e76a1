"""``optimize()``: one run from settings to result, and what it leaves in the output folder.

It resolves the plugins the settings name (backend, strategy, a provider per
role, checked before any work starts), loads the task, opens or resumes the run
in the store, lets the strategy drive a :class:`~maxkernel_core.session.RunSession`,
and writes ``kernel.py`` (the best verified candidate, as a standalone module)
and ``report.json``. It never presents the reference or an unverified
candidate as the result.
"""

from __future__ import annotations

import copy
import json
import threading
from pathlib import Path
from typing import Any

from .activity import Activity
from .config import ResolvedSettings, Settings, bind_sections, load_settings
from .errors import BudgetSpent
from .interfaces import Executor
from .llm import Budget, RetryPolicy
from .llm_roles import TranscriptRecorder, resolve_role_llms
from .plugins import get_plugin_manager
from .records import RunConfig
from .serialize import to_json
from .session import RunResult, RunSession
from .store import RunStore
from .tuned import check_mode, keep_best, start_from_table


def task_search_paths(settings: Settings, pm, backend) -> tuple[Path, ...]:
    """Where a task id is looked up: ``tasks.paths`` first, then the backend's and the registered suites, its own
    before the other backends' (a task of the TPU's JaxBench is as much a task for the GPU backend, which found
    it by its path but not by its id; the backend's ``load_task`` decides whether it reads one)."""
    own = pm.registries.suite_roots(backend.name)
    others = [root for root in pm.registries.suite_roots(None) if root not in own]
    return tuple(Path(p) for p in settings.tasks.paths) + tuple(backend.task_roots()) + tuple(own) + tuple(others)


def executor_for(settings: Settings, pm) -> Executor:
    """The executor ``executor.name`` selects, started (a cluster executor connects here, before any work)."""
    return pm.registries.get("executor", settings.executor.name).cls(settings)


def run_config(settings: Settings, task_id: str) -> RunConfig:
    """The one record of what a run was asked to do, built once from the resolved settings."""
    run = settings.run
    return RunConfig(task_id, run.strategy, run.provider, run.model, run.backend, run.target, run.budget, run.seed,
                     dict(settings.strategy.get(run.strategy, {})), settings.llm.debug_attempts,
                     check_mode(run.tuned), time_limit_s=run.time_limit_s)


def optimize(task: str | Path, *, settings: Settings | None = None, pm=None, resume: str | None = None,
             out: str | Path | None = None, observers: tuple = (), on_start=None, executor: Executor | None = None,
             activity: Activity | None = None, **run_overrides: Any) -> RunResult:
    """Run a strategy on a task and return its result (the same record ``maxkernel run`` reports).

    :param task: a task id (searched in ``tasks.paths`` and the backend's suites) or a path.
    :param settings: the settings to run with (a copy is used: yours are never changed); default: read
        as the CLI reads them, ``maxkernel.toml`` (or ``[tool.maxkernel]`` in ``pyproject.toml``) in the
        working directory, then ``MAXKERNEL_*`` variables.
    :param run_overrides: any ``[run]`` setting, e.g. ``strategy="auto", provider="synthesizer"``.
    :param resume: a run id to continue; its stored config wins over the settings.
    :param on_start: called with the run id once the run is in the store, before any work
        (``maxkernel bench`` records it so that a killed bench resumes this run).
    :param activity: where the session notes what it waits on (model calls, verdicts), for a live display.
    :param executor: where candidates are judged; default: the one ``executor.name`` selects,
        closed at the end (one passed in is left open for the caller's next run).
    """
    resolved = ResolvedSettings(copy.deepcopy(settings), {}) if settings is not None else load_settings()
    settings = resolved.settings  # a copy: the caller's settings are never changed
    for key, value in run_overrides.items():
        if value is not None:
            setattr(settings.run, key, value)
    pm = pm or get_plugin_manager(only=settings.plugins.load, disable=settings.plugins.disable)
    bind_sections(resolved, pm.registries.settings_sections())
    store = RunStore.open(settings.store.home)
    if resume:
        resume = store.resolve_id("run", resume)  # a unique prefix names the run, as everywhere
        stored = store.get_run(resume).config
        for key in ("strategy", "provider", "model", "backend", "target", "budget", "seed", "tuned", "time_limit_s"):
            setattr(settings.run, key, getattr(stored, key))
    strategy_cls = pm.registries.get("strategy", settings.run.strategy).cls
    llms = resolve_role_llms(pm.registries, settings)  # missing keys fail here, before any work
    backend = pm.registries.get("backend", settings.run.backend).cls(settings)
    owned = executor is None
    try:
        executor = executor or executor_for(settings, pm)  # a missing extra or a dead cluster fails before any work
        loaded = backend.load_task(task, task_search_paths(settings, pm, backend))
        config = store.get_run(resume).config if resume else run_config(settings, loaded.id)
        strategy = strategy_cls(config.options)  # its options are checked here, before the run is stored
        session = RunSession(
            pm, store, loaded, config, backend, llms=llms, run_id=resume, settings=settings,
            budget=Budget(settings.llm.max_calls, settings.llm.max_tokens, settings.llm.max_cost_usd),
            policy=RetryPolicy(max_retries=settings.llm.max_retries),
            recorder=TranscriptRecorder(settings.llm.record) if settings.llm.record else None,
            gate=threading.Semaphore(max(settings.llm.concurrency, 1)),  # model calls in flight at once
            executor=executor, reply_retries=max(settings.llm.reply_retries, 0),
            **({"activity": activity} if activity is not None else {}),
        )
        session.observers.extend(observers)
        if on_start is not None:
            on_start(session.run_id)
        try:
            try:
                # an interactive run is a person's to steer: it is never ended by the table before they see it
                tuned = None if strategy.interactive else start_from_table(session)
                result = tuned or strategy.run(session)
            except BudgetSpent as spent:  # a strategy that did not watch the budget: the run ends here
                result = session.finish(message=str(spent))
            keep_best(session, result)
        except KeyboardInterrupt:
            store.set_run_status(session.run_id, "interrupted")
            raise
        except Exception as exc:
            store.set_run_status(session.run_id, "failed", {"error": f"{type(exc).__name__}: {exc}"})
            raise
        finally:
            session.close()
        write_outputs(result, loaded, config, store, Path(out or settings.run.out), backend)
        return result
    finally:
        if owned and executor is not None:
            executor.close()
        backend.close()


def kernel_header(result: RunResult, task, config: RunConfig, delivered: list[str] = ()) -> str:
    best = result.best
    ev, cand = best.evaluation, best.candidate
    from .speed import phrase

    speed = phrase(ev.profile) if ev.profile and ev.profile.seconds else "not measured"
    checks = ", ".join(f"{c.name} {'ok' if c.passed else 'FAILED'}" for c in ev.checks)
    how = cand.provenance
    program = (f"The program this verdict is about: {', '.join(delivered)} beside this file (sha256 {ev.artifact}); "
               "run that to run what was judged.\n" if delivered and ev.artifact else "")
    return (f'"""Best kernel of maxkernel run {result.run_id} for task {task.id}, target {config.target}.\n\n'
            f"Verdict: {ev.status.value} ({checks}).\n{ev.reason}\n"
            f"Speed: {speed}.\nParameters: {json.dumps(cand.parameters, sort_keys=True)}.\n{program}"
            f"Obtained by strategy {config.strategy} with provider {config.provider}: {how.role or '?'} "
            f"({how.transformation or how.model or 'first version'}), candidate {cand.id}, after "
            f"{result.evaluations} evaluations.\n"
            f"Re-judge it with: maxkernel eval --task {task.id} --kernel kernel.py --backend {config.backend} "
            f'--target {config.target}\n"""\n\n')


def write_outputs(result: RunResult, task, config: RunConfig, store: RunStore, out: Path,
                  backend=None) -> dict[str, Path]:
    """kernel.py (the best verified kernel's source) and the program its verdict is about beside it (the
    backend's deliverables), report.json, report.html, and the search graph when there is one."""
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    if result.best is not None:
        delivered = backend.deliverables(result.best.evaluation) if backend is not None else {}
        path = out / "kernel.py"
        path.write_text(kernel_header(result, task, config, sorted(delivered)) + result.best.candidate.code)
        written["kernel"] = path
        for name, data in delivered.items():
            (out / name).write_bytes(data)
            written[name] = out / name
    from .report_data import report_data

    report = report_data(result, config, store)
    path = out / "report.json"
    path.write_text(json.dumps(report, indent=2, sort_keys=True, default=str))
    written["report"] = path
    nodes, edges = store.nodes(result.run_id), store.edges(result.run_id)
    if nodes:
        written.update(write_graph(nodes, edges, store.evaluations(result.run_id), out))
    from .report_html import render

    (out / "report.html").write_text(render(report))
    written["html"] = out / "report.html"
    return written


def write_graph(nodes, edges, evaluations, out: Path) -> dict[str, Path]:
    """The search graph as JSON (records) and Graphviz DOT (beam nodes bold, failures grey)."""
    status = {e.candidate_id: e.status.value for e in evaluations}
    measured = {e.candidate_id for e in evaluations if e.profile and not e.profile.estimated}
    data = {"nodes": [to_json(n) | {"status": status.get(n.candidate_id)} for n in nodes],
            "edges": [to_json(e) for e in edges]}
    (out / "graph.json").write_text(json.dumps(data, indent=2, sort_keys=True))
    lines = ["digraph search {", "  rankdir=LR; node [shape=box, fontname=monospace];"]
    for n in nodes:
        label = f"{n.candidate_id}\\n{status.get(n.candidate_id, '?')}" + (  # DOT's own line break
            f"\\n{n.score * 1e6:,.1f} us {'measured' if n.candidate_id in measured else 'estimated'}" if n.score else "")
        style = "bold" if n.in_beam else ("filled" if status.get(n.candidate_id) != "ok" else "solid")
        lines.append(f'  "{n.id}" [label="{label}", style={style}, fillcolor=lightgrey];')
    lines += [f'  "{e.parent_id}" -> "{e.child_id}" [label="{e.transformation}"];' for e in edges]
    (out / "graph.dot").write_text("\n".join(lines + ["}"]) + "\n")
    return {"graph_json": out / "graph.json", "graph_dot": out / "graph.dot"}
