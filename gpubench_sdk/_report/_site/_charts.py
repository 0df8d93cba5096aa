"""The site's one chart of its own: daily values over weeks or years, with a 95% CI band and
the days the change detector flagged.

Drawn with the report's SVG pieces (``_report/_svg``: scales, nice ticks, axes, the invisible
plot area, legends), so it follows the report's rules: every datum is a ``class="mark"`` with a
``<title>``, inside its plot area, and every colour drawn is in the legend. The report's own
``range_chart`` labels every day, which is unreadable past a few weeks; this one labels a few
evenly spaced dates and draws each day as a point only while the points stay apart.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from .._svg import PALETTE, WIDTH, _legend, _plot, _Scale, _svg, _y_axis, nice_ticks

FLAG_COLOR = "#d62728"
_LEFT, _RIGHT, _TOP, _BOTTOM, _HEIGHT = 60, 24, 26, 236, 296
_LABEL_GAP = 130  # px between two "changed" labels, so that they never overlap
_POINTS_UP_TO = 120  # days: beyond it a point per day would merge into a line anyway
_TICK_DAYS = (1, 2, 7, 14, 28, 56, 91, 182, 364)


@dataclass(frozen=True, slots=True)
class Line:
    """One series: ``points`` are (ISO date, value, CI low, CI high); NaN where none."""

    name: str
    points: Sequence[tuple[str, float, float, float]]
    color: str = ""


def _f(v: float) -> str:
    return f"{v:.1f}"


def _day(date: str) -> int:
    return dt.date.fromisoformat(date).toordinal()


def history_chart(
    lines: Sequence[Line],
    *,
    first: str,
    last: str,
    unit: str,
    title: str,
    flagged: Sequence[tuple[str, str, str]] = (),
) -> str:
    """``lines`` over the days ``first``..``last`` (ISO dates), a band where a point has a CI,
    and each change the detector flagged, given as (first day, last day, note) of a run of
    flagged days: a marker on its first day (when it changed), a shaded span to its last (a
    lasting step leaves every later day different from the days before it too), and a
    "changed" label where there is room."""
    d0, d1 = _day(first), _day(last)
    x = _Scale(d0 - 0.5, d1 + 0.5, _LEFT, WIDTH - _RIGHT)
    values = [v for ln in lines for _, *vs in ln.points for v in vs if math.isfinite(v)] or [0.0]
    ticks = nice_ticks(min(0.0, *values), max(values))
    y = _Scale(ticks[0], ticks[-1], _BOTTOM, _TOP)
    body = _y_axis(y, ticks, _LEFT, WIDTH - _RIGHT, unit)
    body.append(_plot(_LEFT, _TOP, WIDTH - _RIGHT, _BOTTOM))
    body += _date_axis(x, d0, d1)
    colors = [ln.color or PALETTE[i % len(PALETTE)] for i, ln in enumerate(lines)]
    dots = d1 - d0 < _POINTS_UP_TO
    for ln, color in zip(lines, colors, strict=True):
        pts = sorted((p for p in ln.points if math.isfinite(p[1])), key=lambda p: p[0])
        body += _band(ln.name, pts, color, x, y)
        if not pts:
            continue
        coords = " ".join(f"{_f(x(_day(d)))},{_f(y(v))}" for d, v, _, _ in pts)
        body.append(
            f'<polyline class="mark" data-kind="line" points="{coords}" fill="none" '
            f'stroke="{color}" stroke-width="1.5"><title>{escape(ln.name)}: {len(pts)} days'
            "</title></polyline>"
        )
        if dots:
            body.append(f'<g fill="{color}">')
            for d, v, lo, hi in pts:
                ci = f" (95% CI {lo:.1f}-{hi:.1f})" if math.isfinite(lo) else ""
                body.append(
                    f'<circle class="mark" data-kind="day" cx="{_f(x(_day(d)))}" '
                    f'cy="{_f(y(v))}" r="2.6"><title>{escape(ln.name)} {d}: {v:.1f}{ci}'
                    "</title></circle>"
                )
            body.append("</g>")
    label_at = -math.inf
    for start, end, note in sorted(flagged):
        s0, s1 = _day(start), _day(end)
        if s1 < d0 or s0 > d1:
            continue
        px, px_end = x(max(s0, d0)), x(min(s1, d1))
        if s0 < d0:  # a change from before the chart's first day: its span only
            body += _span(px, px_end, start, end)
            continue
        label = px - label_at > _LABEL_GAP  # labels never overlap; the markers say it all
        body += _flag(px, px_end, start, end, note, label=label)
        label_at = px if label else label_at
    legend = [(ln.name, c) for ln, c in zip(lines, colors, strict=True)]
    if flagged:
        legend.append(("change flagged", FLAG_COLOR))
    rows = _legend_rows(legend)
    body.append('<g class="legend">')
    for i, row in enumerate(rows):  # one legend, in as many rows as its names need
        body += _legend(row, _HEIGHT - 8 + 18 * i, _LEFT)[1:-1]
    body.append("</g>")
    return _svg(_HEIGHT + 18 * (len(rows) - 1), body, title)


def _legend_rows(items: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """The legend's items in rows that fit the chart's width (``_legend``'s spacing)."""
    rows: list[list[tuple[str, str]]] = [[]]
    x = _LEFT
    for name, color in items:
        width = 24 + 7 * len(name)
        if rows[-1] and x + width > WIDTH:
            rows.append([])
            x = _LEFT
        rows[-1].append((name, color))
        x += width
    return rows


def _band(
    name: str, pts: list[tuple[str, float, float, float]], color: str, x: _Scale, y: _Scale
) -> list[str]:
    """The CI as one filled area per run of consecutive points that have one."""
    runs: list[list[tuple[float, float, float]]] = [[]]
    for d, _, lo, hi in pts:
        if math.isfinite(lo) and math.isfinite(hi):
            runs[-1].append((x(_day(d)), y(lo), y(hi)))
        elif runs[-1]:
            runs.append([])
    out = []
    for run in runs:
        if len(run) < 2:
            continue
        upper = [f"{_f(px)},{_f(hi)}" for px, _, hi in run]
        lower = [f"{_f(px)},{_f(lo)}" for px, lo, _ in reversed(run)]
        out.append(
            f'<polygon class="mark" data-kind="band" points="{" ".join(upper + lower)}" '
            f'fill="{color}" fill-opacity="0.18" stroke="none">'
            f"<title>{escape(name)}: 95% CI</title></polygon>"
        )
    return out


def _flag(px: float, px_end: float, date: str, end: str, note: str, *, label: bool) -> list[str]:
    anchor = "end" if px > WIDTH - 140 else "start"
    dx = -4 if anchor == "end" else 4
    through = f" (flagged through {end})" if end != date else ""
    out = _span(px, px_end, date, end)
    out += [
        f'<g class="mark flag" data-flag="{date}" stroke="{FLAG_COLOR}">'
        f"<title>{escape(date)}: {escape(note)}{escape(through)}</title>"
        f'<line x1="{_f(px)}" x2="{_f(px)}" y1="{_TOP}" y2="{_BOTTOM}" stroke-dasharray="4 3"/>'
        f'<path d="M{_f(px - 5)},{_TOP} L{_f(px + 5)},{_TOP} L{_f(px)},{_TOP + 8} Z" '
        f'fill="{FLAG_COLOR}"/></g>',
    ]
    if label:
        out.append(
            f'<text class="direct" x="{_f(px + dx)}" y="{_TOP - 6}" text-anchor="{anchor}" '
            f'fill="{FLAG_COLOR}">changed {escape(date)}</text>'
        )
    return out


def _span(px: float, px_end: float, date: str, end: str) -> list[str]:
    """The run of flagged days after a change, shaded (nothing for a single day)."""
    if px_end <= px:
        return []
    return [
        f'<rect class="mark" data-kind="flag-span" x="{_f(px)}" y="{_TOP}" '
        f'width="{_f(px_end - px)}" height="{_BOTTOM - _TOP}" fill="{FLAG_COLOR}" '
        f'fill-opacity="0.08"><title>{escape(date)} to {escape(end)}: flagged</title></rect>'
    ]


def _date_axis(x: _Scale, d0: int, d1: int) -> list[str]:
    """At most 7 date labels, a whole number of days (or weeks, months...) apart."""
    step = next((s for s in _TICK_DAYS if (d1 - d0) / s <= 6), 364 * max(1, (d1 - d0) // 2184))
    out = []
    for d in range(d0, d1 + 1, step):
        px = _f(x(d))
        label = dt.date.fromordinal(d).isoformat()
        out.append(f'<line x1="{px}" x2="{px}" y1="{_TOP}" y2="{_BOTTOM}" stroke="#e3e5e8"/>')
        # the last label right-aligned near the edge, where a centred one would be cut off
        anchor = "end" if x(d) > WIDTH - _RIGHT - 32 else "middle"
        out.append(f'<text x="{px}" y="{_BOTTOM + 16}" text-anchor="{anchor}">{label}</text>')
    return out
