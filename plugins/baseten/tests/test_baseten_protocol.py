"""Baseten protocol details beyond the conformance suite, over loopback HTTP to the emulator:
``async_predict`` with status polling, streaming, the management API and option checks."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from gpubench_baseten import BasetenProvider
from gpubench_baseten.emulator import make_app

from gpubench_sdk import (
    ClientHTTPError,
    ConfigError,
    Request,
    ScalingSettings,
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
    quick_fleet,
    serve,
)

pytestmark = pytest.mark.anyio
KEY = "bt_protocol_71c3e9a2"
MODEL, DEP = "m0del1", "dep1oy1"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


fleet = fleet_fixture(0.3, max_workers=1, idle_timeout_s=1, max_queue=2)


@pytest.fixture
def served(fleet: SimulatedFleet) -> Iterator[ServedApp]:
    limits = {"async_predict": 200, "async_request": 20}
    app = make_app(fleet, api_key=KEY, model_id=MODEL, deployment_id=DEP, rate_limits=limits)
    with serve(app) as served:
        yield served


def provider(served: ServedApp, **options: Any) -> BasetenProvider:
    defaults = {"poll_interval_s": 0.06, "poll_max_interval_s": 0.06, "cold_threshold_ms": 150}
    return BasetenProvider(
        api_key=KEY,
        model_id=MODEL,
        base_url=served.url,
        api_url=served.url,
        **{**defaults, **options},
    )


def probe(seq: int = 0, **payload: Any) -> Request:
    return Request(seq=seq, payload={"echo": "hi", "sleep_ms": 80, **payload})


async def test_async_times_come_from_baseten_timestamps(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    async with provider(served, mode="async") as p:
        cold = await p.invoke(probe(0))
        warm = await p.invoke(probe(1))
    for result in (cold, warm):
        truth = fleet.truth(str(result.request_id))
        assert result.output is None and result.detail == {
            "status": "SUCCEEDED",
            "webhook_status": "PENDING",
        }
        assert truth.queue_ms is not None and result.queue_ms is not None
        assert abs(result.queue_ms - truth.queue_ms) < 1.0, (result.queue_ms, truth)
        assert truth.execution_ms is not None and result.execution_ms is not None
        assert abs(result.execution_ms - truth.execution_ms) < 1.0
    assert (cold.cold, warm.cold) == (True, False)


async def test_async_failure_names_the_request(served: ServedApp, fleet: SimulatedFleet) -> None:
    async with provider(served, mode="async") as p:
        with pytest.raises(
            ServerHTTPError, match=r"MODEL_PREDICT_ERROR.*CUDA out of memory"
        ) as info:
            await p.invoke(probe(fail="CUDA out of memory"))
    assert info.value.request_id == fleet.truths()[0].job_id


async def test_abandoned_async_requests(served: ServedApp, fleet: SimulatedFleet) -> None:
    """Baseten cancels a request still QUEUED; one already IN_PROGRESS runs to its end."""
    async with provider(served, mode="async") as p:
        # long enough that the queued one is still queued when its cancel lands (loaded CI)
        running = asyncio.create_task(p.invoke(probe(0, sleep_ms=3000)))
        await asyncio.to_thread(fleet.wait_for, lambda c: c.running == 1, 10)
        queued = asyncio.create_task(p.invoke(probe(1)))
        await asyncio.to_thread(fleet.wait_for, lambda c: c.queued == 1, 10)
        for task in (queued, running):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    first, second = fleet.truths()
    for _ in range(50):  # the DELETE may still be on its way: up to 2.5 s
        if fleet.truth(second.job_id).status is not JobStatus.QUEUED:
            break
        await asyncio.sleep(0.05)
    assert fleet.truth(second.job_id).status is JobStatus.CANCELLED
    fleet.wait_for(lambda c: c.completed == 1, 10)
    assert fleet.truth(first.job_id).status is JobStatus.COMPLETED


async def test_a_full_queue_is_429(served: ServedApp, fleet: SimulatedFleet) -> None:
    async with provider(served) as p:
        tasks = [asyncio.create_task(p.invoke(probe(0, sleep_ms=600)))]
        await asyncio.to_thread(fleet.wait_for, lambda c: c.running == 1, 10)
        tasks += [asyncio.create_task(p.invoke(probe(i, sleep_ms=10))) for i in (1, 2)]
        await asyncio.to_thread(fleet.wait_for, lambda c: c.queued == 2, 10)
        with pytest.raises(ThrottledError) as info:
            await p.invoke(probe(9))
        assert info.value.retry_after_s == 1.0 and "queue is full" in str(info.value)
        await asyncio.gather(*tasks)


async def test_status_reads_outlive_the_rate_limit() -> None:
    """Status reads past the limit (Baseten: 20 a second; here 2) get 429 with Retry-After: the
    provider waits it out and the request still succeeds, a second or more later."""
    fleet = quick_fleet(0.05, max_workers=1)
    app = make_app(fleet, api_key=KEY, model_id=MODEL, rate_limits={"async_request": 2})
    with serve(app) as served:
        started = time.monotonic()
        async with provider(
            served, mode="async", poll_interval_s=0.01, poll_max_interval_s=0.01
        ) as p:
            result = await p.invoke(probe(sleep_ms=300))
        elapsed_s = time.monotonic() - started
    assert result.detail is not None and result.detail["status"] == "SUCCEEDED"
    assert elapsed_s >= 1.0  # at least one Retry-After: 1 was waited out


async def test_an_http_date_retry_after_is_waited_out(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    """A status read answered 429 with ``Retry-After`` as an HTTP date (RFC 9110) waits until
    that date, where Baseten's own copy of the parser gave None and waited 0.06 s."""
    fleet.faults.next(1, Fault.throttle(retry_after_s=3, as_date=True), on="poll")
    async with provider(served, mode="async") as p:
        started = time.monotonic()
        result = await p.invoke(probe(sleep_ms=0))
        elapsed_s = time.monotonic() - started
    assert result.detail is not None and result.detail["status"] == "SUCCEEDED"
    assert len(fleet.faults.injected) == 1
    assert elapsed_s >= 2.0  # the date is 3 s ahead in whole seconds: 2 to 3 s from now


