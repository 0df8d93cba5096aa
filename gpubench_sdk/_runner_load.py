"""``Load``: what a scenario's ``drive`` sends its requests through.

A shape (built-in or a ``gpubench.scenarios`` plugin) only decides *when* requests go out; the
``Load`` sends them with the runner's own path, so every request is timed from its scheduled
time, stored as it completes, counted by progress, held to ``max_requests`` and the cost caps,
and judged by thresholds. Every call drives all targets at once, and in a multi-process run
each process sends only its share (``shard`` of ``shards``), so a shape needs no sharding code
of its own: it calls ``sync()`` where every process must agree before going on, and reads
``results()`` (all processes' requests, from the store) to decide adaptively.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from ._scenarios._base import SEQ_BLOCK
from ._types import Invocation, Phase

if TYPE_CHECKING:
    from ._runner_drivers import ScenarioDrivers
    from ._runner_send import LiveTarget

Fields = Callable[[int], Mapping[str, Any] | None]


class Load:
    """One scenario's handle on the run (given to ``Scenario.drive``; not built by users)."""

    __slots__ = ("index", "live", "runner")

    def __init__(self, runner: ScenarioDrivers, live: list[LiveTarget], index: int) -> None:
        self.runner = runner
        self.live = live
        self.index = index  # the scenario's position in the plan: Invocation.scenario

    @property
    def shard(self) -> int:
        """This process's number among the load-generating processes (0 when alone)."""
        return self.runner._shard[0]

    @property
    def shards(self) -> int:
        return self.runner._shard[1]

    @property
    def targets(self) -> list[str]:
        return [lt.name for lt in self.live]

    def stopped(self) -> bool:
        """True once the run's budget is spent or it was stopped: send nothing more."""
        return self.runner._spent() or self.runner._stop_reason is not None

    async def open_loop(
        self,
        offsets_s: Iterable[float] | Callable[[str], Iterable[float]],
        *,
        step: int = 0,
        max_inflight: int | None = None,
        fields: Fields | None = None,
    ) -> None:
        """Send request ``i`` at ``offsets_s[i]`` seconds from now to every target, whatever the
        responses (latency counts from that scheduled time). Requests are numbered from
        ``step * SEQ_BLOCK``; ``fields(i)`` adds body fields to request ``i``. Pass a function
        of the target's name instead to give each target its own schedule (made lazily)."""
        await self.sync()  # every process starts the schedule together
        t0 = time.perf_counter_ns()
        if not callable(offsets_s) and len(self.live) > 1:
            offsets_s = list(offsets_s)  # each target walks the same schedule
        async with anyio.create_task_group() as tg:
            for lt in self.live:  # one schedule per target: a saturated one never delays others
                offsets = offsets_s(lt.name) if callable(offsets_s) else offsets_s
                tg.start_soon(
                    _open_loop, self.runner, lt, self.index, offsets, t0, max_inflight, step, fields
                )

    async def closed_loop(
        self,
        concurrency: int,
        duration_s: float,
        *,
        think_s: float = 0.0,
        step: int = 0,
        phase: Phase = Phase.MEASURE,
    ) -> None:
        """Keep ``concurrency`` requests in flight per target for ``duration_s`` (requests in
        flight at the end finish), each slot pausing ``think_s`` after each response."""
        await self.sync()
        k, n = self.shard, self.shards
        m = min(n, concurrency)
        if k >= m:
            return  # more processes than slots: this one has none
        slots = concurrency // m + (1 if k < concurrency % m else 0)
        until = time.perf_counter_ns() + int(duration_s * 1e9)
        async with anyio.create_task_group() as tg:
            for lt in self.live:
                seqs = itertools.count(step * SEQ_BLOCK + k, m)  # never one number twice
                tg.start_soon(
                    self.runner._timed_loop, lt, self.index, seqs, slots, until, think_s, phase
                )

    async def sync(self) -> None:
        """Wait until every process got here with its requests stored (a no-op when alone)."""
        if self.shards > 1:
            await anyio.to_thread.run_sync(self.runner._store.flush)
        await self.runner._wait_for_shards()

    async def results(self, step: int | None = None, target: str | None = None) -> list[Invocation]:
        """This scenario's requests stored so far by every process (call ``sync`` first), or
        only those of ``step``, or of ``target``."""
        store = self.runner._store
        await anyio.to_thread.run_sync(store.flush)
        run_id = self.runner._run_id
        invs = await anyio.to_thread.run_sync(store.invocations, run_id)
        return [
            i
            for i in invs
            if i.scenario == self.index
            and i.phase is Phase.MEASURE
            and (step is None or i.seq // SEQ_BLOCK == step)
            and (target is None or i.target == target)
        ]


async def _open_loop(
    runner: ScenarioDrivers,
    lt: LiveTarget,
    sidx: int,
    offsets: Iterable[float],
    t0: int,
    max_inflight: int | None,
    step: int,
    fields: Fields | None,
) -> None:
    await runner._open_loop(
        lt, sidx, offsets, t0, max_inflight=max_inflight, seq0=step * SEQ_BLOCK, fields=fields
    )
