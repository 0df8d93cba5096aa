"""fal protocol details beyond the conformance suite, over loopback HTTP to the emulator."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import httpx
import pytest
from gpubench_fal import FalProvider
from gpubench_fal.emulator import make_app

from gpubench_sdk import (
    ConfigError,
    Request,
    RequestTimeoutError,
    ServerHTTPError,
    ThrottledError,
    list_plugins,
    load_provider,
)
from gpubench_sdk.testing import (
    Fault,
    JobStatus,
    ServedApp,
    SimulatedFleet,
    fleet_fixture,
    served_fixture,
)

pytestmark = pytest.mark.anyio
KEY = "fal_protocol_9d2b7e41"
APP = "gpubench/echo"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


fleet = fleet_fixture(0.3, max_workers=1, idle_timeout_s=2)
served = served_fixture(make_app, api_key=KEY, submits_per_s=50, keepalive_s=0.05)


def provider(served: ServedApp, **options: Any) -> FalProvider:
    return FalProvider(
        api_key=KEY,
        app_id=options.pop("app_id", APP),
        queue_url=f"{served.url}/queue",
        run_url=f"{served.url}/run",
        poll_interval_s=0.01,
        poll_max_interval_s=0.03,
        cold_threshold_ms=150,
        **options,
    )


def probe(seq: int = 0, **payload: Any) -> Request:
    return Request(seq=seq, payload={"echo": "hi", "sleep_ms": 30, **payload})


async def test_queue_wait_and_run_time_match_the_truth(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    """With the SSE status stream the IN_QUEUE -> IN_PROGRESS transition is seen as it
    happens: the cold request's queue_ms holds the runner's boot, the warm one's does not."""
    async with provider(served, status_updates="stream", logs=True) as p:
        cold = await p.invoke(probe(0))
        warm = await p.invoke(probe(1))
    for result in (cold, warm):
        truth = fleet.truth(str(result.request_id))
        assert truth.queue_ms is not None and result.queue_ms is not None
        assert abs(result.queue_ms - truth.queue_ms) < 60, (result.queue_ms, truth)
        assert truth.execution_ms is not None and result.execution_ms is not None
        assert abs(result.execution_ms - truth.execution_ms) < 1.0  # metrics.inference_time
    assert cold.cold is True and warm.cold is False
    assert fleet.truth(str(cold.request_id)).cold is True
    assert cold.detail is not None and "started the request" in str(cold.detail["logs"])


@pytest.mark.parametrize("fault", [Fault.reset(), Fault.server_error(503), Fault.truncated()])
async def test_a_broken_status_stream_falls_back_to_polling(
    served: ServedApp, fleet: SimulatedFleet, fault: Fault
) -> None:
    fleet.faults.next(1, fault, on="poll")  # the first read of the request: its status stream
    async with provider(served, status_updates="stream") as p:
        result = await p.invoke(probe())
    assert len(fleet.faults.injected) == 1
    assert result.output == {"echo": "hi"} and result.queue_ms is not None
    assert fleet.truth(str(result.request_id)).status is JobStatus.COMPLETED


