"""Summaries of one sample of durations: percentiles, spread, and confidence intervals.

Percentiles default to numpy's ``linear`` method (Hyndman & Fan 1996, definition 7: the
``h = (n - 1) q`` order statistic, interpolated); any ``numpy.quantile`` method may be passed.

Two confidence intervals for a quantile are offered (``ci_method``):

* ``bootstrap``: the percentile bootstrap with ``n_boot`` replicates from a seeded
  ``numpy.random.Generator``. A replicate's quantile is drawn exactly without materialising
  the resample: the k-th order statistic of n uniforms is Beta(k, n - k + 1) (David & Nagaraja,
  *Order Statistics*, 3rd ed., 2.2), and the resample's k-th order statistic is the sample's
  ``ceil(n U_(k))``-th, so each replicate costs O(1) after one sort.
* ``order_statistic``: the distribution-free interval [X_(l), X_(u)] whose coverage
  P(l <= K < u), K ~ Binomial(n, q), is at least the confidence level (ibid. 7.1; exact for
  continuous data, conservative with ties).

``auto`` uses the bootstrap up to ``AUTO_ORDER_STATISTIC_ABOVE`` samples and the order
statistic above, where it is exact and has no Monte Carlo noise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from .._base._math import check_confidence
from .._base._types import Outcome

FloatArray = npt.NDArray[np.float64]
CIMethod = Literal["auto", "bootstrap", "order_statistic"]

AUTO_ORDER_STATISTIC_ABOVE = 100_000
DEFAULT_N_BOOT = 2_000
_NAN = float("nan")
_NAN_PAIR = (_NAN, _NAN)


def as_samples(values: npt.ArrayLike, name: str = "values") -> FloatArray:
    """``values`` as a 1-D float64 array with NaNs dropped (NaN marks a missing figure)."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    return arr[~np.isnan(arr)]


def check_quantile(q: float) -> None:
    if not 0 <= q <= 1:
        raise ValueError(f"quantile must be in [0, 1] (0.95 for p95), got {q!r}")


def quantile_sorted(sorted_values: FloatArray, q: float, method: str = "linear") -> float:
    """The ``q`` quantile of an ascending array without NaNs (O(1) for ``linear``)."""
    check_quantile(q)
    n = sorted_values.size
    if n == 0:
        return _NAN
    if method != "linear":
        return float(np.quantile(sorted_values, q, method=method))  # type: ignore[call-overload]
    h = (n - 1) * q
    k = math.floor(h)
    if k + 1 >= n:
        return float(sorted_values[n - 1])
    lo, hi = float(sorted_values[k]), float(sorted_values[k + 1])
    return lo + (h - k) * (hi - lo)


def percentile(values: npt.ArrayLike, q: float, *, method: str = "linear") -> float:
    """The ``q`` quantile (0-1) of ``values`` ignoring NaN; NaN when nothing is left."""
    check_quantile(q)
    arr = as_samples(values)
    if not arr.size:
        return _NAN
    return float(np.quantile(arr, q, method=method))  # type: ignore[call-overload]


def _binomial_cdf_window(n: int, q: float) -> tuple[npt.NDArray[np.int64], FloatArray]:
    """P(K <= k) for K ~ Binomial(n, q) over the k that carry all but ~1e-30 of the mass."""
    sd = math.sqrt(n * q * (1 - q))
    lo = max(0, math.floor(n * q - 12 * sd - 30))
    hi = min(n, math.ceil(n * q + 12 * sd + 30))
    ks = np.arange(lo, hi + 1, dtype=np.int64)
    first = (
        math.lgamma(n + 1) - math.lgamma(lo + 1) - math.lgamma(n - lo + 1)
        + lo * math.log(q) + (n - lo) * math.log1p(-q)
    )  # fmt: skip
    # pmf(k + 1) / pmf(k) = (n - k) / (k + 1) * q / (1 - q): one cumsum instead of n lgammas
    steps = np.log((n - ks[:-1]) / (ks[:-1] + 1)) + math.log(q) - math.log1p(-q)
    log_pmf = first + np.concatenate(([0.0], np.cumsum(steps)))
    pmf = np.exp(log_pmf - log_pmf.max())
    # the mass outside the window (> 12 sd + 30 from the mean) is far below float precision
    return ks, np.cumsum(pmf) / pmf.sum()


