"""The methodology page, a page per day (the permalinks), the downloads page and index.json."""

from __future__ import annotations

import json
import math
from html import escape
from typing import Any

from .._summary import usd
from . import _layout as h
from ._data import MIN_CHANGE, Tracker
from ._front import changes, cold_median, latest

INDEX_SCHEMA = "gpubench-tracker-site"
INDEX_VERSION = 1


def methodology_page(tracker: Tracker) -> str:
    parts = [
        "<h1>Methodology</h1>",
        "<p>Every figure on this site comes from the data documents listed under "
        "<a href='downloads.html'>Data</a>: one per campaign slot, written by "
        "<code>gpubench campaign export</code> from the slot's stored run. What each campaign "
        "sent, how often and from where:</p>",
    ]
    for c in tracker.campaigns:
        hashes = "".join(
            f"<li><code>{escape(k)}</code>: {escape(a)} to {escape(b)}</li>"
            for k, (a, b) in sorted(c.hashes.items(), key=lambda kv: kv[1])
        )
        parts.append(
            f"<h2>Campaign {escape(c.name)}</h2>"
            f"<p>{c.documents:,} slot(s) from {escape(c.first)} to {escape(c.last)}; schedule: "
            f"{escape(c.schedule or '-')} (days in {escape(c.tz)}); client: "
            f"{escape(c.origin or 'not stated')}.</p>"
            f"<h3>Workload (what each request sends)</h3><pre>{_pretty(c.workload)}</pre>"
            f"<h3>Scenarios (in order, per target, every slot)</h3><pre>{_pretty(c.scenarios)}"
            f"</pre><h3>Plans used (hash of the stored plan: first and last day)</h3>"
            f"<ul>{hashes}</ul>"
        )
    parts.append(
        "<h2>Definitions</h2><ul>"
        "<li><b>Latency</b>: from the request's scheduled send to its last byte, successful "
        "requests only; p95 with a 95% CI (bootstrap, or order statistics for large "
        "samples).</li>"
        "<li><b>Cold start</b>: a cold request's latency minus its inference time (the "
        "server-reported execution time, else the warm median); phases where the provider "
        "reports them.</li>"
        "<li><b>Change detector</b>: each day's cold starts against every earlier day's pooled, "
        "two-sided Mann-Whitney U, p-values Holm-adjusted over all the days tested (the "
        "family-wise error rate held at 5%); a day is flagged below 0.05 when its median "
        f"moved by {MIN_CHANGE:.0%} or more from the earlier days'. The same test as "
        "<code>gpubench campaign show</code>, which lists every significant change.</li>"
        "<li><b>Bill</b>: <code>gpubench cost run</code>'s estimate from the stored requests "
        "and the plan's price (worker time replayed, idle tails included).</li>"
        "<li><b>Cost per day</b> (front page): the latest day's bill per request times the "
        "traffic chosen when the site was built.</li></ul>"
        "<p>Secrets never reach a document: plans store references to keys "
        "(<code>api_key_env</code>), and every option is masked again on export.</p>"
    )
    return "".join(parts)


def _pretty(value: Any) -> str:
    return escape(json.dumps(value, indent=2, sort_keys=True)) if value is not None else "-"


def day_page(tracker: Tracker, date: str, previous: str | None, following: str | None) -> str:
    rows = []
    for t in tracker.targets:
        d = t.days.get(date)
        if d is None:
            continue
        flagged = d.cold is not None and d.cold.changed
        name = h.link(f"../targets/{t.slug}.html", t.label)
        rows.append(
            [
                f'{name} <span class="flagged">changed</span>' if flagged else name,
                h.ms(d.cold.median_ms if d.cold is not None else math.nan),
                h.ci(*d.cold.median_ci_ms) if d.cold is not None else "-",
                h.ms(d.p95_ms[0]),
                h.ms(d.burst_p95_ms),
                h.rate(d.error_rate),
                escape(usd(d.bill_usd)) if d.bill_usd is not None else "-",
            ]
        )
    steps = " ".join(
        h.link(f"{other}.html", f"{arrow} {other}")
        for other, arrow in ((previous, "previous"), (following, "next"))
        if other is not None
    )
    files = "".join(
        f"<li>{h.link(f'../{f}', f.rsplit('/', 1)[-1])}</li>" for f in tracker.files_by_day[date]
    )
    head = ["target", "cold start", "95% CI", "p95 latency", "burst p95", "errors", "bill"]
    return (
        f"<h1>{escape(date)}</h1><p>{steps}</p>"
        + h.table(head, rows)
        + f"<h2>Data documents</h2><ul>{files}</ul>"
    )


def downloads_page(tracker: Tracker) -> str:
    by_month: dict[str, list[str]] = {}
    for date in tracker.dates:
        by_month.setdefault(date[:7], []).append(date)
    rows = [
        [
            escape(month),
            str(sum(len(tracker.files_by_day[d]) for d in days)),
            " ".join(h.link(f"days/{d}.html", d[8:]) for d in days),
        ]
        for month, days in sorted(by_month.items(), reverse=True)
    ]
    total = sum(len(f) for f in tracker.files_by_day.values())
    return (
        "<h1>Data</h1><p>Every data document, one per campaign slot, under "
        "<code>data/YYYY/MM/DD/</code>; each day's page links its files, and "
        f"<a href='index.json'>index.json</a> lists all {total:,} of them with the site's "
        "figures. The documents' format: schema <code>gpubench-tracker</code>, version 1 "
        "(docs/tracker.md).</p>" + h.table(["month", "documents", "days"], rows, left=3)
    )


def index_json(tracker: Tracker, requests_per_day: int) -> str:
    """The site's figures for machines; like the documents, with no time of the build."""
    flagged: dict[str, list[str]] = {}
    for t, d in changes(tracker):
        flagged.setdefault(t.slug, []).insert(0, d.date)
    targets = []
    for t in tracker.targets:
        day = t.ordered()[-1]
        cold_day, cold = latest(t, cold_median)
        targets.append(
            {
                "slug": t.slug,
                "page": f"targets/{t.slug}.html",
                "name": t.name,
                "provider": t.provider,
                "region": t.region,
                "days": len(t.days),
                "latest": {
                    "date": day.date,
                    "cold_start_p50_ms": _num(cold),
                    "cold_start_date": cold_day.date if cold_day else None,
                    "p95_ms": _num(day.p95_ms[0]),
                    "error_rate": _num(day.error_rate),
                    "usd_per_day": _num(day.usd_per_request() * requests_per_day),
                },
                "flagged_days": flagged.get(t.slug, []),
            }
        )
    data = {
        "schema": INDEX_SCHEMA,
        "schema_version": INDEX_VERSION,
        "requests_per_day": requests_per_day,
        "targets": targets,
        "days": [
            {"date": d, "page": f"days/{d}.html", "files": tracker.files_by_day[d]}
            for d in tracker.dates
        ],
    }
    return json.dumps(data, sort_keys=True, indent=1) + "\n"


def _num(value: float) -> float | None:
    return float(f"{value:.6g}") if math.isfinite(value) else None
