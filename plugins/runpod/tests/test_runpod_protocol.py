"""RunPod protocol details beyond the conformance suite, over loopback HTTP to the emulator."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from typing import Any

import httpx
import pytest
from gpubench_runpod import RunPodProvider
from gpubench_runpod.emulator import make_app

from gpubench_sdk import (
    CapabilityError,
    ClientHTTPError,
    ConfigError,
    JobCancelledError,
    Outcome,
    Request,
    RequestTimeoutError,
    ScalingSettings,
    ServerHTTPError,
    ThrottledError,
    list_plugins,
    load_provider,
)
from gpubench_sdk.testing import (
    ASGIApp,
    Fault,
    JobStatus,
    ServedApp,
    SimulatedFleet,
    fleet_fixture,
    quick_fleet,
    serve,
    served_fixture,
)

pytestmark = pytest.mark.anyio
KEY = "rpa_protocol_test_8e2c4a"
EP = "ep-test"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


fleet = fleet_fixture(0.2, max_workers=2, idle_timeout_s=1)
served = served_fixture(make_app, api_key=KEY, endpoint_id=EP)


def provider(served: ServedApp, **options: Any) -> RunPodProvider:
    defaults = {
        "endpoint_id": EP,
        "base_url": f"{served.url}/v2",
        "rest_url": f"{served.url}/v1",
        "poll_interval_s": 0.01,
        "poll_max_interval_s": 0.05,
        "cold_threshold_ms": 100,
    }
    return RunPodProvider(api_key=KEY, **{**defaults, **options})


def probe(sleep_ms: float = 10, **extra: Any) -> Request:
    return Request(seq=0, payload={"echo": "x", "sleep_ms": sleep_ms, **extra})


def test_auth_accepts_bearer_and_bare_keys_and_refuses_others(served: ServedApp) -> None:
    url = f"{served.url}/v2/{EP}/health"
    assert httpx.get(url, headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
    assert httpx.get(url, headers={"Authorization": KEY}).status_code == 200
    assert httpx.get(url, headers={"Authorization": "Bearer nope"}).status_code == 401
    assert httpx.get(url).status_code == 401
    other = f"{served.url}/v2/other/health"
    assert httpx.get(other, headers={"Authorization": KEY}).status_code == 404


def test_emulator_bodies_use_runpod_names_and_units(served: ServedApp) -> None:
    auth = {"Authorization": f"Bearer {KEY}"}
    base = f"{served.url}/v2/{EP}"
    health = httpx.get(f"{base}/health", headers=auth).json()
    assert set(health["jobs"]) == {"completed", "failed", "inProgress", "inQueue", "retried"}
    assert set(health["workers"]) == {
        "idle",
        "initializing",
        "ready",
        "running",
        "throttled",
        "unhealthy",
    }
    job = httpx.post(f"{base}/runsync?wait=5000", json={"input": {"sleep_ms": 20}}, headers=auth)
    body = job.json()
    assert body["status"] == "COMPLETED" and isinstance(body["delayTime"], int)
    assert body["executionTime"] >= 20 and body["delayTime"] >= 190  # includes the 0.2 s boot
    assert body["workerId"] and body["output"] == {"echo": None}
    bad_wait = httpx.post(f"{base}/runsync?wait=10", json={"input": {}}, headers=auth)
    assert bad_wait.status_code == 400 and "wait" in bad_wait.json()["error"]
    assert httpx.post(f"{base}/run", json={"nope": 1}, headers=auth).status_code == 400
    unknown = httpx.get(f"{base}/status/does-not-exist", headers=auth)
    assert unknown.status_code == 404
    rest = httpx.get(f"{served.url}/v1/endpoints/{EP}", headers=auth).json()
    assert (rest["workersMin"], rest["workersMax"], rest["idleTimeout"]) == (0, 2, 1)


async def test_runsync_falls_back_to_polling_a_pending_job(fleet: SimulatedFleet) -> None:
    # The service lets go after ~90 s; this emulator after 150 ms.
    with serve(make_app(fleet, api_key=KEY, endpoint_id=EP, runsync_cap_ms=150)) as served:
        async with provider(served, mode="runsync", runsync_wait_ms=1000) as p:
            result = await p.invoke(probe(sleep_ms=400))
    assert result.output == {"echo": "x"}
    assert fleet.faults.count("submit") == 1 and fleet.faults.count("poll") >= 1
    assert result.execution_ms is not None and result.execution_ms >= 400


async def test_a_passing_poll_error_does_not_fail_the_job(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    fleet.faults.next(1, Fault.server_error(502), on="poll")
    fleet.faults.next(1, Fault.throttle(0.01), on="poll")
    async with provider(served) as p:
        result = await p.invoke(probe(sleep_ms=300))
    assert result.output == {"echo": "x"} and len(fleet.faults.injected) == 2


async def test_an_http_date_retry_after_is_waited_out(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    """A poll answered 429 with ``Retry-After`` as an HTTP date (RFC 9110) waits until that
    date, where RunPod's own copy of the parser gave None and waited 0.05 s."""
    fleet.faults.next(1, Fault.throttle(retry_after_s=3, as_date=True), on="poll")
    async with provider(served) as p:
        started = time.monotonic()
        result = await p.invoke(probe(sleep_ms=0))
        elapsed_s = time.monotonic() - started
    assert result.output == {"echo": "x"} and len(fleet.faults.injected) == 1
    assert elapsed_s >= 2.0  # the date is 3 s ahead in whole seconds: 2 to 3 s from now


