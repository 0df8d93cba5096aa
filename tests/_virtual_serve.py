"""Serve an arrival trace on a simulated fleet in virtual time: the second half of every advise
proof (advise predicts from measured runs; the fleet, whose truth is known, then serves an
independent trace and is metered).

``VirtualTimeLoop`` jumps its clock to the next timer, so a day's window takes well under a
second and every timestamp is exact (see ``gpubench_sdk.testing._replay``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpubench_sdk.cost import WorkerInterval, load_catalog, price_worker_intervals
from gpubench_sdk.testing import JobTruth
from gpubench_sdk.testing._replay import VirtualTimeLoop


@dataclass(frozen=True)
class Served:
    """What the fleet did: each job's truth, its workers' lives up to ``end_s``."""

    truths: list[JobTruth]
    intervals: list[WorkerInterval]
    end_s: float

    def latencies_s(self) -> np.ndarray[Any, np.dtype[np.float64]]:
        """Each job's queue (boot included) plus execution, in seconds."""
        return np.array(
            [((t.queue_ms or 0.0) + (t.execution_ms or 0.0)) / 1e3 for t in self.truths]
        )

    def p95_s(self) -> float:
        return float(np.percentile(self.latencies_s(), 95))

    def cold_rate(self) -> float:
        return sum(1 for t in self.truths if t.cold) / len(self.truths)

    def cost_usd(self, usd_per_s: float, billing: str = "local") -> float:
        """The meter's intervals priced by the cost module under ``billing``'s rules."""
        model = load_catalog().billing_model(billing)
        return price_worker_intervals(self.intervals, model, usd_per_s).cost_usd


def serve_trace(
    make_fleet: Callable[[Callable[[], float]], Any],
    arrivals_s: Iterable[float],
    payload: Mapping[str, Any],
    *,
    linger_s: float = 0.0,
    until_s: float = 0.0,
) -> Served:
    """Submit ``payload`` at each arrival to ``make_fleet(clock)`` (a ``SimulatedFleet`` or
    anything with its ``submit``/``truths`` and a ``worker_intervals(now)``, on ``billing`` or
    itself), wait for every job, then ``linger_s`` more (the last workers idle out), and meter
    the workers up to that time or ``until_s``, whichever is later."""
    loop = VirtualTimeLoop()

    async def drive() -> Served:
        fleet = make_fleet(loop.time)
        async with fleet:
            jobs = []
            for t in arrivals_s:
                if t > loop.time():
                    await asyncio.sleep(t - loop.time())
                jobs.append(fleet.submit(dict(payload)))
            for job in jobs:
                await job.done.wait()
            if linger_s:
                await asyncio.sleep(linger_s)
            end = max(until_s, loop.time())
            meter = getattr(fleet, "billing", fleet)
            return Served(fleet.truths(), meter.worker_intervals(end), end)

    try:
        return loop.run_until_complete(drive())
    finally:
        loop.close()


async def overflow_day(
    loop: VirtualTimeLoop,
    fleets: Sequence[Any],
    arrivals_s: Iterable[float],
    window_s: float,
    usd_per_s: Sequence[float],
) -> float:
    """Inside ``drive`` on ``loop``, with ``fleets`` started: give pinned workers 2 s to boot,
    send each arrival (a 50 ms job) to the first fleet with an idle worker, else to the last
    (which queues and boots), wait for every job, and return the fleets' metered bill for the
    window, each fleet's workers priced at its ``usd_per_s`` under "local" billing."""
    await asyncio.sleep(2.0)  # pinned workers boot before the day starts
    start = loop.time()
    jobs = []
    for t in arrivals_s:
        if start + t > loop.time():
            await asyncio.sleep(start + t - loop.time())
        fleet = next((f for f in fleets[:-1] if f.counts().idle), fleets[-1])
        jobs.append(fleet.submit({"sleep_ms": 50}))
    for job in jobs:
        await job.done.wait()
    end = max(start + window_s, loop.time())
    model = load_catalog().billing_model("local")
    usd = 0.0
    for fleet, rate in zip(fleets, usd_per_s, strict=True):
        kept = [iv for iv in fleet.billing.worker_intervals(end) if iv.end_s > start]
        usd += price_worker_intervals(kept, model, rate).cost_usd
    return usd
