"""Charts that cannot clip: the axes cover any data, and every mark lands in the plot area.

Property tests (hypothesis) over ``nice_ticks`` and over the charts themselves: the SVG's marks
(circles, rectangles, lines) are read back and checked against its ``rect.plot``. The browser
test checks the same on the rendered page.
"""

from __future__ import annotations

import itertools
import math
import re
import xml.etree.ElementTree as ET

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gpubench_sdk._report import _svg

finite = st.floats(min_value=-1e9, max_value=1e9, allow_nan=False, allow_infinity=False)
positive = st.floats(min_value=0, max_value=1e7, allow_nan=False, allow_infinity=False)


@given(finite, finite, st.integers(min_value=2, max_value=12))
@example(0.0, 1e-05, 3)  # 1e-05 / 5e-06 is a hair above 2: no extra tick past the data
@example(0.0, 1222.0, 6)  # the demo's cold start, cut at 1,000 ms before
def test_ticks_cover_the_range_evenly_with_round_steps(a: float, b: float, count: int) -> None:
    lo, hi = min(a, b), max(a, b)
    ticks = _svg.nice_ticks(lo, hi, count)
    assert ticks[0] <= lo and ticks[-1] >= hi
    assert len(ticks) >= 2 and all(math.isfinite(t) for t in ticks)
    steps = [y - x for x, y in itertools.pairwise(ticks)]
    step = steps[0]
    ulps = 8 * math.ulp(max(abs(ticks[0]), abs(ticks[-1])))  # what float ticks can resolve
    assert step > 0 and all(math.isclose(s, step, rel_tol=1e-6, abs_tol=ulps) for s in steps)
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert any(math.isclose(mantissa, m, rel_tol=1e-6, abs_tol=ulps / step) for m in (1, 2, 5, 10))
    if hi > lo:  # no more than a step of slack at either end
        assert ticks[1] > lo and ticks[-2] < hi
        assert len(ticks) <= count + 3


@pytest.mark.parametrize(
    ("lo", "hi"), [(0, 1222), (0, 300.5), (0, 1044), (5, 5), (0, 0), (-3, 7), (float("nan"), 1)]
)
def test_known_ranges(lo: float, hi: float) -> None:
    ticks = _svg.nice_ticks(lo, hi)
    assert ticks[-1] >= (hi if math.isfinite(hi) else 0) and len(ticks) >= 2
    assert _svg.nice_ticks(0, 1222)[-1] == 1500  # the demo's cold start bar, cut at 1,000 before


def _marks_outside(svg: str) -> list[str]:
    """Marks (by their drawn geometry) outside the plot area, with 4.5 px of slack."""
    ns = "{http://www.w3.org/2000/svg}"
    root = ET.fromstring(svg)
    plot = root.find(f".//{ns}rect[@class='plot']")
    assert plot is not None, "every chart draws its plot area"
    x0, y0 = float(plot.get("x", 0)), float(plot.get("y", 0))
    x1, y1 = x0 + float(plot.get("width", 0)), y0 + float(plot.get("height", 0))
    slack = 4.5
    bad = []
    marks = [e for e in root.iter() if "mark" in (e.get("class") or "").split()]
    for mark in marks:
        for e in mark.iter():
            tag = e.tag.removeprefix(ns)
            if tag == "circle":
                xs, ys = [float(e.get("cx", 0))], [float(e.get("cy", 0))]
            elif tag == "rect":
                x, y = float(e.get("x", 0)), float(e.get("y", 0))
                xs, ys = [x, x + float(e.get("width", 0))], [y, y + float(e.get("height", 0))]
            elif tag == "line":
                xs = [float(e.get("x1", 0)), float(e.get("x2", 0))]
                ys = [float(e.get("y1", 0)), float(e.get("y2", 0))]
            else:
                continue
            if min(xs) < x0 - slack or max(xs) > x1 + slack:
                bad.append(f"{tag} x {xs} outside {x0}-{x1}")
            if min(ys) < y0 - slack or max(ys) > y1 + slack:
                bad.append(f"{tag} y {ys} outside {y0}-{y1}")
    return bad


samples = st.lists(positive, min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(st.lists(samples, min_size=1, max_size=4))
def test_box_plots_hold_every_box_and_outlier(groups: list[list[float]]) -> None:
    boxes = []
    for i, g in enumerate(groups):
        v = sorted(g)
        q1, med, q3 = v[len(v) // 4], v[len(v) // 2], v[3 * len(v) // 4]
        boxes.append(_svg.Box(f"t{i}", v[0], q1, med, q3, v[-1], [v[-1] * 1.5 + 1]))
    assert _marks_outside(_svg.box_plot(boxes)) == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(positive, min_size=1, max_size=5), min_size=1, max_size=4))
@example(bars=[[5e-324]])  # a subnormal: its span was too small for log10
def test_stacked_bars_hold_every_segment(bars: list[list[float]]) -> None:
    rows = [(f"t{i}", [(f"p{j}", v) for j, v in enumerate(b)]) for i, b in enumerate(bars)]
    assert _marks_outside(_svg.stacked_bars(rows, totals=["x"] * len(rows))) == []


@settings(max_examples=60, deadline=None)
@given(samples, st.floats(-50, 50), st.floats(-1e4, 1e4))
def test_scatter_holds_every_point_and_its_trend(
    ys: list[float], slope: float, intercept: float
) -> None:
    svg = _svg.scatter(list(range(len(ys))), ys, trend=(slope, intercept))
    assert _marks_outside(svg) == []
    trend = re.search(r'<line x1="([-\d.]+)" y1="([-\d.]+)" x2="([-\d.]+)" y2="([-\d.]+)"'
                      r' stroke="#ff725c"', svg)  # fmt: skip
    assert trend is not None
    plot = re.search(r'class="plot" x="[\d.]+" y="([\d.]+)" width="[\d.]+" height="([\d.]+)"', svg)
    assert plot is not None
    top, bottom = float(plot.group(1)), float(plot.group(1)) + float(plot.group(2))
    assert all(top - 0.1 <= float(trend.group(k)) <= bottom + 0.1 for k in (2, 4))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(positive, positive, positive), min_size=1, max_size=5))
def test_day_ranges_hold_every_median_and_ci(points: list[tuple[float, float, float]]) -> None:
    series = [
        ("a", [(f"2026-01-0{i + 1}", m, min(lo, m), max(hi, m)) for i, (m, lo, hi) in
               enumerate(points)]),
        ("b", [("2026-01-01", points[0][0] * 2, 0.0, points[0][0] * 3)]),
    ]  # fmt: skip
    assert _marks_outside(_svg.range_chart(series, labels=True)) == []


@settings(max_examples=40, deadline=None)
@given(samples)
def test_histograms_hold_every_bin(values: list[float]) -> None:
    assert _marks_outside(_svg.histogram(values, unit="ms")) == []
