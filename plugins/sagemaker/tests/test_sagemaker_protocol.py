"""SageMaker specifics against the emulator over loopback: the event-stream response (TTFT and
per-part times), scale-out from zero as cold-start time, error mapping, concurrency without
blocking the loop, settings restored, and credentials from the environment never leaking."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from gpubench_sagemaker import SageMakerProvider
from gpubench_sagemaker._aws import map_error
from gpubench_sagemaker.emulator import DEFAULT_COMPONENT, DEFAULT_ENDPOINT, make_app

from gpubench_sdk import (
    Burst,
    ClientHTTPError,
    ColdStarts,
    ColdTimeoutError,
    EchoProbe,
    ProviderError,
    Request,
    ScalingSettings,
    ServerHTTPError,
    ThrottledError,
    run,
    telemetry,
)
from gpubench_sdk.testing import (
    Fault,
    ServedApp,
    SimulatedFleet,
    fleet_fixture,
    serve,
)

KEY_ID = "AKIAGPUBENCHPROTO001"
SECRET = "proto-secret-7e1c94a2b6d3"
BOOT_S = 0.3


fleet = fleet_fixture(BOOT_S, max_workers=4, idle_timeout_s=0.5)


@pytest.fixture
def served(fleet: SimulatedFleet) -> Iterator[ServedApp]:
    app = make_app(fleet, credentials={KEY_ID: SECRET}, inference_component=DEFAULT_COMPONENT)
    with serve(app) as s:
        yield s


def options(url: str, **extra: Any) -> dict[str, Any]:
    return {
        "endpoint_name": DEFAULT_ENDPOINT,
        "inference_component": DEFAULT_COMPONENT,
        "region": "us-east-1",
        "runtime_url": url,
        "control_url": url,
        "cold_retry_max_s": 0.05,
        **extra,
    }


def provider(url: str, **extra: Any) -> SageMakerProvider:
    return SageMakerProvider(aws_access_key_id=KEY_ID, api_key=SECRET, **options(url, **extra))


def warm(fleet: SimulatedFleet, copies: int = 1) -> None:
    fleet.set_scaling(ScalingSettings(min_workers=copies))
    fleet.wait_for(lambda c: c.idle >= copies, 10)


def test_stream_gives_first_part_and_part_times(served: ServedApp, fleet: SimulatedFleet) -> None:
    warm(fleet)

    async def go() -> Any:
        async with provider(served.url) as p:
            payload = {"echo": "s", "sleep_ms": 200, "chunks": 4}
            return await p.invoke(Request(seq=0, payload=payload, stream=True))

    result = asyncio.run(go())
    truth = fleet.truth(result.request_id)
    assert truth.chunks == 4 and len(result.output) == 4
    times = result.token_times_ns
    assert times is not None and len(times) == 4 and times == sorted(times)
    assert result.first_byte_ns == times[0]
    # chunks are spread over the 200 ms execution: the first part came well before the last
    assert (times[-1] - times[0]) / 1e6 >= 100
    assert result.detail == {"invoked_production_variant": "AllTraffic"}


def test_stream_error_mid_way_is_a_server_error(served: ServedApp, fleet: SimulatedFleet) -> None:
    warm(fleet)
    fleet.faults.next(1, Fault.job_failed("CUDA out of memory"))

    async def go() -> None:
        async with provider(served.url) as p:
            payload = {"echo": "s", "sleep_ms": 50, "chunks": 2}
            await p.invoke(Request(seq=0, payload=payload, stream=True))

    with pytest.raises(ServerHTTPError, match="CUDA out of memory"):
        asyncio.run(go())


def test_scale_out_from_zero_is_the_cold_start(served: ServedApp, fleet: SimulatedFleet) -> None:
    async def go() -> list[Any]:  # the component has no copy: the service refuses at first
        async with provider(served.url) as p:
            return [await p.invoke(Request(seq=i, payload={"echo": i})) for i in range(2)]

    cold, warm_result = asyncio.run(go())
    assert cold.cold is True and cold.cold_confirmed is True
    assert cold.setup_ms is not None and cold.setup_ms >= BOOT_S * 1e3 - 20
    assert warm_result.cold is False and warm_result.setup_ms is None
    assert fleet.scaling.min_workers == 1  # the emulated scale-out policy added a copy


def test_scale_out_slower_than_cold_wait_times_out(fleet: SimulatedFleet) -> None:
    app = make_app(
        fleet,
        credentials={KEY_ID: SECRET},
        inference_component=DEFAULT_COMPONENT,
        scale_out_delay_s=30,
    )
    with serve(app) as s:

        async def go() -> None:
            async with provider(s.url, cold_wait_s=0.5) as p:
                await p.invoke(Request(seq=0, payload={"echo": 0}))

        with pytest.raises(ColdTimeoutError, match="no capacity"):
            asyncio.run(go())


def test_concurrent_requests_run_at_once(served: ServedApp, fleet: SimulatedFleet) -> None:
    warm(fleet, copies=4)

    async def go() -> list[Any]:
        async with provider(served.url) as p:
            requests = [Request(seq=i, payload={"echo": i, "sleep_ms": 300}) for i in range(4)]
            return await asyncio.gather(*(p.invoke(r) for r in requests))

    results = asyncio.run(go())
    # four idle copies, four requests: had the calls been serialised, one copy would do all
    assert len({fleet.truth(r.request_id).worker_id for r in results}) == 4


def test_close_restores_the_copy_count_after_a_failure(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    warm(fleet, copies=2)

    async def go() -> None:
        async with provider(served.url) as p:
            check = await p.ensure_cold(10)
            assert check.confirmed and fleet.scaling.min_workers == 0
            raise RuntimeError("the benchmark failed")

    with pytest.raises(RuntimeError):
        asyncio.run(go())
    assert fleet.scaling.min_workers == 2


def test_ensure_cold_needs_an_inference_component(served: ServedApp) -> None:
    async def go() -> None:
        async with provider(served.url, inference_component=None) as p:
            await p.ensure_cold(1)

    with pytest.raises(ValueError, match="inference_component"):
        asyncio.run(go())


def test_wrong_secret_is_refused(served: ServedApp, fleet: SimulatedFleet) -> None:
    warm(fleet)

    async def go() -> None:
        options_ = options(served.url)
        async with SageMakerProvider(aws_access_key_id=KEY_ID, api_key="wrong", **options_) as p:
            await p.invoke(Request(seq=0, payload={"echo": 0}))

    with pytest.raises(ClientHTTPError) as info:
        asyncio.run(go())
    assert info.value.status_code == 403


def _client_error(code: str, status: int, message: str = "") -> ClientError:
    return ClientError(
        {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": {"retry-after": "2"}},
        },
        "InvokeEndpoint",
    )


@pytest.mark.parametrize(
    ("code", "status", "message", "expected"),
    [
        ("ModelError", 424, "Received server error (500) from primary", ServerHTTPError),
        ("ModelNotReadyException", 429, "Model is not ready", ColdTimeoutError),
        ("ThrottlingException", 400, "Rate exceeded", ThrottledError),
        ("ServiceUnavailable", 503, "", ServerHTTPError),
        ("InternalFailure", 500, "", ServerHTTPError),
        ("ValidationError", 400, "Endpoint x of account y not found.", ClientHTTPError),
        ("ValidationError", 400, "Inference Component has no capacity to ...", ColdTimeoutError),
    ],
)
def test_botocore_errors_map_to_the_taxonomy(
    code: str, status: int, message: str, expected: type[ProviderError]
) -> None:
    mapped = map_error(_client_error(code, status, message), "InvokeEndpoint")
    assert type(mapped) is expected and mapped.provider == "sagemaker"
    assert mapped.status_code == status
    if isinstance(mapped, ThrottledError):
        assert mapped.retry_after_s == 2


def test_secret_from_the_environment_never_leaks(
    served: ServedApp,
    fleet: SimulatedFleet,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The standard boto3 chain: AWS_SECRET_ACCESS_KEY in the environment, not in the plan.
    A server echoing it, DEBUG logs of botocore, spans and the store never show it."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    caplog.set_level(logging.DEBUG)
    setup = telemetry.configure(in_memory=True, set_global=False)
    echoed = json.dumps({"__type": "InternalFailure", "message": f"bad secret {SECRET}"})
    fleet.faults.next(1, Fault.server_error(500, body=echoed), on="submit")
    target = SageMakerProvider(**options(served.url))
    store = tmp_path / "leak.sqlite"
    outcome = asyncio.run(
        run(
            {"sm": target},
            EchoProbe(sleep_ms=5),
            [Burst(total=3, concurrency=1), ColdStarts(n=1, warm_after=1, cold_timeout_s=10)],
            store=store,
            instruments=setup.instruments(),
        )
    )
    assert outcome.status == "completed"
    assert fleet.faults.injected
    artifacts = [caplog.text, repr(target), json.dumps(target.options.public())]
    assert setup.spans is not None
    artifacts += [span.to_json() for span in setup.spans.get_finished_spans()]
    setup.shutdown()
    artifacts += [p.read_bytes().decode("latin-1") for p in tmp_path.glob("leak.sqlite*")]
    assert any("bad secret" in a for a in artifacts), "the echoed error was not kept"
    assert not [a[:200] for a in artifacts if SECRET in a]
