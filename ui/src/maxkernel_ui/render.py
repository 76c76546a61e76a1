"""The templates: Jinja2 with autoescape on for every template, so anything from the store renders as text."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import jinja2
from maxkernel_core.report_html import clip
from maxkernel_core.speed import achieved_words, phrase, ratio_words

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
    """The ratio as every report words it (its kinds; "slower" under 1x); a row stored before that wording
    was kept is worded from its number and kind."""
    if not _us(row):
        return ""
    if row.get("vs_xla"):
        return row["vs_xla"]
    return ratio_words(row.get("speedup_vs_xla"), "estimated" if row.get("estimated") else "measured")


ENV.filters.update(
    when=_when, us=_us, kind=_kind, speedup=_speedup, clip=clip, speed_phrase=phrase, achieved=achieved_words,
    params=lambda p: " ".join(f"{k}={json.dumps(v)}" for k, v in sorted((p or {}).items())),
    cost=lambda usd: "not reported" if usd is None else f"${usd:.4f}",
)


def render(template: str, **values: Any) -> str:
    return ENV.get_template(template).render(**values)
