"""Charts that cannot clip: the axes cover any data, and every mark lands in the plot area.

Property tests (hypothesis) over ``nice_ticks`` and over the charts themselves: the SVG's marks
(circles, rectangles, lines) are read back and checked against its ``rect.plot``; every colour
drawn on a chart with a legend is in that legend, under the right name; a fitted line stays in
its data's x range and above 0 ms. The browser test checks marks and legends on the page.

The suite runs derandomized (tests/conftest.py): each ``@example`` below is an input a
random run once found, or a degenerate one (no span, one value, a subnormal, the generator's
largest value, signed zeros), checked on every run whatever the seed draws.
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
@example(0.0, 0.0, 6)  # no span
@example(-0.0, 0.0, 2)  # signed zeros: no span either
@example(-7.5, -7.5, 6)  # one negative value
@example(0.0, 5e-324, 6)  # a subnormal span, too small for log10
@example(5e-324, 5e-324, 12)
@example(-1e9, 1e9, 2)  # the generator's widest range
@example(1e9, 1e9, 12)
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
    # no more than a step of slack at either end (a subnormal span is widened to 1e-290 on
    # purpose: 10 ** floor(log10(span)) underflows to 0 below that)
    if hi - lo > 1e-290:
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


SVG_NS = "{http://www.w3.org/2000/svg}"
GRID = "#e3e5e8"  # the axes' grid lines: no datum


def _legend(root: ET.Element) -> dict[str, str]:
    """The chart's legend, name -> swatch colour ({} when it has none)."""
    return {
        r.get("data-legend", ""): r.get("fill", "")
        for g in root.iter(f"{SVG_NS}g")
        if g.get("class") == "legend"
        for r in g.iter(f"{SVG_NS}rect")
    }


def _colors_off_the_legend(svg: str) -> list[str]:
    """Every fill or stroke colour drawn outside the legend (an element's own, or inherited from
    its group) that the legend does not list; the grid's colour aside. A chart must have one."""
    root = ET.fromstring(svg)
    legend = set(_legend(root).values())
    assert legend, "the chart draws a legend"
    bad = []

    def walk(e: ET.Element, inherited: dict[str, str]) -> None:
        if e.get("class") == "legend":
            return
        own = {k: e.get(k, inherited.get(k, "")) for k in ("fill", "stroke")}
        for k, color in own.items():
            if color.startswith("#") and color != GRID and color not in legend:
                bad.append(f"{e.tag.removeprefix(SVG_NS)} {k}={color}")
        for child in e:
            walk(child, own)

    walk(root, {})
    return bad


def _fitted_lines_off_the_data(svg: str) -> list[str]:
    """Fitted lines (``line.trend``) with an end outside the points' x range (pixels), below
    the y axis's 0 tick (a latency below 0 ms) or above the highest point."""
    root = ET.fromstring(svg)
    points = [float(c.get("cx", 0)) for c in root.iter(f"{SVG_NS}circle")]
    highest = min(float(c.get("cy", 0)) for c in root.iter(f"{SVG_NS}circle"))
    zero = [float(t.get("y", 0)) for t in root.iter(f"{SVG_NS}text")
            if t.get("text-anchor") == "end" and t.text == "0"]  # fmt: skip
    assert zero, "the latency axis has a 0 tick"
    bad = []
    for line in root.iter(f"{SVG_NS}line"):
        if line.get("class") != "trend":
            continue
        for end in ("1", "2"):
            x, y = float(line.get(f"x{end}", 0)), float(line.get(f"y{end}", 0))
            if not min(points) - 0.1 <= x <= max(points) + 0.1:
                bad.append(f"x{end}={x} outside the points' {min(points)}-{max(points)}")
            if y > zero[0] + 0.1:  # SVG's y grows downwards
                bad.append(f"y{end}={y} below 0 ms (at y={zero[0]})")
            if y < highest - 0.1:
                bad.append(f"y{end}={y} above the highest point (at y={highest})")
    return bad


samples = st.lists(positive, min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(st.lists(samples, min_size=1, max_size=4))
@example(groups=[[0.0]])  # no span
@example(groups=[[5e-324]])  # a subnormal span
@example(groups=[[3.0, 3.0, 3.0], [3.0]])  # every value equal
@example(groups=[[1e7, 1e7], [0.0]])  # the generator's largest value
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
@example(bars=[[0.0, 0.0], [0.0]])  # no span
@example(bars=[[1e7] * 5] * 4)  # the generator's largest values, every bar the same
def test_stacked_bars_hold_every_segment(bars: list[list[float]]) -> None:
    rows = [(f"t{i}", [(f"p{j}", v) for j, v in enumerate(b)]) for i, b in enumerate(bars)]
    assert _marks_outside(_svg.stacked_bars(rows, totals=["x"] * len(rows))) == []


# segment names as the report's charts have them: phases (colours of their own) and others
segment_names = st.sampled_from(
    ["scheduling", "boot", "execution", "transfer", "unattributed", "inference", "idle",
     "cold start", "rounding", "fees"]
)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(segment_names, positive), max_size=6, unique_by=lambda s: s[0]),
        min_size=1,
        max_size=5,
    )
)
# the cost chart: a second target's "inference" was drawn in a colour the legend did not list
@example(bars=[[("inference", 1.0), ("idle", 2.0)], [("inference", 3.0), ("idle", 4.0)]])
@example(bars=[[("fees", 1.0)], [("boot", 1.0), ("fees", 1.0)]])  # a phase after another name
@example(bars=[[]])  # no segment at all
def test_every_segment_colour_is_its_name_in_the_legend(
    bars: list[list[tuple[str, float]]],
) -> None:
    rows = [(f"t{i}", segs) for i, segs in enumerate(bars)]
    svg = _svg.stacked_bars(rows, unit="$ per day")
    assert _marks_outside(svg) == []
    root = ET.fromstring(svg)
    legend = _legend(root)
    names = {n for segs in bars for n, _ in segs}
    assert set(legend) == names
    if len(names) <= len(_svg.PALETTE):  # no two names share a colour while the palette lasts
        assert len(set(legend.values())) == len(legend), legend
    for rect in root.iter(f"{SVG_NS}rect"):
        if rect.get("data-kind") == "segment":
            assert rect.get("fill") == legend[rect.get("data-name", "")], rect.attrib
    if names:
        assert _colors_off_the_legend(svg) == []


