"""``sweep`` and ``max_rate`` against a simulated fleet of known capacity: two always-warm
workers each serving one 50 ms request at a time, 40 req/s in all. With constant arrivals and a
fixed service time, latency is flat up to that capacity and grows without bound past it, so
the knee and the highest rate meeting an SLO have a known place."""

from __future__ import annotations

from pathlib import Path

import pytest
from _scenario_fleet import FleetProvider, fleet_server, require_fair_measurement

from gpubench_sdk import Burst, ConfigError, EchoProbe, MaxRate, Runner, Store, Sweep, metrics
from gpubench_sdk.testing import Duration, FleetConfig

pytestmark = pytest.mark.anyio

WORKERS, SERVICE_S = 2, 0.05
CAPACITY = WORKERS / SERVICE_S  # 40 req/s
FLEET = FleetConfig(
    cold_start=Duration.fixed(0.05), min_workers=WORKERS, max_workers=WORKERS, idle_timeout_s=60
)


async def _run(tmp_path: Path, *scenarios: object) -> tuple[Store, int]:
    with fleet_server(FLEET) as server:
        runner = Runner(
            {"fleet": FleetProvider(url=server.url)},
            EchoProbe(sleep_ms=SERVICE_S * 1000),
            [Burst(total=4, concurrency=WORKERS), *scenarios],  # type: ignore[list-item]
            store=tmp_path / "s.sqlite",
        )
        result = await runner.run()
    assert result.status == "completed"
    require_fair_measurement(result)
    return Store(tmp_path / "s.sqlite"), result.run_id


async def test_sweep_finds_the_knee_of_a_fleet_of_known_capacity(tmp_path: Path) -> None:
    sc = Sweep(duration_s=1.0, rates=4, max_concurrency=8)
    store, run_id = await _run(tmp_path, sc)
    with store:
        curve = metrics.run_sweep(store, run_id, 1, "fleet")
    by_step = {s.step: s for s in curve.steps}
    assert sorted(by_step) == list(range(6))  # synchronous, throughput, 4 constant rates
    sync, probe = by_step[0], by_step[1]
    assert sync.throughput_rps == pytest.approx(1 / SERVICE_S, rel=0.25)  # one at a time
    assert curve.max_throughput_rps == pytest.approx(CAPACITY, rel=0.15)
    # the constant rates lie evenly between the two probes, as planned
    planned = sc.rates_between(sync.throughput_rps, probe.throughput_rps)
    offered = [by_step[j].offered_rps for j in range(2, 6)]
    assert offered == pytest.approx(planned, rel=0.02)
    assert curve.knee is not None
    # Below capacity latency is flat here, so the knee is the highest constant rate (or, when
    # a shared machine's jitter lifts that step's p95, the one before): the last point before
    # the probe's queueing, within a grid step or two of the capacity.
    assert curve.knee.step in (sc.rates, 1 + sc.rates)
    spacing = (probe.throughput_rps - sync.throughput_rps) / (sc.rates + 1)
    assert CAPACITY - 2 * spacing - 0.1 * CAPACITY <= curve.knee.throughput_rps <= CAPACITY
    assert curve.knee.p95_ms < probe.p95_ms


async def test_max_rate_is_each_targets_capacity_within_ten_percent(tmp_path: Path) -> None:
    """Two targets searched side by side: 40 req/s (two workers) and 20 req/s (one)."""
    # p95 < 200 ms: 150 ms of slack over the service time absorbs a shared machine's jitter,
    # and a 2.5 s trial past capacity by 6% queues enough to pass it (so within 10%)
    slo = MaxRate(p95_ms=200, error_rate=0.05, confidence=0.9, start_rps=15, trial_s=2.5)
    one = FleetConfig(
        cold_start=Duration.fixed(0.05), min_workers=1, max_workers=1, idle_timeout_s=60
    )
    with fleet_server(FLEET) as two_workers, fleet_server(one) as one_worker:
        result = await Runner(
            {
                "fleet": FleetProvider(url=two_workers.url),
                "small": FleetProvider(url=one_worker.url),
            },
            EchoProbe(sleep_ms=SERVICE_S * 1000),
            [Burst(total=4, concurrency=WORKERS), slo],
            store=tmp_path / "m.sqlite",
        ).run()
    assert result.status == "completed"
    require_fair_measurement(result)
    with Store(tmp_path / "m.sqlite") as store:
        found = metrics.run_max_rate(store, result.run_id, 1, "fleet")
        small = metrics.run_max_rate(store, result.run_id, 1, "small")
    rates = [r for r, _ in found.trials]
    assert rates[:3] == pytest.approx([15, 30, 60], rel=0.02)  # doubling until a failure, ...
    assert 4 <= len(rates) <= slo.max_trials  # ... then bisecting
    assert found.max_rate_rps == pytest.approx(CAPACITY, rel=0.10), found
    assert small.max_rate_rps == pytest.approx(1 / SERVICE_S, rel=0.10), small
    for f in (found, small):
        assert f.first_failed_rps > f.max_rate_rps
        assert f.first_failed_rps - f.max_rate_rps <= slo.precision * f.first_failed_rps
        assert f.confidence == 0.9


def test_max_rate_search_doubles_then_bisects_to_its_precision() -> None:
    sc = MaxRate(p95_ms=100, start_rps=10, max_rps=1000, precision=0.1)
    capacity = 37.0
    tried: list[tuple[float, bool]] = []
    while (rps := sc.next_rate(tried)) is not None:
        tried.append((rps, rps <= capacity))
    best = max(r for r, ok in tried if ok)
    assert [r for r, _ in tried][:3] == [10, 20, 40]
    assert capacity * 0.9 <= best <= capacity
    assert len(tried) <= sc.max_trials


def test_min_samples_and_bad_slo_fields() -> None:
    # a clean trial passes at 90% confidence only with enough requests (Wilson bound < 5%)
    assert metrics.min_samples(0.05, 0.9) == 32
    sc = MaxRate(p95_ms=100, error_rate=0.05, start_rps=1, trial_s=1)
    assert len(sc.trial_offsets(1.0)) == 32  # lengthened, not a trial that cannot pass
    for confidence in (1.0, 0.5):  # 0.5: a one-sided bound at 0 sigma, no interval at all
        with pytest.raises(ConfigError) as info:
            MaxRate(p95_ms=100, confidence=confidence)
        assert info.value.field == "max_rate.confidence"
    with pytest.raises(ConfigError) as info:
        MaxRate(p95_ms=100, start_rps=50, max_rps=10)
    assert info.value.field == "max_rate.max_rps"
