"""Replicate specifics the conformance suite does not reach: the fall-back from ``Prefer: wait``
to polling, ``Cancel-After`` deadlines (``aborted``/``canceled``), the throttle body, SSE,
predictions cancelled by someone else, ``Token`` auth, billing per target kind, options."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from gpubench_replicate import (
    PRIVATE_BILLING,
    PUBLIC_MODEL_BILLING,
    ReplicateProvider,
)
from gpubench_replicate.emulator import (
    DEFAULT_DEPLOYMENT,
    DEFAULT_MODEL,
    DEFAULT_VERSION,
    make_app,
    parse_duration_s,
)

from gpubench_sdk import (
    ColdTimeoutError,
    ConfigError,
    JobCancelledError,
    Request,
    RequestTimeoutError,
    ServerHTTPError,
    ThrottledError,
    validate_options,
)
from gpubench_sdk.testing import (
    Fault,
    JobStatus,
    ServedApp,
    SimulatedFleet,
    quick_fleet,
    serve,
    served_fixture,
)

KEY = "r8_protocol_test_8d2e4f"


def _fleet(cold_start_s: float = 0.05) -> SimulatedFleet:
    return quick_fleet(cold_start_s, max_workers=2)


@pytest.fixture
def fleet() -> SimulatedFleet:
    return _fleet()


served = served_fixture(make_app, api_key=KEY, wait_cap_s=0.1)


def _provider(served: ServedApp, **options: Any) -> ReplicateProvider:
    base: dict[str, Any] = {"model": DEFAULT_MODEL, "poll_interval_s": 0.01}
    return ReplicateProvider(api_key=KEY, base_url=f"{served.url}/v1", **{**base, **options})


def _probe(sleep_ms: float, **extra: Any) -> Request:
    payload = {"echo": "x", "sleep_ms": sleep_ms, **extra}
    return Request(seq=0, payload=payload, stream=bool(extra.get("chunks")))


async def _invoke(provider: ReplicateProvider, request: Request) -> Any:
    async with provider:
        return await provider.invoke(request)


def test_wait_falls_back_to_polling_and_reads_seconds_as_ms(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    # The emulator lets Prefer: wait go after 0.1 s: a 400 ms prediction must then be polled.
    result = asyncio.run(_invoke(_provider(served), _probe(400)))
    assert result.output == {"echo": "x"}
    assert fleet.faults.count("poll") >= 1, "never polled after the incomplete answer"
    truth = fleet.truth(result.request_id)
    assert result.execution_ms == pytest.approx(truth.execution_ms, abs=5)
    assert 395 <= result.execution_ms < 600  # predict_time is seconds on the wire
    assert result.queue_ms == pytest.approx(truth.queue_ms, abs=5)


def test_cancel_after_is_sent_and_a_running_prediction_times_out(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    provider = _provider(served, mode="poll", timeout_s=1)
    with pytest.raises(RequestTimeoutError, match="Cancel-After"):
        asyncio.run(_invoke(provider, _probe(5000)))
    (truth,) = fleet.truths()
    assert truth.status is JobStatus.CANCELLED and truth.execution_ms is not None
    assert truth.execution_ms < 1500  # ended by the deadline, not by the model


def test_a_prediction_that_never_started_is_aborted() -> None:
    fleet = _fleet(cold_start_s=5.0)  # the instance boots longer than the deadline
    with serve(make_app(fleet, api_key=KEY)) as served:
        provider = _provider(served, mode="poll", timeout_s=1)
        with pytest.raises(ColdTimeoutError, match="aborted") as info:
            asyncio.run(_invoke(provider, _probe(10)))
    assert info.value.outcome.value == "cold_timeout"
    assert fleet.truths()[0].status is JobStatus.CANCELLED


def test_throttle_body_and_retry_after(served: ServedApp, fleet: SimulatedFleet) -> None:
    fleet.faults.next(1, Fault.throttle(retry_after_s=7))
    with pytest.raises(ThrottledError, match="Request was throttled") as info:
        asyncio.run(_invoke(_provider(served), _probe(10)))
    assert info.value.retry_after_s == 7 and info.value.status_code == 429
    fleet.faults.next(1, Fault.throttle())
    with pytest.raises(ThrottledError) as info:
        asyncio.run(_invoke(_provider(served), _probe(10)))
    assert info.value.retry_after_s is None
    # Retry-After as an HTTP date (RFC 9110): the seconds left, where the old parser gave None;
    # the core's wording: the call named, then Replicate's problem detail
    fleet.faults.next(1, Fault.throttle(30, as_date=True))
    with pytest.raises(ThrottledError) as info:
        asyncio.run(_invoke(_provider(served), _probe(10)))
    assert str(info.value).startswith(f"[replicate] POST {served.url}/")
    assert ": HTTP 429 Too Many Requests: Request was throttled" in str(info.value)
    assert info.value.retry_after_s is not None and 27 <= info.value.retry_after_s <= 30


def test_sse_stream_gives_every_chunk_and_the_first_byte(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    async def go() -> tuple[Any, int, int]:
        start = time.perf_counter_ns()
        result = await _invoke(_provider(served), _probe(300, chunks=3))
        return result, start, time.perf_counter_ns()

    result, start, end = asyncio.run(go())
    assert result.output == [{"chunk": i, "echo": "x"} for i in range(3)]
    # the first output event comes a third of the way through the execution, not at the end
    assert result.first_byte_ns is not None
    assert start + 80e6 <= result.first_byte_ns <= end - 150e6
    assert fleet.truth(result.request_id).chunks == 3


def test_a_prediction_cancelled_by_someone_else_is_cancelled(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    async def go() -> None:
        task = asyncio.create_task(_invoke(_provider(served, mode="poll"), _probe(3000)))
        await asyncio.to_thread(fleet.wait_for, lambda c: c.running == 1, 10)
        await asyncio.to_thread(fleet.cancel, fleet.truths()[0].job_id)
        await task

    with pytest.raises(JobCancelledError) as info:
        asyncio.run(go())
    assert info.value.outcome.value == "cancelled"


def test_a_failed_poll_or_stream_names_the_prediction_and_cancels_it(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    """Polling outlives three errors in a row, not four; the error that ends it, like a
    stream's, names the prediction it was reading, and that prediction is cancelled."""
    fleet.faults.next(4, Fault.server_error(502), on="poll")
    provider = _provider(served, mode="poll", poll_max_interval_s=0.02)
    with pytest.raises(ServerHTTPError) as info:
        asyncio.run(_invoke(provider, _probe(3000)))
    (polled,) = fleet.truths()
    assert info.value.status_code == 502 and info.value.request_id == polled.job_id
    fleet.wait_for(lambda c: c.cancelled == 1, 5)

    fleet.faults.next(1, Fault.server_error(503), on="poll")  # GET urls.stream
    with pytest.raises(ServerHTTPError) as info:
        asyncio.run(_invoke(_provider(served), _probe(3000, chunks=3)))
    streamed = fleet.truths()[-1]
    assert streamed.job_id != polled.job_id
    assert info.value.status_code == 503 and info.value.request_id == streamed.job_id
    fleet.wait_for(lambda c: c.cancelled == 2, 5)