@settings(max_examples=60, deadline=None)
@given(samples, st.floats(-50, 50), st.floats(-1e4, 1e4))
# a burst's fit falling through 0 ms inside the data: the axis went to -1,000 ms
@example(ys=[100.0] * 10, slope=-50.0, intercept=100.0)
@example(ys=[1.0, 2.0], slope=-50.0, intercept=-1e4)  # the whole fit below 0: no line
@example(ys=[0.0], slope=0.0, intercept=0.0)  # one point, on a flat fit at 0
@example(ys=[5e-324], slope=-0.0, intercept=5e-324)  # subnormal, and a signed zero
@example(ys=[1e7] * 3, slope=50.0, intercept=1e4)  # the generator's largest values
@example(ys=[1.0, 2.0], slope=100.0, intercept=0.0)  # a fit rising far above every point
@example(ys=[0.0], slope=0.0, intercept=1.0)  # a flat fit above the only point: no line
@example(ys=[0.1] * 3, slope=0.0, intercept=0.10000000000000002)  # their mean, as floats add
def test_scatter_holds_every_point_and_its_trend(
    ys: list[float], slope: float, intercept: float
) -> None:
    svg = _svg.scatter(list(range(len(ys))), ys, trend=(slope, intercept))
    assert _marks_outside(svg) == []
    assert _fitted_lines_off_the_data(svg) == []
    assert _colors_off_the_legend(svg) == []
    ticks = [t.text or "" for t in ET.fromstring(svg).iter(f"{SVG_NS}text")
             if t.get("text-anchor") == "end"]  # fmt: skip
    assert not any(t.startswith("-") for t in ticks), f"a latency axis below 0 ms: {ticks}"
    trend = re.search(r'<line class="trend" x1="([-\d.]+)" y1="([-\d.]+)" x2="([-\d.]+)" '
                      r'y2="([-\d.]+)" stroke="#ff725c"', svg)  # fmt: skip
    # drawn unless no point of the fit over the data's x range lies between the lower of 0 ms
    # and the lowest point, and the highest point
    ends = (intercept, intercept + slope * (len(ys) - 1))
    low, high = min(0.0, min(ys)), max(ys)
    slack = 1e-9 * max(abs(low), abs(high), 1e-300)  # _fitted's allowance for rounding
    in_band = max(ends) >= low - slack and min(ends) <= high + slack
    assert (trend is None) == (not in_band)
    if trend is None:
        return
    plot = re.search(r'class="plot" x="[\d.]+" y="([\d.]+)" width="[\d.]+" height="([\d.]+)"', svg)
    assert plot is not None
    top, bottom = float(plot.group(1)), float(plot.group(1)) + float(plot.group(2))
    assert all(top - 0.1 <= float(trend.group(k)) <= bottom + 0.1 for k in (2, 4))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(positive, positive, positive), min_size=1, max_size=5))
@example(points=[(0.0, 0.0, 0.0)])  # no span
@example(points=[(5e-324, 5e-324, 5e-324)])  # a subnormal span
@example(points=[(1e7, 1e7, 1e7)] * 5)  # the generator's largest values, every day the same
def test_day_ranges_hold_every_median_and_ci(points: list[tuple[float, float, float]]) -> None:
    series = [
        ("a", [(f"2026-01-0{i + 1}", m, min(lo, m), max(hi, m)) for i, (m, lo, hi) in
               enumerate(points)]),
        ("b", [("2026-01-01", points[0][0] * 2, 0.0, points[0][0] * 3)]),
    ]  # fmt: skip
    svg = _svg.range_chart(series, labels=True)
    assert _marks_outside(svg) == []
    assert _colors_off_the_legend(svg) == []


def test_day_ranges_without_a_finite_value_draw_an_empty_axis() -> None:
    nan = float("nan")
    svg = _svg.range_chart([("a", [("2026-01-01", nan, nan, nan)])], colors=[None])
    assert "nan" not in svg and _marks_outside(svg) == []


@settings(max_examples=40, deadline=None)
@given(samples)
@example(values=[5e-324])  # a subnormal range: numpy refused 40 bins over it
@example(values=[0.0])  # no span
@example(values=[3.0, 3.0, 3.0])  # every value equal
@example(values=[1e7])  # the generator's largest value
@example(values=[5e-324, 1e7])
def test_histograms_hold_every_bin(values: list[float]) -> None:
    svg = _svg.histogram(values, unit="ms")
    assert _marks_outside(svg) == []
    bins = [e for e in ET.fromstring(svg).iter(f"{SVG_NS}rect") if e.get("data-kind") == "bin"]
    counts = [int((b.findtext(f"{SVG_NS}title") or "").rsplit(": ", 1)[1]) for b in bins]
    assert sum(counts) == len(values)  # every value in a bin


@pytest.mark.parametrize("values", [[-5.0], [-0.0], [-1e9, -1e9], [-3.0, 5e-324]])
def test_histograms_of_negative_and_signed_zero_values(values: list[float]) -> None:
    svg = _svg.histogram(values, unit="ms")
    assert _marks_outside(svg) == [] and svg.count('data-kind="bin"') >= 1
