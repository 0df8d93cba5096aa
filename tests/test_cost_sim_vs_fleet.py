"""The what-if simulator against the testing kit's metered fleet, on the same arrival traces.

The fleet's own asyncio code runs on a virtual-time event loop (``testing._replay``), so an
hour of traffic per trace takes a fraction of a second; its meter's worker intervals and the
simulator's bill are priced by the same billing models (exact, per-second, per-minute). With
``min_workers`` the fleet keeps a count of workers up, and so does the simulator.
"""

from __future__ import annotations

import pytest

from gpubench_sdk.cost import BillingModel, FleetSettings, price_worker_intervals, simulate
from gpubench_sdk.cost._policy import (
    PROVIDER_POLICIES,
    WORKER_POLICIES,
    platform_policy,
    provider_policy,
)
from gpubench_sdk.testing._replay import VirtualTimeLoop, replay_on_fleet, sim_vs_fleet

EXACT = BillingModel(granularity_s=1e-6)


@pytest.mark.parametrize("policy", WORKER_POLICIES)
def test_simulator_bills_every_trace_like_the_metered_fleet(policy: str) -> None:
    rows = sim_vs_fleet(policy)  # type: ignore[arg-type]
    assert len(rows) == 2 * 3 * 3  # (poisson, bursty) x (1, 4, 8 workers) x 3 billings
    for r in rows:
        where = f"{r.trace} x{r.workers} {r.billing} ({policy})"
        assert r.requests > 50, where
        assert abs(r.bill_gap) <= 0.02, f"{where}: sim {r.sim_billed_s} vs {r.fleet_billed_s}"
        assert abs(r.sim_cold - r.fleet_cold) <= max(2, 0.05 * r.fleet_cold), where


@pytest.mark.parametrize("policy", ["most_recently_idle", "longest_idle"])
def test_always_warm_workers_are_a_count_as_on_the_fleet(policy: str) -> None:
    """min workers 1 and 2 at three scale-down delays: the ordered policies agree exactly
    (bill under every granularity, cold requests), but for one tie on simultaneous bursts."""
    for min_workers in (1, 2):
        for delay in (1.0, 3.0, 30.0):
            rows = sim_vs_fleet(
                policy,  # type: ignore[arg-type]
                min_workers=min_workers,
                idle_timeout_s=delay,
                traces=("poisson", "bursty", "bursty-1ms"),
            )
            assert len(rows) == 3 * (3 if min_workers == 1 else 2) * 3
            for r in rows:
                where = (
                    f"{r.trace} x{r.workers} min={min_workers} idle={delay} {r.billing}: "
                    f"sim {r.sim_billed_s} vs fleet {r.fleet_billed_s}"
                )
                assert r.requests > 50, where
                assert r.sim_cold == r.fleet_cold, where
                if r.trace != "bursty" or r.billing == "exact":
                    assert abs(r.bill_gap) < 1e-9, where
                else:  # workers fallen idle together: which stops first is the fleet's timer
                    assert abs(r.bill_gap) <= 0.01, where


def test_always_warm_with_random_selection_is_within_two_percent() -> None:
    for min_workers, delay in ((1, 3.0), (2, 30.0)):
        for r in sim_vs_fleet("random", min_workers=min_workers, idle_timeout_s=delay):
            where = f"{r.trace} x{r.workers} min={min_workers} idle={delay} {r.billing}"
            assert abs(r.bill_gap) <= 0.02, f"{where}: {r.sim_billed_s} vs {r.fleet_billed_s}"
            assert abs(r.sim_cold - r.fleet_cold) <= max(2, 0.05 * r.fleet_cold), where