def order_statistic_ranks(n: int, q: float, confidence: float) -> tuple[int, int]:
    """1-based ranks (l, u) with P(X_(l) <= xi_q <= X_(u)) >= confidence, clipped to [1, n]."""
    check_quantile(q)
    check_confidence(confidence)
    if n <= 0:
        raise ValueError(f"n must be positive, got {n}")
    if q in (0.0, 1.0):
        return (1, 1) if q == 0 else (n, n)
    alpha = 1 - confidence
    ks, cdf = _binomial_cdf_window(n, q)
    below = ks[cdf <= alpha / 2]
    l_rank = int(below[-1]) + 1 if below.size else 1
    above = ks[cdf >= 1 - alpha / 2]
    u_rank = int(above[0]) + 1 if above.size else n
    return max(1, min(l_rank, n)), max(1, min(u_rank, n))


def order_statistic_ci(
    sorted_values: FloatArray, q: float, confidence: float = 0.95
) -> tuple[float, float]:
    """Distribution-free CI of the ``q`` quantile from an ascending array (see module doc)."""
    n = sorted_values.size
    if n == 0:
        return _NAN_PAIR
    lo, hi = order_statistic_ranks(n, q, confidence)
    return float(sorted_values[lo - 1]), float(sorted_values[hi - 1])


def bootstrap_quantile_replicates(
    sorted_values: FloatArray, q: float, n_boot: int, rng: np.random.Generator
) -> FloatArray:
    """``n_boot`` bootstrap replicates of the ``linear`` ``q`` quantile (see module doc)."""
    n = sorted_values.size
    h = (n - 1) * q
    k = math.floor(h)
    frac = h - k
    u_k = rng.beta(k + 1, n - k, size=n_boot)  # U_(k+1), 1-based, of n uniforms
    idx = np.minimum(np.ceil(n * u_k).astype(np.int64), n) - 1
    low: FloatArray = sorted_values[np.maximum(idx, 0)]
    if frac == 0 or k + 1 >= n:
        return low
    # The next order statistic: the least of the n - k - 1 uniforms above U_(k+1).
    u_next = u_k + (1 - u_k) * rng.beta(1, n - k - 1, size=n_boot)
    idx_next = np.minimum(np.ceil(n * u_next).astype(np.int64), n) - 1
    high: FloatArray = sorted_values[np.maximum(idx_next, 0)]
    return low + frac * (high - low)


