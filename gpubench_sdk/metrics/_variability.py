"""Variability across days: the reference report's range, CV, per-day medians, and changes.

* A request's day is the calendar date of ``wall_start_ns`` shifted by ``tz_offset_s``
  (default UTC).
* ``range_ms`` is the reference report's measure: max - min of the per-day medians.
* ``cv`` is the coefficient of variation of the per-day medians (std with ddof=1 / mean).
* Each day's median has a CI (``_stats.quantile_ci``).
* Change detector: each day from the ``min_history_days``-th on is tested against all earlier
  days pooled, with the two-sided Mann-Whitney U test; the p-values are adjusted with Holm's
  step-down method (Holm 1979), which holds the family-wise error rate, the chance that *any*
  day is flagged when nothing changed, at ``alpha`` under any dependence between the tests.
  A day is flagged when its adjusted p-value is below ``alpha`` and, when ``min_change`` is
  set, its median differs from the earlier days' pooled median by at least that fraction of
  it. Significance alone flags shifts too small to matter once the days hold many requests,
  or once the days' values barely vary (a loaded measuring machine then moves whole days).
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .._base._math import check_confidence
from ._compare import u_test
from ._stats import quantile_ci

_NS_PER_DAY = 86_400 * 10**9


@dataclass(frozen=True, slots=True)
class DayStats:
    day: str  # ISO date
    count: int
    median_ms: float
    median_ci_ms: tuple[float, float]
    p_value: float  # against the earlier days pooled; NaN when not tested
    p_adjusted: float  # Holm-adjusted
    changed: bool
    earlier_median_ms: float = math.nan  # the earlier days pooled; NaN when not tested


@dataclass(frozen=True, slots=True)
class Variability:
    days: tuple[DayStats, ...]
    range_ms: float
    cv: float
    alpha: float
    confidence: float

    @property
    def changed_days(self) -> list[str]:
        return [d.day for d in self.days if d.changed]


def holm_adjust(p_values: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Holm's step-down adjusted p-values (monotone, capped at 1), in the input's order."""
    p = np.asarray(p_values, dtype=np.float64)
    m = p.size
    if not m:
        return p.copy()
    order = np.argsort(p, kind="stable")
    scaled = (m - np.arange(m)) * p[order]
    adjusted = np.minimum(np.maximum.accumulate(scaled), 1.0)
    out = np.empty(m)
    out[order] = adjusted
    return out


def day_of(wall_start_ns: npt.ArrayLike, tz_offset_s: float = 0.0) -> npt.NDArray[np.int64]:
    """Days since 1970-01-01 in the time zone ``tz_offset_s`` east of UTC."""
    wall = np.asarray(wall_start_ns, dtype=np.int64)
    return (wall + round(tz_offset_s * 1e9)) // _NS_PER_DAY


def day_name(day: int) -> str:
    """A ``day_of`` day as its date, YYYY-MM-DD."""
    return (dt.date(1970, 1, 1) + dt.timedelta(days=int(day))).isoformat()


def _against_earlier_days(
    per_day: list[npt.NDArray[np.float64]], first: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """For each day ``i`` from ``first`` on (NaN before): ``mann_whitney_u(per_day[i],
    concatenate(per_day[:i])).p_value``, to the bit, and the median of those earlier days
    pooled. The earlier days are not ranked again for each day: the counts of their values,
    per distinct value, are kept as the days go, and U, the tie term and the median are counted
    from them (``u_test``). Two years of daily cold starts went from O(days x values log
    values) to about O(days x distinct values)."""
    raw = np.full(len(per_day), np.nan)
    earlier_median = np.full(len(per_day), np.nan)
    if len(per_day) <= first:
        return raw, earlier_median
    values, ids = np.unique(np.concatenate(per_day), return_inverse=True)
    counts = np.zeros(values.size, dtype=np.int64)  # the earlier days' values, by value
    ties_before = 0  # sum of c**3 - c over the earlier days' groups of equal values
    start = 0
    for i, day in enumerate(per_day):
        day_ids = ids[start : start + day.size]
        start += day.size
        seen, own = np.unique(day_ids, return_counts=True)
        c = counts[seen]
        both = c + own
        # the tie term of the earlier days and this one together
        ties = ties_before + int((both**3 - both).sum() - (c**3 - c).sum())
        if i >= first:
            running = np.cumsum(counts)
            below = running - counts  # earlier values below each distinct value
            # U of the day: pairs (day value, earlier value) with the day's greater, ties 1/2
            u1 = float(below[day_ids].sum()) + 0.5 * float(counts[day_ids].sum())
            n_before = int(running[-1])
            raw[i] = u_test(u1, day.size, n_before, float(ties)).p_value
            # the pooled median: the mean of the values at sorted positions (n-1)//2 and n//2
            lo, hi = np.searchsorted(running, [(n_before - 1) // 2 + 1, n_before // 2 + 1])
            earlier_median[i] = (values[lo] + values[hi]) / 2
        ties_before = ties
        counts[seen] += own
    return raw, earlier_median


def daily_variability(
    wall_start_ns: npt.ArrayLike,
    values_ms: npt.ArrayLike,
    *,
    tz_offset_s: float = 0.0,
    confidence: float = 0.95,
    alpha: float = 0.05,
    min_history_days: int = 1,
    min_change: float = 0.0,
    seed: int = 0,
) -> Variability:
    """Per-day medians of ``values_ms`` (e.g. cold starts; NaN ignored) and their spread.

    ``min_change``: the smallest relative difference between a day's median and the earlier
    days' pooled median that is flagged (0.25: a quarter), on top of the test's significance.
    """
    check_confidence(confidence)
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1 (e.g. 0.05), got {alpha!r}")
    if min_history_days < 1:
        raise ValueError(f"min_history_days must be >= 1, got {min_history_days}")
    if not 0 <= min_change < math.inf:
        raise ValueError(f"min_change must be a fraction >= 0 (e.g. 0.25), got {min_change!r}")
    values = np.asarray(values_ms, dtype=np.float64)
    days = day_of(wall_start_ns, tz_offset_s)
    if days.shape != values.shape:
        raise ValueError(f"wall_start_ns {days.shape} and values_ms {values.shape} differ")
    keep = ~np.isnan(values)
    days, values = days[keep], values[keep]
    rng = np.random.default_rng(seed)
    unique = np.unique(days)
    per_day = [np.sort(values[days == d]) for d in unique]
    medians = np.array([float(np.median(v)) for v in per_day])
    raw, earlier = _against_earlier_days(per_day, min_history_days)
    tested = ~np.isnan(raw)
    adjusted = np.full(unique.size, np.nan)
    adjusted[tested] = holm_adjust(raw[tested])
    out = []
    for i, d in enumerate(unique):
        date = day_name(d)
        ci = quantile_ci(per_day[i], 0.5, confidence=confidence, rng=rng)
        median = float(medians[i])
        before = float(earlier[i])
        material = abs(median - before) >= min_change * abs(before)
        changed = bool(tested[i] and adjusted[i] < alpha and material)
        out.append(
            DayStats(date, per_day[i].size, median, ci, raw[i], adjusted[i], changed, before)
        )
    spread = float(medians.max() - medians.min()) if medians.size else math.nan
    mean = float(medians.mean()) if medians.size else math.nan
    cv = float(medians.std(ddof=1)) / mean if medians.size > 1 and mean else math.nan
    return Variability(tuple(out), spread, cv, alpha, confidence)
