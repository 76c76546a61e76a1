"""``maxkernel bench --compare KEY=V1,V2``: the suite once per value, and one side-by-side report.

Each value's bench is an ordinary bench (its own rows in the store, its own folder
``OUT/KEY=VALUE/``), so a killed comparison is continued by running the same command
again: every verdict already made is reused from the store. The tuned-config table is
off in every arm unless it is what is compared: an arm must not start from the kernel
another arm tuned. Evaluations count every verdict an arm asked for, reused ones too,
so arms compare at equal budgets.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import attrs

from ..errors import ConfigError
from .metrics import TaskResult
from .report import _pct, _x
from .runner import BenchConfig, BenchResult, run_bench

#: BenchConfig fields a comparison may vary, with how a value is read.
KEYS = {"strategy": str, "provider": str, "model": str, "target": str, "budget": int, "seed": int, "tuned": str}


def parse_compare(text: str) -> tuple[str, list[Any]]:
    """``"strategy=auto,graph"`` -> ("strategy", ["auto", "graph"]); one clear error otherwise."""
    key, sep, values = text.partition("=")
    key = key.strip()
    if not sep or key not in KEYS:
        raise ConfigError(f"--compare {text!r}: give KEY=V1,V2 with KEY one of {', '.join(KEYS)}")
    raw = [v.strip() for v in values.split(",") if v.strip()]
    if len(raw) < 2 or len(set(raw)) != len(raw):
        raise ConfigError(f"--compare {text!r}: give at least two different values, e.g. strategy=auto,graph")
    try:
        return key, [KEYS[key](v) for v in raw]
    except ValueError:
        raise ConfigError(f"--compare {text!r}: {key} takes {KEYS[key].__name__} values") from None


def run_compare(settings, pm, config: BenchConfig, key: str, values: list[Any], out: Path,
                **bench_options: Any) -> dict[str, Any]:
    """Run the suite once per value (in order) and write ``compare.json``, ``compare.md``, ``compare.html``."""
    arms: list[tuple[Any, BenchResult]] = []
    for value in values:
        arm = attrs.evolve(config, **{key: value})
        if key != "tuned":
            arm = attrs.evolve(arm, tuned="off")
        arms.append((value, run_bench(settings, pm, arm, out=out / f"{key}={value}", **bench_options)))
    document = comparison(key, arms)
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.json").write_text(json.dumps(document, indent=2, sort_keys=True, default=str))
    (out / "compare.md").write_text(markdown(document))
    (out / "compare.html").write_text(html_page(document))
    return document


def _winner(results: dict[str, TaskResult]) -> str:
    """The arm with the fastest correct kernel for a task ("tie" within 1%, "none" when none is correct)."""
    sped = {arm: r.speedup for arm, r in results.items() if r.correct and r.speedup}
    if not sped:
        return "none" if not any(r.correct for r in results.values()) else "tie"
    best = max(sped.values())
    leaders = [arm for arm, s in sped.items() if s >= best / 1.01]
    return leaders[0] if len(leaders) == 1 else "tie"


def comparison(key: str, arms: list[tuple[Any, BenchResult]]) -> dict[str, Any]:
    names = [f"{key}={value}" for value, _ in arms]
    summary = []
    for name, (_, bench) in zip(names, arms, strict=True):
        m = bench.metrics
        speed = next(iter(m["speed"]), {})
        summary.append({"arm": name, "bench": bench.bench_id, "tasks": m["tasks"], "compile_rate": m["compile_rate"],
                        "correctness_rate": m["correctness_rate"], "speedup_kind": speed.get("kind"),
                        "geomean_speedup": speed.get("geomean_speedup"), "fast_p": speed.get("fast_p", {}),
                        "evaluations": m["evaluations"], "llm_calls": m["llm_calls"], "tokens": m["tokens"],
                        "wall_s": m["wall_s"]})
    tasks = []
    for i, task in enumerate(r.task_id for r in arms[0][1].results):
        per = {name: bench.results[i] for name, (_, bench) in zip(names, arms, strict=True)}
        tasks.append({"task": task, "winner": _winner(per),
                      **{name: {"status": r.status, "speedup": r.speedup, "kind": r.speedup_kind,
                                "evaluations": r.evaluations} for name, r in per.items()}})
    wins = {name: sum(t["winner"] == name for t in tasks) for name in names}
    return {"key": key, "arms": names, "summary": summary, "tasks": tasks, "wins": wins}


def _intro(doc: dict[str, Any]) -> str:
    kinds = {s["speedup_kind"] for s in doc["summary"] if s["speedup_kind"]}
    return (f"Speedups are {', '.join(sorted(kinds)) or 'not available'} (each arm's kernels against the same XLA "
            "reference, the same way); evaluations count every verdict an arm asked for.")


def _tables(doc: dict[str, Any]) -> list[tuple[list[str], list[list[str]]]]:
    """(header, rows) of the two tables, as text cells: one row per arm, then one per task."""
    arms = [[s["arm"], _pct(s["compile_rate"]), _pct(s["correctness_rate"]), _x(s["geomean_speedup"]),
             *(_pct(s["fast_p"].get(p, 0)) for p in ("1", "1.5", "2")), str(s["evaluations"]), str(s["llm_calls"]),
             str(s["tokens"]), str(doc["wins"][s["arm"]])] for s in doc["summary"]]
    tasks = [[t["task"], *(_x(t[a]["speedup"]) if t[a]["status"] == "correct" else t[a]["status"] for a in doc["arms"]),
              t["winner"]] for t in doc["tasks"]]
    return [(["arm", "compiled", "correct", "geomean", "fast_1", "fast_1.5", "fast_2", "evaluations", "LLM calls",
              "tokens", "wins"], arms),
            (["task", *doc["arms"], "winner"], tasks)]


def markdown(doc: dict[str, Any]) -> str:
    lines = [f"# Comparison over {doc['key']}", "", _intro(doc)]
    for header, rows in _tables(doc):
        lines += ["", "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def html_page(doc: dict[str, Any]) -> str:
    """The same tables as an HTML page (every cell escaped)."""
    e = html.escape
    tables = ["<table><tr>" + "".join(f"<th>{e(c)}</th>" for c in header) + "</tr>"
              + "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in rows) + "</table>"
              for header, rows in _tables(doc)]
    style = "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;font-family:monospace}"
    return (f"<!doctype html><meta charset=utf-8><title>{e(doc['key'])} comparison</title><style>{style}</style>\n"
            f"<h1>Comparison over {e(doc['key'])}</h1>\n<p>{e(_intro(doc))}</p>\n" + "\n".join(tables) + "\n")
