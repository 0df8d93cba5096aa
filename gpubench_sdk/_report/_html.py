"""The report as one self-contained HTML page: inline CSS and SVG, no script, no external URL.

A layout is the page's sections in order, each a function of the report returning HTML (empty
when it has nothing to show):

* ``comparison`` (the default): the four verdicts with their charts first, then the details.
* ``reference``: the reference report's sections in its order (methodology, cold start,
  variability, autoscaling, the comparative review per provider, pricing, summary).

A new kind of chart is one more function in the layouts' tuples (where its data is).
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape

from . import _questions as q
from . import _sections as s
from ._advise import advice_section
from ._compare import duration
from ._format import figure, table
from ._read import Report
from ._shapes import shapes_html
from ._style import CSS
from ._summary import usd as _usd

Section = Callable[[Report], str]


def _heading(report: Report) -> str:
    notes = "".join(f'<p class="note">{escape(n)}</p>' for n in report.notes)
    return (
        f"<h1>{escape(report.title)}</h1>"
        f"<p>generated {escape(report.generated_utc)} by gpubench</p>{notes}"
    )


def _details(report: Report) -> str:
    return "<h2>Details</h2><p>The figures behind the verdicts, run by run.</p>"


def _methodology(report: Report) -> str:
    runs = report.runs
    targets = sorted({f"{t['name']} ({t['provider']})" for r in runs for t in r["targets"]})
    days = sorted({(r["started_utc"] or "")[:10] for r in runs} - {""})
    text = (
        f"<h2>Methodology</h2><p>{len(runs)} run(s) on {len(days)} day(s) "
        f"({', '.join(days) or 'no date'}) of {', '.join(targets)}: cold start is latency minus "
        "inference time; variability is the per-day median; autoscaling is a burst of "
        "requests at a fixed concurrency (see each run's configuration below).</p>"
    )
    return text + s.summary(report, "<h3>Measurements</h3>")


def _reference_question(
    question: Callable[[Report, str, str], str], title: str, detail: Section
) -> Section:
    """A question's verdict and chart as a top-level section under the reference report's
    heading, then its details."""

    def section(report: Report) -> str:
        return question(report, "h2", title) + detail(report)

    section.__name__ = title
    return section


def _review(report: Report) -> str:
    """The reference report's "comparative performance review": per target, its figures."""
    cold = {r["target"]: r for r in report.series.get("compare_cold_start", [])}
    burst = {r["target"]: r for r in report.series.get("compare_burst", [])}
    days = {
        r["target"]: r for r in report.tables.get("variability", []) if r["figure"] == "cold_start"
    }
    bills = {r["target"]: r for r in report.series.get("compare_cost", [])}
    items = []
    for target in q.colors(report):
        facts = []
        if target in cold:
            facts.append(f"cold start median {duration(cold[target]['median_ms'])}")
        if target in days:
            facts.append(f"daily cold start range {duration(days[target]['range_ms'])}")
        if target in burst:
            b = burst[target]
            facts.append(
                f"burst latency median {duration(b['median_ms'])}, p95 {duration(b['p95_ms'])}"
            )
        if target in bills:
            facts.append(f"{_usd(bills[target]['usd_per_day'])} per day")
        items.append(f"<li><b>{escape(target)}</b>: {escape('; '.join(facts) or 'no data')}</li>")
    return "<h2>Comparative performance review</h2><ul class='review'>" + "".join(items) + "</ul>"


def _verdicts(report: Report) -> str:
    rows = report.tables.get("comparison", [])
    if not rows:
        return ""
    items = "".join(
        f"<li><b>{escape(q.TITLES[r['question']])}</b>: {escape(r['verdict'])}</li>" for r in rows
    )
    return f"<h2>Summary</h2><ul class='review'>{items}</ul>"


def _shapes(report: Report) -> str:
    """Stages, sweep and max_rate results (empty when the runs have none): ``_shapes.py``."""
    return shapes_html(report, figure, table)


def _advice(report: Report) -> str:
    """``gpubench advise``'s page (``report --advice FILE``), empty without one: ``_advise.py``."""
    return "" if report.advice is None else advice_section(report.advice)


LAYOUTS: dict[str, tuple[Section, ...]] = {
    "comparison": (
        _heading,
        q.at_a_glance,
        _advice,
        _details,
        s.summary,
        s.streaming,
        s.latency_groups,
        s.boxes,
        s.cold,
        s.days,
        s.bursts,
        _shapes,
        s.cost,
        s.config,
    ),
    "reference": (
        _heading,
        _methodology,
        _reference_question(q.cold_start, "Cold start", s.cold),
        _reference_question(q.variability, "Variability", s.days),
        _reference_question(q.burst, "Autoscaling", s.bursts),
        _shapes,
        _reference_question(q.streaming, "Streaming", s.streaming),
        s.latency_groups,
        _review,
        _reference_question(q.cost, "Pricing", s.cost),
        _advice,
        _verdicts,
        s.config,
    ),
}


def render_html(report: Report) -> str:
    try:
        sections = LAYOUTS[report.layout]
    except KeyError:
        raise ValueError(
            f"layout must be one of {sorted(LAYOUTS)}, got {report.layout!r}"
        ) from None
    body = "".join(section(report) for section in sections)
    # the CSP is belt and braces: nothing in the page may fetch, even if a value slipped in
    csp = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(report.title)}</title><style>{CSS}</style></head>"
        f"<body>{body}</body></html>\n"
    )
