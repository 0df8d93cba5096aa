"""The per-target, per-scenario summary printed after a run and by ``gpubench results show``.

Every figure comes from ``gpubench_sdk.metrics`` (definitions in ``docs/metrics.md``):
percentiles use numpy's ``linear`` interpolation (Hyndman-Fan type 7) over the successful
requests' latency, counted from the scheduled send time; the p50 carries a 95% confidence
interval (percentile bootstrap, seeded, or the exact order-statistic interval above 100,000
samples). Cold start is the reference report's definition, latency minus inference time,
measured from the actual send (so the client's own send lag is excluded), with inference time
from the server-reported execution time; where the server reports none, the warm median of
the same target in the same scenario stands in (``inferred``). For streamed requests (rows
with stored token times) TTFT and ITL come from ``metrics.stream_metrics``: TTFT from the
scheduled send to the first token, ITL the pooled gaps between tokens, and output tokens/s the
successful requests' output tokens (``usage`` where the server reported it) over the span.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np
from rich.markup import escape
from rich.table import Table

from .._base._secrets import redact
from .._base._types import Outcome
from .._plan._thresholds import SOME_REQUEST_SUCCEEDS, ThresholdReport
from .._store._store import Columns, RunInfo, Store
from ..metrics import (
    cold_starts_of,
    outcome_counts,
    percentile,
    stream_metrics,
    summarize_samples,
    throughput,
)

_NAN = float("nan")


@dataclass(frozen=True, slots=True)
class SummaryRow:
    target: str
    scenario: str
    requests: int
    ok: int
    errors: dict[str, int] = field(default_factory=dict)
    p50_ms: float = _NAN
    p95_ms: float = _NAN
    p99_ms: float = _NAN
    mean_ms: float = _NAN
    throughput_rps: float = _NAN
    cold_samples: int = 0
    cold_confirmed: int = 0
    cold_start_p50_ms: float = _NAN
    cold_start_inferred: bool = False
    send_lag_p99_ms: float = _NAN
    p90_ms: float = _NAN
    p50_ci_ms: tuple[float, float] = (_NAN, _NAN)
    p95_ci_ms: tuple[float, float] = (_NAN, _NAN)
    std_ms: float = _NAN
    cv: float = _NAN
    cold_rate: float = _NAN  # cold requests / requests whose cold state is known
    cold_start_p95_ms: float = _NAN
    units_per_s: float = _NAN
    streamed: int = 0  # successful requests with stored token times
    ttft_p50_ms: float = _NAN
    itl_p50_ms: float = _NAN
    output_tokens_per_s: float = _NAN

    @property
    def error_rate(self) -> float:
        """See ``RATES``."""
        return error_rate(self.requests, self.ok)

    def as_dict(self) -> dict[str, Any]:
        """Every figure, rates included (what ``results show --json`` and reports carry)."""
        return {f: getattr(self, f) for f in self.__dataclass_fields__} | {
            "error_rate": self.error_rate
        }


# The one definition of each rate, shared by the CLI's table, ``--json`` and reports: a rate is
# a fraction (0-1) in JSON and a percent on screen (``percent``), over the row's own requests
# (one target in one scenario): a rate pooled over a whole run would mix a cold-start
# scenario's 1-in-3 with a burst's 0-in-100, so no table shows one.
RATES = {
    "error_rate": "measured requests that did not succeed / measured requests",
    "cold_rate": "cold requests / measured requests whose cold state is known",
}


def error_rate(requests: int, ok: int) -> float:
    return 0.0 if not requests else 1 - ok / requests


def percent(rate: float | None) -> str:
    """A rate (0-1) as people read it: "33%", "2.6%", "0.04%", "-" when undefined."""
    if rate is None or math.isnan(rate):
        return "-"
    pct = 100 * rate
    if pct == 0 or pct >= 10 or pct == round(pct):
        return f"{pct:.0f}%"
    return f"{pct:.2g}%" if pct < 1 else f"{pct:.1f}%"


def usd(value: float | None) -> str:
    """Money to the precision that matters: cents from $100 up, else 4 significant digits
    (the CLI's $0.013944 reads $0.01394, never $0.01)."""
    if value is None or math.isnan(value):
        return "-"
    if abs(value) >= 100:
        return f"${value:,.2f}"
    if value == 0:
        return "$0"
    if value < 0:
        return "-" + usd(-value)
    digits = max(2, 3 - math.floor(math.log10(abs(value))))
    text = f"{value:.{digits}f}"
    whole, frac = text.split(".")
    return f"${whole}.{frac[:2] + frac[2:].rstrip('0')}"


def summarize(store: Store, run: RunInfo) -> list[SummaryRow]:
    rows = []
    for sidx, scenario in enumerate(run.scenarios):
        for target in run.targets:
            cols = store.columns(run.id, target=target.name, scenario=sidx)
            if np.asarray(cols["outcome"]).size == 0:
                continue
            tokens = store.token_times(run.id, target=target.name, scenario=sidx)
            rows.append(_row(target.name, scenario.key(sidx), cols, tokens))
    return rows


def _stream_figures(
    cols: Columns, ok: np.ndarray[Any, Any], tokens: Sequence[np.ndarray[Any, Any]]
) -> dict[str, Any]:
    """TTFT p50, ITL p50 and output tokens/s of the successful streamed requests (or {})."""
    keep = [i for i, t in enumerate(tokens) if ok[i] and t.size]
    if not keep:
        return {}
    sched = np.asarray(cols["scheduled_ns"])
    m = stream_metrics(
        [tokens[i] - sched[i] for i in keep],
        end_ns=np.asarray(cols["end_ns"])[keep] - sched[keep],
        send_ns=sched[keep],
    )
    # usage's exact count where the server reported it; else the chunks counted (one token each)
    units = np.asarray(cols["output_units"])[keep]
    counted = np.where(units >= 0, units, m.output_tokens)
    span_s = (float(np.max(np.asarray(cols["end_ns"])[keep])) - float(sched[keep].min())) / 1e9
    return {
        "streamed": len(keep),
        "ttft_p50_ms": percentile(m.ttft_ms, 0.5),
        "itl_p50_ms": percentile(m.itl_ms, 0.5),
        "output_tokens_per_s": float(counted.sum()) / span_s if span_s > 0 else _NAN,
    }


def _row(
    target: str, scenario: str, cols: Columns, tokens: Sequence[np.ndarray[Any, Any]] = ()
) -> SummaryRow:
    outcome = np.asarray(cols["outcome"])
    ok = outcome == Outcome.OK.code
    latency = summarize_samples(np.asarray(cols["latency_ms"], dtype=float)[ok])
    rate = throughput(
        start_ns=cols["start_ns"],
        end_ns=cols["end_ns"],
        outcome=outcome,
        output_units=cols["output_units"],
    )
    cold = cold_starts_of(cols)
    errors = outcome_counts(outcome)
    errors.pop(Outcome.OK.value, None)
    flags = np.asarray(cols["cold"]) == 1
    lag = (np.asarray(cols["start_ns"]) - np.asarray(cols["scheduled_ns"])) / 1e6
    return SummaryRow(
        target=target,
        scenario=scenario,
        requests=int(outcome.size),
        ok=int(ok.sum()),
        errors=errors,
        p50_ms=latency.p50_ms,
        p95_ms=latency.p95_ms,
        p99_ms=latency.p99_ms,
        mean_ms=latency.mean_ms,
        throughput_rps=rate.ok_per_s,
        cold_samples=int(flags.sum()),
        cold_confirmed=int((flags & np.asarray(cols["cold_confirmed"], dtype=bool)).sum()),
        cold_start_p50_ms=cold.summary.p50_ms,
        cold_start_inferred=cold.inferred,
        send_lag_p99_ms=float(np.percentile(lag, 99)) if lag.size else _NAN,
        p90_ms=latency.p90_ms,
        p50_ci_ms=latency.p50_ci_ms,
        p95_ci_ms=latency.p95_ci_ms,
        std_ms=latency.std_ms,
        cv=latency.cv,
        cold_rate=cold.rate.rate,
        cold_start_p95_ms=cold.summary.p95_ms,
        units_per_s=rate.units_per_s,
        **_stream_figures(cols, ok, tokens),
    )


def _ms(value: float) -> str:
    if math.isnan(value):
        return "-"
    return f"{value / 1000:.2f} s" if value >= 10_000 else f"{value:.1f}"


def _with_ci(value: float, ci: tuple[float, float]) -> str:
    if math.isnan(value) or math.isnan(ci[0]):
        return _ms(value)
    return f"{_ms(value)} ({_ms(ci[0])}-{_ms(ci[1])})"


def render(rows: list[SummaryRow], title: str) -> Table:
    streaming = any(r.streamed for r in rows)
    caption = _CAPTION + (_STREAM_CAPTION if streaming else "")
    table = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
    stream_columns = ("TTFT p50 ms", "ITL p50 ms", "out tok/s") if streaming else ()
    for name, justify in (
        ("target", "left"),
        ("scenario", "left"),
        ("req", "right"),
        ("errors", "left"),
        ("p50 ms (95% CI)", "right"),
        ("p90 ms", "right"),
        ("p95 ms", "right"),
        ("p99 ms", "right"),
        ("CV", "right"),
        ("req/s", "right"),
        ("cold start p50 ms", "right"),
        ("cold n (confirmed)", "right"),
        ("cold rate", "right"),
        *((c, "right") for c in stream_columns),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for r in rows:
        errors = ", ".join(f"{k} {v}" for k, v in sorted(r.errors.items())) or "0"
        cold = _ms(r.cold_start_p50_ms) + (" (inferred)" if r.cold_start_inferred else "")
        table.add_row(
            r.target,
            r.scenario,
            str(r.requests),
            errors,
            _with_ci(r.p50_ms, r.p50_ci_ms),
            _ms(r.p90_ms),
            _ms(r.p95_ms),
            _ms(r.p99_ms),
            "-" if math.isnan(r.cv) else f"{r.cv:.2f}",
            "-" if math.isnan(r.throughput_rps) else f"{r.throughput_rps:.1f}",
            cold if r.cold_samples else "-",
            f"{r.cold_samples} ({r.cold_confirmed})" if r.cold_samples else "-",
            percent(r.cold_rate),
            *(_stream_cells(r) if streaming else ()),
        )
    return table


def _stream_cells(r: SummaryRow) -> tuple[str, str, str]:
    if not r.streamed:
        return ("-", "-", "-")
    rate = r.output_tokens_per_s
    return (_ms(r.ttft_p50_ms), _ms(r.itl_p50_ms), "-" if math.isnan(rate) else f"{rate:.1f}")


_STREAM_CAPTION = "; TTFT/ITL over streamed requests, from the scheduled send (docs/metrics.md)"
_CAPTION = (
    "latency from the scheduled send, successful requests; CV = std/mean; "
    "cold start = latency - inference time (docs/metrics.md)"
)


# -- why requests failed -------------------------------------------------------------------

# What varies between otherwise identical errors: ids, long numbers, hex. Masked for grouping.
_VARYING = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\b[0-9a-f]{12,}\b|\d{4,}",
    re.IGNORECASE,
)
_URL = re.compile(r"https?://[^\s'\"<>)\]]+")
_URL_OPTIONS = ("url", "base_url", "endpoint_url", "api_base", "endpoint")


@dataclass(frozen=True, slots=True)
class ErrorGroup:
    """Failed requests of one target that failed the same way."""

    target: str
    outcome: str
    message: str  # the first one's stored error text, secrets masked
    count: int
    method: str | None  # from the target's options, where they say
    url: str | None  # from the error text, else the target's options; no query, no user info
    request_id: str | None  # an example: the provider's id of one of these requests


def shown_url(url: str) -> str:
    """A URL fit to print: no user:password, and the query's values hidden (they may be keys)."""
    parts = urlsplit(url)
    host = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    query = "&".join(f"{q.split('=', 1)[0]}=***" for q in parts.query.split("&") if q)
    return redact(urlunsplit((parts.scheme, host, parts.path, query, "")))


def _target_url(options: Mapping[str, Any]) -> str | None:
    for key in _URL_OPTIONS:
        value = options.get(key)
        if isinstance(value, str) and value.startswith(("http://", "https://")):
            return value
    return None


def error_groups(store: Store, run: RunInfo, top: int = 3) -> list[ErrorGroup]:
    """Per target, its ``top`` most frequent distinct errors among measured requests."""
    groups = []
    for t in run.targets:
        cols = store.columns(run.id, target=t.name, text=True)
        outcome = np.asarray(cols["outcome"])
        failed = np.flatnonzero(outcome != Outcome.OK.code)
        if not failed.size:
            continue
        counts: Counter[tuple[int, str]] = Counter()
        first: dict[tuple[int, str], int] = {}
        rid: dict[tuple[int, str], str] = {}
        for i in failed:
            text = str(cols["error"][i] or "")
            key = (int(outcome[i]), _VARYING.sub("…", text))
            counts[key] += 1
            first.setdefault(key, int(i))
            if cols["request_id"][i] and key not in rid:
                rid[key] = str(cols["request_id"][i])
        method = t.options.get("method")
        for key, n in counts.most_common(top):
            text = str(cols["error"][first[key]] or "(no message stored)")
            found = _URL.search(text)
            url = found.group(0) if found else _target_url(t.options)
            groups.append(
                ErrorGroup(
                    target=t.name,
                    outcome=Outcome.from_code(key[0]).value,
                    message=_URL.sub(lambda m: shown_url(m.group(0)), redact(text)),
                    count=n,
                    method=method if isinstance(method, str) else None,
                    url=None if url is None else shown_url(url),
                    request_id=rid.get(key),
                )
            )
    return groups


def render_errors(groups: Sequence[ErrorGroup]) -> list[str]:
    """Why requests failed, as plain lines: per target, its most frequent errors first."""
    lines = ["why requests failed (most frequent first, per target):"]
    for g in groups:
        where = " ".join(p for p in (g.method, g.url) if p)
        lines.append(f"  {g.target}: {g.count} x {g.outcome}" + (f", {where}" if where else ""))
        lines.append(f"    {g.message}")
        if g.request_id:
            lines.append(f"    e.g. request id {g.request_id}")
    return lines


def render_thresholds(report: ThresholdReport) -> Table | None:
    """Every rule given and how the run fared, with the default rule where it failed; None
    when there is nothing to show (no rule given, none failed)."""
    rows = [r for r in report.rows if r.rule is not SOME_REQUEST_SUCCEEDS or not r.passed]
    if not rows:
        return None
    table = Table(title="thresholds", title_justify="left")
    for name in ("rule", "target", "scenario", "measured", "result", "why"):
        table.add_column(name, justify="right" if name == "measured" else "left")
    for r in rows:
        table.add_row(
            escape(r.rule.describe()),
            r.target,
            r.scenario,
            r.shown,
            "[green]PASS[/]" if r.passed else "[bold red]FAIL[/]",
            escape(r.note),
        )
    return table
