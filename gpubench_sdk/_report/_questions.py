"""The four comparisons as the page shows them: a verdict line, then one chart with every
target on it (shared scale, each target's colour the same on every chart, direct labels)."""

from __future__ import annotations

from html import escape

from . import _svg
from ._compare import COLD_PHASES, duration
from ._format import figure
from ._read import Report, Row
from ._summary import usd

TITLES = {
    "cold_start": "Cold start",
    "variability": "Variability by day",
    "burst": "Latency under a burst",
    "ttft": "Streaming: time to first token and between tokens",
    "cost_per_day": "Cost per day at your traffic",
}


def colors(report: Report) -> dict[str, str]:
    """One colour per target, in the order targets first appear, for every chart."""
    names = dict.fromkeys(t["name"] for r in report.runs for t in r["targets"])
    return {n: _svg.PALETTE[i % len(_svg.PALETTE)] for i, n in enumerate(names)}


# Why a question has no verdict, when fewer than two targets could be compared.
_NO_VERDICT = {
    "cold_start": "fewer than two targets had a cold request",
    "variability": "fewer than two targets were measured on two days or more",
    "burst": "fewer than two targets ran a burst",
    "ttft": "fewer than two targets streamed tokens",
    "cost_per_day": "fewer than two targets have a price (price_per_s_usd or price_sku)",
}


def verdict(report: Report, question: str) -> str:
    row = next((r for r in report.tables.get("comparison", []) if r["question"] == question), None)
    if row is None:
        return f'<p class="verdict none">No verdict: {_NO_VERDICT[question]}.</p>'
    mark = "significant" if row["significant"] else "not-significant"
    return f'<p class="verdict {mark}" data-question="{question}">{escape(row["verdict"])}</p>'


def _section(report: Report, question: str, chart: str, level: str, title: str | None) -> str:
    return (
        f'<section class="question" data-question="{question}">'
        f"<{level}>{escape(title or TITLES[question])}</{level}>{verdict(report, question)}"
        f"{chart}</section>"
    )


def cold_start(report: Report, level: str = "h3", title: str | None = None) -> str:
    rows = report.series.get("compare_cold_start", [])
    if not rows:
        return ""
    bars = []
    for r in rows:
        segs = [(p, r.get(f"{p}_mean_ms")) for p in COLD_PHASES]
        known = [(n, v) for n, v in segs if v is not None]
        bars.append((r["target"], known or [("unattributed", r["median_ms"] or 0.0)]))
    totals = [f"median {duration(r['median_ms'])}" for r in rows]
    svg = _svg.stacked_bars(bars, unit="mean cold request (ms)", title="cold start", totals=totals)
    caption = (
        "Every target's cold requests over all the runs: the bar is the mean cold request split "
        "into the provider-reported phases; the label is the median cold start (latency minus "
        f"inference time) the verdict compares. n = {', '.join(str(r['count']) for r in rows)}."
    )
    return _section(report, "cold_start", figure("compare-cold-start", svg, caption), level, title)


def variability(report: Report, level: str = "h3", title: str | None = None) -> str:
    rows = report.series.get("compare_daily", [])
    if not rows:
        if level == "h3" and not report.tables.get("daily"):  # say why, in the glance
            note = (
                "<p>The runs span one UTC day: repeat the plan on several days (gpubench "
                "campaign) to see whether the targets hold their numbers.</p>"
            )
            return _section(report, "variability", note, level, title)
        return ""
    nan = float("nan")
    series: dict[str, list[tuple[str, float, float, float]]] = {}
    for d in rows:
        lo, hi = d["median_ci_low_ms"], d["median_ci_high_ms"]
        series.setdefault(d["target"], []).append(
            (d["day"], d["median_ms"], nan if lo is None else lo, nan if hi is None else hi)
        )
    what = rows[0]["figure"].replace("_", " ")
    svg = _svg.range_chart(
        list(series.items()),
        unit=f"median {what} (ms)",
        title=f"{what} per day",
        labels=True,
        colors=[colors(report).get(n) for n in series],
    )
    caption = f"Per-day median {what} (UTC days) with its 95% CI, every target on one scale."
    return _section(report, "variability", figure("compare-daily", svg, caption), level, title)


def _boxes(report: Report, series: str) -> list[_svg.Box]:
    palette = colors(report)
    return [
        _svg.Box(
            r["target"],
            r["whisker_low_ms"],
            r["q1_ms"],
            r["median_ms"],
            r["q3_ms"],
            r["whisker_high_ms"],
            r["outliers_ms"],
            palette.get(r["target"]),
        )
        for r in report.series.get(series, [])
    ]


_BOX_CAPTION = (
    "box = quartiles, line and number = median, whiskers = furthest sample within 1.5 IQR, "
    "circles = samples beyond (up to 200)."
)


def burst(report: Report, level: str = "h3", title: str | None = None) -> str:
    boxes = _boxes(report, "compare_burst")
    if not boxes:
        return ""
    svg = _svg.box_plot(boxes, title="latency under a burst")
    counts = ", ".join(str(r["count"]) for r in report.series["compare_burst"])
    caption = (
        "Latency of every successful burst request of each target over all the runs: "
        f"{_BOX_CAPTION} n = {counts}."
    )
    return _section(report, "burst", figure("compare-burst", svg, caption), level, title)


def streaming(report: Report, level: str = "h3", title: str | None = None) -> str:
    charts = []
    for series, label in (("compare_ttft", "time to first token"), ("compare_itl", "inter-token")):
        boxes = _boxes(report, series)
        if boxes:
            svg = _svg.box_plot(boxes, unit=f"{label} (ms)", title=label)
            caption = f"{label.capitalize()} of every streamed request over all the runs: "
            charts.append(figure(series.replace("_", "-"), svg, caption + _BOX_CAPTION))
    if not charts:
        return ""
    return _section(report, "ttft", "".join(charts), level, title)


def cost(report: Report, level: str = "h3", title: str | None = None) -> str:
    rows: list[Row] = report.series.get("compare_cost", [])
    if not rows:
        if level == "h3":
            note = (
                "<p>No target has a price: give each target price_per_s_usd or price_sku in "
                "the plan to compare what a day of your traffic would cost.</p>"
            )
            return _section(report, "cost_per_day", note, level, title)
        return ""
    parts = ("inference", "idle", "cold_start", "rounding", "fees")
    bars = [
        (r["target"], [(p.replace("_", " "), r[f"{p}_usd"]) for p in parts if r[f"{p}_usd"]])
        for r in rows
    ]
    totals = [usd(r["usd_per_day"]) for r in rows]
    svg = _svg.stacked_bars(bars, unit="$ per day", title="cost per day", totals=totals)
    traffic = report.traffic
    caption = (
        f"The reference report's daily bill at {traffic['requests_per_day']:,} requests a day, "
        f"a {traffic['scale_down_s']:g} s scale-down delay reached "
        f"{traffic['scale_down_events']} times a day, from each priced target's measured median "
        "inference time and cold start (only the phases its provider bills)."
    )
    unpriced = sorted(set(colors(report)) - {r["target"] for r in rows})
    if unpriced:
        caption += (
            f" No price for {', '.join(unpriced)}: give it price_per_s_usd or price_sku in the "
            "plan."
        )
    return _section(report, "cost_per_day", figure("compare-cost", svg, caption), level, title)


QUESTIONS = (cold_start, variability, burst, streaming, cost)


def at_a_glance(report: Report) -> str:
    found = [q(report) for q in QUESTIONS]
    if not any(found):
        return ""
    return "<h2>At a glance: which target?</h2>" + "".join(found)