async def test_persistent_poll_errors_fail_and_cancel_the_job(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    fleet.faults.next(10, Fault.server_error(503), on="poll")
    async with provider(served) as p:
        with pytest.raises(ServerHTTPError) as info:
            await p.invoke(probe(sleep_ms=10_000))
    assert info.value.status_code == 503
    await asyncio.to_thread(fleet.wait_for, lambda c: c.cancelled == 1, 5)


async def test_job_states_map_into_the_taxonomy(served: ServedApp, fleet: SimulatedFleet) -> None:
    async with provider(served) as p:
        with pytest.raises(ServerHTTPError, match="job FAILED: bad prompt"):
            await p.invoke(probe(fail="bad prompt"))
    async with provider(served, execution_timeout_ms=50) as p:
        with pytest.raises(RequestTimeoutError, match="TIMED_OUT"):
            await p.invoke(probe(sleep_ms=2000))
    async with provider(served) as p:
        task = asyncio.create_task(p.invoke(probe(sleep_ms=5000)))
        await asyncio.to_thread(fleet.wait_for, lambda c: c.running == 1, 5)
        running = next(t for t in fleet.truths() if t.status is JobStatus.RUNNING)
        fleet.cancel(running.job_id)  # cancelled by someone else, e.g. in the console
        with pytest.raises(JobCancelledError) as info:
            await task
    assert info.value.outcome is Outcome.CANCELLED


async def test_a_full_queue_is_throttled() -> None:
    fleet = quick_fleet(0.1, max_workers=1, max_queue=1)
    with serve(make_app(fleet, api_key=KEY, endpoint_id=EP)) as served:
        async with provider(served) as p:
            results = await asyncio.gather(
                *(p.invoke(probe(sleep_ms=100)) for _ in range(3)), return_exceptions=True
            )
    throttled = [r for r in results if isinstance(r, ThrottledError)]
    assert len(throttled) == 2 and all(t.status_code == 429 for t in throttled)


async def test_stream_collects_every_chunk_once(served: ServedApp, fleet: SimulatedFleet) -> None:
    async with provider(served) as p:
        result = await p.invoke(
            Request(seq=0, payload={"echo": "s", "sleep_ms": 200, "chunks": 4}, stream=True)
        )
    assert result.output == [{"chunk": i, "echo": "s"} for i in range(4)]
    assert result.queue_ms is not None and result.execution_ms is not None
    assert fleet.truth(str(result.request_id)).chunks == 4


async def test_cold_is_inferred_from_delay_or_known_after_ensure_cold(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    async with provider(served, cold_threshold_ms=5_000) as p:
        first = await p.invoke(probe())  # a 0.2 s boot is under the threshold: not flagged
        check = await p.ensure_cold(10)
        after = await p.invoke(probe())
        warm = await p.invoke(probe())
    assert fleet.truth(str(first.request_id)).cold and first.cold is False
    assert check.confirmed and "idleTimeout=1s" in check.how
    assert after.cold is True and fleet.truth(str(after.request_id)).cold
    assert warm.cold is False


async def test_ensure_cold_gives_up_unconfirmed_while_a_job_runs(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    async with provider(served) as p:
        task = asyncio.create_task(p.invoke(probe(sleep_ms=3000)))
        for _ in range(500):  # the job reaches the fleet first (a loaded machine can delay it)
            if fleet.truths():
                break
            await asyncio.sleep(0.01)
        check = await p.ensure_cold(0.5)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert not check.confirmed and "timed out" in check.how


async def test_scaling_validation_and_restore(served: ServedApp, fleet: SimulatedFleet) -> None:
    async with provider(served) as p:
        with pytest.raises(ConfigError, match="whole seconds"):
            await p.set_scaling(ScalingSettings(idle_timeout_s=1.5))
        with pytest.raises(ConfigError, match="scaling"):
            await p.set_scaling(ScalingSettings(min_workers=5))  # above workersMax 2
        await p.set_scaling(ScalingSettings(max_workers=1, idle_timeout_s=7))
        assert fleet.scaling == ScalingSettings(0, 1, 7)
        state = await p.state()
        assert state.detail["workers"]["idle"] == 0
    assert fleet.scaling == ScalingSettings(0, 2, 1)


async def test_wrong_endpoint_is_a_client_error(served: ServedApp) -> None:
    async with provider(served, endpoint_id="missing") as p:
        with pytest.raises(ClientHTTPError) as info:
            await p.invoke(probe())
    assert info.value.status_code == 404


def test_plugin_is_registered_and_options_are_validated() -> None:
    (info,) = [i for i in list_plugins() if i.name == "runpod"]
    assert info.ok and info.distribution is not None
    assert info.distribution.startswith("gpubench-runpod")
    assert "cold_start_control" in info.capabilities
    with pytest.raises(ConfigError, match="endpoint_id"):
        load_provider("runpod", endpoint_id="has spaces")
    with pytest.raises(ConfigError, match="mode"):
        load_provider("runpod", endpoint_id="ok", mode="sometimes")
    p = load_provider("runpod", endpoint_id="abc", api_key="rpa_secret_value_123")
    assert p.endpoint == "https://api.runpod.ai/v2/abc"
    assert "rpa_secret_value_123" not in repr(p.options) + str(p.options.public())


async def test_billing_model_prices_the_fleets_worker_lifetimes(fleet: SimulatedFleet) -> None:
    with serve(make_app(fleet, api_key=KEY, endpoint_id=EP)) as served:
        async with provider(served) as p:
            await asyncio.gather(*(p.invoke(probe(sleep_ms=150)) for _ in range(4)))
    # the server stopped: every worker's life is over. RunPod bills each whole life, per second.
    lives_s = [b.stopped_s - b.started_s for b in fleet.billing.workers if b.stopped_s]
    assert len(lives_s) == 2
    model = RunPodProvider.capabilities.billing
    assert model is not None
    assert fleet.billing.billed_s(model, 0.0) == sum(math.ceil(s) for s in lives_s)


async def test_rate_limit_per_operation_is_throttled(fleet: SimulatedFleet) -> None:
    with serve(make_app(fleet, api_key=KEY, endpoint_id=EP, rate_limits={"run": 3})) as served:
        async with provider(served) as p:
            for _ in range(3):  # /status polls have their own (default) budget
                await p.invoke(probe())
            with pytest.raises(ThrottledError) as info:
                await p.invoke(probe())
    assert info.value.status_code == 429 and info.value.retry_after_s is None
    assert "rate limit exceeded for /run" in str(info.value)


async def test_server_timings_are_the_emulators_truth(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    async with provider(served) as p:
        results = [await p.invoke(probe(sleep_ms=30)) for _ in range(3)]
    for result in results:
        truth = fleet.truth(str(result.request_id))
        assert result.execution_ms is not None and truth.execution_ms is not None
        assert abs(result.execution_ms - truth.execution_ms) <= 2  # sent in whole ms
        assert result.worker_id == truth.worker_id


async def test_base_url_may_name_the_endpoint(served: ServedApp, fleet: SimulatedFleet) -> None:
    async with provider(served, endpoint_id=None, base_url=f"{served.url}/v2/{EP}/") as p:
        assert p.endpoint_id == EP and p.capabilities.cold_start_control
        result = await p.invoke(probe())
        state = await p.state()
    assert result.output == {"echo": "x"} and state.detail["jobs"]["completed"] == 1


def test_the_hosted_api_needs_an_endpoint_id() -> None:
    with pytest.raises(ConfigError, match="endpoint_id") as info:
        load_provider("runpod", api_key="rpa_x_123456")
    assert "localhost:8000" in str(info.value)  # says how to reach the local server instead
    p = load_provider("runpod", base_url="https://api.runpod.ai/v2/abc123")
    assert p.endpoint == "https://api.runpod.ai/v2/abc123"
    local = load_provider("runpod", base_url="http://localhost:8000")
    assert local.capabilities.names() == ["streaming"]


async def test_without_an_endpoint_there_is_nothing_to_manage() -> None:
    async with RunPodProvider(base_url="http://127.0.0.1:9") as p:
        with pytest.raises(CapabilityError, match="needs an endpoint_id"):
            await p.state()
        with pytest.raises(CapabilityError, match="needs an endpoint_id"):
            await p.ensure_cold(1)


def posting_status(app: ASGIApp, refused: list[str]) -> ASGIApp:
    """``app`` behind a server that polls with POST only, as runpod's local API server does."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and ("/status/" in scope["path"] or "/stream/" in scope["path"]):
            if scope["method"] == "GET":
                refused.append(scope["path"])
                await send({"type": "http.response.start", "status": 405, "headers": []})
                await send({"type": "http.response.body", "body": b'{"detail":"no GET"}'})
                return
            scope = {**scope, "method": "GET"}
        await app(scope, receive, send)

    return wrapped


async def test_auto_polling_switches_to_post_once_on_405(fleet: SimulatedFleet) -> None:
    refused: list[str] = []
    with serve(posting_status(make_app(fleet, api_key=KEY, endpoint_id=EP), refused)) as served:
        async with provider(served) as p:
            results = [await p.invoke(probe()) for _ in range(3)]
            streamed = await p.invoke(Request(seq=0, payload={"chunks": 2}, stream=True))
        assert all(r.output == {"echo": "x"} for r in results) and len(streamed.output) == 2
        assert len(refused) == 1  # one GET refused, then POST for good
        async with provider(served, poll_method="GET") as p:
            with pytest.raises(ClientHTTPError) as info:
                await p.invoke(probe())
    error = info.value
    assert error.status_code == 405 and error.request_id is not None
    where = f"GET {served.url}/v2/{EP}/status/{error.request_id}"
    assert f'{where}: HTTP 405 Method Not Allowed: {{"detail":"no GET"}}' in str(error)


def test_emulator_polls_with_get_only(served: ServedApp) -> None:
    auth = {"Authorization": f"Bearer {KEY}"}
    base = f"{served.url}/v2/{EP}"
    job = httpx.post(f"{base}/run", json={"input": {}}, headers=auth).json()
    assert httpx.post(f"{base}/status/{job['id']}", headers=auth).status_code == 405
    assert httpx.post(f"{base}/stream/{job['id']}", headers=auth).status_code == 405
    assert httpx.post(f"{base}/health", headers=auth).status_code == 405
    assert httpx.get(f"{base}/cancel/{job['id']}", headers=auth).status_code == 405
