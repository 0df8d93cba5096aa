"""The runner's scenario drivers: how a closed loop, a burst, a fixed rate and a cold-start
study pace their requests across targets and load-generating processes.

Separate from the orchestration (``_runner``: opening providers, the run's lifecycle, its
record in the store) and the per-request path (``_runner_send``) because each driver is only a
schedule: which seq goes out when, on which shard, under what cap. ``Runner`` sets the state
declared below.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import anyio.to_thread

from ._runner_send import LiveTarget, RequestSender
from ._scenarios import DEFAULT_MAX_INFLIGHT, Burst, ColdStarts, Rate
from ._secrets import redact
from ._types import ColdCheck, Phase

log = logging.getLogger("gpubench.runner")


class ScenarioDrivers(RequestSender):
    """Drives one scenario's requests through ``_send`` (a base of ``Runner``)."""

    _shard: tuple[int, int]  # this process is shard [0] of [1]
    _sync: Callable[[], object] | None  # waits for the other shards at a barrier
    _fd_cap: int | None  # requests in flight per target the open-files limit holds

    if TYPE_CHECKING:

        def stop(self, reason: str = ...) -> None: ...  # Runner.stop

    async def _wait_for_shards(self) -> None:
        if self._sync is None:
            return
        try:
            await anyio.to_thread.run_sync(self._sync, abandon_on_cancel=True)
        except Exception:  # BrokenBarrierError: another process stopped or failed
            self.stop("another load-generating process stopped")
            await anyio.lowlevel.checkpoint()

    def _share(self, seqs: range, concurrency: int) -> tuple[range, int]:
        """This shard's part of a closed loop: its slots, and every m-th seq for them.

        Only the first ``m = min(shards, concurrency)`` shards get slots, so no seq is ever
        dealt to a shard with nothing to send it.
        """
        k, n = self._shard
        m = min(n, concurrency)
        if k >= m:
            return range(0), 0
        return seqs[k::m], concurrency // m + (1 if k < concurrency % m else 0)

    async def _closed_loop(
        self, lt: LiveTarget, sidx: int, seqs: range, concurrency: int, phase: Phase
    ) -> None:
        pending = iter(seqs)

        async def slot() -> None:
            for seq in pending:  # one shared iterator: each seq is sent exactly once
                if not self._take(lt):
                    return
                await self._send(lt, sidx, seq, phase, time.perf_counter_ns())

        async with anyio.create_task_group() as tg:
            for _ in range(min(concurrency, len(seqs))):
                tg.start_soon(slot)

    async def _burst(self, live: list[LiveTarget], sidx: int, sc: Burst) -> None:
        async def phase(lt: LiveTarget, seqs: range, slots: int, phase: Phase) -> None:
            await self._closed_loop(lt, sidx, seqs, slots, phase)

        if sc.warmup:
            seqs, slots = self._share(range(-sc.warmup, 0), sc.concurrency)
            async with anyio.create_task_group() as tg:
                for lt in live:
                    tg.start_soon(phase, lt, seqs, slots, Phase.WARMUP)
            await self._wait_for_shards()  # measure only once every process has warmed up
        seqs, slots = self._share(range(sc.total), sc.concurrency)
        async with anyio.create_task_group() as tg:
            for lt in live:
                tg.start_soon(phase, lt, seqs, slots, Phase.MEASURE)

    async def _rate(self, live: list[LiveTarget], sidx: int, sc: Rate) -> None:
        if sc.warmup:
            seqs, _ = self._share(range(-sc.warmup, 0), 1)
            async with anyio.create_task_group() as tg:
                for lt in live:
                    tg.start_soon(self._closed_loop, lt, sidx, seqs, 1, Phase.WARMUP)
            await self._wait_for_shards()  # every process starts its schedule together
        t0 = time.perf_counter_ns()
        async with anyio.create_task_group() as tg:
            for lt in live:  # one schedule per target: a saturated one never delays the others
                tg.start_soon(self._rate_target, lt, sidx, sc, t0)

    async def _rate_target(self, lt: LiveTarget, sidx: int, sc: Rate, t0: int) -> None:
        await self._open_loop(lt, sidx, sc.offsets_s(), t0, max_inflight=sc.max_inflight)

    async def _open_loop(
        self,
        lt: LiveTarget,
        sidx: int,
        offsets_s: Iterable[float],
        t0: int,
        *,
        max_inflight: int | None = None,
        seq0: int = 0,
        fields: Callable[[int], Mapping[str, Any] | None] | None = None,
    ) -> None:
        """Send ``seq0 + i`` at ``t0 + offsets_s[i]`` (this shard's every n-th), open loop.

        ``fields(i)`` adds body fields to request ``i`` (a trace's inputs)."""
        k, n = self._shard
        cap = max(1, (max_inflight or DEFAULT_MAX_INFLIGHT) // n)  # the run's total, shared
        if max_inflight is None and self._fd_cap is not None and cap > self._fd_cap:
            warned: set[str] = self.__dict__.setdefault("_fd_warned", set())
            if lt.name not in warned:  # once per target, not at every step of a sweep
                warned.add(lt.name)
                log.warning(
                    "%s: at most %d requests in flight (the open-files limit, ulimit -n); "
                    "set max_inflight to choose",
                    lt.name,
                    self._fd_cap,
                )
            cap = self._fd_cap
        limiter = anyio.Semaphore(cap)

        async def fire(seq: int, due: int, extra: Mapping[str, Any] | None) -> None:
            try:
                await self._send(lt, sidx, seq, Phase.MEASURE, due, extra=extra)
            finally:
                limiter.release()

        async with anyio.create_task_group() as tg:
            for i, offset_s in enumerate(offsets_s):
                if i % n != k:  # another process sends this one, on the same schedule
                    continue
                due = t0 + int(offset_s * 1e9)
                delay = (due - time.perf_counter_ns()) / 1e9
                if delay > 0:
                    await anyio.sleep(delay)
                while time.perf_counter_ns() < due:  # uvloop's ms timers fire up to 1 ms early
                    await anyio.lowlevel.checkpoint()
                # At max_inflight the schedule waits; the wait is counted in latency
                # (from the scheduled time), never hidden. The budget is taken after the
                # wait, so a scenario stopped while waiting has reserved nothing.
                await limiter.acquire()
                if not self._take(lt):
                    limiter.release()
                    break
                tg.start_soon(fire, seq0 + i, due, None if fields is None else fields(i))

    async def _timed_loop(
        self,
        lt: LiveTarget,
        sidx: int,
        seqs: Iterator[int],
        slots: int,
        until_ns: int,
        think_s: float,
        phase: Phase = Phase.MEASURE,
    ) -> None:
        """A closed loop of ``slots`` requests in flight until ``until_ns``, each slot pausing
        ``think_s`` between its requests (k6's constant VUs); ``seqs`` is shared by the slots."""

        async def slot() -> None:
            for seq in seqs:
                if time.perf_counter_ns() >= until_ns or not self._take(lt):
                    return
                await self._send(lt, sidx, seq, phase, time.perf_counter_ns())
                if think_s:
                    left_s = (until_ns - time.perf_counter_ns()) / 1e9
                    await anyio.sleep(min(think_s, max(0.0, left_s)))

        # Requests in flight at the end finish (each bounded by the provider's timeout_s).
        async with anyio.create_task_group() as tg:
            for _ in range(slots):
                tg.start_soon(slot)

    async def _cold_starts(self, live: list[LiveTarget], sidx: int, sc: ColdStarts) -> None:
        if self._shard[0] != 0:
            return  # cold starts are sequential by nature: the first process sends them all

        async def one_target(lt: LiveTarget, first_seq: int) -> None:
            if self._spent() or (self._guard is not None and lt.name in self._guard.stopped):
                return  # do not wait out an idle gap for a request that will not be sent
            check = await self._make_cold(lt, sc)
            if not self._take(lt):
                return
            await self._send(
                lt, sidx, first_seq, Phase.MEASURE, time.perf_counter_ns(), True, check
            )
            for k in range(sc.warm_after):
                if not self._take(lt):
                    return
                await self._send(
                    lt, sidx, first_seq + 1 + k, Phase.MEASURE, time.perf_counter_ns(), False
                )

        for i in range(sc.n):
            if self._spent():
                return
            async with anyio.create_task_group() as tg:
                for lt in live:
                    tg.start_soon(one_target, lt, i * (1 + sc.warm_after))

    async def _make_cold(self, lt: LiveTarget, sc: ColdStarts) -> ColdCheck:
        provider = lt.provider
        if not provider.capabilities.cold_start_control:
            assert sc.idle_gap_s is not None
            await anyio.sleep(sc.idle_gap_s)
            return ColdCheck(False, sc.idle_gap_s, f"waited idle gap {sc.idle_gap_s:g} s")
        began = time.perf_counter()
        try:
            with anyio.fail_after(sc.cold_timeout_s):
                return await provider.ensure_cold(sc.cold_timeout_s)
        except Exception as exc:
            # A failed check does not stop the study: the sample is kept, marked unconfirmed.
            reason = "timed out" if isinstance(exc, TimeoutError) else redact(str(exc))
            log.warning("%s: could not confirm a cold target: %s", lt.name, reason)
            return ColdCheck(False, time.perf_counter() - began, f"ensure_cold failed: {reason}")
