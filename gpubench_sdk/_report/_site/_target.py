"""A target's page: its history (daily median cold start and p95 latency with 95% CI bands,
error rate, bill), the days the change detector flagged, its price changes and metadata."""

from __future__ import annotations

import json
import math
from html import escape
from typing import Any

from .._format import figure
from .._summary import usd
from . import _layout as h
from ._charts import Line, history_chart
from ._data import MIN_CHANGE, Day, Target

RECENT_DAYS = 30


def target_page(target: Target) -> str:
    days = target.ordered()
    first, last = days[0].date, days[-1].date
    flags = [(run[0].date, run[-1].date, _note(target, run[0])) for run in target.episodes()]
    parts = [
        f"<h1>{escape(target.label)}</h1>",
        f"<p class='lede'>{len(days)} day(s) measured, {escape(first)} to {escape(last)}; "
        f"the change detector flagged {len(target.changed)} day(s) in {len(flags)} run(s).</p>",
        _metadata(target),
        "<h2 id='cold-start'>Cold start</h2>",
    ]
    cold = [(d.date, d.cold.median_ms, *d.cold.median_ci_ms) for d in days if d.cold is not None]
    if cold:
        svg = history_chart(
            [Line("median cold start", cold)], first=first, last=last,
            unit="cold start (ms)", title=f"{target.label}: daily median cold start",
            flagged=flags,
        )  # fmt: skip
        parts.append(
            figure(
                "cold-start",
                svg,
                "Daily median cold start, its 95% CI shaded; dashed red: "
                "a day the change detector flagged.",
            )
        )
    else:
        parts.append("<p>No cold start was measured.</p>")
    parts.append("<h2 id='latency'>Latency (p95)</h2>")
    p95 = [(d.date, *d.p95_ms) for d in days if d.p95]
    svg = history_chart(
        [Line("p95 latency", p95, "#3ca951")], first=first, last=last,
        unit="p95 latency (ms)", title=f"{target.label}: daily p95 latency",
    )  # fmt: skip
    parts.append(figure("latency", svg, "Daily p95 latency of successful requests, 95% CI."))
    parts.append("<h2 id='errors'>Errors and bill</h2>")
    errors = [(d.date, 100 * d.error_rate, math.nan, math.nan) for d in days if d.requests]
    svg = history_chart(
        [Line("error rate", errors, "#ff725c")], first=first, last=last,
        unit="errors (% of requests)", title=f"{target.label}: daily error rate",
    )  # fmt: skip
    parts.append(figure("errors", svg, "Share of requests that failed, per day."))
    bills = [(d.date, d.bill_usd, math.nan, math.nan) for d in days if d.bill_usd is not None]
    if bills:
        svg = history_chart(
            [Line("bill", bills, "#a463f2")], first=first, last=last, unit="bill ($)",
            title=f"{target.label}: daily bill",
        )  # fmt: skip
        parts.append(figure("bill", svg, "The estimated bill of each day's measurements."))
    parts += [_changes(target), _prices(target), _recent(target)]
    return "".join(parts)


def _note(target: Target, day: Day) -> str:
    assert day.cold is not None
    return f"{target.label}: median {h.ms(day.cold.median_ms)}, p {day.cold.p_adjusted:.2g}"


def _changes(target: Target) -> str:
    out = (
        "<h2 id='changes'>Days the change detector flagged</h2><p>Each day's cold starts "
        "against every earlier day's pooled: Mann-Whitney U, p-values Holm-adjusted over all "
        f"the days tested, flagged below 0.05 when the median moved by {MIN_CHANGE:.0%} or "
        "more.</p>"
    )
    rows = []
    for d in target.changed:
        assert d.cold is not None
        rows.append(
            [
                f'<span class="flagged">{h.link(f"../days/{d.date}.html", d.date)}</span>',
                h.ms(d.cold.median_ms),
                h.ms(d.cold.earlier_median_ms),
                str(d.cold.count),
                f"{d.cold.p_adjusted:.2g}",
            ]
        )
    head = ["day", "median that day", "median before", "cold starts", "adjusted p"]
    return out + h.table(head, rows)


def _prices(target: Target) -> str:
    rows, previous = [], None
    for d in target.ordered():
        if d.usd_per_s is not None and d.usd_per_s != previous:
            change = (
                "first seen"
                if previous is None
                else f"{(d.usd_per_s - previous) / previous:+.1%}"
                if previous
                else "changed"
            )
            rows.append([d.date, f"{d.usd_per_s:.6g}", change])
            previous = d.usd_per_s
    return "<h2 id='prices'>Price changes</h2>" + h.table(["from", "$ per second", "change"], rows)


def _recent(target: Target) -> str:
    rows = []
    for d in reversed(target.ordered()[-RECENT_DAYS:]):
        flagged = d.cold is not None and d.cold.changed
        date = h.link(f"../days/{d.date}.html", d.date)
        rows.append(
            [
                f'<span class="flagged">{date}</span>' if flagged else date,
                h.ms(d.cold.median_ms if d.cold is not None else math.nan),
                h.ms(d.p95_ms[0]),
                h.rate(d.error_rate),
                ", ".join(f"{escape(k)} {n}" for k, n in sorted(d.errors.items())) or "-",
                escape(usd(d.bill_usd)) if d.bill_usd is not None else "-",
            ]
        )
    head = ["day", "cold start", "p95 latency", "errors", "by kind", "bill"]
    return (
        f"<h2 id='days'>Last {RECENT_DAYS} days</h2>"
        + h.table(head, rows)
        + "<p>Older days: <a href='../downloads.html'>every day</a>.</p>"
    )


def _json(value: Any) -> str:
    return escape(json.dumps(value, sort_keys=True)) if value not in (None, {}, []) else "-"


def _metadata(target: Target) -> str:
    meta = target.meta
    price = meta.get("price") or {}
    rows = [
        ("provider", escape(target.provider)),
        ("region", escape(target.region or "-")),
        ("GPU", escape(str(meta.get("gpu") or "not given by the plan"))),
        ("model / image", _json(meta.get("model"))),
        ("scaling (as the plan set it)", _json(meta.get("scaling"))),
        ("scaling (as the provider said, latest day)", _read(meta.get("scaling_read"))),
        ("deployed (as the provider said, latest day)", _read(meta.get("deployed_read"))),
        ("price", f"{price['usd_per_s']:.6g} $/s" if price.get("usd_per_s") else "-"),
        ("plugin", _spans(target.plugins)),
        ("gpubench", _spans(target.versions)),
        ("campaigns", escape(", ".join(sorted(target.campaigns)))),
    ]
    body = "".join(f"<tr><th>{escape(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return f"<h2 id='about'>What was measured</h2><table class='kv'>{body}</table>"


def _read(read: Any) -> str:
    """What the provider's API reported when the run began (its scaling settings, or what is
    deployed), or why there is nothing."""
    if not isinstance(read, dict):
        return "- (measured before gpubench read them)"
    found = read.get("settings") or read.get("details")
    if found:
        return _json(found)
    return escape(str(read.get("how") or "-"))


def _spans(versions: dict[str, list[str]]) -> str:
    """Each version with the days it measured: ``0.1.0 (2026-01-01 to 2026-02-01)``."""
    return "<br>".join(
        f"{escape(v)} ({min(days)} to {max(days)})" for v, days in sorted(versions.items())
    )
