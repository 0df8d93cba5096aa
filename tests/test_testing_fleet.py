"""The simulated fleet: boots, warm reuse, queueing, scale-down, control plane, billing."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Callable

import pytest

from gpubench_sdk import BillingModel, ConfigError, ScalingSettings
from gpubench_sdk.testing import (
    Duration,
    Fault,
    FaultPlan,
    FleetConfig,
    FleetCounts,
    JobStatus,
    QueueFull,
    SimulatedFleet,
)

pytestmark = pytest.mark.anyio

FAST = FleetConfig(cold_start=Duration.fixed(0.1), max_workers=2, idle_timeout_s=0.2)


async def settle(
    fleet: SimulatedFleet, predicate: Callable[[FleetCounts], bool], timeout_s: float = 5.0
) -> None:
    await asyncio.to_thread(fleet.wait_for, predicate, timeout_s)


async def test_first_job_is_cold_then_the_worker_is_reused_warm() -> None:
    async with SimulatedFleet(FAST) as fleet:
        first = fleet.submit({"echo": "a", "sleep_ms": 20})
        await first.done.wait()
        second = fleet.submit({"echo": "b", "sleep_ms": 20})
        await second.done.wait()
    cold, warm = fleet.truths()
    assert (cold.cold, warm.cold) == (True, False)
    assert cold.worker_id == warm.worker_id
    assert cold.boot_ms is not None and 95 <= cold.boot_ms <= 150
    assert cold.queue_ms is not None and cold.queue_ms >= cold.boot_ms  # waited for the boot
    assert warm.queue_ms is not None and warm.queue_ms < 20
    assert warm.execution_ms is not None and 19 <= warm.execution_ms < 60
    assert first.output == {"echo": "a"} and cold.status is JobStatus.COMPLETED


async def test_idle_workers_stop_after_the_timeout_but_not_below_min() -> None:
    async with SimulatedFleet(FAST) as fleet:
        await fleet.submit({}).done.wait()
        assert fleet.counts().idle == fleet.counts().ready == 1
        await settle(fleet, lambda c: c.workers == 0, 2)
        fleet.set_scaling(ScalingSettings(min_workers=1))
        await settle(fleet, lambda c: c.idle == 1)
        await asyncio.sleep(0.4)  # twice the idle timeout: min_workers keeps it
        assert fleet.counts().idle == 1
        job = fleet.submit({})
        await job.done.wait()
    assert fleet.truth(job.id).cold is False


async def test_queue_is_fifo_and_workers_never_exceed_max() -> None:
    async with SimulatedFleet(FAST) as fleet:
        jobs = [fleet.submit({"sleep_ms": 30}) for _ in range(6)]
        peak = 0
        while not all(j.done.is_set() for j in jobs):
            peak = max(peak, fleet.counts().workers)
            await asyncio.sleep(0.002)
    assert peak == 2
    starts = [j.started_s for j in jobs]
    assert starts == sorted(starts)  # type: ignore[type-var]
    assert {j.worker_id for j in jobs} == {"worker-1", "worker-2"}
    assert [t.cold for t in fleet.truths()] == [True, True, False, False, False, False]


async def test_cancel_queued_and_running_jobs() -> None:
    config = FleetConfig(cold_start=Duration.fixed(0.05), max_workers=1, idle_timeout_s=1)
    async with SimulatedFleet(config) as fleet:
        running = fleet.submit({"sleep_ms": 5000})
        queued = fleet.submit({"sleep_ms": 10})
        await settle(fleet, lambda c: c.running == 1)
        assert fleet.cancel(queued.id) and fleet.cancel(running.id)
        await asyncio.wait_for(running.done.wait(), 1)
        after = fleet.submit({"sleep_ms": 1})
        await asyncio.wait_for(after.done.wait(), 1)
        assert not fleet.cancel(after.id)  # finished: nothing to cancel
    assert running.status is queued.status is JobStatus.CANCELLED
    assert queued.started_s is None  # never ran
    assert running.execution_ms is not None and running.execution_ms < 1000
    assert fleet.counts().cancelled == 2 and after.status is JobStatus.COMPLETED


async def test_capacity_keeps_extra_workers_throttled() -> None:
    config = FleetConfig(cold_start=Duration.fixed(0.05), max_workers=2, capacity=1)
    async with SimulatedFleet(config) as fleet:
        jobs = [fleet.submit({"sleep_ms": 100}) for _ in range(2)]
        await settle(fleet, lambda c: c.throttled == 1 and c.running == 1)
        await asyncio.gather(*(j.done.wait() for j in jobs))


async def test_scaling_changes_are_validated_and_safe_from_other_threads() -> None:
    async with SimulatedFleet(FAST) as fleet:
        with pytest.raises(ConfigError, match="min_workers"):
            fleet.set_scaling(ScalingSettings(min_workers=3))  # above max 2
        await asyncio.to_thread(fleet.set_scaling, ScalingSettings(min_workers=2))
        await settle(fleet, lambda c: c.idle == 2)
        assert fleet.scaling == ScalingSettings(2, 2, 0.2)


async def test_failures_timeouts_streams_and_a_full_queue() -> None:
    config = FleetConfig(cold_start=Duration.fixed(0.01), max_workers=1, max_queue=4)
    async with SimulatedFleet(config, FaultPlan().next(1, Fault.job_failed("boom"))) as fleet:
        planned = fleet.submit({})
        asked = fleet.submit({"fail": "bad input"})
        slow = fleet.submit({"sleep_ms": 500}, execution_timeout_s=0.05)
        streamed = fleet.submit({"sleep_ms": 30, "chunks": 3, "echo": "s"})
        with pytest.raises(QueueFull):
            fleet.submit({})  # four already wait: the worker is still booting
        await asyncio.gather(*(j.done.wait() for j in (planned, asked, slow, streamed)))
    assert (planned.status, planned.error) == (JobStatus.FAILED, "boom")
    assert (asked.status, asked.error) == (JobStatus.FAILED, "bad input")
    assert slow.status is JobStatus.TIMED_OUT
    assert streamed.stream == [{"chunk": i, "echo": "s"} for i in range(3)]
    assert fleet.truth(streamed.id).chunks == 3


async def test_time_scale_shrinks_every_duration() -> None:
    config = FleetConfig(cold_start=Duration.fixed(2.0), time_scale=0.05, idle_timeout_s=4)
    async with SimulatedFleet(config) as fleet:
        job = fleet.submit({"sleep_ms": 1000})
        await job.done.wait()
        await settle(fleet, lambda c: c.workers == 0, 2)  # 4 s idle timeout -> 0.2 s
    truth = fleet.truth(job.id)
    assert truth.boot_ms is not None and 95 <= truth.boot_ms <= 140
    assert truth.execution_ms is not None and 48 <= truth.execution_ms <= 80


async def test_billing_meter_records_each_phase() -> None:
    config = FleetConfig(cold_start=Duration.fixed(0.1), idle_timeout_s=0.2, time_scale=0.5)
    async with SimulatedFleet(config) as fleet:
        await fleet.submit({"sleep_ms": 200}).done.wait()  # 100 ms once scaled
        await settle(fleet, lambda c: c.workers == 0, 2)
    (bill,) = fleet.billing.workers
    assert bill.stopped_s is not None
    phases = fleet.billing.phase_totals_s(0.0)
    assert phases["cold_boot"] == pytest.approx(0.05, abs=0.02)
    assert phases["execution"] == pytest.approx(0.1, abs=0.02)
    assert phases["idle"] == pytest.approx(0.1, abs=0.03)
    nominal = fleet.billing.phase_totals_s(0.0, nominal=True)
    assert nominal["execution"] == pytest.approx(2 * phases["execution"])
    per_second = BillingModel(granularity_s=1.0)
    assert fleet.billing.billed_s(per_second, 0.0) == 1.0  # 0.25 s rounded up
    run_only = BillingModel(granularity_s=0.1, billed_phases=frozenset({"execution"}))
    assert fleet.billing.billed_s(run_only, 0.0) == pytest.approx(0.2)


def test_durations_are_seeded_and_validated() -> None:
    lognormal = Duration.lognormal(median_s=0.5, sigma=0.4)
    a = [lognormal.sample_s(random.Random(3)) for _ in range(3)]
    assert a == [lognormal.sample_s(random.Random(3)) for _ in range(3)]
    draws = sorted(lognormal.sample_s(rng) for rng in [random.Random(7)] * 2001)
    assert draws[1000] == pytest.approx(0.5, rel=0.1)  # the median is the median
    uniform = Duration.uniform(0.2, 1.5)
    assert all(0.2 <= uniform.sample_s(random.Random(i)) <= 1.5 for i in range(50))
    with pytest.raises(ConfigError, match="high_s"):
        Duration.uniform(2, 1)
    with pytest.raises(ConfigError, match="time_scale"):
        FleetConfig(time_scale=0)


def test_fault_plan_rules() -> None:
    plan = FaultPlan()
    plan.at(1, 3, fault=Fault.server_error(502))
    plan.next(1, Fault.throttle(2), on="poll")
    plan.with_probability(0.5, Fault.reset(), seed=1, on="control")
    got = [plan.draw("submit") for _ in range(5)]
    assert [f.status if f else None for f in got] == [None, 502, None, 502, None]
    assert plan.draw("poll") == Fault.throttle(2) and plan.draw("poll") is None
    hits = sum(plan.draw("control") is not None for _ in range(400))
    assert 160 <= hits <= 240
    assert plan.count("submit") == 5 and len(plan.injected) == 3 + hits
    with pytest.raises(ValueError, match="route 'job'"):
        plan.next(1, Fault.server_error(), on="job")
    with pytest.raises(ValueError, match=r"500\.\.599"):
        Fault.server_error(404)


async def test_worker_intervals_tile_each_life_for_the_cost_module() -> None:
    config = FleetConfig(cold_start=Duration.fixed(0.05), idle_timeout_s=0.1, max_workers=2)
    async with SimulatedFleet(config) as fleet:
        await asyncio.gather(*(fleet.submit({"sleep_ms": 30}).done.wait() for _ in range(3)))
        await asyncio.sleep(0.05)
        fleet.submit({"sleep_ms": 20})
        await settle(fleet, lambda c: c.workers == 0 and c.completed == 4, 3)
    intervals = fleet.billing.worker_intervals(0.0)
    for bill in fleet.billing.workers:
        mine = sorted((i for i in intervals if i.worker == bill.worker_id), key=lambda i: i.start_s)
        assert mine[0].phase == "cold_boot" and mine[0].start_s == bill.started_s
        assert mine[-1].phase == "idle" and mine[-1].end_s == bill.stopped_s
        assert all(a.end_s == b.start_s for a, b in itertools.pairwise(mine))
    execution_s = sum(i.duration_s for i in intervals if i.phase == "execution")
    assert execution_s == pytest.approx(fleet.billing.phase_totals_s(0.0)["execution"])
    assert execution_s == pytest.approx(0.11, abs=0.02)
