"""Provider A against provider B on the same workload: which is faster, by how much, how sure.

* Differences of the median and p95 (``b - a``: positive means A is faster) with percentile
  bootstrap CIs: A and B are resampled independently with the exact order-statistic draw of
  ``_stats`` (``n_boot`` replicates, seeded), so it stays O(n log n + n_boot) at any size.
* The Mann-Whitney U rank test, two-sided, by the normal approximation with the tie
  correction and a continuity correction of 0.5 (Mann & Whitney 1947; the tie-corrected
  variance as in scipy.stats.mannwhitneyu's ``asymptotic`` method, which the tests check
  against). Good from about 8 values per side.
* A verdict in plain language, from the CIs (a difference is significant when its CI
  excludes 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .._base._math import check_confidence
from ._stats import (
    DEFAULT_N_BOOT,
    as_samples,
    bootstrap_quantile_replicates,
    normal_sf,
    quantile_sorted,
    rankdata,
)


@dataclass(frozen=True, slots=True)
class MannWhitney:
    u: float  # U of sample a: pairs (a_i, b_j) with a_i > b_j, ties counting 1/2
    z: float
    p_value: float


def mann_whitney_u(a: npt.ArrayLike, b: npt.ArrayLike) -> MannWhitney:
    """Two-sided Mann-Whitney U test (normal approximation, tie and continuity corrected)."""
    x, y = as_samples(a, "a"), as_samples(b, "b")
    n1, n2 = x.size, y.size
    if n1 == 0 or n2 == 0:
        return MannWhitney(math.nan, math.nan, math.nan)
    ranks = rankdata(np.concatenate((x, y)))
    u1 = float(ranks[:n1].sum()) - n1 * (n1 + 1) / 2
    _, tie_counts = np.unique(ranks, return_counts=True)
    ties = float((tie_counts.astype(np.float64) ** 3 - tie_counts).sum())
    return u_test(u1, n1, n2, ties)


def u_test(u1: float, n1: int, n2: int, ties: float) -> MannWhitney:
    """The test from U of sample a and the tie term (the sum of ``t**3 - t`` over the groups of
    equal values of both samples together). Both are whole (or half) numbers far below 2**53,
    so they come out exactly alike however they were counted: ``daily_variability`` counts
    them without ranking the pooled days again for each day."""
    n = n1 + n2
    var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))) if n > 1 else 0.0
    if var <= 0:  # every value equal: no evidence either way
        return MannWhitney(u1, 0.0, 1.0)
    mu = n1 * n2 / 2
    u_big = max(u1, n1 * n2 - u1)
    z = (u_big - mu - 0.5) / math.sqrt(var)
    return MannWhitney(u1, z, min(1.0, 2 * normal_sf(z)))


@dataclass(frozen=True, slots=True)
class QuantileDifference:
    """``b_ms - a_ms`` at quantile ``q`` with its CI; positive means A is lower (faster)."""

    q: float
    a_ms: float
    b_ms: float
    diff_ms: float
    diff_ci_ms: tuple[float, float]

    @property
    def significant(self) -> bool:
        lo, hi = self.diff_ci_ms
        return lo > 0 or hi < 0


@dataclass(frozen=True, slots=True)
class Comparison:
    a_name: str
    b_name: str
    a_count: int
    b_count: int
    p50: QuantileDifference
    p95: QuantileDifference
    rank_test: MannWhitney
    confidence: float
    verdict: str


def _fmt_range(lo: float, hi: float, sep: str = "-") -> str:
    """Both ends in one unit: "120-310 ms", "1.2-3.4 ms", "-4.8 to 5.9 ms", "12.5-14.0 s"."""
    size = max(abs(lo), abs(hi))
    if size >= 10_000:
        return f"{lo / 1000:.1f}{sep}{hi / 1000:.1f} s"
    digits = 0 if size >= 100 else 1
    return f"{lo:.{digits}f}{sep}{hi:.{digits}f} ms"


def _verdict_part(d: QuantileDifference, a: str, b: str, label: str, conf: str) -> str:
    lo, hi = d.diff_ci_ms
    if math.isnan(lo):
        return f"not enough data at {label}"
    if lo > 0:
        return f"{a} is faster at {label} by {_fmt_range(lo, hi)} ({conf} CI)"
    if hi < 0:
        return f"{b} is faster at {label} by {_fmt_range(-hi, -lo)} ({conf} CI)"
    span = _fmt_range(lo, hi, " to ")
    return f"no significant difference at {label} ({conf} CI of {b} - {a}: {span})"


def compare(
    a_ms: npt.ArrayLike,
    b_ms: npt.ArrayLike,
    *,
    a_name: str = "A",
    b_name: str = "B",
    confidence: float = 0.95,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
) -> Comparison:
    """Compare two samples of latencies (NaN ignored); see the module doc for the methods."""
    check_confidence(confidence)
    if n_boot < 100:
        raise ValueError(f"n_boot must be >= 100 for a usable interval, got {n_boot}")
    a, b = np.sort(as_samples(a_ms, "a_ms")), np.sort(as_samples(b_ms, "b_ms"))
    rng = np.random.default_rng(seed)
    alpha = 1 - confidence
    diffs = []
    for q in (0.5, 0.95):
        qa, qb = quantile_sorted(a, q), quantile_sorted(b, q)
        if a.size and b.size:
            reps = bootstrap_quantile_replicates(b, q, n_boot, rng) - (
                bootstrap_quantile_replicates(a, q, n_boot, rng)
            )
            lo, hi = (float(v) for v in np.quantile(reps, [alpha / 2, 1 - alpha / 2]))
        else:
            lo = hi = math.nan
        diffs.append(QuantileDifference(q, qa, qb, qb - qa, (lo, hi)))
    test = mann_whitney_u(a, b)
    conf = f"{confidence:.0%}"
    parts = [_verdict_part(diffs[1], a_name, b_name, "p95", conf)]
    parts.append(_verdict_part(diffs[0], a_name, b_name, "p50", conf))
    if not math.isnan(test.p_value):
        parts.append(f"Mann-Whitney U p = {test.p_value:.2g}")
    return Comparison(
        a_name, b_name, int(a.size), int(b.size), diffs[0], diffs[1], test, confidence,
        "; ".join(parts),
    )  # fmt: skip