def test_emulator_accepts_token_and_bearer_and_refuses_others(served: ServedApp) -> None:
    url = f"{served.url}/v1/models/{DEFAULT_MODEL}/predictions"
    body = {"input": {"echo": "x"}}
    for scheme, status in (("Token", 201), ("Bearer", 201), ("Basic", 401)):
        response = httpx.post(url, json=body, headers={"Authorization": f"{scheme} {KEY}"})
        assert response.status_code == status, (scheme, response.text)
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json() == {
        "title": "Unauthenticated",
        "detail": "You did not pass a valid authentication token",
        "status": 401,
    }
    got = httpx.post(url, json=body, headers={"Authorization": f"Token {KEY}"}).json()
    # without Prefer: wait, the prediction comes back at once, not yet finished
    assert got["status"] in ("starting", "processing") and got["urls"]["stream"]
    assert got["created_at"].endswith("Z") and got["metrics"] == {}


def test_prefer_and_cancel_after_are_validated(served: ServedApp) -> None:
    url = f"{served.url}/v1/models/{DEFAULT_MODEL}/predictions"
    auth = {"Authorization": f"Bearer {KEY}"}
    body = {"input": {"echo": "x"}}
    bad_wait = httpx.post(url, json=body, headers={**auth, "Prefer": "wait=61"})
    assert bad_wait.status_code == 400 and "Prefer" in bad_wait.json()["detail"]
    bad_deadline = httpx.post(url, json=body, headers={**auth, "Cancel-After": "soon"})
    assert bad_deadline.status_code == 400
    assert parse_duration_s("1m30s") == 90 and parse_duration_s("5") == 5
    assert parse_duration_s("1x") is None


def test_billing_is_declared_per_target_kind() -> None:
    assert ReplicateProvider(model="a/b").capabilities.billing is PUBLIC_MODEL_BILLING
    assert ReplicateProvider(version="abc").capabilities.billing is PUBLIC_MODEL_BILLING
    private = ReplicateProvider(model="a/b", private=True)
    assert private.capabilities.billing is PRIVATE_BILLING
    assert ReplicateProvider(deployment="a/b").capabilities.billing is PRIVATE_BILLING
    assert PUBLIC_MODEL_BILLING.billed_phases == frozenset({"execution"})
    assert ReplicateProvider.capabilities.billing is PRIVATE_BILLING  # the class: the most


@pytest.mark.parametrize(
    "options",
    [{}, {"model": "a/b", "deployment": "c/d"}, {"model": "not-a-name"}],
)
def test_bad_target_options_name_the_fields(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as info:
        validate_options(ReplicateProvider.Options, options, "targets[0]")
    assert "model" in str(info.value)


def test_cold_inference_needs_a_long_start_against_the_warm_baseline() -> None:
    provider = ReplicateProvider(model="a/b", cold_threshold_ms=1000, cold_factor=3)
    assert provider._infer_cold(None) is None
    assert provider._infer_cold(400) is False
    assert provider._infer_cold(1100) is False  # above the threshold, below 3x the 400 ms median
    assert provider._infer_cold(5000) is True
    assert ReplicateProvider(version=DEFAULT_VERSION).endpoint.endswith("/predictions")
    assert ReplicateProvider(deployment=DEFAULT_DEPLOYMENT).endpoint.endswith(DEFAULT_DEPLOYMENT)
