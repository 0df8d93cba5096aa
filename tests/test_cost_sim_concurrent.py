"""The simulator's concurrency per worker against ``_concurrent_fleet.ConcurrentFleet`` (workers
running several jobs at once, each slowed by how many its worker runs once it has begun), on
the same Poisson traces in virtual time: bill, cold requests and latency."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from _concurrent_fleet import ConcurrentFleet

from gpubench_sdk import ConfigError
from gpubench_sdk.cost import (
    BillingModel,
    FleetSettings,
    poisson_arrivals,
    price_worker_intervals,
    simulate,
)
from gpubench_sdk.testing import Duration
from gpubench_sdk.testing._replay import VirtualTimeLoop

EXACT = BillingModel(granularity_s=1e-6)
EXEC_S, BOOT_S, IDLE_S, MAX_WORKERS = 1.0, 5.5, 3.0, 4


def _fleet(
    arrivals: np.ndarray, per_worker: int, slowdown: float, policy: str
) -> tuple[float, int, np.ndarray]:
    """(billed worker-seconds, cold jobs, latencies) of the fleet serving ``arrivals``."""
    loop = VirtualTimeLoop()

    async def drive() -> tuple[float, int, np.ndarray]:
        fleet = ConcurrentFleet(
            boot=Duration.fixed(BOOT_S), execution_s=EXEC_S, per_worker=per_worker,
            slowdown=slowdown, max_workers=MAX_WORKERS, idle_timeout_s=IDLE_S, policy=policy,
        )  # fmt: skip
        async with fleet:
            jobs = []
            for t in arrivals:
                if t > loop.time():
                    await asyncio.sleep(t - loop.time())
                jobs.append(fleet.submit({}))
            for job in jobs:
                await job.done.wait()
            await asyncio.sleep(IDLE_S + 1.0)  # every worker has stopped
            billed = price_worker_intervals(fleet.worker_intervals(loop.time()), EXACT, 1.0)
            truths = fleet.truths()
        latency = np.array([((t.queue_ms or 0) + (t.execution_ms or 0)) / 1e3 for t in truths])
        return billed.billed_s, sum(1 for t in truths if t.cold), latency

    try:
        return loop.run_until_complete(drive())
    finally:
        loop.close()


@pytest.mark.parametrize("per_worker", [2, 4])
def test_requests_slowed_by_their_level_bill_as_on_the_fleet(per_worker: int) -> None:
    """Most recently idle (the fleet's ordered policy): the bill, cold requests and latency
    percentiles agree exactly; charging every request the setting's full slowdown does not."""
    arrivals = poisson_arrivals(0.8, 1800.0, seed=per_worker)
    factors = tuple(1 + 0.5 * (j - 1) for j in range(1, per_worker + 1))  # x1, x1.5, x2, ...
    billed, cold, latency = _fleet(arrivals, per_worker, 0.5, "most_recently_idle")
    settings = FleetSettings(0, MAX_WORKERS, IDLE_S, per_worker, "most_recently_idle")
    sim = simulate(
        arrivals, execution_s=EXEC_S, cold_start_s=BOOT_S, settings=settings, billing=EXACT,
        rate_usd_per_s=1.0, slowdown=factors,
    )  # fmt: skip
    assert len(latency) == sim.requests > 1000
    assert sim.billed_s == pytest.approx(billed, rel=1e-9)
    assert sim.cold_requests == cold
    for q in (50, 95, 99):
        assert sim.latency_percentile_s(q) == pytest.approx(np.percentile(latency, q), abs=1e-6)
    full = simulate(
        arrivals, execution_s=EXEC_S * factors[-1], cold_start_s=BOOT_S, settings=settings,
        billing=EXACT, rate_usd_per_s=1.0,
    )  # fmt: skip
    # the old upper bound: every request as slow as the setting's most crowded one
    assert full.billed_s > billed * 1.02
    warm_full, warm = full.latency_s[full.latency_s < BOOT_S], latency[latency < BOOT_S]
    assert warm_full.mean() > warm.mean() * 1.05, (warm_full.mean(), warm.mean())


def test_random_selection_with_slowdown_is_close() -> None:
    arrivals = poisson_arrivals(0.8, 1800.0, seed=9)
    billed, _, latency = _fleet(arrivals, 2, 0.5, "random")
    sim = simulate(
        arrivals, execution_s=EXEC_S, cold_start_s=BOOT_S, billing=EXACT, rate_usd_per_s=1.0,
        settings=FleetSettings(0, MAX_WORKERS, IDLE_S, 2, "random"), slowdown=(1.0, 1.5),
    )  # fmt: skip
    assert abs(sim.billed_s / billed - 1) <= 0.05, (sim.billed_s, billed)
    assert sim.latency_percentile_s(95) == pytest.approx(np.percentile(latency, 95), rel=0.05)


def test_levels_by_hand() -> None:
    """One warm worker of 3 slots, x1.5 at 2 and nothing measured beyond: the request at 0
    runs alone (1 s), the one at 0.1 joins it (1.5 s), the one at 0.2 is third (the last
    factor, 1.5 s); the one at 5 runs alone again."""
    sim = simulate(
        [0.0, 0.1, 0.2, 5.0], execution_s=1.0, cold_start_s=9.0, billing=EXACT,
        rate_usd_per_s=1.0, settings=FleetSettings(1, 1, 60.0, 3), slowdown=(1.0, 1.5),
        horizon_s=10.0,
    )  # fmt: skip
    assert sim.latency_s.tolist() == pytest.approx([1.0, 1.5, 1.5, 1.0])
    per_request = BillingModel(granularity_s=1e-6, billed_unit="request")
    billed = simulate(
        [0.0, 0.1], execution_s=1.0, cold_start_s=0.0, billing=per_request,
        rate_usd_per_s=1.0, settings=FleetSettings(1, 1, 60.0, 2), slowdown=(1.0, 1.5),
    ).billed_s  # fmt: skip
    assert billed == pytest.approx(2.5)  # per request: each as long as it ran
    with pytest.raises(ConfigError, match="slowdown"):
        simulate(
            [0.0], execution_s=1.0, cold_start_s=0.0, billing=EXACT, rate_usd_per_s=1.0,
            settings=FleetSettings(1, 1, 60.0, 2), slowdown=(1.0, 0.0),
        )  # fmt: skip
