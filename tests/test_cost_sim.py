"""The fleet simulator against closed forms: Erlang C (M/M/c) and P(cold) = exp(-lambda d)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpubench_sdk import ConfigError
from gpubench_sdk.cost import (
    BillingModel,
    FleetSettings,
    poisson_arrivals,
    price_worker_intervals,
    simulate,
    sweep,
)

PER_S = BillingModel(granularity_s=1.0)


def erlang_c(c: int, offered: float) -> float:
    """P(wait > 0) in M/M/c with offered load a = lambda/mu (Erlang's C formula)."""
    top = offered**c / math.factorial(c) * c / (c - offered)
    return top / (sum(offered**k / math.factorial(k) for k in range(c)) + top)


@pytest.mark.parametrize(("c", "lam"), [(1, 0.6), (3, 2.4), (5, 3.0)])
def test_mmc_waiting_probability_and_mean_wait(c: int, lam: float) -> None:
    # no cold starts, c workers always on, never scaled down: an M/M/c queue with mu = 1
    arrivals = poisson_arrivals(lam, 60_000, seed=c)
    service = np.random.default_rng(100 + c).exponential(1.0, 400_000)
    r = simulate(
        arrivals,
        execution_s=service,
        cold_start_s=0.0,
        settings=FleetSettings(c, c, math.inf, 1),
        billing=PER_S,
        rate_usd_per_s=1.0,
        seed=c,
    )
    p_wait = erlang_c(c, lam)
    assert r.waited_fraction == pytest.approx(p_wait, abs=0.02)
    assert r.mean_wait_s == pytest.approx(p_wait / (c - lam), rel=0.1)  # W_q = C / (c mu - lambda)
    assert r.cold_requests == 0 and r.workers_started == 0


@pytest.mark.parametrize(("lam", "delay_s"), [(0.1, 5.0), (0.5, 2.0), (0.05, 30.0)])
def test_cold_probability_with_one_worker_and_a_scale_down_delay(
    lam: float, delay_s: float
) -> None:
    # execution and boot << the gap between requests: cold iff the gap exceeds the delay
    arrivals = poisson_arrivals(lam, 40_000 / lam, seed=7)
    r = simulate(
        arrivals,
        execution_s=1e-3,
        cold_start_s=1e-3,
        settings=FleetSettings(0, 1, delay_s, 1),
        billing=PER_S,
        rate_usd_per_s=1.0,
    )
    expected = math.exp(-lam * delay_s)
    sigma = math.sqrt(expected * (1 - expected) / r.requests)
    assert abs(r.cold_rate - expected) < 4 * sigma + 1e-3


@pytest.mark.parametrize("concurrency", [1, 3])
def test_fast_billing_path_equals_pricing_the_recorded_intervals(concurrency: int) -> None:
    arrivals = poisson_arrivals(0.8, 3_000, seed=11)
    for billing in (PER_S, BillingModel(granularity_s=60.0), BillingModel(granularity_s=0.1)):
        r = simulate(
            arrivals,
            execution_s=[0.2, 1.5, 4.0],
            cold_start_s=[3.0, 9.0],
            settings=FleetSettings(1, 4, 12.0, concurrency),
            billing=billing,
            rate_usd_per_s=0.001,
            horizon_s=3_000,
            record_intervals=True,
        )
        assert r.intervals is not None
        bill = price_worker_intervals(r.intervals, billing, 0.001)
        assert bill.billed_s == pytest.approx(r.billed_s)
        assert bill.raw_s == pytest.approx(r.worker_s)
        assert r.cost_usd == pytest.approx(bill.cost_usd)


def test_seeded_and_reproducible() -> None:
    arrivals = poisson_arrivals(2.0, 600, seed=3)
    assert np.array_equal(arrivals, poisson_arrivals(2.0, 600, seed=3))
    kwargs = dict(
        execution_s=[0.5, 1.0, 2.0],
        cold_start_s=[4.0, 8.0],
        billing=PER_S,
        settings=FleetSettings(0, 5, 10.0, 1),
        rate_usd_per_s=1.0,
    )
    a = simulate(arrivals, seed=1, **kwargs)  # type: ignore[arg-type]
    b = simulate(arrivals, seed=1, **kwargs)  # type: ignore[arg-type]
    c = simulate(arrivals, seed=2, **kwargs)  # type: ignore[arg-type]
    assert np.array_equal(a.latency_s, b.latency_s) and a.cost_usd == b.cost_usd
    assert not np.array_equal(a.latency_s, c.latency_s)


def test_min_workers_are_billed_for_the_whole_horizon() -> None:
    r = simulate(
        [],
        execution_s=1.0,
        cold_start_s=5.0,
        settings=FleetSettings(2, 2, 60.0),
        billing=PER_S,
        rate_usd_per_s=0.001,
        horizon_s=86_400,
    )
    assert r.billed_s == 2 * 86_400
    assert r.cost_usd == pytest.approx(172.8)


def test_max_workers_caps_the_fleet_and_requests_queue() -> None:
    # 10 requests at once, 1 s each, 2 workers booting 1 s: served in 5 waves after the boot
    r = simulate(
        [0.0] * 10,
        execution_s=1.0,
        cold_start_s=1.0,
        settings=FleetSettings(0, 2, 60.0),
        billing=PER_S,
        rate_usd_per_s=1.0,
    )
    assert r.workers_started == 2
    assert sorted(r.latency_s.tolist()) == [2, 2, 3, 3, 4, 4, 5, 5, 6, 6]
    assert r.cold_requests == 2  # only the two that waited for a boot and started on it


def test_daily_profile_shapes_the_arrivals() -> None:
    profile = [0.0] * 12 + [2.0] * 12  # nothing in the morning, all in the afternoon
    t = poisson_arrivals(1.0, 86_400, daily_profile=profile, seed=5)
    assert (t < 43_200).sum() == 0
    assert len(t) == pytest.approx(86_400, rel=0.02)  # the mean rate is kept
    with pytest.raises(ConfigError, match="daily_profile"):
        poisson_arrivals(1.0, 10, daily_profile=[0, 0])


def test_sweep_picks_the_cheapest_setting_meeting_the_slo() -> None:
    arrivals = poisson_arrivals(1 / 120, 86_400, seed=9)  # one request every 2 minutes
    result = sweep(
        arrivals,
        execution_s=5.0,
        cold_start_s=40.0,
        billing=PER_S,
        rate_usd_per_s=0.001,
        scale_down_s=[5, 60, 600],
        min_workers=[0, 1],
        max_workers=2,
        slo_latency_s=30.0,
        slo_percentile=90,
        horizon_s=86_400,
    )
    assert len(result.rows) == 6
    meeting = [r for r in result.rows if r.latency_percentile_s(90) <= 30.0]
    assert result.best is not None and result.best in meeting
    assert result.best.cost_usd == min(r.cost_usd for r in meeting)
    # a short delay is cheapest but misses the SLO (most requests cold)
    cheapest = min(result.rows, key=lambda r: r.cost_usd)
    assert cheapest.settings.scale_down_s == 5 and cheapest not in meeting


def test_sweep_never_goes_below_the_platform_minimum_delay() -> None:
    hf = BillingModel(granularity_s=60.0, min_idle_timeout_s=900.0)
    result = sweep(
        [0.0, 100.0],
        execution_s=1.0,
        cold_start_s=1.0,
        billing=hf,
        rate_usd_per_s=1.0,
        scale_down_s=[60, 300, 900, 1800],
        slo_latency_s=10,
    )
    assert [r.settings.scale_down_s for r in result.rows] == [900, 1800]


def test_bad_settings_name_the_field() -> None:
    with pytest.raises(ConfigError, match="max_workers"):
        FleetSettings(min_workers=3, max_workers=2)
    with pytest.raises(ConfigError, match="execution_s"):
        simulate(
            [1.0],
            execution_s=[],
            cold_start_s=1.0,
            settings=FleetSettings(),
            billing=PER_S,
            rate_usd_per_s=1.0,
        )
