"""``RunLoad``: the runner's implementation of the scenarios' ``Load`` interface.

A shape (built-in or a ``gpubench.scenarios`` plugin) only sees ``gpubench_sdk.Load``, declared
with the scenarios (``_scenarios._load``); this is what the runner hands it: each call drives
every target through the loops of ``_drivers``, with this process's share of the
schedule (``share``: the one split of slots and requests among processes), over the run's
``RunState`` (its budget, send path, barrier and store), never the runner's private state.
"""

from __future__ import annotations

import itertools
import logging
import time

import anyio

from .._base._secrets import redact
from .._base._types import ColdCheck, Invocation, Phase
from .._scenarios import DEFAULT_MAX_INFLIGHT, SEQ_BLOCK, Fields, Load, Offsets, share
from ._drivers import RunState, count_loop, open_loop, timed_loop
from ._send import LiveTarget

__all__ = ["RunLoad"]

log = logging.getLogger("gpubench.runner")


class RunLoad(Load):
    """One scenario's ``Load``: made by the runner for ``Scenario.drive``."""

    __slots__ = ("_by_name", "_index", "_live", "_run")

    def __init__(self, run: RunState, live: list[LiveTarget], index: int) -> None:
        self._run = run
        self._live = live
        self._by_name = {lt.name: lt for lt in live}
        self._index = index

    @property
    def index(self) -> int:
        return self._index

    @property
    def shard(self) -> int:
        return self._run.shard[0]

    @property
    def shards(self) -> int:
        return self._run.shard[1]

    @property
    def targets(self) -> list[str]:
        return [lt.name for lt in self._live]

    @property
    def turns(self) -> int:
        return self._run.turns

    def capabilities(self, target: str) -> frozenset[str]:
        return frozenset(self._by_name[target].provider.capabilities.names())

    def stopped(self, target: str | None = None) -> bool:
        if target is None:
            return self._run.spent() or self._run.stopping()
        return self._run.spent() or self._run.target_stopped(target)

    async def _start(self, slots: int) -> tuple[int, int, int]:
        """Wait for every process (a loop starts together), then this process's share of a
        loop's ``slots``: ``(its shard k, its slots, m)``, request ``i`` being shard ``i % m``'s."""
        await self.sync()
        k, n = self._run.shard
        mine, m = share(k, n, slots)
        return k, mine, m

    async def open_loop(
        self,
        offsets_s: Offsets,
        *,
        step: int = 0,
        max_inflight: int | None = None,
        fields: Fields | None = None,
    ) -> None:
        # max_inflight is the run's total, shared as the slots of a closed loop are
        k, slots, m = await self._start(max_inflight or DEFAULT_MAX_INFLIGHT)
        t0 = time.perf_counter_ns()
        if not slots:
            return  # more processes than slots: the others send this one's share
        if not callable(offsets_s) and len(self._live) > 1:
            offsets_s = list(offsets_s)  # each target walks the same schedule
        seq0 = step * SEQ_BLOCK
        async with anyio.create_task_group() as tg:
            for lt in self._live:  # one schedule per target: a saturated one never delays others
                offsets = offsets_s(lt.name) if callable(offsets_s) else offsets_s
                cap = slots
                if max_inflight is None:  # the default: lowered to what the open-files limit holds
                    cap = self._run.within_open_files(lt.name, slots)
                args = (self._run, lt, self._index, offsets, t0, cap, (k, m), seq0, fields)
                tg.start_soon(open_loop, *args)

    async def closed_loop(
        self,
        concurrency: int,
        duration_s: float,
        *,
        think_s: float = 0.0,
        step: int = 0,
        phase: Phase = Phase.MEASURE,
    ) -> None:
        k, slots, m = await self._start(concurrency)
        if not slots:
            return  # more processes than slots: this one has none
        until = time.perf_counter_ns() + int(duration_s * 1e9)
        async with anyio.create_task_group() as tg:
            for lt in self._live:
                seqs = itertools.count(step * SEQ_BLOCK + k, m)  # never one number twice
                args = (self._run, lt, self._index, seqs, slots, until, think_s, phase)
                tg.start_soon(timed_loop, *args)

    async def burst(
        self,
        total: int,
        concurrency: int,
        *,
        first_seq: int = 0,
        phase: Phase = Phase.MEASURE,
    ) -> None:
        k, slots, m = await self._start(concurrency)
        if not slots:
            return  # more processes than slots: this one has none
        seqs = range(first_seq, first_seq + total)[k::m]  # each process every m-th
        async with anyio.create_task_group() as tg:
            for lt in self._live:
                tg.start_soon(count_loop, self._run, lt, self._index, seqs, slots, phase)

    async def send(
        self,
        target: str,
        seq: int,
        *,
        phase: Phase = Phase.MEASURE,
        expect_cold: bool | None = None,
        cold_check: ColdCheck | None = None,
    ) -> bool:
        lt = self._by_name[target]
        if not self._run.take(lt):
            return False
        scheduled = time.perf_counter_ns()
        await self._run.send(lt, self._index, seq, phase, scheduled, expect_cold, cold_check)
        return True

    async def ensure_cold(self, target: str, timeout_s: float) -> ColdCheck:
        lt = self._by_name[target]
        began = time.perf_counter()
        try:
            with anyio.fail_after(timeout_s):
                return await lt.provider.ensure_cold(timeout_s)
        except Exception as exc:
            # A failed check does not stop the study: the sample is kept, marked unconfirmed.
            reason = "timed out" if isinstance(exc, TimeoutError) else redact(str(exc))
            log.warning("%s: could not confirm a cold target: %s", target, reason)
            return ColdCheck(False, time.perf_counter() - began, f"ensure_cold failed: {reason}")

    async def sync(self) -> None:
        if self.shards > 1:
            await self._run.flush()
        await self._run.wait_for_shards()

    async def results(self, step: int | None = None, target: str | None = None) -> list[Invocation]:
        invs = await self._run.invocations()
        return [
            i
            for i in invs
            if i.scenario == self._index
            and i.phase is Phase.MEASURE
            and (step is None or i.seq // SEQ_BLOCK == step)
            and (target is None or i.target == target)
        ]