def test_the_longest_idle_worker_stops_even_if_it_was_the_first() -> None:
    """By hand: min 1, max 2, 3 s delay, 1 s jobs, 0.5 s boots, most recently idle. A (the
    minimum) runs 0-1; B boots for the request at 0.2 and runs it 0.7-1.7; the requests at 2
    and 3.5 go to B, the more recently idle. A's delay runs out at 4 with two workers up, so A
    stops and B is the one kept to the 10 s horizon: 4 + 9.8 = 13.8 worker-seconds (keeping
    A by identity instead billed 10 + 7.3 = 17.3)."""
    arrivals = [0.0, 0.2, 2.0, 3.5]
    settings = FleetSettings(1, 2, 3.0, 1, "most_recently_idle")
    sim = simulate(
        arrivals, execution_s=1.0, cold_start_s=0.5, settings=settings, billing=EXACT,
        rate_usd_per_s=1.0, horizon_s=10.0, record_intervals=True,
    )  # fmt: skip
    assert sim.billed_s == pytest.approx(13.8)
    assert sim.intervals is not None
    assert price_worker_intervals(sim.intervals, EXACT, 1.0).billed_s == pytest.approx(13.8)
    fleet = replay_on_fleet(
        arrivals, execution_s=1.0, cold_start_s=0.5, max_workers=2, idle_timeout_s=3.0,
        worker_policy="most_recently_idle", min_workers=1,
    )  # fmt: skip
    lives = {}
    for iv in fleet.intervals:
        start, end = lives.get(iv.worker, (iv.start_s, iv.end_s))
        lives[iv.worker] = (min(start, iv.start_s), max(end, iv.end_s))
    first, second = sorted(lives.values())
    assert first == pytest.approx((0.0, 4.0), abs=1e-6)  # the minimum's first worker stopped
    assert second[0] == pytest.approx(0.2, abs=1e-6)  # and the burst worker stayed up
    assert second[1] == pytest.approx(fleet.end_s, abs=1e-6)


def test_a_mismatched_policy_is_caught() -> None:
    """The comparison can fail: the old simulator (most recently idle) against a fleet that
    wakes the longest idle worker is off by far more than 2% once there are several workers."""
    rows = sim_vs_fleet("longest_idle", sim_policy="most_recently_idle")
    worst = max(abs(r.bill_gap) for r in rows if r.workers > 1)
    assert worst > 0.05
    assert all(abs(r.bill_gap) < 1e-9 for r in rows if r.workers == 1)  # nothing to choose


def test_fleet_policy_decides_which_worker_scales_down() -> None:
    # two workers warm, then one request every 20 s with a 45 s delay: reusing the most
    # recently idle worker lets the other stop; waking the longest idle keeps both alive
    arrivals = [0.0, 0.0] + [20.0 * k for k in range(1, 10)]
    kw = dict(execution_s=1.0, cold_start_s=5.0, max_workers=2, idle_timeout_s=45.0)
    mru = replay_on_fleet(arrivals, worker_policy="most_recently_idle", **kw)  # type: ignore[arg-type]
    lru = replay_on_fleet(arrivals, worker_policy="longest_idle", **kw)  # type: ignore[arg-type]
    life = {
        name: sum(iv.duration_s for iv in r.intervals) for name, r in (("mru", mru), ("lru", lru))
    }
    assert mru.requests == lru.requests == 11
    assert life["lru"] > life["mru"] + 50  # the second worker lived ~140 s longer


def test_virtual_time_loop_jumps_to_the_next_timer() -> None:
    import asyncio
    import time

    loop = VirtualTimeLoop()
    began = time.perf_counter()
    try:
        loop.run_until_complete(asyncio.sleep(3600.0))
        assert loop.time() == pytest.approx(3600.0)
    finally:
        loop.close()
    assert time.perf_counter() - began < 5.0  # an hour did not pass


def test_every_stated_policy_names_its_source() -> None:
    for name, fact in PROVIDER_POLICIES.items():
        assert fact.policy in WORKER_POLICIES, name
        assert fact.basis in ("documented", "inferred", "assumed"), name
        assert len(fact.source) > 40, name
    assert provider_policy("sagemaker").policy == "random"
    assert provider_policy("some-plugin").basis == "assumed"


def test_a_target_is_simulated_with_its_platforms_policy() -> None:
    # a RunPod endpoint priced with the catalog's "local" billing still routes as RunPod; a
    # generic provider billed as a platform routes as that platform; else assumed
    assert platform_policy("runpod", "local").policy == "random"
    assert platform_policy("http", "cloudrun").policy == "most_recently_idle"
    assert platform_policy("http", "cloudrun").basis == "inferred"
    assert platform_policy("http", "sagemaker").policy == "random"
    assert platform_policy("http", None).basis == "assumed"
    assert platform_policy("sagemaker", "runpod").basis == "documented"


def test_the_simulator_and_the_testing_fleet_share_one_default_policy() -> None:
    from gpubench_sdk.cost import FleetSettings
    from gpubench_sdk.testing import FleetConfig

    assert FleetSettings().worker_policy == FleetConfig().worker_policy
