"""Terminal tables (rich) for a campaign summary and a regression-gate report."""

from __future__ import annotations

import math
from typing import Any

from rich.table import Table

from .._plan._thresholds import Threshold
from ..metrics import Variability
from ._analysis import CampaignSummary, TargetSeries, TimeOfDay
from ._gate import GateRow, format_change, format_value

_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def _ms(value: float) -> str:
    if math.isnan(value):
        return "-"
    return f"{value / 1000:.2f} s" if abs(value) >= 10_000 else f"{value:.1f} ms"


def _ci(ci: tuple[float, float]) -> str:
    return "-" if math.isnan(ci[0]) else f"{_ms(ci[0])} - {_ms(ci[1])}"


def _p(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2g}"


def series_table(s: TargetSeries) -> Table:
    table = Table(title=f"{s.target}: per slot", title_justify="left")
    for col in ("slot", "local time", "day", "requests", "errors", "p50", "p95", "cold start p50"):
        table.add_column(col, justify="left" if col in ("local time", "day") else "right")
    for p in s.points:
        table.add_row(
            f"{p.slot}" + (f" (attempt {p.attempt})" if p.attempt > 1 else ""),
            f"{p.local_date} {p.local_time}",
            _WEEKDAYS[p.weekday],
            str(p.requests),
            "-" if math.isnan(p.error_rate) else f"{p.error_rate:.1%}",
            _ms(p.p50_ms),
            _ms(p.p95_ms),
            _ms(p.cold_start_p50_ms),
        )
    return table


def daily_table(title: str, v: Variability) -> Table:
    table = Table(title=title, title_justify="left", caption=_spread(v.range_ms, v.cv))
    for col in ("day", "n", "median", f"{v.confidence:.0%} CI", "p (Holm)", "drift"):
        table.add_column(col, justify="left" if col == "day" else "right")
    for d in v.days:
        table.add_row(
            d.day, str(d.count), _ms(d.median_ms), _ci(d.median_ci_ms), _p(d.p_adjusted),
            "[bold red]CHANGED[/]" if d.changed else "",
        )  # fmt: skip
    return table


def modes_table(title: str, s: TargetSeries) -> Table:
    """Per day, the cold starts' modes: their shares and medians, with intervals."""
    table = Table(title=title, title_justify="left")
    for col in ("day", "n", "modes", "each mode: share (95% CI) at median (95% CI)"):
        table.add_column(col, justify="right" if col in ("n", "modes") else "left")
    for day, m in s.cold_start_modes_by_day:
        modes = "; ".join(
            f"{x.share:.0%} ({x.share_ci[0]:.0%}-{x.share_ci[1]:.0%}) at {_ms(x.median_ms)}"
            f" ({_ci(x.median_ci_ms)})"
            for x in m.modes
        )
        table.add_row(day, str(m.n), str(len(m.modes)), modes)
    return table


def hourly_table(title: str, t: TimeOfDay) -> Table:
    table = Table(title=title, title_justify="left", caption=_spread(t.range_ms, t.cv))
    for col in ("hour", "n", "median", "95% CI"):
        table.add_column(col, justify="left" if col == "hour" else "right")
    for h in t.hours:
        table.add_row(f"{h.hour:02d}:00", str(h.count), _ms(h.median_ms), _ci(h.median_ci_ms))
    return table


def _spread(range_ms: float, cv: float) -> str:
    cv_text = "-" if math.isnan(cv) else f"{cv:.1%}"
    return f"range (max - min of medians) {_ms(range_ms)}, CV of medians {cv_text}"


def summary_renderables(summary: CampaignSummary) -> list[Any]:
    """Everything ``gpubench campaign show`` prints, in order."""
    cost = "" if summary.cost_usd is None else f", ${summary.cost_usd:.4f} estimated"
    slots = ", ".join(f"{k} {v}" for k, v in summary.slot_status.items())
    parts: list[Any] = [
        f"[bold]campaign {summary.name}[/]: {summary.schedule}; slots: {slots}; "
        f"{summary.requests} requests{cost}"
    ]
    for s in summary.targets:
        region = f" (region {s.region})" if s.region else ""
        parts.append(f"[bold]{s.target}[/]{region}")
        parts.append(series_table(s))
        parts.append(daily_table(f"{s.target}: latency by day", s.daily_latency))
        parts.append(hourly_table(f"{s.target}: latency by time of day", s.time_of_day_latency))
        if s.daily_cold_start is not None and s.time_of_day_cold_start is not None:
            parts.append(daily_table(f"{s.target}: cold start by day", s.daily_cold_start))
            parts.append(
                hourly_table(f"{s.target}: cold start by time of day", s.time_of_day_cold_start)
            )
        if any(len(m.modes) > 1 for _, m in s.cold_start_modes_by_day):
            parts.append(modes_table(f"{s.target}: cold-start modes by day", s))
        if s.drift_days:
            parts.append(
                f"[bold red]drift:[/] {s.target} changed on {', '.join(s.drift_days)} "
                "(each day against the earlier days, Mann-Whitney U, Holm-adjusted)"
            )
    return parts


def _rule_cell(th: Threshold) -> str:
    """The rule after its metric: "> +20%" (what fails), or the whole rule if it reads "holds"."""
    text = th.text.replace(" ", "")
    if th.holds or th.op not in text:
        return th.describe()
    return f"{th.op} {text.split(th.op, 1)[1]}"


def gate_table(rows: list[GateRow] | tuple[GateRow, ...], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("target", "metric", "baseline", "candidate", "change", "threshold",
                "95% CI of change", "result"):  # fmt: skip
        table.add_column(col, justify="left" if col in ("target", "metric", "result") else "right")
    style = {"PASS": "[green]PASS[/]", "FAIL": "[bold red]FAIL[/]", "NO DATA": "[yellow]NO DATA[/]"}
    for r in rows:
        th = r.threshold
        ci = (
            "-"
            if math.isnan(r.change_ci[0])
            else f"{format_change(th, r.change_ci[0])} to {format_change(th, r.change_ci[1])}"
        )
        table.add_row(
            r.target, th.metric, format_value(th.metric, r.baseline),
            format_value(th.metric, r.candidate), format_change(th, r.change),
            _rule_cell(th), ci, style[r.verdict],
        )  # fmt: skip
    return table