def bootstrap_ci(
    values: npt.ArrayLike,
    statistic: Any,
    *,
    confidence: float = 0.95,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int | np.random.Generator = 0,
    chunk_elements: int = 4_000_000,
) -> tuple[float, float]:
    """Percentile-bootstrap CI of any ``statistic(resamples, axis=1) -> array``, resampling
    whole rows in chunks of at most ``chunk_elements`` values (e.g. ``np.mean``)."""
    check_confidence(confidence)
    arr = as_samples(values)
    if not arr.size:
        return _NAN_PAIR
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    per_chunk = max(1, chunk_elements // arr.size)
    reps = []
    for start in range(0, n_boot, per_chunk):
        rows = min(per_chunk, n_boot - start)
        reps.append(np.asarray(statistic(arr[rng.integers(0, arr.size, (rows, arr.size))], axis=1)))
    alpha = 1 - confidence
    lo, hi = np.quantile(np.concatenate(reps), [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def quantile_ci(
    sorted_values: FloatArray,
    q: float,
    *,
    confidence: float = 0.95,
    ci_method: CIMethod = "auto",
    n_boot: int = DEFAULT_N_BOOT,
    rng: np.random.Generator | None = None,
) -> tuple[float, float]:
    """CI of the ``linear`` ``q`` quantile of an ascending array by the chosen method."""
    check_confidence(confidence)
    n = sorted_values.size
    if n == 0:
        return _NAN_PAIR
    method = ci_method
    if method == "auto":
        method = "order_statistic" if n > AUTO_ORDER_STATISTIC_ABOVE else "bootstrap"
    if method == "order_statistic":
        return order_statistic_ci(sorted_values, q, confidence)
    if method != "bootstrap":
        raise ValueError(f"ci_method must be auto, bootstrap or order_statistic, got {method!r}")
    if n_boot < 100:
        raise ValueError(f"n_boot must be >= 100 for a usable interval, got {n_boot}")
    reps = bootstrap_quantile_replicates(sorted_values, q, n_boot, rng or np.random.default_rng(0))
    alpha = 1 - confidence
    lo, hi = np.quantile(reps, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def normal_sf(z: float) -> float:
    """P(Z > z) for a standard normal Z."""
    return 0.5 * math.erfc(z / math.sqrt(2))


def outcome_counts(outcome_codes: npt.ArrayLike) -> dict[str, int]:
    """How many requests ended each way, by ``Outcome`` name (only those that occurred)."""
    codes = np.asarray(outcome_codes, dtype=np.int64)
    counts = np.bincount(codes, minlength=len(Outcome)) if codes.size else np.zeros(0, np.int64)
    return {Outcome.from_code(i).value: int(c) for i, c in enumerate(counts) if c}


def error_rates(outcome_codes: npt.ArrayLike) -> dict[str, float]:
    """The fraction of requests that ended with each non-ok outcome."""
    counts = outcome_counts(outcome_codes)
    total = sum(counts.values())
    return {k: v / total for k, v in counts.items() if k != Outcome.OK.value}


@dataclass(frozen=True, slots=True)
class Summary:
    """A summary of one sample of durations in ms. NaN where a figure is undefined (no data,
    or a spread of a single value). CIs are ``(low, high)`` at ``confidence``."""

    count: int
    mean_ms: float
    std_ms: float
    cv: float
    min_ms: float
    max_ms: float
    iqr_ms: float
    p50_ms: float
    p90_ms: float
    p95_ms: float
    p99_ms: float
    p999_ms: float
    p50_ci_ms: tuple[float, float]
    p95_ci_ms: tuple[float, float]
    confidence: float
    ci_method: str
    interpolation: str


def summarize_samples(
    values_ms: npt.ArrayLike,
    *,
    confidence: float = 0.95,
    method: str = "linear",
    ci_method: CIMethod = "auto",
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
) -> Summary:
    """Count, mean, std (ddof=1), CV = std/mean, min/max, IQR, p50-p99.9 and CIs of p50 and p95.

    NaN values are ignored (missing). CIs are of the ``linear`` quantile whatever ``method``.
    """
    check_confidence(confidence)
    s = np.sort(as_samples(values_ms, "values_ms"))
    n = int(s.size)
    if n == 0:
        nan = _NAN
        return Summary(
            0, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan,
            _NAN_PAIR, _NAN_PAIR, confidence, ci_method, method,
        )  # fmt: skip
    mean = float(s.mean())
    std = float(s.std(ddof=1)) if n > 1 else _NAN
    qs = [quantile_sorted(s, q, method) for q in (0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999)]
    rng = np.random.default_rng(seed)
    used = ci_method
    if used == "auto":
        used = "order_statistic" if n > AUTO_ORDER_STATISTIC_ABOVE else "bootstrap"
    cis = [quantile_ci(s, q, confidence=confidence, ci_method=used, n_boot=n_boot, rng=rng)
           for q in (0.5, 0.95)]  # fmt: skip
    return Summary(
        count=n,
        mean_ms=mean,
        std_ms=std,
        cv=std / mean if mean != 0 else _NAN,
        min_ms=float(s[0]),
        max_ms=float(s[-1]),
        iqr_ms=qs[2] - qs[0],
        p50_ms=qs[1],
        p90_ms=qs[3],
        p95_ms=qs[4],
        p99_ms=qs[5],
        p999_ms=qs[6],
        p50_ci_ms=cis[0],
        p95_ci_ms=cis[1],
        confidence=confidence,
        ci_method=used,
        interpolation=method,
    )


def spearman_rho(x: Sequence[float] | FloatArray, y: Sequence[float] | FloatArray) -> float:
    """Spearman's rank correlation (Pearson's r of average ranks, so ties are handled)."""
    return pearson_r(rankdata(np.asarray(x, float)), rankdata(np.asarray(y, float)))


def pearson_r(x: FloatArray, y: FloatArray) -> float:
    """Pearson's correlation; NaN when either side is constant or has < 2 values."""
    if x.size < 2:
        return _NAN
    dx, dy = x - x.mean(), y - y.mean()
    denom = math.sqrt(float(dx @ dx) * float(dy @ dy))
    return float(dx @ dy) / denom if denom > 0 else _NAN


def rankdata(values: FloatArray) -> FloatArray:
    """1-based ranks with ties given their average rank (scipy's ``rankdata`` 'average')."""
    order = np.argsort(values, kind="stable")
    sorted_vals = values[order]
    # boundaries of runs of equal values
    starts = np.flatnonzero(np.concatenate(([True], sorted_vals[1:] != sorted_vals[:-1])))
    ends = np.concatenate((starts[1:], [values.size]))
    avg = (starts + ends + 1) / 2.0  # mean of 1-based ranks starts+1 .. ends
    ranks = np.empty(values.size, dtype=np.float64)
    ranks[order] = np.repeat(avg, ends - starts)
    return ranks
