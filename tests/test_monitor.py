"""The runner flags the stretches of a run where the client, not the provider, was the limit."""

from __future__ import annotations

import asyncio
from pathlib import Path

import anyio
import numpy as np
import pytest
from conftest import EchoProvider

from gpubench_sdk import Burst, EchoProbe, Rate, Request, Result, Store, run
from gpubench_sdk._base._monitor import HealthWindow, Monitor

pytestmark = pytest.mark.anyio


async def test_saturated_client_is_flagged(external_server: str, tmp_path: Path) -> None:
    # An instant endpoint at 128 concurrent: the client spends all its CPU on HTTP and
    # bookkeeping, so the limit is the client, and the run must say so.
    result = await run(
        {"a": EchoProvider(url=external_server)},
        EchoProbe(),
        [Burst(total=100_000, concurrency=128, deadline_s=5)],  # the deadline ends it
        store=tmp_path / "r.sqlite",
    )
    assert result.client_bound_s >= 1
    with Store(tmp_path / "r.sqlite") as s:
        health = s.health(result.run_id)
    bound = health["client_bound"] == 1
    assert bound.sum() >= 1
    # each flagged window shows why: timers fired late (repeatedly), or the process used a core
    assert np.all((health["loop_lag_ms"][bound] > 20) | (health["cpu_pct"][bound] > 90))


async def test_light_load_is_not_flagged(external_server: str, tmp_path: Path) -> None:
    result = await run(
        {"a": EchoProvider(url=external_server)},
        EchoProbe(sleep_ms=5),
        [Rate(rps=20, duration_s=2.5)],
        store=tmp_path / "r.sqlite",
    )
    assert len(result.health) >= 2
    assert result.client_bound_s == 0
    assert all(w.cpu_pct < 50 for w in result.health)


async def _window_of(monitor: Monitor, sends: list[int]) -> HealthWindow:
    """The window that holds ``sends`` (send delays, ns), all noted between two ticks."""
    seen = len(monitor.windows)
    for delay in sends:
        monitor.note_send(delay)
    while True:
        await anyio.sleep(0.005)
        fresh = [w for w in monitor.windows[seen:] if w.sends]
        if fresh:
            return fresh[0]


async def test_the_flag_rises_on_the_send_delay_at_p99() -> None:
    """A window is client-bound once more than 1% of its requests left over 1 ms after they
    were due (p99 send delay over 1 ms), at least two of them (one is a hiccup), judged from
    100 sends or more. Timer lag and CPU are kept out of it here: their thresholds are set out
    of reach."""
    monitor = Monitor(
        origin_ns=0, inflight=lambda: 0, sink=lambda w: None, tick_s=0.002, window_s=0.01,
        max_lag_ms=1e9, max_cpu=1e9,
    )  # fmt: skip
    prompt, late = 200_000, 1_500_000  # 0.2 ms and 1.5 ms after due
    async with anyio.create_task_group() as tg:
        tg.start_soon(monitor.run)
        flagged = await _window_of(monitor, [late] * 3 + [prompt] * 197)  # p99 1.5 ms
        hiccup = await _window_of(monitor, [late] + [prompt] * 199)  # one late send
        edge = await _window_of(monitor, [late] * 2 + [prompt] * 198)  # exactly 1%: p99 fine
        tail = await _window_of(monitor, [late] * 2 + [prompt] * 98)  # 2%
        few = await _window_of(monitor, [late] * 20 + [prompt] * 20)  # too few to judge p99
        quiet = await _window_of(monitor, [prompt] * 300)
        tg.cancel_scope.cancel()
    assert (flagged.sends, flagged.late_sends, flagged.client_bound) == (200, 3, True)
    assert (hiccup.late_sends, hiccup.client_bound) == (1, False)
    assert (edge.late_sends, edge.client_bound) == (2, False)
    assert (tail.late_sends, tail.client_bound) == (2, True)
    assert (few.late_sends, few.client_bound) == (20, False)
    assert (quiet.late_sends, quiet.client_bound) == (0, False)


class _WaitsBeforeSending(EchoProvider):
    """Holds each request back on the loop before it sends (the client's own delay)."""

    async def invoke(self, request: Request) -> Result:
        await asyncio.sleep(0.004)
        return await super().invoke(request)


async def test_a_client_that_sends_late_is_flagged(external_server: str, tmp_path: Path) -> None:
    """Each request leaves ~4 ms after it was due: every latency the run reports carries that,
    and each window the runner judged (100 sends or more) says so, with the late sends."""
    result = await run(
        {"a": _WaitsBeforeSending(url=external_server)},
        EchoProbe(sleep_ms=5),
        [Rate(rps=150, duration_s=2.5)],
        store=tmp_path / "r.sqlite",
    )
    assert result.client_bound_s > 0
    full = [w for w in result.health if w.sends >= 100]
    assert full and all(w.client_bound and w.late_sends >= 0.9 * w.sends for w in full)