async def test_subpath_submits_there_and_follows_the_app(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    async with provider(served, app_id="gpubench/echo/dev") as p:
        assert p.endpoint.endswith("/queue/gpubench/echo/dev")
        result = await p.invoke(probe())
    assert result.output == {"echo": "hi"}
    assert fleet.truth(str(result.request_id)).status is JobStatus.COMPLETED


async def test_a_failed_request_keeps_its_id_and_message(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    async with provider(served) as p:
        with pytest.raises(ServerHTTPError, match="model ran out of memory") as info:
            await p.invoke(probe(fail="model ran out of memory"))
    assert info.value.request_id == fleet.truths()[0].job_id
    assert fleet.truths()[0].status is JobStatus.FAILED


async def test_a_stream_that_fails_after_its_first_piece(served: ServedApp) -> None:
    async with provider(served) as p:
        with pytest.raises(ServerHTTPError, match="broke mid-way"):
            await p.invoke(
                Request(
                    seq=0,
                    payload={"chunks": 2, "sleep_ms": 60, "fail": "broke mid-way"},
                    stream=True,
                )
            )


async def test_streamed_pieces_arrive_as_events(served: ServedApp, fleet: SimulatedFleet) -> None:
    async with provider(served, mode="run") as p:
        result = await p.invoke(
            Request(seq=0, payload={"echo": "s", "chunks": 3, "sleep_ms": 90}, stream=True)
        )
    assert [e["chunk"] for e in result.output] == [0, 1, 2]
    assert result.output_units == 3 and result.request_id == fleet.truths()[0].job_id


async def test_submit_throttling_carries_retry_after(served: ServedApp) -> None:
    async with provider(served) as p:
        for _ in range(50):  # the emulator's 50 submits per second
            await p.client.post(
                f"{served.url}/queue/{APP}", json={"sleep_ms": 0}, headers=p.auth_headers()
            )
        with pytest.raises(ThrottledError) as info:
            await p.invoke(probe())
    assert info.value.status_code == 429 and info.value.retry_after_s == 1.0


async def test_an_http_date_retry_after_is_read_as_seconds(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    """Retry-After may be an HTTP date (RFC 9110); the core's parser reads it, where fal's
    own copy used to give None."""
    fleet.faults.next(1, Fault.throttle(retry_after_s=30, as_date=True))
    async with provider(served) as p:
        with pytest.raises(ThrottledError, match=f"POST .*/queue/{APP}: HTTP 429 Too Many") as info:
            await p.invoke(probe())
    assert info.value.retry_after_s is not None and 28 < info.value.retry_after_s <= 30


async def test_a_status_read_waits_out_an_http_date_retry_after(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    """A 429 to a status read, with Retry-After as a date 3 s ahead: the request still
    succeeds, 2 s or more later (fal's own parser gave None, so it waited 0.03 s)."""
    fleet.faults.next(1, Fault.throttle(retry_after_s=3, as_date=True), on="poll")
    async with provider(served) as p:
        started = time.monotonic()
        result = await p.invoke(probe(sleep_ms=0))
        elapsed_s = time.monotonic() - started
    assert result.output == {"echo": "hi"} and len(fleet.faults.injected) == 1
    assert elapsed_s >= 2.0


async def test_status_reads_outlive_a_passing_throttle(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    fleet.faults.next(2, Fault.throttle(retry_after_s=0.05), on="poll")
    async with provider(served) as p:
        result = await p.invoke(probe())
    assert result.output == {"echo": "hi"} and len(fleet.faults.injected) == 2


async def test_cancel_answers_as_fal_does(served: ServedApp, fleet: SimulatedFleet) -> None:
    headers = {"Authorization": f"Key {KEY}"}
    async with httpx.AsyncClient(base_url=f"{served.url}/queue") as client:
        submitted = (await client.post(f"/{APP}", json={"sleep_ms": 10}, headers=headers)).json()
        assert submitted["status_url"].endswith(
            f"/queue/{APP}/requests/{submitted['request_id']}/status"
        )
        queued = await client.get(submitted["status_url"], headers=headers)
        assert queued.status_code == 202 and queued.json()["status"] == "IN_QUEUE"
        assert queued.json()["queue_position"] == 0
        while (await client.get(submitted["status_url"], headers=headers)).status_code == 202:
            pass
        late = await client.put(submitted["cancel_url"], headers=headers)
        assert late.status_code == 400 and late.json()["status"] == "ALREADY_COMPLETED"
        running = (await client.post(f"/{APP}", json={"sleep_ms": 5000}, headers=headers)).json()
        await asyncio.to_thread(fleet.wait_for, lambda c: c.running == 1, 10)
        waiting = (await client.post(f"/{APP}", json={"sleep_ms": 5}, headers=headers)).json()
        assert waiting["status"] == "IN_QUEUE" and waiting["queue_position"] == 0  # 1 runner
        removed = await client.put(waiting["cancel_url"], headers=headers)
        assert removed.status_code == 200 and removed.json()["status"] == "OK"
        answer = await client.put(running["cancel_url"], headers=headers)
        assert answer.status_code == 202 and answer.json()["status"] == "CANCELLATION_REQUESTED"
        status = (await client.get(running["status_url"], headers=headers)).json()
        assert status["status"] == "COMPLETED" and status["error_type"] == "request_cancelled"
        unknown = await client.put(f"/{APP}/requests/no-such-id/cancel", headers=headers)
        assert unknown.status_code == 404 and unknown.json()["status"] == "NOT_FOUND"
        bearer = await client.get(
            submitted["status_url"], headers={"Authorization": f"Bearer {KEY}"}
        )
        assert bearer.status_code == 401  # fal's scheme is Key, not Bearer


@pytest.mark.parametrize("mode", ["queue", "run"])
async def test_a_request_not_started_in_time_is_a_timeout(
    served: ServedApp, fleet: SimulatedFleet, mode: str
) -> None:
    """``start_timeout_s`` (X-Fal-Request-Timeout): fal gives up on a request still queued."""
    async with provider(served, mode=mode, start_timeout_s=1.2) as p:
        busy = asyncio.create_task(p.invoke(probe(0, sleep_ms=3000)))
        await asyncio.to_thread(fleet.wait_for, lambda c: c.running == 1, 10)
        with pytest.raises(RequestTimeoutError, match="X-Fal-Request-Timeout"):
            await p.invoke(probe(1))
        busy.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await busy
    assert fleet.truths()[1].status is JobStatus.CANCELLED


def test_plugin_is_registered_and_options_are_validated() -> None:
    (info,) = [i for i in list_plugins() if i.name == "fal"]
    assert info.ok and info.distribution is not None
    assert info.distribution.startswith("gpubench-fal")
    assert "streaming" in info.capabilities and "billing" in info.capabilities
    with pytest.raises(ConfigError, match="app_id"):
        load_provider("fal", app_id="no-owner")
    with pytest.raises(ConfigError, match="status_updates"):
        load_provider("fal", app_id="a/b", status_updates="sometimes")
    p = load_provider("fal", app_id="fal-ai/flux/dev", api_key="fal_secret_value_123")
    assert p.endpoint == "https://queue.fal.run/fal-ai/flux/dev"
    assert p.auth_headers() == {"Authorization": "Key fal_secret_value_123"}
    assert "fal_secret_value_123" not in repr(p.options) + str(p.options.public()) + repr(p)
