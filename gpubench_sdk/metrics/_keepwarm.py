"""The keep-warm curve: chance of a cold start, and expected latency, against the idle gap.

From samples of (idle gap since the target's previous response, cold or not, latency), e.g.
a ``KeepWarmCurve`` scenario's run:

* gaps are grouped into bins: each distinct gap when there are at most ``max_distinct``
  (a planned sweep), else ``n_bins`` bins of equal count (quantile edges);
* per bin, P(cold) with a Wilson score interval, and the mean latency with a normal
  interval (mean +- z s / sqrt(n));
* ``cold_gap_s``: the gap where P(cold) first reaches 0.5, interpolated linearly between
  the median gaps of the last bin below and the first bin at or above 0.5. It is the first
  bin's median gap when that bin is already at or above 0.5, NaN when no bin reaches 0.5.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .._base._math import check_confidence, normal_ppf, wilson_interval
from ._stats import FloatArray


def idle_gaps_s(start_ns: npt.ArrayLike, end_ns: npt.ArrayLike) -> FloatArray:
    """Per request (input order): seconds from the latest end of the requests sent before it
    to its own send; 0 when one was still in flight, NaN for the first request."""
    start = np.asarray(start_ns, dtype=np.int64)
    end = np.asarray(end_ns, dtype=np.int64)
    if start.shape != end.shape:
        raise ValueError(f"start_ns {start.shape} and end_ns {end.shape} differ")
    order = np.argsort(start, kind="stable")
    latest_end = np.maximum.accumulate(end[order])
    gaps = np.full(start.size, np.nan)
    if start.size > 1:
        before = latest_end[:-1]
        gaps[order[1:]] = np.maximum(start[order][1:] - before, 0) / 1e9
    return gaps


@dataclass(frozen=True, slots=True)
class KeepWarmCurve:
    gap_low_s: FloatArray
    gap_high_s: FloatArray
    gap_median_s: FloatArray
    count: npt.NDArray[np.int64]
    cold: npt.NDArray[np.int64]
    p_cold: FloatArray
    p_cold_low: FloatArray
    p_cold_high: FloatArray
    mean_latency_ms: FloatArray
    mean_latency_low_ms: FloatArray
    mean_latency_high_ms: FloatArray
    cold_gap_s: float
    confidence: float


def keep_warm_curve(
    idle_gap_s: npt.ArrayLike,
    was_cold: npt.ArrayLike,
    latency_ms: npt.ArrayLike,
    *,
    n_bins: int = 10,
    max_distinct: int = 20,
    confidence: float = 0.95,
) -> KeepWarmCurve:
    """Bin samples by idle gap (see module doc). Samples with a NaN gap or unknown cold state
    (-1) are left out; a NaN latency only leaves the latency figures."""
    check_confidence(confidence)
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    gap = np.asarray(idle_gap_s, dtype=np.float64)
    cold = np.asarray(was_cold, dtype=np.float64)
    latency = np.asarray(latency_ms, dtype=np.float64)
    if not gap.shape == cold.shape == latency.shape:
        shapes = f"gap {gap.shape}, cold {cold.shape}, latency {latency.shape}"
        raise ValueError(f"idle_gap_s, was_cold and latency_ms must match: {shapes}")
    keep = ~np.isnan(gap) & (cold >= 0)
    if (gap[keep] < 0).any():
        raise ValueError("idle_gap_s must be >= 0")
    gap, cold, latency = gap[keep], cold[keep] == 1, latency[keep]
    distinct = np.unique(gap)
    if distinct.size <= max_distinct:
        bin_of = np.searchsorted(distinct, gap)
        edges_lo = edges_hi = distinct
    else:
        edges = np.unique(np.quantile(gap, np.linspace(0, 1, n_bins + 1)))
        bin_of = np.clip(np.searchsorted(edges, gap, side="right") - 1, 0, edges.size - 2)
        edges_lo, edges_hi = edges[:-1], edges[1:]
    z = normal_ppf(1 - (1 - confidence) / 2)
    rows = []
    for b in range(len(edges_lo)):
        sel = bin_of == b
        n, k = int(sel.sum()), int(cold[sel].sum())
        lo, hi = wilson_interval(k, n, confidence)
        lat = latency[sel]
        lat = lat[~np.isnan(lat)]
        mean = float(lat.mean()) if lat.size else math.nan
        half = z * float(lat.std(ddof=1)) / math.sqrt(lat.size) if lat.size > 1 else math.nan
        med = float(np.median(gap[sel])) if n else math.nan
        p = k / n if n else math.nan
        rows.append(
            (edges_lo[b], edges_hi[b], med, n, k, p, lo, hi, mean, mean - half, mean + half)
        )
    cols = list(zip(*rows, strict=True)) if rows else [()] * 11
    arr = [np.asarray(c, dtype=np.float64) for c in cols]
    return KeepWarmCurve(
        arr[0], arr[1], arr[2], arr[3].astype(np.int64), arr[4].astype(np.int64),
        arr[5], arr[6], arr[7], arr[8], arr[9], arr[10],
        _crossing(arr[2], arr[5]) if rows else math.nan, confidence,
    )  # fmt: skip


def _crossing(gap_s: FloatArray, p: FloatArray) -> float:
    valid = ~np.isnan(p)
    gap_s, p = gap_s[valid], p[valid]
    above = np.flatnonzero(p >= 0.5)
    if not above.size:
        return math.nan
    i = int(above[0])
    if i == 0:
        return float(gap_s[0])
    g0, g1, p0, p1 = gap_s[i - 1], gap_s[i], p[i - 1], p[i]
    return float(g0 + (0.5 - p0) / (p1 - p0) * (g1 - g0))
