"""The templates: Jinja2 with autoescape on for every template, so anything from the store renders as text."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import jinja2
from maxkernel_core.report_html import clip

ENV = jinja2.Environment(loader=jinja2.PackageLoader("maxkernel_ui", "templates"),
                         autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def _when(ts: float | None) -> str:
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S") if ts else ""


def _us(row: dict[str, Any]) -> str:
    return f"{row['seconds'] * 1e6:,.1f}" if row.get("seconds") and row.get("status") == "ok" else ""


def _kind(row: dict[str, Any]) -> str:
    if not _us(row) or row.get("estimated") is None:
        return ""
    return "estimate" if row["estimated"] else "measured"


def _speedup(row: dict[str, Any]) -> str:
    return f"{row['speedup_vs_xla']:.2f}x" if row.get("speedup_vs_xla") and _us(row) else ""


ENV.filters.update(
    when=_when, us=_us, kind=_kind, speedup=_speedup, clip=clip,
    params=lambda p: " ".join(f"{k}={json.dumps(v)}" for k, v in sorted((p or {}).items())),
    cost=lambda usd: "not reported" if usd is None else f"${usd:.4f}",
)


def render(template: str, **values: Any) -> str:
    return ENV.get_template(template).render(**values)
