"""The per-target, per-scenario summary printed after a run and by ``gpubench results show``.

Percentiles use numpy's default linear interpolation between closest ranks. Latency counts
from the scheduled send time. Cold start is the reference report's definition, latency minus
inference time, measured from the actual send (so the client's own send lag is excluded), with
inference time from the server-reported execution time; where the server reports none, the warm
median of the same target in the same scenario stands in (``inferred``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from rich.table import Table

from ._store import RunInfo, Store
from ._types import Outcome


@dataclass(frozen=True, slots=True)
class SummaryRow:
    target: str
    scenario: str
    requests: int
    ok: int
    errors: dict[str, int] = field(default_factory=dict)
    p50_ms: float = float("nan")
    p95_ms: float = float("nan")
    p99_ms: float = float("nan")
    mean_ms: float = float("nan")
    throughput_rps: float = float("nan")
    cold_samples: int = 0
    cold_confirmed: int = 0
    cold_start_p50_ms: float = float("nan")
    cold_start_inferred: bool = False
    send_lag_p99_ms: float = float("nan")

    @property
    def error_rate(self) -> float:
        return 0.0 if not self.requests else 1 - self.ok / self.requests


def _pct(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if values.size else float("nan")


def summarize(store: Store, run: RunInfo) -> list[SummaryRow]:
    rows = []
    for sidx, scenario in enumerate(run.scenarios):
        for target in run.targets:
            cols = store.columns(run.id, target=target.name, scenario=sidx)
            outcome = np.asarray(cols["outcome"])
            if outcome.size == 0:
                continue
            rows.append(_row(target.name, f"{sidx}:{scenario.kind}", cols, outcome))
    return rows


def _row(
    target: str, scenario: str, cols: dict[str, np.ndarray], outcome: np.ndarray
) -> SummaryRow:
    ok = outcome == Outcome.OK.code
    latency = np.asarray(cols["latency_ms"], dtype=float)
    good = latency[ok]
    errors = Counter(Outcome.from_code(int(c)).value for c in outcome[~ok])
    span_s = (int(np.max(cols["end_ns"])) - int(np.min(cols["start_ns"]))) / 1e9
    cold = np.asarray(cols["cold"], dtype=float) == 1
    confirmed = np.asarray(cols["cold_confirmed"], dtype=float) == 1
    execution = np.asarray(cols["execution_ms"], dtype=float)
    # Cold start counts from the actual send: a client's own send lag is not the provider's.
    service = (np.asarray(cols["end_ns"]) - np.asarray(cols["start_ns"])) / 1e6
    cold_ok = cold & ok
    inferred = False
    cold_start = service[cold_ok] - execution[cold_ok]
    if cold_start.size and np.isnan(cold_start).any():
        warm = ok & ~cold
        baseline = float(np.median(service[warm])) if warm.any() else float("nan")
        cold_start = np.where(np.isnan(cold_start), service[cold_ok] - baseline, cold_start)
        inferred = True
    cold_start = cold_start[~np.isnan(cold_start)]
    lag = (np.asarray(cols["start_ns"]) - np.asarray(cols["scheduled_ns"])) / 1e6
    return SummaryRow(
        target=target,
        scenario=scenario,
        requests=int(outcome.size),
        ok=int(ok.sum()),
        errors=dict(errors),
        p50_ms=_pct(good, 50),
        p95_ms=_pct(good, 95),
        p99_ms=_pct(good, 99),
        mean_ms=float(good.mean()) if good.size else float("nan"),
        throughput_rps=float(ok.sum()) / span_s if span_s > 0 else float("nan"),
        cold_samples=int(cold.sum()),
        cold_confirmed=int((cold & confirmed).sum()),
        cold_start_p50_ms=float(np.median(np.maximum(cold_start, 0)))
        if cold_start.size
        else float("nan"),
        cold_start_inferred=inferred,
        send_lag_p99_ms=_pct(lag, 99),
    )


def _ms(value: float) -> str:
    if np.isnan(value):
        return "-"
    return f"{value / 1000:.2f} s" if value >= 10_000 else f"{value:.1f}"


def render(rows: list[SummaryRow], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for name, justify in (
        ("target", "left"),
        ("scenario", "left"),
        ("req", "right"),
        ("errors", "left"),
        ("p50 ms", "right"),
        ("p95 ms", "right"),
        ("p99 ms", "right"),
        ("req/s", "right"),
        ("cold start p50 ms", "right"),
        ("cold n (confirmed)", "right"),
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
            _ms(r.p50_ms),
            _ms(r.p95_ms),
            _ms(r.p99_ms),
            "-" if np.isnan(r.throughput_rps) else f"{r.throughput_rps:.1f}",
            cold if r.cold_samples else "-",
            f"{r.cold_samples} ({r.cold_confirmed})" if r.cold_samples else "-",
        )
    return table
