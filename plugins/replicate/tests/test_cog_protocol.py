"""Cog specifics the conformance suite does not reach: 409 when busy, /health-check states and
setup times, warm predictions costing no extra request, respond-async, idempotent PUT, cancel."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from gpubench_replicate import CogProvider
from gpubench_replicate.cog_emulator import make_app

from gpubench_sdk import Request, ThrottledError
from gpubench_sdk.testing import Duration, FleetConfig, ServedApp, SimulatedFleet, serve


@pytest.fixture
def fleet() -> SimulatedFleet:
    config = FleetConfig(cold_start=Duration.fixed(0.3), max_workers=1, idle_timeout_s=30)
    return SimulatedFleet(config)


@pytest.fixture
def served(fleet: SimulatedFleet) -> Iterator[ServedApp]:
    with serve(make_app(fleet)) as served:
        yield served


def _probe(sleep_ms: float, seq: int = 0) -> Request:
    return Request(seq=seq, payload={"echo": "x", "sleep_ms": sleep_ms})


def test_busy_container_answers_409_as_throttled(served: ServedApp) -> None:
    async def go() -> None:
        async with CogProvider(url=served.url) as provider:
            first = asyncio.create_task(provider.invoke(_probe(800)))
            await asyncio.sleep(0.1)
            try:
                await provider.invoke(_probe(10, 1))
            finally:
                await first

    with pytest.raises(ThrottledError, match="Already running a prediction") as info:
        asyncio.run(go())
    assert info.value.status_code == 409


def test_setup_time_on_cold_and_no_health_check_when_warm(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    async def go() -> list[Any]:
        async with CogProvider(url=served.url, cold_threshold_ms=150) as provider:
            cold = await provider.invoke(_probe(20))
            checks_after_cold = fleet.faults.count("poll")
            warm = [await provider.invoke(_probe(20, i)) for i in (1, 2)]
            return [cold, checks_after_cold, warm, fleet.faults.count("poll")]

    cold, checks_after_cold, warm, checks_after_warm = asyncio.run(go())
    truth = fleet.truth(cold.request_id)
    assert truth.cold and cold.cold is True and cold.cold_confirmed  # the container said so
    assert truth.boot_ms is not None and cold.setup_ms == pytest.approx(truth.boot_ms, abs=5)
    assert cold.queue_ms == pytest.approx(truth.queue_ms, abs=5)
    assert all(w.cold is False and w.setup_ms is None and not w.cold_confirmed for w in warm)
    assert checks_after_cold == 1 and checks_after_warm == 1  # warm ones cost nothing extra


def test_health_check_states_become_fleet_state(served: ServedApp, fleet: SimulatedFleet) -> None:
    async def go() -> list[Any]:
        async with CogProvider(url=served.url) as provider:
            states = [await provider.state()]  # no container: the proxy answers 503
            task = asyncio.create_task(provider.invoke(_probe(600)))
            await asyncio.to_thread(fleet.wait_for, lambda c: c.initializing == 1, 5)
            states.append(await provider.state())
            await asyncio.to_thread(fleet.wait_for, lambda c: c.running == 1, 5)
            states.append(await provider.state())
            await task
            states.append(await provider.state())
            return states

    empty, starting, busy, ready = asyncio.run(go())
    assert empty.is_cold and empty.detail == {"http_status": 503}
    assert (starting.starting, starting.detail["status"], starting.detail["setup"]) == (
        1,
        "STARTING",
        {},
    )
    assert (busy.busy, busy.detail["status"]) == (1, "BUSY")
    assert (ready.ready, ready.detail["status"]) == (1, "READY")
    setup = ready.detail["setup"]
    assert setup["status"] == "succeeded" and setup["completed_at"] > setup["started_at"]


def test_respond_async_idempotent_put_and_cancel(served: ServedApp, fleet: SimulatedFleet) -> None:
    body = {"input": {"echo": "x", "sleep_ms": 2000}}
    created = httpx.put(
        f"{served.url}/predictions/p1", json=body, headers={"Prefer": "respond-async"}
    )
    assert created.status_code == 202 and created.json()["id"] == "p1"
    assert created.json()["status"] == "starting"
    again = httpx.put(f"{served.url}/predictions/p1", json=body)  # same id: its state, no rerun
    assert again.status_code == 202 and len(fleet.truths()) == 1
    mismatch = httpx.put(f"{served.url}/predictions/p2", json={**body, "id": "p3"})
    assert mismatch.status_code == 422
    assert httpx.post(f"{served.url}/predictions/p1/cancel").status_code == 200
    fleet.wait_for(lambda c: c.cancelled == 1, 5)
    assert httpx.post(f"{served.url}/predictions/p1/cancel").status_code == 404
    assert httpx.post(f"{served.url}/predictions/nope/cancel").json() == {}
