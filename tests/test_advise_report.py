"""advise's page in the HTML report: written by ``gpubench advise --html`` (standalone) and by
``gpubench report RUN --advice FILE`` (a section); well-formed, with a frontier chart holding
one point per option at its cost and latency (read back from the SVG's own axis ticks), the
whiskers at the 5-95% ranges, the frontier joined, the objective's line, the recommendation
and the runner-up ringed; and in a real browser when one is installed."""

from __future__ import annotations

import json
import os
import re
import shutil
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_advise import _store

from gpubench_sdk._cli import main

SVG = "{http://www.w3.org/2000/svg}"
VOID = {"meta", "br", "img", "input", "link", "hr", "col", "area", "base", "wbr", "source"}
# svg children closed by "/>" are reported by HTMLParser as startendtag: nothing to balance
BASE = ["--per-day", "1000", "--p95-ms", "30000", "--resamples", "6"]


class _Balance(HTMLParser):
    """Every element opened is closed, in order (a well-formed page)."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:]}")
        else:
            self.stack.pop()


def _well_formed(page: str) -> None:
    check = _Balance()
    check.feed(page)
    assert check.errors == [] and check.stack == [], (check.errors, check.stack)
    assert "<script" not in page and "http://" not in page.replace(SVG[1:-1], "")


def _advise_page(tmp_path: Path, *extra: str) -> tuple[str, dict[str, Any]]:
    path = tmp_path / "m.sqlite"
    _store(path)
    page = tmp_path / "advice.html"
    args = ["advise", "latest", "--store", str(path), *BASE, *extra]
    done = CliRunner().invoke(main, [*args, "--html", str(page), "--json"])
    assert done.exit_code == 0, done.output
    (tmp_path / "advice.json").write_text(done.output)
    return page.read_text(), json.loads(done.output)


def _value(label: str) -> float:
    return float(label[:-1]) * 1000 if label.endswith("k") else float(label)


def _axes(svg: ET.Element) -> tuple[Any, Any]:
    """Value -> pixel on each axis, fitted from the tick labels the chart draws."""
    texts = list(svg.iter(f"{SVG}text"))
    xs = [
        (_value(t.text or ""), float(t.get("x", 0)))
        for t in texts
        if t.get("text-anchor") == "middle" and re.fullmatch(r"-?[\d.]+k?", t.text or "")
    ]
    ys = [(_value(t.text or ""), float(t.get("y", 0))) for t in texts
          if t.get("text-anchor") == "end" and t.get("dy")
          and re.fullmatch(r"-?[\d.]+k?", t.text or "")]  # fmt: skip
    assert len(xs) >= 2 and len(ys) >= 2

    def fit(pairs: list[tuple[float, float]]) -> Any:
        (v0, p0), (v1, p1) = pairs[0], pairs[-1]
        return lambda v: p0 + (v - v0) * (p1 - p0) / (v1 - v0)

    return fit(xs), fit(ys)


def _chart(page: str) -> ET.Element:
    found = re.search(r'data-chart="advise-frontier"><svg.*?</svg>', page, re.S)
    assert found is not None
    return ET.fromstring(found.group(0).split(">", 1)[1])


def test_the_page_draws_every_option_where_its_figures_put_it(tmp_path: Path) -> None:
    page, data = _advise_page(tmp_path)
    _well_formed(page)
    svg = _chart(page)
    x, y = _axes(svg)
    points = [c for c in svg.iter(f"{SVG}circle") if c.get("data-kind") == "option"]
    assert len(points) == len(data["options"]) > 3
    by_label = {p.get("data-label"): p for p in points}
    assert set(by_label) == {o["label"] for o in data["options"]}
    lines = list(svg.iter(f"{SVG}line"))
    for o in data["options"]:
        p = by_label[o["label"]]
        c, lat = o["cost_usd_per_day"], o["latency_ms"]
        cx, cy = float(p.get("cx", 0)), float(p.get("cy", 0))
        assert cx == pytest.approx(x(c["median"]), abs=0.2)
        assert cy == pytest.approx(y(lat["median"]), abs=0.2)
        # the whiskers: the cost range across the point, the latency range through it
        across = [ln for ln in lines if ln.get("data-kind") == "whisker-cost"
                  and float(ln.get("y1", 0)) == float(p.get("cy", 0))
                  and abs(float(ln.get("x1", 0)) - x(c["p5"])) < 0.2]  # fmt: skip
        assert across and float(across[0].get("x2", 0)) == pytest.approx(x(c["p95"]), abs=0.2)
        through = [ln for ln in lines if ln.get("data-kind") == "whisker-latency"
                   and float(ln.get("x1", 0)) == cx
                   and abs(float(ln.get("y1", 0)) - y(lat["p5"])) < 0.2]  # fmt: skip
        assert through and float(through[0].get("y2", 0)) == pytest.approx(y(lat["p95"]), abs=0.2)
        assert p.get("data-frontier") == str(o["frontier"]).lower()
    # the frontier, joined in order of cost
    front = sorted((o for o in data["options"] if o["frontier"]),
                   key=lambda o: o["cost_usd_per_day"]["median"])  # fmt: skip
    (line,) = [p for p in svg.iter(f"{SVG}polyline") if p.get("class") == "frontier"]
    joined = [tuple(map(float, xy.split(","))) for xy in (line.get("points") or "").split()]
    assert len(joined) == len(front) >= 2
    for (px, py), o in zip(joined, front, strict=True):
        assert px == pytest.approx(x(o["cost_usd_per_day"]["median"]), abs=0.2)
        assert py == pytest.approx(y(o["latency_ms"]["median"]), abs=0.2)
    # the objective's line at 30 s; the pick and the runner-up ringed where their points are
    (goal,) = [ln for ln in lines if ln.get("class") == "objective"]
    assert float(goal.get("y1", 0)) == pytest.approx(y(30_000), abs=0.2)
    for cls, key in (("recommended", "recommended"), ("runner-up", "runner_up")):
        (ring,) = [c for c in svg.iter(f"{SVG}circle") if c.get("class") == cls]
        point = by_label[data[key]["label"]]
        assert (ring.get("cx"), ring.get("cy")) == (point.get("cx"), point.get("cy"))
    # the rest of the page: inputs with the samples measured, the sentence, the table
    assert data["reason"].split(" is ")[0] in page
    assert "<td>12</td>" in page  # 12 cold starts measured per target
    assert page.count("<tr>") >= len(data["options"]) + 3  # inputs (2 + header) + options
    assert "Stable" in page or "Unstable pick" in page


def test_scores_and_ttft_columns_show_when_asked(tmp_path: Path) -> None:
    page, data = _advise_page(tmp_path, "--criterion", "sla=runpod:99.9", "--weight", "cost=1")
    assert "<h3>Weighted score</h3>" in page and "sla: runpod 99.9" in page
    assert f"{data['options'][0]['score']['score']:.2f}" in page
    _well_formed(page)


def test_report_includes_the_advice(tmp_path: Path) -> None:
    _, data = _advise_page(tmp_path)
    out = tmp_path / "report.html"
    args = ["report", "1", "--store", str(tmp_path / "m.sqlite"), "-o", str(out)]
    for layout in ("comparison", "reference"):
        done = CliRunner().invoke(main, [*args, "--layout", layout, "--advice",
                                         str(tmp_path / "advice.json")])  # fmt: skip
        assert done.exit_code == 0, done.output
        report = out.read_text()
        assert "<h2>Advice: provider and scaling settings</h2>" in report
        assert report.count('data-chart="advise-frontier"') == 1
        _well_formed(report)
    plain = CliRunner().invoke(main, args)
    assert plain.exit_code == 0 and "Advice:" not in out.read_text()
    as_json = tmp_path / "report.json"
    done = CliRunner().invoke(main, [*args[:-1], str(as_json), "--advice",
                                     str(tmp_path / "advice.json")])  # fmt: skip
    assert done.exit_code == 0 and json.loads(as_json.read_text())["advice"] == data
    markdown = tmp_path / "report.md"
    done = CliRunner().invoke(main, [*args[:-1], str(markdown), "--advice",
                                     str(tmp_path / "advice.json")])  # fmt: skip
    assert done.exit_code == 0 and "## advice" in markdown.read_text()
    assert f"| {data['recommended']['label']} | recommended |" in markdown.read_text()
    # from Python: build_report(..., advice=Advice.to_json())
    from gpubench_sdk import Store, build_report, render_report

    with Store(tmp_path / "m.sqlite", readonly=True) as store:
        report = build_report(store, ["latest"], advice=data)
    assert len(report.tables["advice"]) == len(data["options"])
    assert 'data-chart="advise-frontier"' in render_report(report, "html")
    (tmp_path / "bad.json").write_text('{"runs": []}')
    for bad, says in (
        (tmp_path / "bad.json", "missing options"),
        (tmp_path / "no.json", "readable"),
    ):
        done = CliRunner().invoke(main, [*args, "--advice", str(bad)])
        assert done.exit_code != 0 and says in done.output and "Traceback" not in done.output


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def test_the_page_in_a_browser(tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    if not Path(CHROMIUM).exists():
        pytest.skip("needs Debian's chromium (apt-get install chromium)")
    from test_report_browser import (
        CHROMIUM_ARGS,
        COLORS_OFF_THE_LEGEND,
        MARKS_OUTSIDE,
        TABLES_OVERFLOWING,
    )

    _, data = _advise_page(tmp_path)
    path = tmp_path / "advice.html"
    errors: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else 0)
            page.goto(path.as_uri(), wait_until="load")
            points = page.eval_on_selector_all("svg .mark[data-kind=option]", "m => m.length")
            outside = page.evaluate(MARKS_OUTSIDE)
            overflowing = page.evaluate(TABLES_OVERFLOWING)
            legends = page.eval_on_selector_all("svg g.legend", "g => g.length")
            off = page.evaluate(COLORS_OFF_THE_LEGEND)  # the objective's line included
            shot = tmp_path / "advise.png"
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    artifacts = os.environ.get("GPUBENCH_ARTIFACTS")
    if artifacts:
        (Path(artifacts) / "report").mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(artifacts) / "report" / "advise.png")
    assert errors == [] and outside == [] and overflowing == []
    assert legends == 1 and off == [], off
    assert points == len(data["options"])


def test_the_page_example_runs(tmp_path: Path) -> None:
    import subprocess
    import sys

    example = Path(__file__).resolve().parents[1] / "examples" / "advise_page.py"
    out = tmp_path / "advise.html"
    done = subprocess.run(
        [sys.executable, str(example), str(out)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "highest weighted score" in done.stdout and "cheapest option" in done.stdout
    page = out.read_text()
    _well_formed(page)
    assert 'data-chart="advise-frontier"' in page and "<h3>Weighted score</h3>" in page


def test_names_are_escaped_and_nothing_is_fetched() -> None:
    import numpy as np

    from gpubench_sdk import MeasuredTarget, Objectives, Traffic, advise_targets
    from gpubench_sdk.cost import BillingModel

    evil = '<img src="https://x.invalid/a.png" onerror="alert(1)">'
    target = MeasuredTarget(
        evil, "x", np.full(20, 2.0), np.full(5, 6.0), BillingModel(granularity_s=1.0),
        0.0004, "longest_idle",
    )  # fmt: skip
    page = advise_targets([target], Traffic.per_day(500), Objectives(30.0), resamples=3).to_html(
        title=evil
    )
    _well_formed(page)
    assert "<img" not in page and "&lt;img src=&quot;https://x.invalid" in page
    assert "default-src 'none'" in page  # and the CSP forbids any fetch regardless


def test_an_unstable_pick_says_how_many_cold_starts_or_days_would_settle_it() -> None:
    import numpy as np

    from gpubench_sdk import MeasuredTarget, Objectives, Traffic, advise_targets
    from gpubench_sdk.cost import BillingModel

    # three days of 10 executions and 2, 2, 1 cold starts, one of them 30 s: scaled to zero,
    # a 35 s p95 is met only by the draws without it (as in test_advise's unstable case)
    days = MeasuredTarget(
        "a", "x", np.full(30, 12.0), np.array([10.0, 12.0, 14.0, 16.0, 30.0]),
        BillingModel(granularity_s=1.0), 0.0004, "longest_idle",
        runs=(1, 2, 3), run_sizes=((10, 2), (10, 2), (10, 1)),
    )  # fmt: skip
    advice = advise_targets([days], Traffic.per_day(1000), Objectives(35.0), resamples=30)
    assert not advice.stable and advice.unsettled_by is not None
    assert advice.days_measured == 3 and advice.more_days is not None and advice.more_days > 3
    page = advice.to_html()
    assert f"about {advice.more_days:,} days of campaign in all (now 3)" in page
    assert f"about {advice.more_cold_starts:,} cold starts of a in all (now 5)" in page
    assert advice.to_json()["more_days"] == advice.more_days