async def test_an_error_names_the_call_and_keeps_baseten_s_body(served: ServedApp) -> None:
    async with provider(served, environment="staging") as p:
        with pytest.raises(ClientHTTPError) as info:
            await p.invoke(probe())
    message = str(info.value)
    assert message.startswith("[baseten] POST ") and "/environments/staging/predict" in message
    assert "HTTP 404 Not Found: " in message and '"error_code"' in message


async def test_a_streamed_predict(served: ServedApp, fleet: SimulatedFleet) -> None:
    async with provider(served) as p:
        result = await p.invoke(
            Request(seq=0, payload={"echo": "s", "chunks": 3, "sleep_ms": 90}, stream=True)
        )
    lines = [json.loads(line) for line in result.output.splitlines()]
    assert [piece["chunk"] for piece in lines] == [0, 1, 2]
    assert result.request_id == fleet.truths()[0].job_id
    assert result.output_units is not None and result.output_units >= 1


async def test_settings_for_the_run_are_restored(served: ServedApp) -> None:
    async with provider(served, concurrency_target=4, scale_down_delay_s=30) as p:
        settings = await p._admin_or_fail("test").settings()
        assert (settings["concurrency_target"], settings["scale_down_delay"]) == (4, 30)
        await p.set_scaling(ScalingSettings(max_workers=2, idle_timeout_s=60))
    async with provider(served) as p:
        settings = await p._admin_or_fail("test").settings()
    assert (settings["concurrency_target"], settings["max_replica"]) == (1, 1)
    assert settings["scale_down_delay"] == 1


async def test_scaling_values_baseten_refuses(served: ServedApp) -> None:
    async with provider(served) as p:
        with pytest.raises(ConfigError, match="whole seconds"):
            await p.set_scaling(ScalingSettings(idle_timeout_s=1.5))
        with pytest.raises(ConfigError, match="scaling"):
            await p.set_scaling(ScalingSettings(min_workers=3))  # above max_replica 1


async def test_an_environment_other_than_production_needs_its_deployment(
    served: ServedApp,
) -> None:
    async with provider(served, environment="staging") as p:
        with pytest.raises(ConfigError, match="deployment_id"):
            await p.state()


def test_plugin_is_registered_and_options_are_validated() -> None:
    (info,) = [i for i in list_plugins() if i.name == "baseten"]
    assert info.ok and info.distribution is not None
    assert info.distribution.startswith("gpubench-baseten")
    for capability in ("streaming", "fleet_state", "cold_start_control", "scaling_settings"):
        assert capability in info.capabilities
    with pytest.raises(ConfigError, match="deployment_id"):
        load_provider("baseten", model_id="abc", deployment_id="d1", environment="staging")
    with pytest.raises(ConfigError, match="model_id"):
        load_provider("baseten", model_id="has spaces")
    p = load_provider("baseten", model_id="abc", api_key="bt_secret_value_123")
    assert p.endpoint == "https://model-abc.api.baseten.co/environments/production/predict"
    assert p.auth_headers() == {"Authorization": "Api-Key bt_secret_value_123"}
    assert "bt_secret_value_123" not in repr(p.options) + str(p.options.public()) + repr(p)
