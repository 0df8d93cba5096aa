"""Cog specifics the conformance suite does not reach, on the emulator behaving as Cog 0.23's
server does: 503 while setup runs (the cold start, waited out), 409 from a busy container
versus from a slot still being freed, /health-check states and setup times, warm predictions
costing no extra request, respond-async, idempotent PUT, cancel."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from gpubench_replicate import CogProvider
from gpubench_replicate.cog_emulator import AT_CAPACITY, SETUP_RUNNING, make_app

from gpubench_sdk import ColdTimeoutError, Request, ThrottledError
from gpubench_sdk.testing import Duration, Fault, FleetConfig, ServedApp, SimulatedFleet, serve

SETUP_S = 0.3


@pytest.fixture
def fleet() -> SimulatedFleet:
    config = FleetConfig(cold_start=Duration.fixed(SETUP_S), max_workers=1, idle_timeout_s=30)
    return SimulatedFleet(config)


@pytest.fixture
def served(fleet: SimulatedFleet) -> Iterator[ServedApp]:
    """One container answering directly: it starts, and runs setup, with the server."""
    with serve(make_app(fleet)) as served:
        yield served


@pytest.fixture
def proxied(fleet: SimulatedFleet) -> Iterator[ServedApp]:
    """Containers behind a proxy that starts them on demand and holds requests meanwhile."""
    with serve(make_app(fleet, behind_proxy=True)) as served:
        yield served


def _probe(sleep_ms: float, seq: int = 0) -> Request:
    return Request(seq=seq, payload={"echo": "x", "sleep_ms": sleep_ms})


def _setup_ms(fleet: SimulatedFleet) -> float:
    bill = fleet.billing.workers[0]
    assert bill.boot_end_s is not None
    return (bill.boot_end_s - bill.started_s) * 1e3


def test_setup_503_is_the_cold_start() -> None:
    """Cog answers 503 while setup() runs: waited out, reported cold with the setup time."""
    # Setup starts with the server, so it must outlast the first request and the provider's
    # opening on a loaded machine (0.3 s did not, once, in CI).
    setup_s = 1.5
    fleet = SimulatedFleet(FleetConfig(cold_start=Duration.fixed(setup_s), max_workers=1))

    async def go(url: str) -> list[Any]:
        async with CogProvider(url=url) as provider:
            cold = await provider.invoke(_probe(20))
            checks = fleet.faults.count("poll")
            warm = [await provider.invoke(_probe(20, i)) for i in (1, 2)]
            return [cold, checks, warm, fleet.faults.count("poll")]

    with serve(make_app(fleet)) as served:
        refused = httpx.post(f"{served.url}/predictions", json={"input": {"echo": "x"}})
        assert refused.status_code == 503
        assert refused.json() == {"error": SETUP_RUNNING, "status": "failed"}
        cold, checks_after_cold, warm, checks_after_warm = asyncio.run(go(served.url))
    assert cold.cold is True and cold.cold_confirmed  # the container said so
    assert cold.setup_ms == pytest.approx(_setup_ms(fleet), abs=1)
    assert cold.detail is not None and 0 < cold.detail["setup_wait_ms"] <= setup_s * 1e3 + 200
    assert cold.execution_ms == pytest.approx(fleet.truth(cold.request_id).execution_ms, abs=1)
    assert cold.queue_ms is None  # Cog 0.23 sends no created_at/started_at
    assert all(w.cold is False and w.setup_ms is None and not w.cold_confirmed for w in warm)
    assert checks_after_cold >= 1 and checks_after_warm == checks_after_cold
    assert len(fleet.truths()) == 3  # every 503 was refused before any prediction ran


def test_setup_longer_than_the_deadline_is_a_cold_timeout(fleet: SimulatedFleet) -> None:
    slow = SimulatedFleet(FleetConfig(cold_start=Duration.fixed(3.0), max_workers=1))
    with serve(make_app(slow)) as served:

        async def go() -> None:
            async with CogProvider(url=served.url, timeout_s=0.5) as provider:
                await provider.invoke(_probe(10))

        with pytest.raises(ColdTimeoutError, match="still in setup"):
            asyncio.run(go())


def test_busy_container_answers_409_as_throttled(served: ServedApp, fleet: SimulatedFleet) -> None:
    """With another of our predictions running, the container is busy with our own load."""
    fleet.wait_for(lambda c: c.idle == 1, 5)

    async def go() -> None:
        async with CogProvider(url=served.url) as provider:
            first = asyncio.create_task(provider.invoke(_probe(800)))
            await asyncio.sleep(0.1)
            try:
                await provider.invoke(_probe(10, 1))
            finally:
                await first

    with pytest.raises(ThrottledError, match="At capacity") as info:
        asyncio.run(go())
    assert info.value.status_code == 409
    assert str(info.value).startswith(f"[cog] POST {served.url}/predictions: HTTP 409 Conflict: ")


def test_slot_being_freed_is_not_throttling(fleet: SimulatedFleet) -> None:
    """Cog frees its slot just after answering: a sequential run must not record that 409."""
    with serve(make_app(fleet, slot_release_s=0.2)) as served:
        fleet.wait_for(lambda c: c.idle == 1, 5)
        raw = httpx.Client(base_url=served.url)
        raw.post("/predictions", json={"input": {"echo": "x"}})
        race = raw.post("/predictions", json={"input": {"echo": "x"}})  # sent at once: 409
        assert race.status_code == 409 and race.json()["error"] == AT_CAPACITY
        time.sleep(0.25)

        async def go(slot_wait_s: float) -> list[Any]:
            async with CogProvider(url=served.url, slot_wait_s=slot_wait_s) as provider:
                return [await provider.invoke(_probe(5, i)) for i in range(4)]

        results = asyncio.run(go(0.5))
        retried = [r.detail["slot_retries"] for r in results if r.detail]
        assert len(retried) == 3 and min(retried) >= 1  # each after the first waited a slot
        time.sleep(0.25)
        with pytest.raises(ThrottledError):  # without the wait, the race is a 409
            asyncio.run(go(0.0))


def test_a_slot_taken_by_someone_else_is_throttled_after_slot_wait(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    fleet.wait_for(lambda c: c.idle == 1, 5)

    async def go() -> float:
        async with httpx.AsyncClient(base_url=served.url) as other:
            theirs = asyncio.create_task(
                other.post("/predictions", json={"input": {"sleep_ms": 1500}}, timeout=10)
            )
            await asyncio.sleep(0.1)
            began = time.monotonic()
            try:
                async with CogProvider(url=served.url, slot_wait_s=0.2) as provider:
                    await provider.invoke(_probe(10))
            except ThrottledError:
                return time.monotonic() - began
            finally:
                await theirs
        raise AssertionError("not throttled")

    # gave up within one retry interval (20 ms) of slot_wait_s, not when theirs ended
    assert 0.15 <= asyncio.run(go()) < 1.0


def test_proxy_holding_the_request_through_setup(proxied: ServedApp, fleet: SimulatedFleet) -> None:
    """Behind a proxy that holds the request, the first prediction waited for setup: cold,
    by the send time against /health-check's setup.completed_at (Cog 0.23 has no created_at)."""

    async def go() -> list[Any]:
        async with CogProvider(url=proxied.url, cold_threshold_ms=150) as provider:
            cold = await provider.invoke(_probe(20))
            warm = await provider.invoke(_probe(20, 1))
            return [cold, warm]

    cold, warm = asyncio.run(go())
    assert fleet.truth(cold.request_id).cold
    assert cold.cold is True and not cold.cold_confirmed  # our clock against the container's
    assert cold.setup_ms == pytest.approx(_setup_ms(fleet), abs=1)
    assert warm.cold is False and warm.setup_ms is None


