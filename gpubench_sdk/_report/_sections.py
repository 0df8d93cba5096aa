"""The report's detail sections: per run and scenario, the figures behind the verdicts."""

from __future__ import annotations

import json
from html import escape
from typing import Any

from ..metrics import ColdStartMode
from . import _svg
from ._format import cell, figure, table
from ._read import PHASES, Report, Row

# The summary's columns on the page, the deciding ones first (JSON/CSV/Markdown carry all).
SUMMARY_COLUMNS = (
    "target", "scenario", "p50_with_ci", "p95_ms", "p99_ms", "error_rate", "cold_start_p50_ms",
    "cold_rate", "throughput_rps", "requests", "errors", "run",
)  # fmt: skip
COST_COLUMNS = (
    "target", "total_usd", "per_1k_requests_usd", "per_request_usd", "requests", "billed_s",
    "workers", "compute_usd", "fees_usd", "run",
)  # fmt: skip
# Shown after "fees_usd" where some target's workload counted that unit (tokens, images, audio)
UNIT_COLUMNS = (
    "per_1k_input_tokens_usd", "per_million_input_tokens_usd", "per_1k_output_tokens_usd",
    "per_million_output_tokens_usd", "per_image_usd", "per_audio_minute_usd",
)  # fmt: skip


def summary(report: Report, heading: str = "<h2>Summary</h2>") -> str:
    rows = []
    for r in report.tables.get("summary", []):
        lo, hi = r.get("p50_ci_low_ms"), r.get("p50_ci_high_ms")
        ci = f" [{cell(lo)}-{cell(hi)}]" if lo is not None and hi is not None else ""
        rows.append(r | {"p50_with_ci": cell(r.get("p50_ms")) + ci})
    note = (
        "<p>Latency from the scheduled send, successful requests. Rates are over the row's own "
        "requests (one target in one scenario): error rate = failed / measured, cold rate = "
        "cold / requests whose cold state is known, as in <code>gpubench results show</code>.</p>"
    )
    return heading + note + table(rows, SUMMARY_COLUMNS)


def _finite(value: float | None) -> float:
    """A figure the JSON side stores as None (undefined) back as NaN for drawing."""
    return float("nan") if value is None else value


def _key(row: Row) -> tuple[Any, ...]:
    return (row.get("run"), row.get("target"), row.get("scenario"))


def boxes(report: Report) -> str:
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
    parts = ["<h2>Latency by scenario</h2>"]
    for scenario, boxes in by_scenario.items():
        svg = _svg.box_plot(boxes, title=f"latency, scenario {scenario}")
        caption = (
            f"Scenario {scenario}: latency of successful requests from the scheduled send; "
            "box = quartiles, line = median, whiskers = furthest sample within 1.5 IQR, "
            "circles = samples beyond (up to 200 shown)."
        )
        parts.append(figure("latency-box", svg, caption))
    return "".join(parts)


def cold(report: Report) -> str:
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
        "target", "cold_start_p50_ms", "cold_start_p95_ms", "modes", "cold_requests",
        "confirmed", "false_ready", "scheduling_mean_ms", "boot_mean_ms", "execution_mean_ms",
        "transfer_mean_ms", "inference_inferred", "run",
    ]  # fmt: skip
    return (
        "<h2>Cold starts by run</h2>"
        + figure("cold-start", svg, caption)
        + table(rows, cols)
        + "".join(_cold_distribution(d) for d in report.series.get("cold_start_modes", []))
    )


def _cold_distribution(series: dict[str, Any]) -> str:
    """One target's cold starts as a distribution with its modes drawn over it."""
    modes = [
        _svg.Mode(m["share"], m["median_ms"], m["sigma"], ColdStartMode(**m).text)
        for m in series["modes"]
    ]
    name = f"r{series['run']} {series['target']}"
    svg = _svg.mixture_histogram(
        series["cold_start_ms"], modes, unit="cold start (ms)", title=f"{name}: cold starts"
    )
    caption = (
        f"{name}: {len(series['cold_start_ms'])} cold starts on a log axis, "
        + ("one mode" if len(modes) == 1 else f"{len(modes)} modes")
        + ": each curve is a mode's fitted log-normal, scaled to its share; dashed, its median "
        "(a Gaussian mixture on log times, the number of modes by BIC: docs/metrics.md)."
    )
    return figure("cold-modes", svg, caption)


