"""How a figure reads in a table: human headers with units, money and rates shown once, one way.

The JSON/CSV field names keep their units (``p50_ms``, ``total_usd``, ``cold_rate``); the page
turns them into headers (``p50 (ms)``, ``total ($)``, ``cold rate``) and formats by unit: money
with ``_summary.usd`` (the precision that matters, never rounded to cents below $100), rates
with ``_summary.percent`` (the same as the CLI's table), milliseconds to 0.1 ms.
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape
from typing import Any

from ._read import Row
from ._summary import percent, usd

# Where the generic rule (suffix to unit, underscores to spaces) reads badly.
HEADERS = {
    "ok": "succeeded",
    "cold_samples": "cold requests",
    "cold_confirmed": "cold confirmed",
    "cold_start_p50_ms": "cold start p50 (ms)",
    "cold_start_p95_ms": "cold start p95 (ms)",
    "throughput_rps": "throughput (req/s)",
    "units_per_s": "units/s",
    "output_tokens_per_s": "output tokens/s",
    "p50_with_ci": "p50 (ms) [95% CI]",
    "per_1k_requests_usd": "per 1,000 requests ($)",
    "per_million_output_tokens_usd": "per 1M output tokens ($)",
    "per_million_input_tokens_usd": "per 1M input tokens ($)",
    "per_1k_output_tokens_usd": "per 1k output tokens ($)",
    "per_1k_input_tokens_usd": "per 1k input tokens ($)",
    "slope_ms_per_request": "slope (ms/request)",
    "pearson_r": "Pearson r",
    "spearman_rho": "Spearman rho",
    "cv": "CV",
    "ttft_p50_ms": "TTFT p50 (ms)",
    "ttft_p95_ms": "TTFT p95 (ms)",
    "itl_p50_ms": "ITL p50 (ms)",
    "itl_p95_ms": "ITL p95 (ms)",
    "tpot_p50_ms": "TPOT p50 (ms)",
    "usd_per_day": "$ per day",
    "rate_usd_per_s": "rate ($/s)",
    "inference_inferred": "inference inferred",
    "started_utc": "started (UTC)",
    "ended_utc": "ended (UTC)",
    "gpubench_version": "gpubench",
}
# Columns of words, not figures: read from the left.
TEXT = {"target", "scenario", "errors", "error", "name", "status", "host", "scenarios", "figure",
        "day", "changed_days", "started_utc", "ended_utc", "gpubench_version"}  # fmt: skip
_UNITS = (("_ms", "ms"), ("_usd", "$"), ("_s", "s"))


def header(field: str) -> str:
    if field in HEADERS:
        return HEADERS[field]
    for suffix, unit in _UNITS:
        if field.endswith(suffix):
            return f"{field[: -len(suffix)].replace('_', ' ')} ({unit})"
    return field.replace("_", " ")


def cell(value: Any, field: str = "") -> str:
    """One figure as text; ``field`` (its JSON name) says its unit."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float) and field.endswith("_usd"):
        return usd(float(value)).lstrip("$")  # the header says $
    if isinstance(value, float) and field.endswith("_rate"):
        return percent(value)
    if isinstance(value, float):
        if abs(value) < 0.01 and value:
            return f"{value:.3g}"
        return (
            f"{value:,.2f}"
            if abs(value) < 100
            else f"{value:,.1f}"
            if abs(value) < 1e5
            else (f"{value:,.0f}")
        )
    return str(value)


def table(rows: list[Row], columns: Iterable[str] | None = None) -> str:
    if not rows:
        return "<p>none</p>"
    cols = list(columns) if columns is not None else list(rows[0])
    left = {c: ' class="l"' if c in TEXT else "" for c in cols}
    head = "".join(f"<th{left[c]}>{escape(header(c))}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td{left[c]}>{escape(cell(r.get(c), c))}</td>" for c in cols) + "</tr>"
        for r in rows
    )
    return f'<div class="scroll"><table><tr>{head}</tr>{body}</table></div>'


def figure(kind: str, svg: str, caption: str) -> str:
    return (
        f'<figure class="chart" data-chart="{escape(kind)}">{svg}'
        f"<figcaption>{escape(caption)}</figcaption></figure>"
    )