def test_failed_health_check_leaves_the_prediction_standing(
    proxied: ServedApp, fleet: SimulatedFleet
) -> None:
    """The cold-start read of /health-check fails after the prediction succeeded: the
    prediction stands (its output, its id), the cold start is unknown, and detail says why."""
    fleet.faults.next(1, Fault.server_error(502), on="poll")

    async def go() -> Any:
        async with CogProvider(url=proxied.url, cold_threshold_ms=150) as provider:
            return await provider.invoke(_probe(20))

    result = asyncio.run(go())
    assert fleet.faults.injected and fleet.truth(result.request_id).cold
    assert result.output == {"echo": "x"} and result.execution_ms is not None
    assert result.cold is None and result.setup_ms is None and not result.cold_confirmed
    assert result.detail is not None and "HTTP 502" in result.detail["cold_check_error"]


def test_older_cog_timestamps_give_queue_and_a_confirmed_cold(fleet: SimulatedFleet) -> None:
    """Cog before 0.23 sent created_at/started_at: the queue phase, and a cold start both of
    whose stamps are the container's clock."""
    with serve(make_app(fleet, behind_proxy=True, timestamps=True)) as served:

        async def go() -> list[Any]:
            async with CogProvider(url=served.url, cold_threshold_ms=150) as provider:
                return [await provider.invoke(_probe(20, i)) for i in range(2)]

        cold, warm = asyncio.run(go())
    truth = fleet.truth(cold.request_id)
    assert cold.cold is True and cold.cold_confirmed
    assert cold.queue_ms == pytest.approx(truth.queue_ms, abs=1)
    assert cold.setup_ms == pytest.approx(_setup_ms(fleet), abs=1)
    assert warm.cold is False and warm.queue_ms is not None and warm.queue_ms < 50