def days(report: Report) -> str:
    daily = report.tables.get("daily", [])
    if not daily:
        return ""
    parts = ["<h2>Variability across days, per figure</h2>"]
    for name in ("cold_start", "latency"):
        series: dict[str, list[tuple[str, float, float, float]]] = {}
        for d in daily:
            if d["figure"] == name and d["median_ms"] is not None:
                nan = float("nan")
                lo, hi = d["median_ci_low_ms"], d["median_ci_high_ms"]
                series.setdefault(d["target"], []).append(
                    (d["day"], d["median_ms"], nan if lo is None else lo, nan if hi is None else hi)
                )
        if series:
            svg = _svg.range_chart(list(series.items()), title=f"{name} per day")
            label = name.replace("_", " ")
            caption = f"Per-day median {label} (UTC days) with its 95% CI, per target."
            parts.append(figure(f"daily-{name}", svg, caption))
    parts.append(table(report.tables.get("variability", [])))
    return "".join(parts)


def bursts(report: Report) -> str:
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
        parts.append(figure("burst", svg, caption))
    if not parts:
        return ""
    return (
        "<h2>Bursts by run: latency against request index</h2>"
        + "".join(parts)
        + table(list(rows.values()))
    )


def streaming(report: Report) -> str:
    rows = report.tables.get("streaming", [])
    if not rows:
        return ""
    parts = ["<h2>Streaming: time to first token and inter-token latency</h2>", table(rows)]
    for name, label in (("ttft_ms", "time to first token (ms)"), ("itl_ms", "inter-token (ms)")):
        for s in report.series.get("stream_" + name, []):
            if s[name]:
                svg = _svg.histogram(s[name], unit=label, title=label)
                where = f"run {s['run']}, {s['target']}, scenario {s['scenario']}"
                parts.append(figure(name.replace("_ms", ""), svg, f"{label}: {where}"))
    return "".join(parts)


GROUP_COLUMNS = (
    "target", "scenario", "group", "requests", "errors", "prompt_tokens_p50", "latency_p50_ms",
    "latency_p95_ms", "ttft_p50_ms", "ttft_p95_ms", "cached_share", "run",
)  # fmt: skip


def latency_groups(report: Report) -> str:
    """One table per grouping (``metrics.GROUPINGS``) the runs' workloads had."""
    rows = report.tables.get("latency_groups", [])
    if not rows:
        return ""
    parts = [
        "<h2>Latency by what was asked</h2>",
        "<p>A run whose requests differ in what they ask (drawn or dataset lengths, a "
        "conversation's growing history, a shared prefix, an embeddings batch, an audio "
        "clip's duration) split by the cause: successful "
        "requests' p50 and p95 from the scheduled send; TTFT is the first streamed token, or "
        "the first byte; cached share is what the server reported its prefix cache served.</p>",
    ]
    for grouping in dict.fromkeys(r["grouping"] for r in rows):
        mine = [r for r in rows if r["grouping"] == grouping]
        columns = [c for c in GROUP_COLUMNS if c != "cached_share" or any(r.get(c) for r in mine)]
        parts.append(f"<h3>By {escape(grouping)}</h3>" + table(mine, columns))
    return "".join(parts)


def cost(report: Report) -> str:
    rows = report.tables.get("cost", [])
    if not rows:
        return ""
    note = (
        "<p>Estimated from the measured invocations with the cost module "
        "(each target's plan price; see the cost model page).</p>"
    )
    units = [c for c in UNIT_COLUMNS if any(r.get(c) is not None for r in rows)]
    columns = (*COST_COLUMNS[:-1], *units, COST_COLUMNS[-1])
    parts = ["<h2>Cost of the runs</h2>", note, table(rows, columns)]
    groups = report.tables.get("cost_groups", [])
    for grouping in dict.fromkeys(r["grouping"] for r in groups):
        mine = [r for r in groups if r["grouping"] == grouping]
        units = [c for c in UNIT_COLUMNS if any(r.get(c) is not None for r in mine)]
        parts.append(
            f"<h3>Cost by {escape(grouping)}</h3><p>Each target's bill shared among its "
            "requests by the worker time each took (boot and idle time included).</p>"
            + table(mine, ("target", "group", "requests", "total_usd", *units, "run"))
        )
    return "".join(parts)


def config(report: Report) -> str:
    parts = ["<h2>Runs and configuration</h2>"]
    meta = [
        {k: v for k, v in r.items() if k not in ("config", "targets", "uuid")}
        | {"scenarios": ", ".join(r["scenarios"])}
        for r in report.runs
    ]
    columns = ["run", "name", "status", "started_utc", "ended_utc", "samples", "scenarios",
               "host", "gpubench_version"]  # fmt: skip
    if any(m["error"] for m in meta):
        columns.insert(3, "error")
    parts.append(table(meta, columns))
    for r in report.runs:
        text = json.dumps(r["config"], indent=2, sort_keys=True, default=str)
        parts.append(
            f"<h3>run {r['run']} configuration</h3><p>uuid {escape(r['uuid'])}</p>"
            f"<pre>{escape(text)}</pre>"
        )
    return "".join(parts)
