"""The regression gate: ``--fail-on "p95>+20%,cold_start.p50>+2s,cost_per_1k>+10%"``.

The grammar of rules (changes from a baseline, and limits on the candidate's own figures) is
``gpubench_sdk._plan._thresholds``'s; this module judges them on two pooled samples.

The change's CI is a percentile bootstrap (2,000 replicates, seeded): each side resampled
independently with ``metrics``' exact order-statistic draw for quantiles, plain resampling for
the mean (above 5,000 values, normal draws with the sample's standard error: the central limit
theorem makes them the same to within Monte Carlo noise), and binomial draws for the error
rate. Throughput and cost have no CI (one figure per run, not per request).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .._plan._thresholds import METRICS, Threshold, format_value, parse_fail_on
from ..metrics._stats import DEFAULT_N_BOOT, bootstrap_quantile_replicates

__all__ = [
    "METRICS",
    "GateReport",
    "GateRow",
    "Sample",
    "Threshold",
    "evaluate",
    "format_value",
    "parse_fail_on",
]

FloatArray = npt.NDArray[np.float64]
_MEAN_NORMAL_ABOVE = 5_000  # values per side above which the mean's replicates are drawn normal


@dataclass(frozen=True, slots=True)
class Sample:
    """One side of a comparison: pooled measured requests of one target over some runs."""

    latency_ms: FloatArray  # successful requests
    ttft_ms: FloatArray  # successful requests: first stored token, else first byte
    cold_start_ms: FloatArray
    requests: int
    failed: int
    ok_per_s: float
    cost_usd: float | None  # estimated bill of these requests; None without a price


@dataclass(frozen=True, slots=True)
class GateRow:
    target: str
    threshold: Threshold
    baseline: float
    candidate: float
    change: float  # fraction when the threshold is relative, else the metric's base unit
    change_ci: tuple[float, float]  # same unit as change; NaN when not meaningful
    verdict: str  # PASS, FAIL, NO DATA


@dataclass(frozen=True, slots=True)
class GateReport:
    rows: tuple[GateRow, ...]

    @property
    def failed(self) -> list[GateRow]:
        return [r for r in self.rows if r.verdict == "FAIL"]

    @property
    def missing(self) -> list[GateRow]:
        return [r for r in self.rows if r.verdict == "NO DATA"]

    @property
    def passed(self) -> bool:
        return not self.failed and not self.missing


def _quantile_stat(q: float) -> Callable[[FloatArray, np.random.Generator, int], FloatArray]:
    def reps(values: FloatArray, rng: np.random.Generator, n: int) -> FloatArray:
        return bootstrap_quantile_replicates(np.sort(values), q, n, rng)

    return reps


def _mean_reps(values: FloatArray, rng: np.random.Generator, n: int) -> FloatArray:
    if values.size > _MEAN_NORMAL_ABOVE:
        # the bootstrap distribution of a mean of this many values is normal to within its own
        # Monte Carlo noise (central limit theorem), and drawing it is O(n_boot), not O(n n_boot)
        sd = float(values.std(ddof=1)) / math.sqrt(values.size)
        reps: FloatArray = rng.normal(float(values.mean()), sd, n)
        return reps
    out = np.empty(n)
    rows = max(1, 4_000_000 // max(values.size, 1))  # resamples per chunk: ~4M values at once
    for i in range(0, n, rows):
        k = min(rows, n - i)
        out[i : i + k] = values[rng.integers(0, values.size, (k, values.size))].mean(axis=1)
    return out


_DURATIONS: dict[str, tuple[str, float | None]] = {  # metric -> (sample field, quantile)
    "p50": ("latency_ms", 0.5),
    "p90": ("latency_ms", 0.9),
    "p95": ("latency_ms", 0.95),
    "p99": ("latency_ms", 0.99),
    "mean": ("latency_ms", None),
    "cold_start.p50": ("cold_start_ms", 0.5),
    "cold_start.p95": ("cold_start_ms", 0.95),
    "ttft.p50": ("ttft_ms", 0.5),
    "ttft.p95": ("ttft_ms", 0.95),
}


def point(metric: str, s: Sample) -> float:
    """``metric`` of one side (NaN where it has nothing to measure it on)."""
    if metric in _DURATIONS:
        field, q = _DURATIONS[metric]
        values: FloatArray = getattr(s, field)
        if not values.size:
            return math.nan
        return float(values.mean()) if q is None else float(np.quantile(values, q))
    if metric == "error_rate":
        return s.failed / s.requests if s.requests else math.nan
    if metric == "throughput":
        return s.ok_per_s
    if s.cost_usd is None or not s.requests:  # cost_per_1k
        return math.nan
    return s.cost_usd / s.requests * 1000


def _replicates(metric: str, s: Sample, rng: np.random.Generator, n: int) -> FloatArray | None:
    if metric in _DURATIONS:
        field, q = _DURATIONS[metric]
        values: FloatArray = getattr(s, field)
        return _mean_reps(values, rng, n) if q is None else _quantile_stat(q)(values, rng, n)
    if metric == "error_rate" and s.requests:
        reps: FloatArray = rng.binomial(s.requests, s.failed / s.requests, n) / s.requests
        return reps
    return None


def evaluate(
    target: str,
    baseline: Sample,
    candidate: Sample,
    thresholds: list[Threshold],
    *,
    significant_only: bool = False,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
) -> list[GateRow]:
    """Each threshold against the change from ``baseline`` to ``candidate`` (a change rule)
    or against the candidate's own figure (a limit).

    A rule fails when the change is beyond its limit; with ``significant_only``, only when the
    whole 95% CI of the change is beyond it (rules without a CI still use the change itself).
    A metric the candidate lacks (no cold start measured, no price) fails the rule: a gate
    must not pass on nothing. One only the baseline lacks cannot be judged: ``NO DATA``.
    """
    rows = []
    for th in thresholds:
        rng = np.random.default_rng(seed)
        b, c = point(th.metric, baseline), point(th.metric, candidate)
        ci = (math.nan, math.nan)
        if not th.change:
            rows.append(GateRow(target, th, b, c, c, ci, "FAIL" if th.fails(c) else "PASS"))
            continue
        if math.isnan(b) or math.isnan(c) or (th.relative and b == 0 and c != 0):
            change = math.inf if not (math.isnan(b) or math.isnan(c)) else math.nan
        else:
            change = (c / b - 1 if b else 0.0) if th.relative else c - b
            br = _replicates(th.metric, baseline, rng, n_boot)
            cr = _replicates(th.metric, candidate, rng, n_boot)
            if br is not None and cr is not None:
                with np.errstate(divide="ignore", invalid="ignore"):
                    diff = cr / br - 1 if th.relative else cr - br
                diff = diff[np.isfinite(diff)]
                if diff.size:
                    lo, hi = np.quantile(diff, [0.025, 0.975])
                    ci = (float(lo), float(hi))
        if math.isnan(c):
            verdict = "FAIL"
        elif math.isnan(change):
            verdict = "NO DATA"
        else:
            use_ci = significant_only and not math.isnan(ci[0])
            if th.op == ">":
                beyond = (ci[0] if use_ci else change) > th.limit
            else:
                beyond = (ci[1] if use_ci else change) < th.limit
            verdict = "FAIL" if beyond else "PASS"
        rows.append(GateRow(target, th, b, c, change, ci, verdict))
    return rows


def format_change(th: Threshold, value: float) -> str:
    if math.isnan(value):
        return "-"
    if not th.change:  # a limit judges the candidate's own figure, not a change
        return "-"
    if math.isinf(value):
        return "new" if value > 0 else "gone"
    if th.relative:
        return f"{value * 100:+.1f}%"
    kind = METRICS[th.metric][0]
    if kind == "fraction":
        return f"{value * 100:+.2f} pp"
    text = format_value(th.metric, abs(value))
    return ("+" if value >= 0 else "-") + text
