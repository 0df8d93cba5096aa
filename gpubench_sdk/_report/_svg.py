"""Inline SVG charts drawn in Python: no script, no fetch, so a report opens offline anywhere.

Every drawn datum carries ``class="mark"`` (the browser test counts them) and a ``<title>``
tooltip with its value. Axes use "nice" ticks (1, 2, 5 times a power of ten).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

import numpy as np

PALETTE = ("#4269d0", "#efb118", "#ff725c", "#6cc5b0", "#3ca951", "#ff8ab7", "#a463f2", "#97bbf5")
PHASE_COLORS = {
    "scheduling": "#97bbf5",
    "boot": "#ff725c",
    "execution": "#3ca951",
    "transfer": "#efb118",
    "unattributed": "#9498a0",
}
WIDTH = 760
_LEFT = 190  # room for "target · scenario" labels
_RIGHT = 24
_FONT = 'font-family="system-ui, sans-serif" font-size="11"'


def _f(v: float) -> str:
    return f"{v:.1f}"


def nice_ticks(lo: float, hi: float, count: int = 6) -> list[float]:
    """Evenly spaced round ticks (1, 2 or 5 times a power of ten) with ``ticks[0] <= lo`` and
    ``ticks[-1] >= hi``: an axis drawn from the first to the last tick holds every value in
    [lo, hi], so no mark is ever cut off. About ``count`` ticks (never fewer than 2)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        lo = lo if math.isfinite(lo) else 0.0
        hi = max(hi, lo + 1) if math.isfinite(hi) else lo + 1
    # (each end divided first: hi - lo overflows to inf for ends near +-1.8e308)
    raw = hi / max(1, count - 1) - lo / max(1, count - 1)
    if raw < 1e-300:  # a subnormal span (e.g. one value of 5e-324): too small for log10
        hi, raw = lo + 1e-290, 1e-290 / max(1, count - 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    # (a quotient a rounding error off a whole number must not add a tick past the data)
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    # multiples of the step (no running sum to drift), shown to 12 significant digits
    ticks = [float(f"{k * step:.12g}") for k in range(first, max(last, first + 1) + 1)]
    while ticks[0] > lo:  # rounding to 12 digits can only move an end by an ulp or so
        ticks.insert(0, float(f"{ticks[0] - step:.12g}"))
    while ticks[-1] < hi:
        ticks.append(float(f"{ticks[-1] + step:.12g}"))
    return ticks


def _label(v: float) -> str:
    if abs(v) >= 1000:
        return f"{v / 1000:g}k" if v % 1000 else f"{v / 1000:.0f}k"
    return f"{v:g}"


@dataclass
class _Scale:
    lo: float
    hi: float
    a: float  # pixel of lo
    b: float  # pixel of hi

    def __call__(self, v: float) -> float:
        span = self.hi - self.lo or 1.0
        return self.a + (v - self.lo) / span * (self.b - self.a)


def _svg(height: float, body: list[str], title: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {_f(height)}" '
        f'width="{WIDTH}" height="{_f(height)}" role="img" aria-label="{escape(title)}" {_FONT}>'
        + "".join(body)
        + "</svg>"
    )


def _plot(x0: float, y0: float, x1: float, y1: float) -> str:
    """The plot area, drawn invisibly: every mark must lie inside it (the browser test checks)."""
    return (
        f'<rect class="plot" x="{_f(x0)}" y="{_f(y0)}" width="{_f(x1 - x0)}" '
        f'height="{_f(y1 - y0)}" fill="none"/>'
    )


def _x_axis(scale: _Scale, ticks: list[float], y0: float, y1: float, unit: str) -> list[str]:
    out = []
    for t in ticks:
        x = _f(scale(t))
        out.append(f'<line x1="{x}" x2="{x}" y1="{_f(y0)}" y2="{_f(y1)}" stroke="#e3e5e8"/>')
        out.append(f'<text x="{x}" y="{_f(y1 + 14)}" text-anchor="middle">{_label(t)}</text>')
    mid = _f((scale.a + scale.b) / 2)
    out.append(f'<text x="{mid}" y="{_f(y1 + 30)}" text-anchor="middle">{escape(unit)}</text>')
    return out


def _y_axis(scale: _Scale, ticks: list[float], x0: float, x1: float, unit: str) -> list[str]:
    out = []
    for t in ticks:
        y = _f(scale(t))
        out.append(f'<line x1="{_f(x0)}" x2="{_f(x1)}" y1="{y}" y2="{y}" stroke="#e3e5e8"/>')
        out.append(f'<text x="{_f(x0 - 6)}" y="{y}" text-anchor="end" dy="4">{_label(t)}</text>')
    out.append(
        f'<text transform="translate(14 {_f((scale.a + scale.b) / 2)}) rotate(-90)" '
        f'text-anchor="middle">{escape(unit)}</text>'
    )
    return out


def _legend(items: Sequence[tuple[str, str]], y: float, x: float = _LEFT) -> list[str]:
    """A swatch and a name per item, in a ``g.legend`` (the tests match marks' colours to it)."""
    out = ['<g class="legend">']
    for name, color in items:
        out.append(
            f'<rect data-legend="{escape(name)}" x="{_f(x)}" y="{_f(y - 9)}" width="10" '
            f'height="10" fill="{color}"/>'
        )
        out.append(f'<text x="{_f(x + 14)}" y="{_f(y)}">{escape(name)}</text>')
        x += 24 + 7 * len(name)
    out.append("</g>")
    return out


def _segment_colors(names: Sequence[str]) -> dict[str, str]:
    """One colour per segment name, the same in every bar and in the legend: the phases' own
    colours first, then the palette's colours no name here has yet. (Picking by how many names
    had been seen so far gave a name a new colour in each later bar, one the legend did not list.)
    """
    colors = {n: PHASE_COLORS[n] for n in names if n in PHASE_COLORS}
    for n in names:
        if n not in colors:
            free = [c for c in PALETTE if c not in colors.values()]
            colors[n] = free[0] if free else PALETTE[len(colors) % len(PALETTE)]
    return {n: colors[n] for n in names}


@dataclass
class Box:
    label: str
    whisker_low: float
    q1: float
    median: float
    q3: float
    whisker_high: float
    outliers: Sequence[float]
    color: str | None = None


def box_plot(boxes: Sequence[Box], unit: str = "latency (ms)", title: str = "") -> str:
    """Horizontal Tukey box plots, one row per box."""
    row_h, top = 34, 10
    height = top + row_h * len(boxes) + 44
    values = [v for b in boxes for v in (b.whisker_low, b.whisker_high, *b.outliers)]
    ticks = nice_ticks(min(0.0, *values), max(values))
    x = _Scale(ticks[0], ticks[-1], _LEFT, WIDTH - _RIGHT)
    body = _x_axis(x, ticks, top, top + row_h * len(boxes), unit)
    body.append(_plot(_LEFT, top, WIDTH - _RIGHT, top + row_h * len(boxes)))
    for i, b in enumerate(boxes):
        color = b.color or PALETTE[i % len(PALETTE)]
        cy = top + row_h * i + row_h / 2
        tip = escape(
            f"{b.label}: whiskers {b.whisker_low:.1f}-{b.whisker_high:.1f} ms, "
            f"quartiles {b.q1:.1f}/{b.median:.1f}/{b.q3:.1f} ms, {len(b.outliers)} outliers"
        )
        body.append(
            f'<text x="{_LEFT - 8}" y="{_f(cy)}" dy="4" text-anchor="end">{escape(b.label)}</text>'
        )
        body.append(
            f'<g class="mark" data-kind="box"><title>{tip}</title>'
            f'<line x1="{_f(x(b.whisker_low))}" x2="{_f(x(b.whisker_high))}" y1="{_f(cy)}" '
            f'y2="{_f(cy)}" stroke="#555"/>'
            f'<rect x="{_f(x(b.q1))}" y="{_f(cy - 9)}" width="{_f(max(1, x(b.q3) - x(b.q1)))}" '
            f'height="18" fill="{color}" fill-opacity="0.35" stroke="{color}"/>'
            f'<line x1="{_f(x(b.median))}" x2="{_f(x(b.median))}" y1="{_f(cy - 9)}" '
            f'y2="{_f(cy + 9)}" stroke="#111" stroke-width="2"/></g>'
            f'<text class="direct" x="{_f(x(b.median))}" y="{_f(cy - 11)}" '
            f'text-anchor="middle" font-size="10">{_label(round(b.median, 1))}</text>'
        )
        for v in b.outliers:
            body.append(
                f'<circle class="mark" data-kind="outlier" cx="{_f(x(v))}" cy="{_f(cy)}" r="2" '
                f'fill="none" stroke="{color}"><title>{v:.1f} ms</title></circle>'
            )
    return _svg(height, body, title)


def stacked_bars(
    rows: Sequence[tuple[str, Sequence[tuple[str, float]]]],
    unit: str = "ms",
    title: str = "",
    totals: Sequence[str] | None = None,
) -> str:
    """Horizontal bars, each a stack of named segments (colours from ``PHASE_COLORS``);
    ``totals``: a label written at the end of each bar (its total, say)."""
    row_h, top = 30, 10
    right = WIDTH - (_RIGHT + 70 if totals else _RIGHT)
    height = top + row_h * len(rows) + 64
    total = max(sum(v for _, v in segs) for _, segs in rows) if rows else 1.0
    ticks = nice_ticks(0.0, total)
    x = _Scale(ticks[0], ticks[-1], _LEFT, right)
    body = _x_axis(x, ticks, top, top + row_h * len(rows), unit)
    body.append(_plot(_LEFT, top, right, top + row_h * len(rows)))
    names = _segment_colors(list(dict.fromkeys(name for _, segs in rows for name, _ in segs)))
    for i, (label, segs) in enumerate(rows):
        y = top + row_h * i + 6
        body.append(
            f'<text x="{_LEFT - 8}" y="{_f(y + 9)}" dy="4" text-anchor="end">{escape(label)}</text>'
        )
        cursor = 0.0
        for name, value in segs:
            color = names[name]
            w = x(cursor + value) - x(cursor)
            body.append(
                f'<rect class="mark" data-kind="segment" data-name="{escape(name)}" '
                f'x="{_f(x(cursor))}" y="{_f(y)}" '
                f'width="{_f(max(w, 0.5))}" height="18" fill="{color}">'
                f"<title>{escape(label)}: {escape(name)} {value:.1f} {escape(unit)}</title></rect>"
            )
            cursor += value
        if totals:
            body.append(
                f'<text class="direct" x="{_f(x(cursor) + 6)}" y="{_f(y + 9)}" dy="4">'
                f"{escape(totals[i])}</text>"
            )
    body += _legend(list(names.items()), height - 8)
    return _svg(height, body, title)


def range_chart(
    series: Sequence[tuple[str, Sequence[tuple[str, float, float, float]]]],
    unit: str = "median (ms)",
    title: str = "",
    labels: bool = False,
    colors: Sequence[str | None] = (),
) -> str:
    """Per-day medians with their CI as vertical bars, one coloured line per series.

    ``series``: (name, [(day, median, ci_low, ci_high), ...]).
    """
    days = sorted({d for _, pts in series for d, *_ in pts})
    top, bottom, height = 10, 230, 290
    # (no finite value at all, say every median NaN: an empty axis from 0, not a crash)
    values = [v for _, pts in series for _, *vs in pts for v in vs if math.isfinite(v)] or [0.0]
    ticks = nice_ticks(min(0.0, *values), max(values))
    y = _Scale(ticks[0], ticks[-1], bottom, top)
    step = (WIDTH - _RIGHT - 60) / max(1, len(days))
    body = _y_axis(y, ticks, 60, WIDTH - _RIGHT, unit)
    body.append(_plot(60, top, WIDTH - _RIGHT, bottom))
    for j, day in enumerate(days):
        body.append(
            f'<text x="{_f(60 + step * (j + 0.5))}" y="{bottom + 16}" '
            f'text-anchor="middle">{escape(day)}</text>'
        )
    # a series without a colour of its own (``colors`` short, or None) takes the palette's
    palette = [
        (colors[i] if i < len(colors) else None) or PALETTE[i % len(PALETTE)]
        for i in range(len(series))
    ]
    for i, (name, pts) in enumerate(series):
        color = palette[i]
        offset = (i - (len(series) - 1) / 2) * 6  # side by side, so CIs do not hide each other
        coords = []
        for day, med, lo, hi in pts:
            if not math.isfinite(med):  # no median that day: nothing to place
                continue
            cx = 60 + step * (days.index(day) + 0.5) + offset
            coords.append(f"{_f(cx)},{_f(y(med))}")
            ci = ""
            if math.isfinite(lo) and math.isfinite(hi):
                ci = (
                    f'<line x1="{_f(cx)}" x2="{_f(cx)}" y1="{_f(y(lo))}" y2="{_f(y(hi))}" '
                    f'stroke="{color}" stroke-width="2"/>'
                )
            body.append(
                f'<g class="mark" data-kind="day">{ci}<circle cx="{_f(cx)}" cy="{_f(y(med))}" '
                f'r="4" fill="{color}"/><title>{escape(name)} {escape(day)}: median '
                f"{med:.1f} ms (CI {lo:.1f}-{hi:.1f})</title></g>"
            )
        body.append(
            f'<polyline points="{" ".join(coords)}" fill="none" stroke="{color}" '
            'stroke-opacity="0.6"/>'
        )
        if coords and labels:  # the name beside the last point: no trip to the legend
            end_x, end_y = coords[-1].split(",")
            body.append(
                f'<text class="direct" x="{_f(float(end_x) + 8)}" y="{end_y}" dy="4" '
                f'fill="{color}">'
                f"{escape(name[:18])}</text>"
            )
    body += _legend([(n, palette[i]) for i, (n, _) in enumerate(series)], height - 8)
    return _svg(height, body, title)


def _fitted(
    trend: tuple[float, float], xs: np.ndarray, floor: float, ceiling: float
) -> tuple[float, float, float, float] | None:
    """The fitted line ``y = intercept + slope x`` as its ends ``(x0, y0, x1, y1)``: over the
    data's x range only, and only where it lies between ``floor`` (0, or the data's minimum if
    lower) and ``ceiling`` (the data's maximum). An extrapolated latency below 0 ms means
    nothing, and drawing it pulled the axis down to -1,000 ms; a fit is a summary of the points,
    so it is not drawn where no point is. None when no part of the line is in that band."""
    slope, intercept = trend
    x0, x1 = float(xs.min()), float(xs.max())
    # widened by a rounding: a flat fit through equal points is their mean, which floats put
    # a hair above them (the mean of [0.1] * 3 is 0.10000000000000002)
    slack = 1e-9 * max(abs(floor), abs(ceiling), 1e-300)
    floor, ceiling = floor - slack, ceiling + slack
    if slope == 0.0:
        inside = floor <= intercept <= ceiling
        return (x0, intercept, x1, intercept) if inside else None
    # the x where the line meets each edge of the band, in increasing x
    at_floor, at_ceiling = (floor - intercept) / slope, (ceiling - intercept) / slope
    lo = max(x0, min(at_floor, at_ceiling))
    hi = min(x1, max(at_floor, at_ceiling))
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        return None

    def at(x: float) -> float:  # clamped: the edges' x are computed, so off by a rounding
        return min(max(intercept + slope * x, floor), ceiling)

    return lo, at(lo), hi, at(hi)


def scatter(
    x_values: Sequence[float],
    y_values: Sequence[float],
    *,
    trend: tuple[float, float] | None = None,
    x_unit: str = "request index (in send order)",
    y_unit: str = "latency (ms)",
    title: str = "",
) -> str:
    """Points, plus the fitted line ``y = intercept + slope x`` when ``trend`` is given (drawn
    over the points' x range, never below 0 or the lowest point nor above the highest:
    ``_fitted``)."""
    top, bottom, height = 10, 230, 296
    xs, ys = np.asarray(x_values, float), np.asarray(y_values, float)
    line = None
    if trend is not None and all(math.isfinite(v) for v in trend) and xs.size:
        line = _fitted(trend, xs, min(0.0, float(ys.min())), float(ys.max()))
    if xs.size:
        xt = nice_ticks(min(0.0, float(xs.min())), float(xs.max()))
        yt = nice_ticks(min(0.0, float(ys.min())), float(ys.max()))
    else:
        xt = yt = nice_ticks(0.0, 1.0)
    x = _Scale(xt[0], xt[-1], 60, WIDTH - _RIGHT)
    y = _Scale(yt[0], yt[-1], bottom, top)
    body = _y_axis(y, yt, 60, WIDTH - _RIGHT, y_unit) + _x_axis(x, xt, top, bottom, x_unit)
    body.append(_plot(60, top, WIDTH - _RIGHT, bottom))
    # the points' common look once, on their group: up to 2,000 points a chart add up
    body.append(f'<g data-kind="points" fill="{PALETTE[0]}" fill-opacity="0.6">')
    for a, b in zip(xs, ys, strict=True):
        body.append(
            f'<circle class="mark" cx="{_f(x(a))}" cy="{_f(y(b))}" r="2.2">'
            f"<title>#{a:.0f}: {b:.1f} ms</title></circle>"
        )
    body.append("</g>")
    legend = [("request", PALETTE[0])]
    if line is not None and trend is not None:
        x0, y0, x1, y1 = line
        body.append(
            f'<line class="trend" x1="{_f(x(x0))}" y1="{_f(y(y0))}" '
            f'x2="{_f(x(x1))}" y2="{_f(y(y1))}" stroke="{PALETTE[2]}" stroke-width="2">'
            f"<title>OLS: {trend[0]:.3f} ms per request</title></line>"
        )
        legend.append(("OLS fit", PALETTE[2]))
    body += _legend(legend, height - 8, 60)
    return _svg(height, body, title)


def histogram(values: Sequence[float], *, unit: str, bins: int = 40, title: str = "") -> str:
    """Counts of ``values`` in equal-width bins from 0 (or the minimum, if negative) to the
    maximum."""
    arr = np.asarray(values, float)
    lo, hi = min(0.0, float(arr.min())), float(arr.max())
    edges = np.linspace(lo, hi, bins + 1)
    if not (np.isfinite(edges).all() and (np.diff(edges) > 0).all()):
        # No span (every value 0, or one negative value) or one too small for `bins` distinct
        # edges (one subnormal value, 5e-324: numpy refuses): the bins split the axis instead,
        # which nice_ticks makes wide enough for them.
        ticks = nice_ticks(lo, hi)
        edges = np.linspace(ticks[0], ticks[-1], bins + 1)
    counts, edges = np.histogram(arr, bins=edges)
    top, bottom, height = 10, 200, 250
    xt = nice_ticks(float(edges[0]), float(edges[-1]))
    yt = nice_ticks(0.0, float(counts.max()))
    x = _Scale(xt[0], xt[-1], 60, WIDTH - _RIGHT)
    y = _Scale(yt[0], yt[-1], bottom, top)
    body = _y_axis(y, yt, 60, WIDTH - _RIGHT, "requests") + _x_axis(x, xt, top, bottom, unit)
    body.append(_plot(60, top, WIDTH - _RIGHT, bottom))
    for c, a, b in zip(counts, edges[:-1], edges[1:], strict=True):
        if not c:
            continue
        body.append(
            f'<rect class="mark" data-kind="bin" x="{_f(x(a))}" y="{_f(y(c))}" '
            f'width="{_f(max(1, x(b) - x(a) - 1))}" height="{_f(bottom - y(c))}" '
            f'fill="{PALETTE[3]}"><title>{a:.1f}-{b:.1f}: {c}</title></rect>'
        )
    return _svg(height, body, title)


def _log_ticks(lo: float, hi: float) -> list[float]:
    """Ticks at 1, 2 and 5 times the powers of ten from at or below ``lo`` to at or above
    ``hi`` (both > 0); only the powers of ten once that would be more than ten ticks."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    steps = (1, 2, 5) if last - first <= 3 else (1,)
    ticks = [m * 10.0**e for e in range(first, last + 1) for m in steps]
    low = max(t for t in ticks if t <= lo)
    high = min(t for t in ticks if t >= hi)
    return [float(f"{t:.12g}") for t in ticks if low <= t <= high]


@dataclass
class Mode:
    """One mode of a mixture, as ``metrics.ColdStartMode`` gives it: share, median, spread."""

    share: float
    median: float
    sigma: float  # of the log-normal, in natural-log units
    label: str


def mixture_histogram(
    values: Sequence[float], modes: Sequence[Mode], *, unit: str, bins: int = 30, title: str = ""
) -> str:
    """Counts of ``values`` (> 0) in bins equally wide on a log axis, with each mode's fitted
    log-normal drawn over them (scaled to its share of the counts) and a line at its median:
    a mixture's modes show as separate humps, which a box or a bar would merge."""
    arr = np.asarray([v for v in values if v > 0 and math.isfinite(v)], float)
    top, bottom, height = 10, 200, 262
    if not arr.size:
        return _svg(height, [], title)
    ticks = _log_ticks(float(arr.min()), float(arr.max()))
    lo, hi = math.log10(ticks[0]), math.log10(ticks[-1])
    if hi <= lo:
        hi = lo + 1
    edges = np.linspace(lo, hi, bins + 1)
    counts, _ = np.histogram(np.log10(arr), bins=edges)
    width_ln = (edges[1] - edges[0]) * math.log(10)  # a bin's width in natural-log units
    grid = np.linspace(lo, hi, 160)
    curves = []
    for m in modes:  # expected counts per bin: n * share * pdf(ln x) * bin width
        z = (grid * math.log(10) - math.log(m.median)) / m.sigma
        curves.append(
            arr.size * m.share * width_ln * np.exp(-0.5 * z**2) / (m.sigma * math.sqrt(2 * math.pi))
        )
    peak = max([float(counts.max())] + [float(c.max()) for c in curves])
    yt = nice_ticks(0.0, peak)
    x = _Scale(lo, hi, 60, WIDTH - _RIGHT)
    y = _Scale(yt[0], yt[-1], bottom, top)
    body = _y_axis(y, yt, 60, WIDTH - _RIGHT, "cold starts")
    for t in ticks:
        px = _f(x(math.log10(t)))
        body.append(f'<line x1="{px}" x2="{px}" y1="{top}" y2="{bottom}" stroke="#e3e5e8"/>')
        body.append(f'<text x="{px}" y="{bottom + 14}" text-anchor="middle">{_label(t)}</text>')
    body.append(
        f'<text x="{_f((x.a + x.b) / 2)}" y="{bottom + 30}" text-anchor="middle">'
        f"{escape(unit)} (log scale)</text>"
    )
    body.append(_plot(60, top, WIDTH - _RIGHT, bottom))
    for c, a, b in zip(counts, edges[:-1], edges[1:], strict=True):
        if c:
            body.append(
                f'<rect class="mark" data-kind="bin" x="{_f(x(a))}" y="{_f(y(c))}" '
                f'width="{_f(max(1, x(b) - x(a) - 1))}" height="{_f(bottom - y(c))}" '
                f'fill="{PALETTE[7]}"><title>{10**a:,.0f}-{10**b:,.0f}: {c}</title></rect>'
            )
    legend = [("cold starts", PALETTE[7])]
    for i, (m, curve) in enumerate(zip(modes, curves, strict=True)):
        color = PALETTE[(2 * i) % len(PALETTE)]
        points = " ".join(f"{_f(x(g))},{_f(y(v))}" for g, v in zip(grid, curve, strict=True))
        body.append(
            f'<polyline class="mark" data-kind="mode" points="{points}" fill="none" '
            f'stroke="{color}" stroke-width="2"><title>{escape(m.label)}</title></polyline>'
        )
        mx = _f(x(min(max(math.log10(m.median), lo), hi)))
        body.append(
            f'<line class="mark" data-kind="median" x1="{mx}" x2="{mx}" y1="{top}" '
            f'y2="{bottom}" stroke="{color}" stroke-dasharray="4 3">'
            f"<title>median {escape(m.label)}</title></line>"
        )
        legend.append((m.label, color))
    body += _legend(legend, height - 8, 60)
    return _svg(height, body, title)
