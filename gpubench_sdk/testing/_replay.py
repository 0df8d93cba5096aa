"""Replay an arrival trace through the metered fleet in virtual time.

``SimulatedFleet`` is asyncio code: workers are tasks that ``asyncio.sleep`` through their boot
and their jobs, and wait with timeouts for their scale-down delay. ``VirtualTimeLoop`` runs that
same code with a clock that jumps to the next timer instead of waiting for it, so an hour of
traffic takes well under a second and every timestamp is exact. Nothing of the fleet is
re-implemented: this is how the what-if simulator's bill is checked against the fleet's meter
(``tests/test_cost_sim_vs_fleet.py``, the table in docs/cost.md).
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._contract._billing import WorkerInterval
from ..cost._policy import WorkerPolicy
from ._fleet import FleetConfig, SimulatedFleet
from ._jobs import FleetCounts
from ._timing import Duration


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose ``time()`` advances only when nothing is ready to run: instead of
    blocking in ``select`` until the next timer, it moves its clock to that timer. Real I/O
    is still polled (without waiting), so it must not wait on sockets."""

    def __init__(self) -> None:
        super().__init__()
        self._virtual_s = 0.0
        selector = self._selector  # type: ignore[attr-defined]
        poll = selector.select

        def select(timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
            events: list[tuple[selectors.SelectorKey, int]] = poll(0)
            if not events and timeout is not None and timeout > 0:
                self._virtual_s += timeout
            return events

        selector.select = select

    def time(self) -> float:
        return self._virtual_s


@dataclass(frozen=True)
class FleetReplay:
    """What the metered fleet did with a trace: its requests, cold ones, and worker lives."""

    requests: int
    cold_requests: int
    workers_started: int
    intervals: list[WorkerInterval]
    end_s: float


def replay_on_fleet(
    arrivals_s: Sequence[float],
    *,
    execution_s: float,
    cold_start_s: float,
    max_workers: int,
    idle_timeout_s: float,
    worker_policy: WorkerPolicy,
    seed: int = 0,
    min_workers: int = 0,
) -> FleetReplay:
    """Submit a job at each arrival (seconds from 0) to a ``SimulatedFleet`` on a
    ``VirtualTimeLoop``, run until every job is done and every worker above ``min_workers``
    has scaled down, and return its meter's worker intervals (price them with
    ``price_worker_intervals``).

    With ``min_workers``, time 0 is when the fleet's minimum has booted (one cold start after
    it began): their boot is left out, so they are up from 0 as the simulator's are, and
    every interval is on that clock."""
    loop = VirtualTimeLoop()
    config = FleetConfig(
        cold_start=Duration.fixed(cold_start_s),
        execution=Duration.fixed(execution_s),
        min_workers=min_workers,
        max_workers=max_workers,
        idle_timeout_s=idle_timeout_s,
        seed=seed,
        worker_policy=worker_policy,
    )

    async def drive() -> FleetReplay:
        fleet = SimulatedFleet(config, clock=loop.time)
        async with fleet:
            zero = 0.0
            if min_workers:
                await asyncio.sleep(cold_start_s)
                while fleet.counts().idle < min_workers:  # noqa: ASYNC110
                    await asyncio.sleep(0.001)
                zero = loop.time()
            jobs: list[Any] = []
            for t in sorted(arrivals_s):
                delay = zero + t - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                jobs.append(fleet.submit({}))
            for job in jobs:
                await job.done.wait()
            # every idle worker above the minimum reaches its scale-down delay (polling is
            # free in virtual time)
            while not _settled(fleet.counts(), min_workers):  # noqa: ASYNC110
                await asyncio.sleep(idle_timeout_s / 4 or 0.001)
            truths = fleet.truths()
            now = loop.time()
            return FleetReplay(
                requests=len(truths),
                cold_requests=sum(1 for t in truths if t.cold),
                workers_started=len(fleet.billing.workers) - min_workers,
                intervals=_from(fleet.billing.worker_intervals(now), zero),
                end_s=now - zero,
            )

    try:
        return loop.run_until_complete(drive())
    finally:
        loop.close()


def _settled(counts: FleetCounts, min_workers: int) -> bool:
    """Nothing left to happen: only the minimum is up, idle (none booting)."""
    return counts.workers <= min_workers and counts.idle == counts.workers


def _from(intervals: list[WorkerInterval], zero: float) -> list[WorkerInterval]:
    """``intervals`` from ``zero`` on, on a clock that starts there."""
    return [
        WorkerInterval(iv.worker, iv.phase, max(iv.start_s, zero) - zero, iv.end_s - zero)
        for iv in intervals
        if iv.end_s > zero
    ]


# -- the simulator against the fleet, trace by trace (the test and docs/cost.md's table) -----

AGREEMENT_WORKERS = (1, 4, 8)
AGREEMENT_GRANULARITY_S = {"exact": 1e-6, "per-second": 1.0, "per-minute": 60.0}
_EXECUTION_S, _COLD_START_S, _IDLE_TIMEOUT_S = 2.0, 10.5, 30.0


def agreement_trace(kind: str, workers: int, seed: int = 1) -> list[float]:
    """An hour of arrivals. ``poisson``: 0.06 requests/s per worker, so gaps near the 30 s
    scale-down delay are common; ``bursty``: bursts of up to 2 x workers requests at once,
    40 s apart on average (some find the fleet warm, some cold); ``bursty-1ms``: the same
    bursts with their requests 1 ms apart, so no two workers fall idle at the same instant
    (which of two such workers stops first is the order of the fleet's asyncio timers, a
    tie the simulator cannot follow: its bill under per-minute billing differs slightly)."""
    import numpy as np

    from ..cost import poisson_arrivals

    if kind == "poisson":
        return [float(t) for t in poisson_arrivals(0.06 * workers, 3600.0, seed=seed)]
    rng = np.random.default_rng(seed)
    out: list[float] = []
    t = 0.0
    while True:
        t += float(rng.exponential(40.0))
        if t >= 3600.0:
            return out
        size = int(rng.integers(1, 2 * workers + 1))
        out += [t + (0.001 * j if kind == "bursty-1ms" else 0.0) for j in range(size)]


@dataclass(frozen=True)
class AgreementRow:
    trace: str
    workers: int
    billing: str
    policy: WorkerPolicy
    requests: int
    fleet_billed_s: float
    sim_billed_s: float
    fleet_cold: int
    sim_cold: int
    min_workers: int = 0
    idle_timeout_s: float = _IDLE_TIMEOUT_S

    @property
    def bill_gap(self) -> float:
        """(simulator - fleet) / fleet."""
        return self.sim_billed_s / self.fleet_billed_s - 1 if self.fleet_billed_s else 0.0


def sim_vs_fleet(
    policy: WorkerPolicy,
    *,
    sim_policy: WorkerPolicy | None = None,
    seed: int = 1,
    min_workers: int = 0,
    idle_timeout_s: float = _IDLE_TIMEOUT_S,
    traces: Sequence[str] = ("poisson", "bursty"),
) -> list[AgreementRow]:
    """Every trace (Poisson, bursty) x fleet size (1, 4, 8; those of at least ``min_workers``)
    x billing granularity, through the fleet (``policy``) and the simulator (``sim_policy``,
    default the same), both billed; ``min_workers`` always up, billed to the fleet's end."""
    from ..cost import BillingModel, FleetSettings, price_worker_intervals, simulate

    rows: list[AgreementRow] = []
    for kind in traces:
        for workers in (w for w in AGREEMENT_WORKERS if w >= min_workers):
            arrivals = agreement_trace(kind, workers, seed)
            fleet = replay_on_fleet(
                arrivals,
                execution_s=_EXECUTION_S,
                cold_start_s=_COLD_START_S,
                max_workers=workers,
                idle_timeout_s=idle_timeout_s,
                worker_policy=policy,
                seed=seed,
                min_workers=min_workers,
            )
            settings = FleetSettings(min_workers, workers, idle_timeout_s, 1, sim_policy or policy)
            for name, granularity_s in AGREEMENT_GRANULARITY_S.items():
                model = BillingModel(granularity_s=granularity_s)
                sim = simulate(
                    arrivals,
                    execution_s=_EXECUTION_S,
                    cold_start_s=_COLD_START_S,
                    settings=settings,
                    billing=model,
                    rate_usd_per_s=1.0,
                    horizon_s=fleet.end_s,
                    seed=seed,
                )
                rows.append(
                    AgreementRow(
                        kind,
                        workers,
                        name,
                        policy,
                        fleet.requests,
                        price_worker_intervals(fleet.intervals, model, 1.0).billed_s,
                        sim.billed_s,
                        fleet.cold_requests,
                        sim.cold_requests,
                        min_workers,
                        idle_timeout_s,
                    )
                )
    return rows
