"""Autoscaling under a burst: does latency grow with the load, and how fast does the fleet grow.

* Latency against request index (requests in order of their send) and against send time:
  ordinary least squares slope (ms per request, ms per s), Pearson's r and Spearman's rho. The
  reference report's "latency rises linearly with requests" is a positive slope with r near 1.
* Time to return to the warm baseline: from the burst's first send to the send of the first
  request that opens ``run_length`` consecutive successful requests whose median is within
  ``tolerance`` of ``baseline_ms`` (default: the median of the burst's last quarter).
* Completions per second in ``window_s`` windows from the first send.
* From fleet readings (``Store.fleet``): workers ready over time and the time to scale from
  the first reading to ``target_ready`` workers ready (default: the peak reached).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .._base._types import Outcome
from ._stats import FloatArray, pearson_r, spearman_rho
from ._throughput import windowed_rate


@dataclass(frozen=True, slots=True)
class Trend:
    slope: float  # ms per unit of x
    intercept_ms: float
    pearson_r: float
    spearman_rho: float


def linear_trend(x: npt.ArrayLike, y_ms: npt.ArrayLike) -> Trend:
    """OLS fit ``y = intercept + slope * x`` with both correlations; NaN with < 2 points."""
    xs, ys = np.asarray(x, dtype=np.float64), np.asarray(y_ms, dtype=np.float64)
    if xs.shape != ys.shape:
        raise ValueError(f"x {xs.shape} and y_ms {ys.shape} must have the same shape")
    if xs.size < 2 or np.ptp(xs) == 0:
        return Trend(math.nan, math.nan, math.nan, math.nan)
    dx = xs - xs.mean()
    slope = float(dx @ (ys - ys.mean())) / float(dx @ dx)
    return Trend(
        slope, float(ys.mean()) - slope * float(xs.mean()), pearson_r(xs, ys), spearman_rho(xs, ys)
    )


@dataclass(frozen=True, slots=True)
class BurstAnalysis:
    requests: int
    ok: int
    by_index: Trend  # slope in ms per request
    by_time: Trend  # slope in ms per second since the first send
    baseline_ms: float
    time_to_baseline_s: float  # NaN when latency never returned to the baseline
    requests_to_baseline: int  # -1 when it never did
    window_start_s: FloatArray
    window_rps: FloatArray


def burst_analysis(
    *,
    start_ns: npt.ArrayLike,
    end_ns: npt.ArrayLike,
    latency_ms: npt.ArrayLike,
    outcome: npt.ArrayLike,
    baseline_ms: float | None = None,
    tolerance: float = 0.2,
    run_length: int = 10,
    window_s: float = 1.0,
) -> BurstAnalysis:
    """Analyse one burst of one target (successful requests only for the latency figures)."""
    if not tolerance >= 0:
        raise ValueError(f"tolerance must be >= 0 (0.2 for 20%), got {tolerance!r}")
    if run_length < 1:
        raise ValueError(f"run_length must be >= 1, got {run_length}")
    start = np.asarray(start_ns, dtype=np.int64)
    order = np.argsort(start, kind="stable")
    start = start[order]
    end = np.asarray(end_ns, dtype=np.int64)[order]
    latency = np.asarray(latency_ms, dtype=np.float64)[order]
    ok = (np.asarray(outcome, dtype=np.int64) == Outcome.OK.code)[order]
    if not start.size:
        nan_trend = Trend(math.nan, math.nan, math.nan, math.nan)
        empty = np.zeros(0)
        return BurstAnalysis(0, 0, nan_trend, nan_trend, math.nan, math.nan, -1, empty, empty)
    index = np.arange(start.size, dtype=np.float64)
    since_s = (start - start[0]) / 1e9
    good = latency[ok]
    if baseline_ms is None:
        baseline_ms = float(np.median(good[-max(1, good.size // 4) :])) if good.size else math.nan
    limit = baseline_ms * (1 + tolerance)
    back = -1
    if good.size >= run_length:
        windows = np.lib.stride_tricks.sliding_window_view(good, run_length)
        hits = np.flatnonzero(np.median(windows, axis=1) <= limit)
        if hits.size:
            back = int(np.flatnonzero(ok)[hits[0]])
    window_start, rps = windowed_rate(end, window_s=window_s, origin_ns=int(start[0]))
    return BurstAnalysis(
        requests=int(start.size),
        ok=int(ok.sum()),
        by_index=linear_trend(index[ok], good),
        by_time=linear_trend(since_s[ok], good),
        baseline_ms=baseline_ms,
        time_to_baseline_s=float(since_s[back]) if back >= 0 else math.nan,
        requests_to_baseline=back,
        window_start_s=window_start,
        window_rps=rps,
    )


@dataclass(frozen=True, slots=True)
class ScaleUp:
    t_s: FloatArray  # since the first reading (or origin_ns)
    ready: npt.NDArray[np.int64]
    started_ready: int
    peak_ready: int
    target_ready: int
    time_to_target_s: float  # NaN when never reached


def scale_up(
    t_ns: npt.ArrayLike,
    ready: npt.ArrayLike,
    *,
    target_ready: int | None = None,
    origin_ns: int | None = None,
) -> ScaleUp:
    """Workers ready over time from fleet readings (-1 = not reported, dropped) and the time
    until ``target_ready`` were ready (0 -> N when the first reading had none ready)."""
    t = np.asarray(t_ns, dtype=np.int64)
    r = np.asarray(ready, dtype=np.int64)
    keep = r >= 0
    t, r = t[keep], r[keep]
    if target_ready is not None and target_ready < 1:
        raise ValueError(f"target_ready must be >= 1, got {target_ready}")
    if not t.size:
        return ScaleUp(np.zeros(0), r, -1, -1, target_ready or -1, math.nan)
    origin = int(t[0]) if origin_ns is None else origin_ns
    peak = int(r.max())
    goal = peak if target_ready is None else target_ready
    reached = np.flatnonzero(r >= goal)
    when = float((t[reached[0]] - origin) / 1e9) if reached.size and goal > 0 else math.nan
    return ScaleUp((t - origin) / 1e9, r, int(r[0]), peak, goal, when)
