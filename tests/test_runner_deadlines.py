"""The runner's per-target deadlines (one timer for all of a target's requests): what times
out does so at its own deadline, what finishes first is untouched, a cancellation that is not
the deadline's propagates, and finished requests do not pile up behind a long one."""

from __future__ import annotations

import asyncio
import time

import pytest

from gpubench_sdk._runner._deadlines import Deadlines

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # Deadlines is the asyncio path (trio keeps anyio's cancel scopes)


async def test_each_request_times_out_at_its_own_deadline() -> None:
    deadlines = Deadlines(0.3)
    loop = asyncio.get_running_loop()

    async def one(delay_start: float, takes: float) -> tuple[bool, float]:
        await asyncio.sleep(delay_start)
        began = loop.time()
        timed_out, result = await deadlines.run(asyncio.sleep(takes, "done"))
        assert (result is None) == timed_out and (timed_out or result == "done")
        await asyncio.sleep(0)  # the task's cancel count was restored: it goes on
        return timed_out, loop.time() - began

    plan = [(0.0, 1.0), (0.05, 0.05), (0.1, 1.0), (0.15, 0.1), (0.2, 5.0)]
    outcomes = await asyncio.gather(*(one(d, t) for d, t in plan))
    deadlines.close()
    assert [o[0] for o in outcomes] == [True, False, True, False, True]
    for (timed_out, took), (_, takes) in zip(outcomes, plan, strict=True):
        expected = 0.3 if timed_out else takes
        assert expected - 0.01 <= took < expected + 0.25  # its own deadline, not the first's


async def test_a_cancellation_that_is_not_the_deadlines_propagates() -> None:
    deadlines = Deadlines(5.0)
    task = asyncio.create_task(deadlines.run(asyncio.sleep(10)))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(deadlines._queue) == 0  # finished: not queued until its deadline
    deadlines.close()


async def test_an_outer_timeout_still_wins_over_a_later_deadline() -> None:
    deadlines = Deadlines(5.0)
    began = time.perf_counter()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.1):
            await deadlines.run(asyncio.sleep(10))
    assert time.perf_counter() - began < 2
    deadlines.close()


async def test_finished_requests_do_not_pile_up_behind_a_long_one() -> None:
    deadlines = Deadlines(60.0)
    long = asyncio.create_task(deadlines.run(asyncio.sleep(60)))
    await asyncio.sleep(0)
    for _ in range(5_000):
        assert await deadlines.run(asyncio.sleep(0, "x")) == (False, "x")
    assert len(deadlines._queue) < 1_000  # swept, though the head is still in flight
    long.cancel()
    with pytest.raises(asyncio.CancelledError):
        await long
    deadlines.close()
