"""The front page: the four questions answered with the latest data across targets, the changes
the detector flagged, and every target with its latest figures.

1. **Cold start**: each target's median cold start on its latest day (with its 95% CI).
2. **Day-to-day variability**: over each target's last ``WINDOW_DAYS`` days, the coefficient of
   variation of the daily median cold starts (the reference report's measure), their range, and
   the days the change detector flagged.
3. **Latency under a burst**: the p95 latency of the latest day's burst scenario (every measured
   request when the plan has no burst).
4. **Cost per day**: the latest day's bill per request (``gpubench cost run``'s estimate, idle
   tails included) times the chosen traffic: a linear estimate, so a scale-to-zero provider's
   idle tail weighs less at high traffic than it shows here.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from html import escape

from .._compare import duration
from .._format import figure
from .._summary import usd
from .._svg import stacked_bars
from . import _layout as h
from ._charts import Line, history_chart
from ._data import Day, Target, Tracker

WINDOW_DAYS = 30


def latest(target: Target, value: Callable[[Day], float]) -> tuple[Day | None, float]:
    """The target's latest day on which ``value`` is a number, and that number."""
    for day in reversed(target.ordered()):
        v = value(day)
        if math.isfinite(v):
            return day, v
    return None, math.nan


def cold_median(day: Day) -> float:
    return day.cold.median_ms if day.cold is not None else math.nan


def burst_p95(day: Day) -> float:
    v = day.burst_p95_ms
    return v if math.isfinite(v) else day.p95_ms[0]


def changes(tracker: Tracker) -> list[tuple[Target, Day]]:
    """Every flagged (target, day), newest first."""
    found = [(t, d) for t in tracker.targets for d in t.changed]
    return sorted(found, key=lambda td: (td[1].date, td[0].slug), reverse=True)


def _ranked(tracker: Tracker, value: Callable[[Day], float]) -> list[tuple[Target, Day, float]]:
    rows = []
    for t in tracker.targets:
        day, v = latest(t, value)
        if day is not None:
            rows.append((t, day, v))
    return sorted(rows, key=lambda r: r[2])


def short_label(target: Target, tracker: Tracker) -> str:
    """A label that fits a bar chart's margin: the target's name when no other target has it,
    cut to 28 characters."""
    same = [t for t in tracker.targets if t.name == target.name]
    text = target.name if len(same) == 1 else target.label
    return text if len(text) <= 28 else text[:27] + "…"


def _verdict(text: str, level: bool = False) -> str:
    cls = "verdict not-significant" if level else "verdict"
    return f'<p class="{cls}">{escape(text)}</p>'


def _cold_start(tracker: Tracker, first: str, last: str) -> str:
    ranked = _ranked(tracker, cold_median)
    out = ["<h2 id='cold-start'>1. Cold start</h2>"]
    if not ranked:
        return out[0] + _verdict("No cold start was measured yet.", True)
    best, best_day, best_v = ranked[0]
    text = f"{best.label} starts fastest from cold: median {duration(best_v)} on {best_day.date}"
    level = False
    if len(ranked) > 1:
        second, second_day, second_v = ranked[1]
        assert best_day.cold is not None and second_day.cold is not None
        level = best_day.cold.median_ci_ms[1] >= second_day.cold.median_ci_ms[0]
        text += f", against {second.label}'s {duration(second_v)}" + (
            " (level within the 95% CIs)" if level else ""
        )
    out.append(_verdict(text + ".", level))
    lines = [Line(short_label(t, tracker), _cold_points(t, first)) for t in tracker.targets]
    flags = [
        (run[0].date, run[-1].date, f"{t.label}: cold start changed")
        for t in tracker.targets
        for run in t.episodes()
        if run[-1].date >= first
    ]
    svg = history_chart(
        lines, first=first, last=last, unit="median cold start (ms)",
        title="daily median cold start, every target", flagged=flags,
    )  # fmt: skip
    out.append(figure("cold-start", svg, f"Daily median cold start, {first} to {last}."))
    rows = [
        [h.link(f"targets/{t.slug}.html", t.label), h.ms(v), h.ci(*_cold_ci(d)), d.date]
        for t, d, v in ranked
    ]
    out.append(h.table(["target", "median", "95% CI", "day"], rows))
    return "".join(out)


def _cold_ci(day: Day) -> tuple[float, float]:
    return day.cold.median_ci_ms if day.cold is not None else (math.nan, math.nan)


def _cold_points(t: Target, first: str) -> list[tuple[str, float, float, float]]:
    return [
        (d.date, d.cold.median_ms, math.nan, math.nan)
        for d in t.ordered()
        if d.date >= first and d.cold is not None
    ]