def test_health_check_states_become_fleet_state(proxied: ServedApp, fleet: SimulatedFleet) -> None:
    async def go() -> list[Any]:
        async with CogProvider(url=proxied.url) as provider:
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
    assert (starting.starting, starting.detail["status"]) == (1, "STARTING")
    assert starting.detail["setup"]["status"] == "starting"
    assert "completed_at" not in starting.detail["setup"]
    assert (busy.busy, busy.detail["status"]) == (1, "BUSY")
    assert (ready.ready, ready.detail["status"]) == (1, "READY")
    setup = ready.detail["setup"]
    assert setup["status"] == "succeeded" and setup["completed_at"] > setup["started_at"]
    assert setup["started_at"].endswith("+00:00") and len(setup["started_at"]) == 35  # ns


def test_respond_async_idempotent_put_and_cancel(proxied: ServedApp, fleet: SimulatedFleet) -> None:
    body = {"input": {"echo": "x", "sleep_ms": 2000}}
    url = proxied.url
    created = httpx.put(f"{url}/predictions/p1", json=body, headers={"Prefer": "respond-async"})
    assert created.status_code == 202 and created.json() == {"id": "p1", "status": "starting"}
    again = httpx.put(f"{url}/predictions/p1", json=body)  # same id: its state, no rerun
    assert again.status_code == 202 and len(fleet.truths()) == 1
    assert again.json()["input"] == body["input"]
    mismatch = httpx.put(f"{url}/predictions/p2", json={**body, "id": "p3"})
    assert mismatch.status_code == 422 and mismatch.json()["detail"][0]["loc"] == ["body", "id"]
    assert httpx.post(f"{url}/predictions/p1/cancel").status_code == 200
    fleet.wait_for(lambda c: c.cancelled == 1, 5)
    assert httpx.post(f"{url}/predictions/p1/cancel").status_code == 404
    assert httpx.post(f"{url}/predictions/nope/cancel").json() == {}
    bad = httpx.post(f"{url}/predictions", content=b"{nope", headers={"content-type": "x"})
    assert bad.status_code == 400 and bad.headers["content-type"].startswith("text/plain")
