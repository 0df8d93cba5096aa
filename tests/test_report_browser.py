"""The HTML report in a real headless browser (Debian's chromium, driven by Playwright).

The page must load from a file with no console error and no request but its own, every chart
must hold the data points it claims, every mark must lie inside its chart's plot area (an axis
that ends below the data cuts marks off), every colour on a chart with a legend must be in it,
and no table may be wider than the page at 1280 px.
Full-page screenshots at desktop (1280 px) and phone (390 px) widths, of both layouts, go to
the test's tmp dir and, when ``GPUBENCH_ARTIFACTS`` names a directory (CI), to its ``report/``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from _report_store import BURST, STREAMING, build_store
from test_cli import gpubench

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# What Chromium needs to run headless as root in a container, with nothing phoning home.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="needs Debian's chromium (apt-get install chromium)"
)


def _report_page(tmp_path: Path, name: str = "report.html", *args: str) -> Path:
    """``gpubench report 1 2 3`` of the shared three-run store, written to ``tmp_path/name``."""
    store = tmp_path / "runs.sqlite"
    build_store(store)
    page_path = tmp_path / name
    proc = gpubench("report", "1", "2", "3", "--store", str(store), *args, "-o", str(page_path))
    assert proc.returncode == 0, proc.stderr
    return page_path


def test_report_renders_every_chart_offline(tmp_path: Path) -> None:
    page_path = _report_page(tmp_path)

    console_errors: list[str] = []
    requests: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1200, "height": 900})
            page = context.new_page()
            page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else 0)
            page.on("pageerror", lambda e: console_errors.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(page_path.as_uri(), wait_until="load")
            charts = page.eval_on_selector_all(
                "figure.chart",
                """figs => figs.map(f => ({
                    kind: f.dataset.chart,
                    marks: f.querySelectorAll('svg .mark').length,
                    width: f.querySelector('svg').getBoundingClientRect().width,
                    boxes: f.querySelectorAll('svg .mark[data-kind=box]').length,
                    kinds: [...new Set([...f.querySelectorAll('svg .mark')]
                        .map(m => m.dataset.kind))],
                }))""",
            )
            shot = tmp_path / "report.png"
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    artifacts = os.environ.get("GPUBENCH_ARTIFACTS")
    if artifacts:
        Path(artifacts).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(artifacts) / "report.png")

    assert console_errors == []
    assert requests == [page_path.as_uri()]  # the page itself, nothing else
    assert shot.stat().st_size > 10_000
    by_kind: dict[str, list[dict[str, object]]] = {}
    for c in charts:
        assert c["marks"] > 0 and c["width"] > 100, c  # rendered, with data points
        by_kind.setdefault(str(c["kind"]), []).append(c)
    expected = {"latency-box", "cold-start", "daily-cold_start", "daily-latency", "burst"}
    expected |= {"compare-cold-start", "compare-daily", "compare-burst", "compare-cost"}
    if STREAMING:
        expected |= {"ttft", "itl", "compare-ttft", "compare-itl"}
    assert expected <= set(by_kind)
    # one box per target in each of the 3 runs' 2 scenarios: 2 charts, 6 boxes each
    assert [c["boxes"] for c in by_kind["latency-box"]] == [6, 6]
    # a burst chart per run and target, one point per successful request
    marks = sorted(int(c["marks"]) for c in by_kind["burst"])  # type: ignore[call-overload]
    assert marks == [BURST - 1] * 3 + [BURST] * 3
    # 3 days x 2 targets on each daily chart; 4 phase segments x 6 cold-start bars
    assert [c["marks"] for c in by_kind["daily-cold_start"]] == [6]
    assert [c["marks"] for c in by_kind["cold-start"]] == [24]
    if STREAMING:  # histograms of "fast"'s bursts: TTFT bins hold 40 requests, ITL bins 40 x 9
        assert len(by_kind["ttft"]) == len(by_kind["itl"]) == 3


# Every mark's box against its chart's plot area, in CSS pixels; a circle's radius and a
# stroke's half width may stick out by a few pixels, a clipped mark by far more.
MARKS_OUTSIDE = """() => [...document.querySelectorAll('figure.chart svg')].flatMap(svg => {
    const plot = svg.querySelector('rect.plot');
    if (!plot) return [{chart: svg.getAttribute('aria-label'), why: 'no plot area'}];
    const p = plot.getBoundingClientRect();
    const scale = p.width / Number(plot.getAttribute('width'));
    const slack = 4.5 * scale;
    return [...svg.querySelectorAll('.mark')].map(m => m.getBoundingClientRect()).filter(b =>
        b.left < p.left - slack || b.right > p.right + slack ||
        b.top < p.top - slack || b.bottom > p.bottom + slack
    ).map(b => ({chart: svg.getAttribute('aria-label'), mark: [b.left, b.top, b.right, b.bottom],
                 plot: [p.left, p.top, p.right, p.bottom]}));
})"""
# Tables wider than the room they have (their scroll box): a reader would have to scroll.
TABLES_OVERFLOWING = """() => [...document.querySelectorAll('table')]
    .filter(t => t.closest('.scroll') && t.getBoundingClientRect().width >
                 t.closest('.scroll').clientWidth + 1)
    .map(t => t.querySelector('tr').innerText.slice(0, 80))"""
# Colours drawn on a chart with a legend (any element's own fill or stroke, or its group's,
# outside the legend: marks, fitted lines, objective lines, rings and their labels; the grid
# is no datum) that the legend does not list, and bar segments whose colour is not their
# name's swatch.
COLORS_OFF_THE_LEGEND = """() => [...document.querySelectorAll('figure.chart svg')].flatMap(svg => {
    const legend = svg.querySelector('g.legend');
    if (!legend) return [];
    const swatches = [...legend.querySelectorAll('rect')];
    const listed = new Set(swatches.map(r => r.getAttribute('fill')));
    const chart = svg.getAttribute('aria-label');
    const drawn = [...svg.querySelectorAll('*')]
        .filter(e => !e.closest('g.legend') && !e.matches('rect.plot'))
        .flatMap(e => ['fill', 'stroke'].map(k => e.closest(`[${k}]`)?.getAttribute(k)))
        .filter(c => c && c.startsWith('#') && c !== '#e3e5e8' && !listed.has(c))
        .map(c => ({chart, color: c}));
    const misnamed = [...svg.querySelectorAll('.mark[data-name]')].filter(m =>
        swatches.find(r => r.dataset.legend === m.dataset.name)?.getAttribute('fill') !==
        m.getAttribute('fill')
    ).map(m => ({chart, segment: m.dataset.name, color: m.getAttribute('fill')}));
    return [...drawn, ...misnamed];
})"""
# Fitted lines (line.trend) reaching past their chart's points: left or right of the first and
# last point, above the highest, or below the lower of the lowest point and the y axis's 0
# tick (a latency below 0 ms). Pixels, with the same slack as MARKS_OUTSIDE.
TRENDS_OFF_THE_DATA = """() => [...document.querySelectorAll('figure.chart svg')].flatMap(svg => {
    const trends = [...svg.querySelectorAll('.trend')];
    if (!trends.length) return [];
    const chart = svg.getAttribute('aria-label');
    const marks = [...svg.querySelectorAll('.mark')].map(m => m.getBoundingClientRect());
    if (!marks.length) return [{chart, why: 'a fitted line and no point'}];
    const ctm = svg.getScreenCTM();
    const slack = 4.5 * ctm.a;
    const zeros = [...svg.querySelectorAll('text[text-anchor=end]')]
        .filter(t => t.textContent.trim() === '0')
        .map(t => new DOMPoint(0, Number(t.getAttribute('y'))).matrixTransform(ctm).y);
    const left = Math.min(...marks.map(b => b.left)), right = Math.max(...marks.map(b => b.right));
    const top = Math.min(...marks.map(b => b.top));
    const bottom = Math.max(...marks.map(b => b.bottom), ...zeros);
    return trends.map(t => t.getBoundingClientRect()).filter(b =>
        b.left < left - slack || b.right > right + slack ||
        b.top < top - slack || b.bottom > bottom + slack
    ).map(b => ({chart, line: [b.left, b.top, b.right, b.bottom],
                 data: [left, top, right, bottom]}));
})"""
WIDTHS = {"desktop": 1280, "phone": 390}


@pytest.mark.parametrize("layout", ["comparison", "reference"])
def test_no_mark_outside_its_plot_and_no_table_wider_than_the_page(
    tmp_path: Path, layout: str
) -> None:
    page_path = _report_page(tmp_path, f"report-{layout}.html", "--layout", layout)
    shots = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for device, width in WIDTHS.items():
                context = browser.new_context(viewport={"width": width, "height": 900})
                page = context.new_page()
                page.goto(page_path.as_uri(), wait_until="load")
                outside = page.evaluate(MARKS_OUTSIDE)
                assert outside == [], f"{device}: marks outside their plot area: {outside[:5]}"
                marks = page.eval_on_selector_all("figure.chart svg .mark", "ms => ms.length")
                assert marks > 100
                if device == "desktop":
                    legends = page.eval_on_selector_all("svg g.legend", "g => g.length")
                    assert legends > 0  # the cost, cold-start and burst charts have one
                    off = page.evaluate(COLORS_OFF_THE_LEGEND)
                    assert off == [], f"colours their chart's legend does not list: {off[:5]}"
                    trends = page.eval_on_selector_all("svg .trend", "t => t.length")
                    assert trends > 0  # the burst charts' fits
                    astray = page.evaluate(TRENDS_OFF_THE_DATA)
                    assert astray == [], f"fitted lines past their points: {astray[:5]}"
                    wide = page.evaluate(TABLES_OVERFLOWING)
                    assert wide == [], f"tables wider than the page at {width} px: {wide}"
                    page_width = page.evaluate("document.documentElement.scrollWidth")
                    assert page_width <= width, "the page scrolls sideways at 1280 px"
                shot = tmp_path / f"report-{layout}-{device}.png"
                page.screenshot(path=str(shot), full_page=True)
                shots.append(shot)
                context.close()
        finally:
            browser.close()
    assert all(s.stat().st_size > 10_000 for s in shots)
    artifacts = os.environ.get("GPUBENCH_ARTIFACTS")
    if artifacts:
        folder = Path(artifacts) / "report"
        folder.mkdir(parents=True, exist_ok=True)
        for shot in shots:
            shutil.copy(shot, folder / shot.name)


# What each check must catch, made by hand on the real page: the checks are only worth what
# they fail on.
BREAK = {
    "a mark in a colour no legend lists": (
        COLORS_OFF_THE_LEGEND,
        """() => { const m = [...document.querySelectorAll('figure.chart svg')]
            .find(s => s.querySelector('g.legend') && s.querySelector('.mark'))
            .querySelector('.mark');
            m.setAttribute('fill', '#123456'); }""",
    ),
    "a segment in another name's colour": (
        COLORS_OFF_THE_LEGEND,
        """() => { const ms = [...document.querySelectorAll('.mark[data-name]')];
            const other = ms.find(m => m.dataset.name !== ms[0].dataset.name);
            ms[0].setAttribute('fill', other.getAttribute('fill')); }""",
    ),
    "an unlisted colour on a fitted line": (
        COLORS_OFF_THE_LEGEND,
        "() => document.querySelector('.trend').setAttribute('stroke', '#abcdef')",
    ),
    "a fitted line past the last point": (
        TRENDS_OFF_THE_DATA,
        """() => { const t = document.querySelector('.trend');
            t.setAttribute('x2', String(Number(t.getAttribute('x2')) + 40)); }""",
    ),
    "a fitted line below 0 ms": (
        TRENDS_OFF_THE_DATA,
        """() => { const t = document.querySelector('.trend');
            const plot = t.closest('svg').querySelector('rect.plot');
            const floor = Number(plot.getAttribute('y')) + Number(plot.getAttribute('height'));
            t.setAttribute('y1', String(floor + 30)); }""",
    ),
    "a fitted line above every point": (
        TRENDS_OFF_THE_DATA,
        "() => document.querySelector('.trend').setAttribute('y2', '-20')",
    ),
    "a mark outside its plot": (
        MARKS_OUTSIDE,
        """() => { const m = document.querySelector('circle.mark');
            m.setAttribute('cx', '-50'); }""",
    ),
}


def test_each_check_fails_on_the_fault_it_is_for(tmp_path: Path) -> None:
    page_path = _report_page(tmp_path)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            for fault, (check, inject) in BREAK.items():
                page.goto(page_path.as_uri(), wait_until="load")
                assert page.evaluate(check) == [], f"the page is clean before: {fault}"
                page.evaluate(inject)
                assert page.evaluate(check) != [], f"not caught: {fault}"
        finally:
            browser.close()


def _two_mode_store(path: Path) -> None:
    """One run whose target's 40 cold starts fall in two modes (70% near 2 s, 30% near 30 s),
    each followed by two warm requests, through the public Store API."""
    import numpy as np

    from gpubench_sdk import Invocation, Outcome, Phase, Store
    from gpubench_sdk._store._store import ScenarioRecord, TargetRecord

    rng = np.random.default_rng(5)
    colds = np.concatenate(
        [rng.lognormal(np.log(2000), 0.15, 28), rng.lognormal(np.log(30000), 0.15, 12)]
    )
    with Store(path) as store:
        run = store.begin_run(
            name="modes",
            config={"run": {"name": "modes"}, "workload": {"kind": "probe"},
                    "targets": [{"name": "snap", "provider": "local"}],
                    "scenarios": [{"kind": "cold_starts", "n": 40}]},
            targets=(TargetRecord("snap", "local"),),
            scenarios=(ScenarioRecord("cold_starts", {}),),
            origin_ns=0,
            started_wall_ns=1_767_225_600 * 10**9,
        )  # fmt: skip
        for i, cold in enumerate(colds):
            t = i * 120_000 * 10**6
            for j, (ms, is_cold) in enumerate(((cold + 100, True), (100.0, False), (101.0, False))):
                start = t + j * 5_000 * 10**6
                store.append(run.id, Invocation(
                    target="snap", scenario=0, seq=3 * i + j, phase=Phase.MEASURE,
                    scheduled_ns=start, start_ns=start, end_ns=start + int(ms * 1e6),
                    wall_start_ns=1_767_225_600 * 10**9 + start, outcome=Outcome.OK,
                    cold=is_cold, execution_ms=100.0,
                ))  # fmt: skip
        store.end_run(run.id, "completed")


def test_cold_starts_drawn_as_the_mixture_they_are(tmp_path: Path) -> None:
    store = tmp_path / "modes.sqlite"
    _two_mode_store(store)
    page_path = tmp_path / "modes.html"
    proc = gpubench("report", "1", "--store", str(store), "-o", str(page_path))
    assert proc.returncode == 0, proc.stderr
    errors: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for width in WIDTHS.values():
                context = browser.new_context(viewport={"width": width, "height": 900})
                page = context.new_page()
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.goto(page_path.as_uri(), wait_until="load")
                chart = page.eval_on_selector_all(
                    "figure.chart[data-chart=cold-modes]",
                    """figs => figs.map(f => ({
                        modes: f.querySelectorAll('.mark[data-kind=mode]').length,
                        medians: [...f.querySelectorAll('.mark[data-kind=median] title')]
                            .map(t => t.textContent),
                        bins: [...f.querySelectorAll('.mark[data-kind=bin] title')]
                            .map(t => Number(t.textContent.split(': ')[1])),
                        caption: f.querySelector('figcaption').textContent,
                    }))""",
                )
                assert errors == []
                assert page.evaluate(MARKS_OUTSIDE) == []
                assert page.evaluate(COLORS_OFF_THE_LEGEND) == []
                assert page.evaluate("document.documentElement.scrollWidth") <= width
                context.close()
        finally:
            browser.close()
    (found,) = chart
    assert found["modes"] == 2 and sum(found["bins"]) == 40, found
    fast, slow = found["medians"]  # "median 70% at 1.9 s (1.9 s-2 s)"
    assert fast.startswith("median 70% at ") and slow.startswith("median 30% at ")
    assert 1.8 <= float(fast.split(" at ")[1].split(" s")[0]) <= 2.2
    assert 27 <= float(slow.split(" at ")[1].split(" s")[0]) <= 33
    assert "2 modes" in found["caption"]
    html = page_path.read_text()
    assert fast[len("median ") : fast.index(" (")] + ", 30% at" in html  # the modes column
