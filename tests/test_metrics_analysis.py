"""Cold start, variability, autoscaling, throughput, streaming and keep-warm on known inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats as st

from gpubench_sdk import ConfigError, Outcome
from gpubench_sdk.metrics import (
    SLO,
    burst_analysis,
    cold_start_rate,
    cold_starts,
    daily_variability,
    holm_adjust,
    idle_gaps_s,
    keep_warm_curve,
    linear_trend,
    meets_slo,
    scale_up,
    stream_metrics,
    throughput,
    windowed_rate,
)

OK, TIMEOUT = Outcome.OK.code, Outcome.TIMEOUT.code
MS = 1_000_000  # ns


def test_cold_start_from_server_execution_time_with_its_phases() -> None:
    # request 0: cold, 5000 ms service = 3000 queue (2500 of it boot) + 1200 execution + 800
    # request 1-3: warm, 1300/1250/1350 ms; request 4: cold with no server timing
    start = np.array([0, 10_000, 20_000, 30_000, 40_000]) * MS
    service_ms = np.array([5_000, 1_300, 1_250, 1_350, 4_000])
    cs = cold_starts(
        start_ns=start,
        end_ns=start + service_ms * MS,
        outcome=[OK] * 5,
        cold=[1, 0, 0, 0, 1],
        cold_confirmed=[True, False, False, False, False],
        execution_ms=[1_200, 1_100, 1_050, 1_150, np.nan],
        queue_ms=[3_000, 5, 5, 5, np.nan],
        setup_ms=[2_500, np.nan, np.nan, np.nan, np.nan],
    )
    assert cs.index.tolist() == [0, 4]
    assert cs.cold_start_ms.tolist() == [3_800.0, 4_000.0 - 1_300.0]  # warm median of service
    assert cs.inference_measured.tolist() == [True, False] and cs.inferred
    assert cs.confirmed.tolist() == [True, False]
    assert cs.scheduling_ms[0] == 500 and cs.boot_ms[0] == 2_500
    assert cs.execution_ms[0] == 1_200 and cs.transfer_ms[0] == 800
    assert math.isnan(cs.transfer_ms[1])
    assert cs.warm_median_ms == 1_300
    assert (cs.rate.cold, cs.rate.known, cs.rate.rate) == (2, 5, 0.4)
    assert cs.summary.p50_ms == pytest.approx(3_250)


def test_cold_start_edge_cases() -> None:
    empty = cold_starts(start_ns=[], end_ns=[], outcome=[], cold=[])
    assert empty.cold_start_ms.size == 0 and math.isnan(empty.rate.rate)
    # a failed cold request counts towards the rate, but has no cold-start value
    cs = cold_starts(start_ns=[0, 0], end_ns=[MS, MS], outcome=[TIMEOUT, OK], cold=[1, -1])
    assert cs.rate.known == 1 and cs.rate.cold == 1 and cs.index.size == 0
    with pytest.raises(ValueError, match="end_ns"):
        cold_starts(start_ns=[0, 1], end_ns=[1], outcome=[OK, OK], cold=[0, 0])
    assert cold_start_rate([1, 0, 0, -1]).rate == pytest.approx(1 / 3)


def test_daily_variability_range_cv_and_change_detection() -> None:
    rng = np.random.default_rng(7)
    day_ns = 86_400 * 10**9
    t0 = 1_767_225_600 * 10**9  # 2026-01-01T00:00Z
    walls, values = [], []
    for d, scale in enumerate([1.0, 1.0, 1.0, 1.0, 1.6]):  # the fifth day is 60% slower
        walls.append(t0 + d * day_ns + rng.integers(0, day_ns, 40))
        values.append(rng.lognormal(np.log(5_000 * scale), 0.15, 40))
    v = daily_variability(np.concatenate(walls), np.concatenate(values))
    medians = [float(np.median(x)) for x in values]
    assert [d.day for d in v.days] == [f"2026-01-0{i}" for i in range(1, 6)]
    assert v.range_ms == pytest.approx(max(medians) - min(medians))
    assert v.cv == pytest.approx(np.std(medians, ddof=1) / np.mean(medians))
    assert v.changed_days == ["2026-01-05"]
    assert all(d.median_ci_ms[0] <= d.median_ms <= d.median_ci_ms[1] for d in v.days)
    assert math.isnan(v.days[0].p_value)
    # a time zone 12 h ahead moves the requests after noon UTC to the next day
    shifted = daily_variability(np.concatenate(walls), np.concatenate(values), tz_offset_s=43_200)
    assert len(shifted.days) == 6


def test_change_detector_false_positive_rate_is_held() -> None:
    """With no change at all, fewer than ~alpha of 5-day campaigns get any day flagged."""
    flagged = 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        walls = np.repeat(np.arange(5) * 86_400 * 10**9, 15)
        v = daily_variability(walls, rng.lognormal(8, 0.3, walls.size))
        flagged += bool(v.changed_days)
    assert flagged / 200 <= 0.08


def test_holm_matches_the_textbook_procedure() -> None:
    p = [0.01, 0.04, 0.03, 0.005]
    # sorted: .005*4=.02, .01*3=.03, .03*2=.06, .04*1=.04 -> monotone .02 .03 .06 .06
    assert holm_adjust(p).tolist() == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_burst_where_latency_rises_linearly() -> None:
    n = 200
    start = np.arange(n) * 50 * MS
    latency = 100 + 2.0 * np.arange(n)  # 2 ms per request
    b = burst_analysis(
        start_ns=start,
        end_ns=start + (latency * MS).astype(np.int64),
        latency_ms=latency,
        outcome=[OK] * n,
    )
    assert b.by_index.slope == pytest.approx(2.0) and b.by_index.intercept_ms == pytest.approx(100)
    assert b.by_index.pearson_r == pytest.approx(1.0) and b.by_index.spearman_rho == pytest.approx(
        1.0
    )
    assert b.by_time.slope == pytest.approx(2.0 / 0.05)  # ms per second of sends
    assert b.requests == b.ok == n and b.window_rps.sum() * 1.0 == n


def test_burst_time_to_return_to_baseline() -> None:
    latency = np.concatenate([np.linspace(5_000, 200, 20), np.full(80, 100.0)])
    start = np.arange(latency.size) * 100 * MS
    outcome = [OK] * latency.size
    outcome[3] = TIMEOUT
    b = burst_analysis(
        start_ns=start,
        end_ns=start + (latency * MS).astype(np.int64),
        latency_ms=latency,
        outcome=outcome,
        baseline_ms=100,
        run_length=5,
        tolerance=0.2,
    )
    good = latency[np.asarray(outcome) == OK]
    first = next(i for i in range(good.size) if np.median(good[i : i + 5]) <= 120)
    expected_index = int(np.flatnonzero(np.asarray(outcome) == OK)[first])
    assert b.requests_to_baseline == expected_index
    assert b.time_to_baseline_s == pytest.approx(expected_index * 0.1)
    assert b.by_index.spearman_rho == pytest.approx(
        st.spearmanr(np.flatnonzero(np.asarray(outcome) == OK), good).statistic
    )
    never = burst_analysis(
        start_ns=start,
        end_ns=start + MS,
        latency_ms=latency * 0 + 500,
        outcome=outcome,
        baseline_ms=1,
    )
    assert math.isnan(never.time_to_baseline_s) and never.requests_to_baseline == -1


def test_linear_trend_matches_scipy() -> None:
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 100, 300)
    y = 3 * x + rng.normal(0, 20, 300)
    t = linear_trend(x, y)
    ref = st.linregress(x, y)
    assert (t.slope, t.intercept_ms, t.pearson_r) == (
        pytest.approx(ref.slope),
        pytest.approx(ref.intercept),
        pytest.approx(ref.rvalue),
    )
    assert t.spearman_rho == pytest.approx(st.spearmanr(x, y).statistic)
    assert math.isnan(linear_trend([1.0], [2.0]).slope)


def test_scale_up_from_fleet_readings() -> None:
    t = np.arange(8) * 500 * MS
    ready = np.array([0, 0, -1, 1, 2, 3, 4, 4])
    s = scale_up(t, ready)
    assert s.started_ready == 0 and s.peak_ready == 4 and s.time_to_target_s == pytest.approx(3.0)
    assert scale_up(t, ready, target_ready=2).time_to_target_s == pytest.approx(2.0)
    assert math.isnan(scale_up(t, ready, target_ready=9).time_to_target_s)
    assert math.isnan(scale_up([], []).time_to_target_s)


def test_throughput_units_and_goodput() -> None:
    start = np.array([0, 0, 500, 1_000]) * MS
    end = np.array([400, 900, 1_500, 2_000]) * MS
    outcome = [OK, OK, OK, TIMEOUT]
    latency = (end - start) / MS
    good = meets_slo(SLO(latency_ms=950), ok=np.asarray(outcome) == OK, latency_ms=latency)
    assert good.tolist() == [True, True, False, False]
    tp = throughput(
        start_ns=start, end_ns=end, outcome=outcome, output_units=[10, 20, -1, 5], good=good
    )
    assert tp.duration_s == 2.0 and tp.requests_per_s == 2.0 and tp.ok_per_s == 1.5
    assert tp.units_per_s == 15.0  # 30 reported units of successful requests over 2 s
    assert tp.goodput_per_s == 1.0 and tp.good_fraction == 0.5
    cold = meets_slo(
        SLO(cold_start_ms=100), ok=[True, True], latency_ms=[1, 1], cold_start_ms=[np.nan, 150]
    )
    assert cold.tolist() == [True, False]
    with pytest.raises(ConfigError, match="latency_ms"):
        SLO(latency_ms=-1)
    with pytest.raises(ValueError, match="ttft_ms"):
        meets_slo(SLO(ttft_ms=5), ok=[True], latency_ms=[1])
    starts, rps = windowed_rate(np.array([0.1, 0.2, 1.5, 3.9]) * 1e9, window_s=1.0, origin_ns=0)
    assert starts.tolist() == [0, 1, 2, 3] and rps.tolist() == [2, 1, 0, 1]


def test_stream_metrics_by_hand_and_the_other_tools_definitions() -> None:
    tokens = [
        np.array([100, 120, 150, 160]) * MS,  # TTFT 100, gaps 20/30/10
        np.array([300]) * MS,  # one token: no TPOT
        np.array([], dtype=np.int64),
    ]
    m = stream_metrics(
        tokens, end_ns=np.array([170, 300, 50]) * MS, send_ns=np.array([0, 10, 20]) * MS
    )
    assert m.ttft_ms[:2].tolist() == [100, 300] and math.isnan(m.ttft_ms[2])
    assert m.time_to_second_token_ms[0] == 120 and math.isnan(m.time_to_second_token_ms[1])
    assert m.tpot_ms[0] == pytest.approx((170 - 100) / 3)  # vLLM: (e2e - TTFT) / (N - 1)
    assert sorted(m.itl_ms.tolist()) == [10, 20, 30]
    assert m.output_tokens.tolist() == [4, 1, 0]
    assert m.output_tokens_per_s[0] == pytest.approx(4 / 0.170)
    assert m.decode_tokens_per_s[0] == pytest.approx(1e3 / ((170 - 100) / 3))
    assert m.total_output_tokens_per_s == pytest.approx(5 / 0.310)  # last end 10 + 300 ms
    assert m.first_token_inclusive_tpot_ms()[0] == pytest.approx(160 / 4)  # GuideLLM / llmperf
    with pytest.raises(ValueError, match="ascending"):
        stream_metrics([np.array([5, 3])])
    with pytest.raises(ValueError, match="before request 0's last token"):
        stream_metrics([np.array([5, 9])], end_ns=[6])


def test_idle_gaps_follow_the_latest_end() -> None:
    start = np.array([0, 10, 5, 100]) * MS
    end = np.array([50, 20, 60, 110]) * MS
    gaps = idle_gaps_s(start, end)
    assert math.isnan(gaps[0]) and gaps[2] == 0.0 and gaps[1] == 0.0
    assert gaps[3] == pytest.approx(0.040)  # 100 - max(50, 20, 60)


def test_keep_warm_curve_finds_the_idle_timeout() -> None:
    rng = np.random.default_rng(9)
    gaps = np.repeat([1.0, 5.0, 10.0, 20.0, 40.0], 40)
    # the platform scales to zero after ~15 s idle: P(cold) = logistic around 15 s
    p = 1 / (1 + np.exp(-(gaps - 15) / 2))
    cold = rng.random(gaps.size) < p
    latency = np.where(cold, 4_000.0, 100.0) + rng.normal(0, 5, gaps.size)
    curve = keep_warm_curve(gaps, cold.astype(int), latency)
    assert curve.gap_median_s.tolist() == [1, 5, 10, 20, 40] and curve.count.tolist() == [40] * 5
    assert np.all(curve.p_cold_low <= curve.p_cold) and np.all(curve.p_cold <= curve.p_cold_high)
    assert 10 < curve.cold_gap_s < 20
    assert curve.mean_latency_ms[0] < 500 < 3_000 < curve.mean_latency_ms[-1]
    many = keep_warm_curve(
        rng.uniform(0, 60, 500), (rng.random(500) < 0.5).astype(int), np.ones(500), n_bins=5
    )
    assert many.count.sum() == 500 and many.count.size == 5
    never = keep_warm_curve([1.0, 2.0], [0, 0], [1.0, 1.0])
    assert math.isnan(never.cold_gap_s)