def _variability(tracker: Tracker) -> str:
    out = ["<h2 id='variability'>2. Day-to-day variability</h2>"]
    rows, steadiest = [], None
    for t in tracker.targets:
        days = t.ordered()[-WINDOW_DAYS:]
        medians = [d.cold.median_ms for d in days if d.cold is not None]
        if len(medians) < 2:
            continue
        mean = statistics.fmean(medians)
        cv = statistics.stdev(medians) / mean if mean else math.nan
        flagged = [d for d in days if d.cold is not None and d.cold.changed]
        recent = [run[0] for run in t.episodes() if run[-1].date >= days[0].date]
        if steadiest is None or (math.isfinite(cv) and cv < steadiest[1]):
            steadiest = (t, cv)
        rows.append(
            [
                h.link(f"targets/{t.slug}.html", t.label),
                f"{cv:.1%}" if math.isfinite(cv) else "-",
                h.ms(max(medians) - min(medians)),
                str(len(medians)),
                str(len(flagged)),
                ", ".join(
                    f'<span class="flagged">{h.link(f"days/{d.date}.html", d.date)}</span>'
                    for d in recent
                )
                or "-",
            ]
        )
    if steadiest is None:
        return out[0] + _verdict("Too few days yet to measure variability.", True)
    flagged_n = sum(1 for t, _ in changes(tracker))
    out.append(
        _verdict(
            f"{steadiest[0].label} varies least from day to day (CV of the daily median cold "
            f"start {steadiest[1]:.1%} over its last {WINDOW_DAYS} days); the change detector "
            f"flagged {flagged_n} day(s) in all."
        )
    )
    head = ["target", "CV of medians", "range", "days", "flagged", "changes from"]
    out.append(h.table(head, rows))
    return "".join(out)


def _bars(
    tracker: Tracker,
    anchor: str,
    heading: str,
    value: Callable[[Day], float],
    words: tuple[str, str, str],
    fmt: Callable[[float], str],
) -> str:
    """A question answered by one latest figure per target, lowest best, as bars."""
    ranked = _ranked(tracker, value)
    out = [f"<h2 id='{anchor}'>{escape(heading)}</h2>"]
    if not ranked:
        return out[0] + _verdict(f"No {words[0]} was measured yet.", True)
    best, day, v = ranked[0]
    out.append(_verdict(f"{best.label} {words[1]}: {fmt(v)} on {day.date}."))
    rows = [(short_label(t, tracker), [(words[2], v)]) for t, _, v in ranked]
    svg = stacked_bars(rows, unit=words[2], title=heading, totals=[fmt(v) for _, _, v in ranked])
    out.append(figure(anchor, svg, f"{heading}: each target's latest day."))
    return "".join(out)


def front_page(tracker: Tracker, requests_per_day: int) -> str:
    dates = tracker.dates
    last = dates[-1]
    first = dates[max(0, len(dates) - WINDOW_DAYS)]
    parts = [
        f"<h1>How serverless GPUs start, vary, burst and bill: {len(tracker.targets)} "
        "targets, measured every day</h1>",
        f'<p class="lede">Latest data {escape(last)}; history since {escape(dates[0])}. '
        "Each answer below uses every target's latest measured day; the "
        '<a href="methodology.html">methodology</a> says what was sent, how often and from '
        "where.</p>",
        _cold_start(tracker, first, last),
        _variability(tracker),
        _bars(
            tracker,
            "burst",
            "3. Latency under a burst",
            burst_p95,
            ("burst", "holds the lowest p95 latency under a burst", "p95 latency (ms)"),
            duration,
        ),
        _bars(
            tracker,
            "cost",
            f"4. Cost per day at {requests_per_day:,} requests",
            lambda d: d.usd_per_request() * requests_per_day,
            ("bill", "costs least per day", "$ per day"),
            usd,
        ),
        _changes(tracker),
        _targets(tracker),
    ]
    return "".join(parts)


def _changes(tracker: Tracker) -> str:
    """Each change once: the first day of each run of flagged days, newest first."""
    found = sorted(
        ((t, run) for t in tracker.targets for run in t.episodes()),
        key=lambda tr: (tr[1][0].date, tr[0].slug),
        reverse=True,
    )
    out = ["<h2 id='changes'>Changes the detector flagged</h2>"]
    if not found:
        return out[0] + "<p>No day differed from the days before it (cold start).</p>"
    items = []
    for t, run in found[:30]:
        d = run[0]
        assert d.cold is not None
        more = (
            f"; {len(run) - 1} later day(s) flagged too, through {run[-1].date}"
            if len(run) > 1
            else ""
        )
        items.append(
            f'<li><span class="flagged">{h.link(f"days/{d.date}.html", d.date)}</span>: '
            f"{h.link(f'targets/{t.slug}.html#changes', t.label)} cold start changed "
            f"(median {h.ms(d.cold.median_ms)}; Holm-adjusted p {d.cold.p_adjusted:.2g}"
            f"{escape(more)})</li>"
        )
    rest = f"<p>and {len(found) - 30} earlier.</p>" if len(found) > 30 else ""
    return out[0] + f"<ul class='flags'>{''.join(items)}</ul>{rest}"


def _targets(tracker: Tracker) -> str:
    rows = []
    for t in tracker.targets:
        day = t.ordered()[-1]
        _, cold = latest(t, cold_median)
        rows.append(
            [
                h.link(f"targets/{t.slug}.html", t.label),
                h.ms(cold),
                h.ms(day.p95_ms[0]),
                h.rate(day.error_rate),
                escape(usd(day.bill_usd)) if day.bill_usd is not None else "-",
                str(len(t.changed)),
                day.date,
            ]
        )
    head = ["target", "cold start", "p95 latency", "errors", "bill", "days flagged", "latest"]
    return "<h2 id='targets'>Targets</h2>" + h.table(head, rows)
