"""The report as one self-contained HTML page: inline CSS and SVG, no script, no external URL."""

from __future__ import annotations

import json
from collections.abc import Iterable
from html import escape
from typing import Any

from . import _svg
from ._collect import PHASES, Report, Row
from ._shapes import shapes_html

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#1d1f23;
padding:0 1rem}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2.2rem;border-bottom:1px solid #ddd}
h3{font-size:1rem}table{border-collapse:collapse;margin:.6rem 0;font-size:12px}
th,td{border:1px solid #d6d8dc;padding:3px 7px;text-align:right;white-space:nowrap}
th{background:#f3f4f6}td:first-child,th:first-child{text-align:left}
.scroll{overflow-x:auto}figure{margin:1rem 0}figcaption{color:#555;font-size:12px}
pre{background:#f6f7f9;padding:.8rem;overflow-x:auto;font-size:12px}.note{color:#8a5a00}
"""
# Columns shown in the HTML summary (JSON/CSV/Markdown carry every column).
SUMMARY_COLUMNS = (
    "run", "target", "scenario", "requests", "ok", "error_rate", "p50_ms", "p50_ci_low_ms",
    "p50_ci_high_ms", "p95_ms", "p99_ms", "mean_ms", "throughput_rps", "cold_samples",
    "cold_start_p50_ms", "errors",
)  # fmt: skip


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if abs(value) < 0.01 and value:
            return f"{value:.3g}"
        return f"{value:,.2f}" if abs(value) < 1e5 else f"{value:,.0f}"
    return str(value)


def table(rows: list[Row], columns: Iterable[str] | None = None) -> str:
    if not rows:
        return "<p>none</p>"
    cols = list(columns) if columns is not None else list(rows[0])
    head = "".join(f"<th>{escape(c)}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(cell(r.get(c)))}</td>" for c in cols) + "</tr>" for r in rows
    )
    return f'<div class="scroll"><table><tr>{head}</tr>{body}</table></div>'


def _figure(kind: str, svg: str, caption: str) -> str:
    return (
        f'<figure class="chart" data-chart="{escape(kind)}">{svg}'
        f"<figcaption>{escape(caption)}</figcaption></figure>"
    )


def _finite(value: float | None) -> float:
    """A figure the JSON side stores as None (undefined) back as NaN for drawing."""
    return float("nan") if value is None else value


def _key(row: Row) -> tuple[Any, ...]:
    return (row.get("run"), row.get("target"), row.get("scenario"))


def _boxes(report: Report) -> str:
    """One chart per scenario (a cold-start scenario's seconds would squash a burst's ms)."""
    outliers = {_key(s): s["latency_ms"] for s in report.series.get("latency_outliers", [])}
    multi = len(report.runs) > 1
    by_scenario: dict[str, list[_svg.Box]] = {}
    for r in report.tables.get("latency_box", []):
        by_scenario.setdefault(r["scenario"], []).append(
            _svg.Box(
                f"{'run ' + str(r['run']) + ' ' if multi else ''}{r['target']}",
                r["whisker_low_ms"],
                r["q1_ms"],
                r["median_ms"],
                r["q3_ms"],
                r["whisker_high_ms"],
                outliers.get(_key(r), []),
            )
        )
    if not by_scenario:
        return ""
    parts = ["<h2>Latency by target and scenario</h2>"]
    for scenario, boxes in by_scenario.items():
        svg = _svg.box_plot(boxes, title=f"latency, scenario {scenario}")
        caption = (
            f"Scenario {scenario}: latency of successful requests from the scheduled send; "
            "box = quartiles, line = median, whiskers = furthest sample within 1.5 IQR, "
            "circles = samples beyond (up to 200 shown)."
        )
        parts.append(_figure("latency-box", svg, caption))
    return "".join(parts)


def _cold(report: Report) -> str:
    rows = report.tables.get("cold_start", [])
    if not rows:
        return ""
    bars = []
    for r in rows:
        segments = [(p[:-3], r.get(f"{p[:-3]}_mean_ms")) for p in PHASES]
        known = [(n, v) for n, v in segments if v is not None]
        if not known:  # the provider reports no phases: one bar of the cold start itself
            known = [("unattributed", r.get("cold_start_mean_ms") or 0.0)]
        bars.append((f"r{r['run']} {r['target']}", known))
    svg = _svg.stacked_bars(bars, unit="mean cold request (ms)", title="cold starts by phase")
    caption = (
        "Mean time of a cold request split into the provider-reported phases (scheduling, boot, "
        "execution, transfer = the rest); the table gives the reference report's cold start "
        "(latency minus inference time)."
    )
    cols = [
        "run", "target", "cold_requests", "confirmed", "cold_rate", "cold_start_p50_ms",
        "cold_start_p95_ms", "scheduling_mean_ms", "boot_mean_ms", "execution_mean_ms",
        "transfer_mean_ms", "inference_inferred",
    ]  # fmt: skip
    return "<h2>Cold starts</h2>" + _figure("cold-start", svg, caption) + table(rows, cols)


def _days(report: Report) -> str:
    daily = report.tables.get("daily", [])
    if not daily:
        return ""
    parts = ["<h2>Variability across days</h2>"]
    for figure in ("cold_start", "latency"):
        series: dict[str, list[tuple[str, float, float, float]]] = {}
        for d in daily:
            if d["figure"] == figure and d["median_ms"] is not None:
                nan = float("nan")
                lo, hi = d["median_ci_low_ms"], d["median_ci_high_ms"]
                series.setdefault(d["target"], []).append(
                    (d["day"], d["median_ms"], nan if lo is None else lo, nan if hi is None else hi)
                )
        if series:
            svg = _svg.range_chart(list(series.items()), title=f"{figure} per day")
            label = figure.replace("_", " ")
            caption = f"Per-day median {label} (UTC days) with its 95% CI, per target."
            parts.append(_figure(f"daily-{figure}", svg, caption))
    parts.append(table(report.tables.get("variability", [])))
    return "".join(parts)


def _bursts(report: Report) -> str:
    rows = {_key(r): r for r in report.tables.get("burst", [])}
    parts = []
    for s in report.series.get("burst_points", []):
        r = rows[_key(s)]
        svg = _svg.scatter(
            s["index"],
            s["latency_ms"],
            trend=(_finite(r["slope_ms_per_request"]), _finite(r["intercept_ms"])),
            title="latency against request index",
        )
        caption = (
            f"run {r['run']}, {r['target']}, scenario {r['scenario']}: "
            f"{cell(r['slope_ms_per_request'])} ms per request (OLS), "
            f"Pearson r {cell(r['pearson_r'])}"
        )
        parts.append(_figure("burst", svg, caption))
    if not parts:
        return ""
    return (
        "<h2>Bursts: latency against request index</h2>"
        + "".join(parts)
        + table(list(rows.values()))
    )


def _streaming(report: Report) -> str:
    rows = report.tables.get("streaming", [])
    if not rows:
        return ""
    parts = ["<h2>Streaming: time to first token and inter-token latency</h2>", table(rows)]
    for name, label in (("ttft_ms", "time to first token (ms)"), ("itl_ms", "inter-token (ms)")):
        for s in report.series.get("stream_" + name, []):
            if s[name]:
                svg = _svg.histogram(s[name], unit=label, title=label)
                where = f"run {s['run']}, {s['target']}, scenario {s['scenario']}"
                parts.append(_figure(name.replace("_ms", ""), svg, f"{label}: {where}"))
    return "".join(parts)


def _cost(report: Report) -> str:
    rows = report.tables.get("cost", [])
    if not rows:
        return ""
    note = (
        "<p>Estimated from the measured invocations with the cost module "
        "(each target's plan price; see the cost model page).</p>"
    )
    return "<h2>Cost</h2>" + note + table(rows)


def _config(report: Report) -> str:
    parts = ["<h2>Runs and configuration</h2>"]
    meta = [{k: v for k, v in r.items() if k not in ("config", "targets")} for r in report.runs]
    for m in meta:
        m["scenarios"] = ", ".join(m["scenarios"])
    parts.append(table(meta))
    for r in report.runs:
        text = json.dumps(r["config"], indent=2, sort_keys=True, default=str)
        parts.append(f"<h3>run {r['run']} configuration</h3><pre>{escape(text)}</pre>")
    return "".join(parts)


def render_html(report: Report) -> str:
    notes = "".join(f'<p class="note">{escape(n)}</p>' for n in report.notes)
    body = "".join(
        [
            f"<h1>{escape(report.title)}</h1>",
            f"<p>generated {escape(report.generated_utc)} by gpubench</p>",
            notes,
            "<h2>Summary</h2>",
            table(report.tables.get("summary", []), SUMMARY_COLUMNS),
            _boxes(report),
            _cold(report),
            _days(report),
            _bursts(report),
            shapes_html(report, _figure, table),  # stages, sweep, max_rate: _shapes.py
            _streaming(report),
            _cost(report),
            _config(report),
        ]
    )
    # the CSP is belt and braces: nothing in the page may fetch, even if a value slipped in
    csp = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(report.title)}</title><style>{_CSS}</style></head>"
        f"<body>{body}</body></html>\n"
    )
