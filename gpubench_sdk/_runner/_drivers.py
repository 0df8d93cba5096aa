"""The loops a ``Load`` runs on each target, and ``RunState``: the few things they need of the run.

A loop is only a schedule: which seq goes out when, under what cap. ``count_loop`` keeps a
number of slots busy until a count is sent (a burst), ``timed_loop`` until a time (constant
VUs), ``open_loop`` sends on a schedule whatever the responses. Which part of a loop this
process runs (shard k of n) is ``gpubench_sdk._scenarios.share``'s answer, computed once by the
``Load`` (``_load``) for every loop. The per-request path is ``_send``'s.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

import anyio
import anyio.lowlevel

from .._base._types import ColdCheck, Invocation, Phase
from ._send import LiveTarget


class RunState(Protocol):
    """What a ``Load`` needs of the run it belongs to (the ``Runner`` makes one per run)."""

    @property
    def shard(self) -> tuple[int, int]:
        """This process is shard ``[0]`` of ``[1]`` load-generating processes."""
        ...

    @property
    def turns(self) -> int:
        """Requests per session of the run's workload (``Workload.turns``)."""
        ...

    def take(self, lt: LiveTarget, /) -> bool:
        """Reserve one request of the budget for ``lt``: False once ``max_requests`` went out,
        or when ``lt``'s next request could pass its ``max_cost_usd`` cap."""
        ...

    async def send(
        self,
        lt: LiveTarget,
        sidx: int,
        seq: int,
        phase: Phase,
        scheduled_ns: int,
        expect_cold: bool | None = None,
        check: ColdCheck | None = None,
        extra: Mapping[str, Any] | None = None,
        /,
    ) -> None:
        """Send one request taken from the budget, time it from ``scheduled_ns``, store it."""
        ...

    def spent(self) -> bool:
        """Whether the budget is used up (without taking from it)."""
        ...

    def stopping(self) -> bool:
        """Whether the run was stopped, or is stopping (a budget or a cost cap said why)."""
        ...

    def target_stopped(self, target: str, /) -> bool:
        """Whether ``target``'s cost cap stopped it."""
        ...

    def within_open_files(self, target: str, cap: int, /) -> int:
        """``cap`` requests in flight for ``target``, lowered to what the open-files limit holds
        (and said so, once per target and run)."""
        ...

    async def wait_for_shards(self) -> None:
        """The barrier every load-generating process meets at (a no-op when alone)."""
        ...

    async def flush(self) -> None:
        """Commit this process's stored requests."""
        ...

    async def invocations(self) -> list[Invocation]:
        """Every request of the run stored so far (by every process, once flushed)."""
        ...


async def count_loop(
    run: RunState, lt: LiveTarget, sidx: int, seqs: range, slots: int, phase: Phase
) -> None:
    """``slots`` requests in flight to ``lt`` until every seq of ``seqs`` went out, each slot
    sending its next as soon as its last answered."""
    pending = iter(seqs)
    take, send = run.take, run.send

    async def slot() -> None:
        for seq in pending:  # one shared iterator: each seq is sent exactly once
            if not take(lt):
                return
            await send(lt, sidx, seq, phase, time.perf_counter_ns())

    async with anyio.create_task_group() as tg:
        for _ in range(min(slots, len(seqs))):
            tg.start_soon(slot)


async def timed_loop(
    run: RunState,
    lt: LiveTarget,
    sidx: int,
    seqs: Iterator[int],
    slots: int,
    until_ns: int,
    think_s: float,
    phase: Phase,
) -> None:
    """A closed loop of ``slots`` requests in flight until ``until_ns``, each slot pausing
    ``think_s`` between its requests (k6's constant VUs); ``seqs`` is shared by the slots."""
    take, send = run.take, run.send

    async def slot() -> None:
        for seq in seqs:
            if time.perf_counter_ns() >= until_ns or not take(lt):
                return
            await send(lt, sidx, seq, phase, time.perf_counter_ns())
            if think_s:
                left_s = (until_ns - time.perf_counter_ns()) / 1e9
                await anyio.sleep(min(think_s, max(0.0, left_s)))

    # Requests in flight at the end finish (each bounded by the provider's timeout_s).
    async with anyio.create_task_group() as tg:
        for _ in range(slots):
            tg.start_soon(slot)


async def open_loop(
    run: RunState,
    lt: LiveTarget,
    sidx: int,
    offsets_s: Iterable[float],
    t0: int,
    cap: int,
    shard: tuple[int, int],
    seq0: int,
    fields: Callable[[int], Mapping[str, Any] | None] | None,
) -> None:
    """Send ``seq0 + i`` at ``t0 + offsets_s[i]``, open loop, at most ``cap`` in flight: the
    ``i`` with ``i % m == k`` for ``shard == (k, m)``. ``fields(i)`` adds body fields to
    request ``i`` (a trace's inputs)."""
    k, m = shard
    limiter = anyio.Semaphore(cap)
    take, send = run.take, run.send

    async def fire(seq: int, due: int, extra: Mapping[str, Any] | None) -> None:
        try:
            await send(lt, sidx, seq, Phase.MEASURE, due, None, None, extra)
        finally:
            limiter.release()

    # asyncio's timers fire 1-1.1 ms late (epoll counts its timeout in whole milliseconds,
    # rounded up), and every request would leave that late: a send delay the saturation flag
    # (p99 over 1 ms) would read as the client's. Woken 1 ms early, the wait ends in the spin
    # below, as it does on uvloop, whose millisecond timers fire up to 1 ms early already.
    early_s = 0.0 if _on_uvloop() else _EARLY_S
    async with anyio.create_task_group() as tg:
        for i, offset_s in enumerate(offsets_s):
            if i % m != k:  # another process sends this one, on the same schedule
                continue
            due = t0 + int(offset_s * 1e9)
            delay = (due - time.perf_counter_ns()) / 1e9 - early_s
            if delay > 0:
                await anyio.sleep(delay)
            while time.perf_counter_ns() < due:  # a timer that fired early: spin to due
                await anyio.lowlevel.checkpoint()
            # At max_inflight the schedule waits; the wait is counted in latency
            # (from the scheduled time), never hidden. The budget is taken after the
            # wait, so a scenario stopped while waiting has reserved nothing.
            await limiter.acquire()
            if not take(lt):
                limiter.release()
                break
            tg.start_soon(fire, seq0 + i, due, None if fields is None else fields(i))


_EARLY_S = 0.001  # how early an open loop wakes on asyncio, to spin to the due instant


def _on_uvloop() -> bool:
    try:
        import asyncio

        return type(asyncio.get_running_loop()).__module__.startswith("uvloop")
    except RuntimeError:  # not on asyncio (trio): its timers are not rounded to milliseconds
        return True
