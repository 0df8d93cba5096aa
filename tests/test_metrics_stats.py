"""Summaries, percentiles and confidence intervals against numpy/scipy and known distributions."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.stats as st
from hypothesis import example, given, settings
from hypothesis import strategies as hs

from gpubench_sdk import Outcome
from gpubench_sdk._base._math import normal_ppf
from gpubench_sdk.metrics import (
    bootstrap_ci,
    error_rates,
    order_statistic_ci,
    outcome_counts,
    percentile,
    quantile_ci,
    summarize_samples,
    wilson_interval,
)
from gpubench_sdk.metrics._stats import (
    _binomial_cdf_window,
    bootstrap_quantile_replicates,
    order_statistic_ranks,
    rankdata,
)

finite = hs.floats(min_value=0, max_value=1e7, allow_nan=False, allow_infinity=False)


def test_summary_matches_numpy_by_hand() -> None:
    x = np.random.default_rng(3).lognormal(4, 0.8, 5_001)
    s = summarize_samples(np.append(x, np.nan))  # NaN = missing, ignored
    assert s.count == x.size
    qs = np.quantile(x, [0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999])
    got = [s.p50_ms, s.p90_ms, s.p95_ms, s.p99_ms, s.p999_ms]
    assert got == pytest.approx(qs[[1, 3, 4, 5, 6]].tolist(), rel=1e-12)
    assert s.iqr_ms == pytest.approx(qs[2] - qs[0])
    assert s.mean_ms == pytest.approx(x.mean()) and s.std_ms == pytest.approx(x.std(ddof=1))
    assert s.cv == pytest.approx(x.std(ddof=1) / x.mean())
    assert (s.min_ms, s.max_ms) == (x.min(), x.max())
    assert s.ci_method == "bootstrap" and s.interpolation == "linear"
    assert s.p50_ci_ms[0] < s.p50_ms < s.p50_ci_ms[1]


def test_hand_computed_small_sample() -> None:
    s = summarize_samples([10.0, 20.0, 30.0, 40.0])
    # type 7: h = (n - 1) q; p50 -> h = 1.5 -> 20 + 0.5 * 10; p90 -> h = 2.7 -> 30 + 0.7 * 10
    assert s.p50_ms == 25.0 and s.p90_ms == pytest.approx(37.0) and s.iqr_ms == 15.0
    assert s.std_ms == pytest.approx(math.sqrt(500 / 3))


@pytest.mark.parametrize("method", ["lower", "higher", "nearest", "midpoint", "hazen", "weibull"])
def test_other_numpy_methods(method: str) -> None:
    x = np.random.default_rng(1).exponential(50, 101)
    s = summarize_samples(x, method=method)
    assert s.p95_ms == pytest.approx(float(np.quantile(x, 0.95, method=method)))  # type: ignore[call-overload]
    assert percentile(x, 0.95, method=method) == s.p95_ms


def test_empty_and_single_give_nan_not_exceptions() -> None:
    empty = summarize_samples([])
    assert empty.count == 0 and math.isnan(empty.p50_ms) and math.isnan(empty.p50_ci_ms[0])
    one = summarize_samples([5.0, np.nan])
    assert one.count == 1 and one.p99_ms == 5.0 and math.isnan(one.std_ms)
    assert math.isnan(percentile([], 0.5))


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="confidence"):
        summarize_samples([1.0], confidence=95)
    with pytest.raises(ValueError, match="quantile"):
        percentile([1.0], 95)
    with pytest.raises(ValueError, match="one-dimensional"):
        summarize_samples([[1.0, 2.0]])
    with pytest.raises(ValueError, match="ci_method"):
        quantile_ci(np.arange(10.0), 0.5, ci_method="magic")  # type: ignore[arg-type]


def test_binomial_window_matches_scipy() -> None:
    for n, q in [(7, 0.5), (200, 0.95), (5_000, 0.999), (1_000_000, 0.5)]:
        ks, cdf = _binomial_cdf_window(n, q)
        assert np.max(np.abs(cdf - st.binom.cdf(ks, n, q))) < 1e-9


def test_order_statistic_ranks_meet_coverage_exactly() -> None:
    for n, q in [(20, 0.5), (100, 0.9), (1_000, 0.95), (50_000, 0.99)]:
        lo, hi = order_statistic_ranks(n, q, 0.95)
        coverage = st.binom.cdf(hi - 1, n, q) - st.binom.cdf(lo - 1, n, q)
        assert coverage >= 0.95
        # and it is not wastefully wide: shrinking either end drops below the level
        assert st.binom.cdf(hi - 2, n, q) - st.binom.cdf(lo - 1, n, q) < 0.95 or hi - 1 <= lo


def test_large_samples_use_the_order_statistic_by_default() -> None:
    x = np.random.default_rng(0).normal(100, 10, 200_001)
    s = summarize_samples(x)
    assert s.ci_method == "order_statistic"
    assert s.p50_ci_ms == order_statistic_ci(np.sort(x), 0.5)
    assert s.p50_ci_ms[0] < 100 < s.p50_ci_ms[1]


def test_exact_bootstrap_draw_matches_brute_force_resampling() -> None:
    rng = np.random.default_rng(5)
    x = np.sort(rng.gamma(2.0, 30.0, 301))
    for q in (0.5, 0.95, 0.37):
        fast = bootstrap_quantile_replicates(x, q, 20_000, np.random.default_rng(1))
        brute = np.quantile(x[rng.integers(0, x.size, (4_000, x.size))], q, axis=1)
        assert fast.mean() == pytest.approx(brute.mean(), rel=0.01)
        assert fast.std() == pytest.approx(brute.std(), rel=0.08)


@pytest.mark.parametrize("method", ["bootstrap", "order_statistic"])
def test_ci_coverage_on_known_distributions(method: str) -> None:
    """Over 400 samples from distributions with a known median/p95, ~95% of CIs cover it."""
    cases = [
        (lambda r, n: r.lognormal(0, 1, n), st.lognorm(1).ppf),
        (lambda r, n: r.exponential(1, n), st.expon.ppf),
    ]
    for draw, ppf in cases:
        for q in (0.5, 0.95):
            hits = 0
            for seed in range(400):
                x = np.sort(draw(np.random.default_rng(seed), 200))
                lo, hi = quantile_ci(x, q, ci_method=method, rng=np.random.default_rng(seed))  # type: ignore[arg-type]
                hits += lo <= ppf(q) <= hi
            assert 0.90 <= hits / 400 <= 0.99, (method, q, hits)


def test_generic_bootstrap_of_the_mean() -> None:
    x = np.random.default_rng(2).normal(50, 5, 400)
    lo, hi = bootstrap_ci(x, np.mean, n_boot=2_000, seed=3, chunk_elements=100_000)
    half = 1.96 * x.std(ddof=1) / math.sqrt(x.size)
    assert lo == pytest.approx(x.mean() - half, abs=0.2)
    assert hi == pytest.approx(x.mean() + half, abs=0.2)
    assert bootstrap_ci(x, np.mean, seed=3) == bootstrap_ci(x, np.mean, seed=3)  # seeded


def test_wilson_matches_the_textbook_case() -> None:
    for k, n in ((3, 10), (0, 10), (10, 10), (47, 1_000)):
        ref = st.binomtest(k, n).proportion_ci(0.95, method="wilson")
        got = wilson_interval(k, n)
        assert got == (pytest.approx(ref.low, abs=1e-9), pytest.approx(ref.high, abs=1e-9))
    assert math.isnan(wilson_interval(0, 0)[0])
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(11, 10)


def test_normal_ppf_matches_scipy() -> None:
    for p in (1e-9, 0.001, 0.025, 0.3, 0.5, 0.8, 0.975, 0.999999):
        assert normal_ppf(p) == pytest.approx(st.norm.ppf(p), abs=1e-9)


def test_outcome_counts_and_error_rates() -> None:
    codes = [Outcome.OK.code] * 7 + [Outcome.THROTTLED.code] * 2 + [Outcome.HTTP_5XX.code]
    assert outcome_counts(codes) == {"ok": 7, "throttled": 2, "http_5xx": 1}
    assert error_rates(codes) == {"throttled": 0.2, "http_5xx": 0.1}
    assert outcome_counts([]) == {}


@settings(max_examples=60, deadline=None)
@given(
    hs.lists(finite, min_size=1, max_size=200), hs.lists(hs.floats(0, 1), min_size=2, max_size=6)
)
# degenerate samples, checked every run (the suite is derandomized: tests/conftest.py)
@example(values=[0.0], qs=[0.0, 1.0])  # one value, zero
@example(values=[3.5] * 7, qs=[0.0, 0.5, 0.5, 1.0])  # every value equal, a repeated q
@example(values=[5e-324, 5e-324, 1e-323], qs=[0.25, 0.75])  # subnormals
@example(values=[0.0, 1e7], qs=[0.0, 0.5, 1.0])  # the generator's extremes
@example(values=[1e7] * 200, qs=[0.0, 1.0])
def test_percentiles_are_monotone_in_q_and_match_numpy(
    values: list[float], qs: list[float]
) -> None:
    qs = sorted(qs)
    got = [percentile(values, q) for q in qs]
    assert all(a <= b for a, b in itertools.pairwise(got))
    assert got == pytest.approx(np.quantile(values, qs).tolist(), rel=1e-9, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(
    hs.lists(finite, min_size=2, max_size=300), hs.sampled_from(["bootstrap", "order_statistic"])
)
@example(values=[0.0, 0.0], method="bootstrap")  # every value equal (zero)
@example(values=[0.0, 0.0], method="order_statistic")
@example(values=[5e-324, 5e-324], method="bootstrap")  # a subnormal
@example(values=[1e7, 1e7, 1e7], method="order_statistic")  # the generator's largest value
@example(values=[0.0, 1e7], method="bootstrap")  # its extremes
@example(values=[0.0, 1e7], method="order_statistic")
def test_ci_contains_the_point_estimate(values: list[float], method: str) -> None:
    s = summarize_samples(values, ci_method=method)  # type: ignore[arg-type]
    for (lo, hi), point in ((s.p50_ci_ms, s.p50_ms), (s.p95_ci_ms, s.p95_ms)):
        assert lo <= point + 1e-9 * max(1, abs(point)) and point <= hi + 1e-9 * max(1, abs(point))


@settings(max_examples=40, deadline=None)
@given(hs.lists(hs.integers(0, 5), min_size=1, max_size=60))
@example(values=[0])  # one value
@example(values=[5] * 60)  # every value tied
@example(values=[5, 0])
def test_rankdata_matches_scipy_with_ties(values: list[int]) -> None:
    x = np.asarray(values, dtype=float)
    assert rankdata(x).tolist() == st.rankdata(x).tolist()
