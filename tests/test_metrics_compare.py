"""A vs B: the rank test against scipy, bootstrap differences, verdicts; weighted scoring."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats as st
from hypothesis import example, given, settings
from hypothesis import strategies as hs

from gpubench_sdk import ConfigError
from gpubench_sdk.metrics import Criterion, compare, mann_whitney_u, score


@settings(max_examples=80, deadline=None)
@given(
    hs.lists(hs.integers(0, 30), min_size=1, max_size=60),
    hs.lists(hs.integers(0, 30), min_size=1, max_size=60),
)
# degenerate samples, checked every run (the suite is derandomized: tests/conftest.py)
@example(a=[0], b=[0])  # one value each, all tied: p = 1
@example(a=[7, 7, 7], b=[7])  # every value equal
@example(a=[3], b=[30])  # one value each, apart
@example(a=[0] * 60, b=[30] * 60)  # the generator's extremes, fully separated
@example(a=[0, 0, 0], b=[0, 0, 1])  # all tied but one
def test_mann_whitney_matches_scipy_with_ties(a: list[int], b: list[int]) -> None:
    got = mann_whitney_u(a, b)
    if len(set(a + b)) == 1:
        assert got.p_value == 1.0
        return
    ref = st.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic")
    assert got.u == pytest.approx(ref.statistic)
    assert got.p_value == pytest.approx(ref.pvalue, rel=1e-7, abs=1e-12)


def test_mann_whitney_on_continuous_data() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(100, 10, 300), rng.normal(103, 10, 250)
    ref = st.mannwhitneyu(a, b, method="asymptotic")
    got = mann_whitney_u(a, b)
    assert (got.u, got.p_value) == (pytest.approx(ref.statistic), pytest.approx(ref.pvalue))
    assert math.isnan(mann_whitney_u([], [1.0]).p_value)


def test_a_clearly_faster_gets_a_verdict_with_the_interval() -> None:
    rng = np.random.default_rng(1)
    a = rng.lognormal(np.log(800), 0.2, 400)
    b = rng.lognormal(np.log(1000), 0.2, 400)
    c = compare(a, b, a_name="runpod", b_name="replicate")
    assert c.p95.significant and c.p50.significant and c.rank_test.p_value < 1e-10
    lo, hi = c.p95.diff_ci_ms
    assert 0 < lo < c.p95.diff_ms < hi
    assert c.verdict.startswith("runpod is faster at p95 by ")
    assert "(95% CI)" in c.verdict
    assert c.p95.diff_ms == pytest.approx(np.quantile(b, 0.95) - np.quantile(a, 0.95))
    flipped = compare(b, a, a_name="replicate", b_name="runpod")
    assert flipped.verdict.startswith("runpod is faster at p95")


def test_same_distribution_is_no_significant_difference_most_of_the_time() -> None:
    significant = 0
    for seed in range(100):
        rng = np.random.default_rng(seed)
        c = compare(rng.exponential(100, 150), rng.exponential(100, 150), seed=seed, n_boot=500)
        significant += c.p50.significant
        if not c.p95.significant:
            assert "no significant difference at p95" in c.verdict
    assert significant <= 12  # nominal 5%, bootstrap intervals of a median run a little narrow


def test_compare_validates_and_handles_empty() -> None:
    with pytest.raises(ValueError, match="n_boot"):
        compare([1.0, 2.0], [3.0], n_boot=10)
    c = compare([], [1.0, 2.0])
    assert math.isnan(c.p50.diff_ci_ms[0]) and "not enough data" in c.verdict


def test_weighted_score_ranks_and_explains() -> None:
    candidates = {
        "runpod": {"cold_start_p50_ms": 9_000, "p95_ms": 900, "usd_per_day": 11.4},
        "replicate": {"cold_start_p50_ms": 30_000, "p95_ms": 1_100, "usd_per_day": 41.44},
        "inferless": {"cold_start_p50_ms": 7_000, "p95_ms": 950, "usd_per_day": 13.9},
    }
    criteria = [
        Criterion("cold_start_p50_ms", weight=2),
        Criterion("p95_ms", weight=1, slo=1_000),
        Criterion("usd_per_day", weight=1),
    ]
    rows = score(candidates, criteria)
    assert [r.candidate for r in rows] == ["runpod", "inferless", "replicate"]
    top = rows[1]
    assert rows[0].score == pytest.approx(0.5 * 21_000 / 23_000 + 0.25 + 0.25)
    # inferless by hand: cold start best (1) * 0.5; p95 (1100-950)/(1100-900) * 0.25;
    # usd (41.44-13.9)/(41.44-11.4) * 0.25
    assert top.contributions["cold_start_p50_ms"] == pytest.approx(0.5)
    assert top.contributions["p95_ms"] == pytest.approx(0.25 * 150 / 200)
    assert top.contributions["usd_per_day"] == pytest.approx(0.25 * (41.44 - 13.9) / (41.44 - 11.4))
    assert top.score == pytest.approx(sum(top.contributions.values()))
    assert rows[2].slo_failures == ("p95_ms",) and rows[2].contributions["p95_ms"] == 0


def test_scoring_disqualify_higher_is_better_and_errors() -> None:
    cands = {"a": {"rps": 100.0, "p99_ms": 50.0}, "b": {"rps": 300.0, "p99_ms": 500.0}}
    crit = [Criterion("rps", 3, better="higher"), Criterion("p99_ms", 1, slo=100)]
    assert [r.candidate for r in score(cands, crit)] == ["b", "a"]
    assert [r.candidate for r in score(cands, crit, disqualify=True)] == ["a", "b"]
    with pytest.raises(ConfigError, match="weight"):
        Criterion("x", 0)
    with pytest.raises(ConfigError, match="better"):
        Criterion("x", 1, better="faster")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"candidates\['a'\]"):
        score({"a": {"rps": 1.0}}, crit)
    with pytest.raises(ConfigError, match="criteria"):
        score(cands, [])
    nan = score({"a": {"rps": float("nan")}, "b": {"rps": 2.0}}, [Criterion("rps", 1, "higher")])
    assert nan[0].candidate == "b" and nan[1].slo_failures == ("rps",)
