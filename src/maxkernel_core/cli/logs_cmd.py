"""``maxkernel logs``: browse the LLM calls in the run store, the way ``llm logs`` browses its log.

Every attempt is there, failed ones too: the prompt, the reply, tokens, cost,
latency and the error. Keys never reach the store (requests carry messages and
options only); as a second line of defence anything shaped like a key, and the
value of any ``*_API_KEY``/``*_TOKEN`` variable set here, is masked on output.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import click
from rich.markup import escape

from ..report_html import clip
from .commands import _app, _echo_json, _when
from .group import cli
from .output import console_for, print_table

KEY_SHAPES = re.compile(r"(sk-[A-Za-z0-9_\-]{8,}|AIza[0-9A-Za-z_\-]{20,}|(?i:bearer)\s+[A-Za-z0-9._\-]{8,})")
SECRET_VARS = re.compile(r"(API_KEY|_KEY|_TOKEN|_SECRET)$")
MASK = "[key hidden]"


def redact(text: str | None) -> str | None:
    """``text`` with key-shaped strings and the values of secret environment variables masked."""
    if not text:
        return text
    for name, value in os.environ.items():
        if SECRET_VARS.search(name) and len(value) >= 8:
            text = text.replace(value, MASK)
    return KEY_SHAPES.sub(MASK, text)


def call_json(row: dict[str, Any]) -> dict[str, Any]:
    """One stored call as ``--json`` prints it: the prompt's messages, the reply, what it cost."""
    prompt = json.loads(row["prompt_json"])
    messages = [{"role": m["role"], "content": redact(m["content"])} for m in prompt.get("messages", [])]
    return {"id": row["id"], "run": row["run_id"], "role": row["role"], "provider": row["provider"],
            "model": row["model"], "created_at": row["created_at"], "status": "error" if row["error"] else "ok",
            "error": redact(row["error"]), "latency_s": row["latency_s"], "input_tokens": row["input_tokens"],
            "output_tokens": row["output_tokens"], "cost_usd": row["cost_usd"], "messages": messages,
            "response": redact(row["response"]), "options": {k: prompt.get(k) for k in
                                                               ("temperature", "max_output_tokens")}}


def _first_line(text: str | None, width: int = 60) -> str:
    return clip(next((s.strip() for s in (text or "").splitlines() if s.strip()), ""), width)


HEADER = ["call", "when", "run", "role", "model", "tokens in/out", "s", "status", "reply"]


def _print_table(console, calls: list[dict[str, Any]]) -> None:
    rows = [[str(c["id"]), _when(c["created_at"]), c["run"] or "-", c["role"] or "-",
             f"{c['provider']}:{c['model'] or '?'}", f"{c['input_tokens'] or 0:,}/{c['output_tokens'] or 0:,}",
             f"{c['latency_s']:.1f}" if c["latency_s"] is not None else "-",
             f"error: {_first_line(c['error'], 40)}" if c["error"] else "ok", _first_line(c["response"])]
            for c in calls]
    print_table(console, HEADER, rows)


def _print_full(console, c: dict[str, Any]) -> None:
    cost = f", ${c['cost_usd']:.4f}" if c["cost_usd"] is not None else ""
    latency = f"{c['latency_s']:.2f} s" if c["latency_s"] is not None else "? s"
    console.print(f"[bold]## call {c['id']}[/] {_when(c['created_at'])}  run {c['run'] or '-'}  role "
                  f"{c['role'] or '-'}  {escape(c['provider'])}:{escape(c['model'] or '?')}  {latency}, "
                  f"{c['input_tokens'] or 0:,} tokens in, {c['output_tokens'] or 0:,} out{cost}")
    for m in c["messages"]:
        console.print(f"\n[bold]### {m['role']}[/]\n")
        console.print(escape(m["content"]), markup=False, highlight=False)
    if c["error"]:
        console.print(f"\n[bold red]### error[/]\n{escape(c['error'])}")
    else:
        console.print("\n[bold]### response[/]\n")
        console.print(escape(c["response"] or ""), markup=False, highlight=False)
    console.print("")


def _print_usage(console, rows: list[dict[str, Any]]) -> None:
    header = ["provider:model", "role", "calls", "failed", "tokens in", "tokens out", "cost", "model time"]
    print_table(console, header, [
        [f"{r['provider']}:{r['model'] or '?'}", r["role"] or "-", str(r["calls"]), str(r["errors"]),
         f"{r['input_tokens']:,}", f"{r['output_tokens']:,}",
         f"${r['cost_usd']:.4f}" if r["cost_usd"] is not None else "not reported", f"{r['latency_s']:.1f} s"]
        for r in rows], title="LLM usage")


@cli.command("logs")
@click.argument("run_id", required=False)
@click.option("-n", "--count", default=20, show_default=True, help="Newest calls first; 0 for all.")
@click.option("--role", type=click.Choice(["plan", "implement", "debug", "test", "profile"]), help="Only this role.")
@click.option("-m", "--model", help="Only models whose name contains this.")
@click.option("--status", type=click.Choice(["ok", "error"]), help="Only answered calls, or only failed ones.")
@click.option("--call", "call_id", type=int, help="One call, in full (prompt and response).")
@click.option("--full", is_flag=True, help="Print every selected call's prompt and response in full.")
@click.option("--usage", is_flag=True, help="Calls, failures, tokens, cost and model time per model and role.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON array (prompts and responses included).")
def logs_cmd(run_id, count, role, model, status, call_id, full, usage, as_json) -> int:
    """Browse the LLM calls in the run store: of one RUN_ID (a unique prefix will do) or of all runs."""
    store = _app().store
    run_id = store.resolve_id("run", run_id) if run_id else None
    console = console_for()
    if usage:
        rows = store.llm_usage(run_id)
        if as_json:
            _echo_json(rows)
        elif rows:
            _print_usage(console, rows)
        else:
            click.echo("No LLM calls logged" + (f" for run {run_id}." if run_id else "."))
        return 0
    calls = [call_json(r) for r in store.llm_call_rows(run_id=run_id, role=role, model=model, status=status,
                                                        call_id=call_id, limit=count or None)]
    if call_id is not None and not calls:
        raise click.BadParameter(f"no LLM call {call_id} (`maxkernel logs` lists the calls)", param_hint="--call")
    if as_json:
        _echo_json(calls)
    elif not calls:
        where = f" for run {run_id}" if run_id else ""
        click.echo(f"No LLM calls logged{where} (the offline synthesizer makes none; a model provider's calls, "
                   "failed ones too, appear here).")
    elif full or call_id is not None:
        for c in reversed(calls):  # oldest first, as a conversation reads
            _print_full(console, c)
    else:
        _print_table(console, calls)
    return 0
