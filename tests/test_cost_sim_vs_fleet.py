"""The what-if simulator against the testing kit's metered fleet, on the same arrival traces.

The fleet's own asyncio code runs on a virtual-time event loop (``testing._replay``), so an
hour of traffic per trace takes a fraction of a second; its meter's worker intervals and the
simulator's bill are priced by the same billing models (exact, per-second, per-minute).
"""

from __future__ import annotations

import pytest

from gpubench_sdk.cost._policy import PROVIDER_POLICIES, WORKER_POLICIES, provider_policy
from gpubench_sdk.testing._replay import VirtualTimeLoop, replay_on_fleet, sim_vs_fleet


@pytest.mark.parametrize("policy", WORKER_POLICIES)
def test_simulator_bills_every_trace_like_the_metered_fleet(policy: str) -> None:
    rows = sim_vs_fleet(policy)  # type: ignore[arg-type]
    assert len(rows) == 2 * 3 * 3  # (poisson, bursty) x (1, 4, 8 workers) x 3 billings
    for r in rows:
        where = f"{r.trace} x{r.workers} {r.billing} ({policy})"
        assert r.requests > 50, where
        assert abs(r.bill_gap) <= 0.02, f"{where}: sim {r.sim_billed_s} vs {r.fleet_billed_s}"
        assert abs(r.sim_cold - r.fleet_cold) <= max(2, 0.05 * r.fleet_cold), where


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
