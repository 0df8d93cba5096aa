"""Modal's web endpoint protocol over loopback HTTP against the emulator: the 303 result-URL
redirect chain (followed with GET, the call id kept), its limit, proxy-auth refusals, and
token halves kept out of errors."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from gpubench_modal import ModalProvider
from gpubench_modal.emulator import CALL_ID_PARAM, make_app

from gpubench_sdk import (
    ClientHTTPError,
    Request,
    RequestTimeoutError,
    ScalingSettings,
    ServerHTTPError,
    ThrottledError,
    TransportError,
)
from gpubench_sdk.testing import (
    Fault,
    ServedApp,
    SimulatedFleet,
    fleet_fixture,
    served_fixture,
)

TOKEN = "wk-proto4b2e9c:ws-proto7d1f3a8e"


fleet = fleet_fixture(0.05, max_workers=2)
served = served_fixture(make_app, api_key=TOKEN, redirect_after_s=0.1)


def invoke(served: ServedApp, sleep_ms: float, **options: Any) -> Any:
    async def go() -> Any:
        provider = ModalProvider(api_key=TOKEN, url=served.url + "/generate", **options)
        async with provider:
            return await provider.invoke(
                Request(seq=0, payload={"echo": "hi", "sleep_ms": sleep_ms})
            )

    return asyncio.run(go())


def test_a_long_call_is_followed_through_several_result_url_redirects(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    result = invoke(served, 450)  # 0.1 s per answer: four or five 303s
    (truth,) = fleet.truths()
    assert result.output == {"echo": "hi"} and result.request_id == truth.job_id
    assert result.http_status == 200
    # one POST, then a GET of the result URL per 0.1 s until the 0.5 s call was done
    assert fleet.faults.count("submit") == 1 and fleet.faults.count("poll") >= 3


def test_the_redirect_limit_names_the_call(served: ServedApp, fleet: SimulatedFleet) -> None:
    with pytest.raises(RequestTimeoutError) as info:
        invoke(served, 2000, max_redirects=2)
    assert info.value.request_id == fleet.truths()[0].job_id
    assert "max_redirects = 2" in str(info.value)


def test_a_failed_call_after_a_redirect_names_the_call(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    fleet.faults.next(1, Fault.job_failed(), on="job")
    with pytest.raises(ServerHTTPError) as info:
        invoke(served, 300)
    assert info.value.status_code == 500
    assert info.value.request_id == fleet.truths()[0].job_id


def test_the_emulator_speaks_modals_redirect(served: ServedApp) -> None:
    headers = {"Modal-Key": "wk-proto4b2e9c", "Modal-Secret": "ws-proto7d1f3a8e"}
    with httpx.Client(base_url=served.url, headers=headers) as client:
        first = client.post("/generate", json={"echo": "x", "sleep_ms": 400})
        assert first.status_code == 303
        call_id = first.headers["modal-function-call-id"]
        location = first.headers["location"]
        assert location.endswith(f"/generate?{CALL_ID_PARAM}={call_id}")
        again = client.post(location, json={})  # a result URL takes GET only
        assert again.status_code == 400 and "bad redirect method" in again.text
        done = client.get(location, follow_redirects=True)
        assert done.status_code == 200 and done.json() == {"echo": "x"}
        assert done.headers["modal-function-call-id"] == call_id
        missing = httpx.post(served.url + "/generate", json={})
        assert missing.status_code == 401
        assert missing.text == "modal-http: missing credentials for proxy authorization"


def test_a_429_on_the_result_url_reads_an_http_date_and_names_the_call(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    """Retry-After may be an HTTP date (RFC 9110): read through the core's parser as the
    seconds left (the plugin's own copy gave None); the error names the GET and the call."""
    fleet.faults.next(1, Fault.throttle(30, as_date=True), on="poll")
    with pytest.raises(ThrottledError) as info:
        invoke(served, 450)  # redirected after 0.1 s: the result URL's GET is throttled
    error = info.value
    assert error.request_id == fleet.truths()[0].job_id and error.status_code == 429
    assert str(error).startswith(f"[modal] GET {served.url}/generate: HTTP 429 Too Many Requests")
    assert error.retry_after_s is not None and 27 <= error.retry_after_s <= 30


def test_token_halves_never_appear_in_errors(served: ServedApp, fleet: SimulatedFleet) -> None:
    """Each half travels in its own header, so either may be echoed alone."""
    echoed = "bad header Modal-Secret: ws-proto7d1f3a8e (Modal-Key wk-proto4b2e9c)"
    fleet.faults.next(1, Fault.server_error(500, body=echoed), on="submit")
    with pytest.raises(ServerHTTPError) as info:
        invoke(served, 5)
    text = str(info.value) + repr(info.value)
    assert "bad header" in text
    assert "ws-proto7d1f3a8e" not in text and "wk-proto4b2e9c" not in text


def test_wrong_token_is_a_client_error_with_the_fix(served: ServedApp) -> None:
    async def go() -> Any:
        provider = ModalProvider(api_key="wk-nope:ws-nope", url=served.url)
        async with provider:
            return await provider.invoke(Request(seq=0, payload={"echo": "x"}))

    with pytest.raises(ClientHTTPError) as info:
        asyncio.run(go())
    assert info.value.status_code == 401 and "<token id>:<token secret>" in str(info.value)
    assert str(info.value).startswith(f"[modal] POST {served.url}: HTTP 401 Unauthorized: ")
    assert "credentials for proxy authorization (give a Proxy Auth Token" in str(info.value)


def stream(served: ServedApp, sleep_ms: float, **options: Any) -> Any:
    async def go() -> Any:
        provider = ModalProvider(api_key=TOKEN, url=served.url + "/generate", **options)
        async with provider:
            payload = {"echo": "hi", "sleep_ms": sleep_ms, "chunks": 3}
            return await provider.invoke(Request(seq=0, payload=payload, stream=True))

    return asyncio.run(go())


def test_a_stream_is_read_piece_by_piece(served: ServedApp, fleet: SimulatedFleet) -> None:
    result = stream(served, 90)  # three pieces, 30 ms apart
    assert result.output == [{"chunk": i, "echo": "hi"} for i in range(3)]
    times = result.token_times_ns
    assert times is not None and len(times) == 3 and times == sorted(times)
    assert result.first_byte_ns is not None and result.first_byte_ns <= times[0]
    assert (times[2] - times[0]) / 1e6 >= 40  # they arrived as written, not at the end
    assert result.request_id == fleet.truths()[0].job_id


def test_a_stream_queued_past_the_threshold_comes_from_the_result_url(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    fleet.set_scaling(ScalingSettings(max_workers=1))

    async def go() -> Any:
        blocker = asyncio.create_task(asyncio.to_thread(invoke, served, 400))
        await asyncio.to_thread(fleet.wait_for, lambda c: c.running == 1, 5)
        streamed = await asyncio.to_thread(stream, served, 60)
        await blocker
        return streamed

    result = asyncio.run(go())
    assert fleet.faults.count("poll") >= 1  # it waited behind the first call, redirected
    assert result.output == [{"chunk": i, "echo": "hi"} for i in range(3)]
    assert result.token_times_ns is not None and len(result.token_times_ns) == 3


def test_a_function_failing_mid_stream_is_a_transport_error(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    fleet.faults.next(1, Fault.job_failed(), on="job")
    with pytest.raises(TransportError) as info:
        stream(served, 60)
    assert info.value.request_id == fleet.truths()[0].job_id
