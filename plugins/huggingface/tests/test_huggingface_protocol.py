"""Hugging Face protocol details beyond the conformance suite, over loopback HTTP to the emulator:
the cold proxy (503/502 phase, X-Scale-Up-Timeout), TGI bodies, streams and headers (both
x-compute-time units), error shapes, throttling and the management API."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from gpubench_huggingface import BILLING, HandlerError, HuggingFaceProvider, compute_time_ms
from gpubench_huggingface.emulator import make_app

from gpubench_sdk import (
    ClientHTTPError,
    ColdTimeoutError,
    ConfigError,
    Outcome,
    Request,
    ScalingSettings,
    ServerHTTPError,
    ThrottledError,
    classify,
    list_plugins,
    load_provider,
)
from gpubench_sdk.cost import load_catalog
from gpubench_sdk.testing import (
    Fault,
    ServedApp,
    SimulatedFleet,
    fleet_fixture,
    quick_fleet,
    serve,
)

pytestmark = pytest.mark.anyio
KEY = "hf_protocol_test_5c2e9a71"
NS, NAME = "org", "ep"
BOOT_S = 0.3


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


fleet = fleet_fixture(BOOT_S, max_workers=2, idle_timeout_s=2)


def emulator(fleet: SimulatedFleet, **kw: Any) -> Any:
    return make_app(fleet, api_key=KEY, namespace=NS, endpoint_name=NAME, minute_s=1.0, **kw)


@pytest.fixture
def served(fleet: SimulatedFleet) -> Iterator[ServedApp]:
    with serve(emulator(fleet)) as served:
        yield served


def provider(served: ServedApp, **options: Any) -> HuggingFaceProvider:
    defaults = {
        "url": served.url,
        "namespace": NS,
        "endpoint_name": NAME,
        "management_url": f"{served.url}/v2",
        "minute_s": 1.0,
        "poll_interval_s": 0.01,
        "retry_interval_s": 0.01,
        "cold_threshold_ms": 150,
    }
    return HuggingFaceProvider(api_key=KEY, **{**defaults, **options})


def llm(max_tokens: int = 8, stream: bool = False) -> Request:
    payload = {"prompt": "one two three", "max_tokens": max_tokens, "temperature": 0.0}
    return Request(seq=0, payload=payload, kind="llm", stream=stream)


def probe(sleep_ms: float = 10, **extra: Any) -> Request:
    return Request(seq=0, payload={"echo": "x", "sleep_ms": sleep_ms, **extra})


def boot_ms(fleet: SimulatedFleet, index: int = -1) -> float:
    bill = fleet.billing.workers[index]
    assert bill.boot_end_s is not None
    return (bill.boot_end_s - bill.started_s) * 1e3


def test_compute_time_unit_is_detected_either_way() -> None:
    assert compute_time_ms("0.512", 515.0) == pytest.approx(512.0)  # newer TGI: seconds
    assert compute_time_ms("512", 515.0) == 512.0  # older TGI: whole milliseconds
    assert compute_time_ms("2", 2010.0) == 2000.0  # Rust prints 2.0 s as "2"
    assert compute_time_ms("2", 2.4) == 2.0
    assert compute_time_ms("1.5", None) == 1500.0 and compute_time_ms("40", None) == 40.0
    assert compute_time_ms("nope", 10.0) is None and compute_time_ms(None, 10.0) is None


@pytest.mark.parametrize("unit", ["s", "ms"])
async def test_tgi_generate_reads_body_headers_and_either_compute_unit(
    fleet: SimulatedFleet, unit: str
) -> None:
    with serve(emulator(fleet, compute_time_unit=unit, time_per_token_ms=20)) as served:
        async with provider(served, route="generate") as p:
            await p.invoke(llm(2))  # boots the replica: the next one is warm
            result = await p.invoke(llm(8))
    truth = fleet.truth(str(result.request_id))
    assert result.output == "".join(f" tok{i}" for i in range(8))
    assert (result.input_units, result.output_units) == (3, 8)
    assert result.cold is False and not truth.cold
    assert truth.queue_ms is not None and truth.execution_ms is not None
    assert result.queue_ms is not None and abs(result.queue_ms - truth.queue_ms) <= 2
    assert result.execution_ms is not None and abs(result.execution_ms - truth.execution_ms) <= 2
    assert result.detail is not None and result.execution_ms >= 160  # 8 tokens x 20 ms
    # x-compute-time is the total in either unit; read back in ms it matches x-total-time
    assert result.detail["compute_ms"] == pytest.approx(result.detail["total_ms"], abs=1.5)
    assert p.capabilities.server_timings == {"queue_ms", "execution_ms"}


async def test_generate_stream_times_every_token(served: ServedApp, fleet: SimulatedFleet) -> None:
    async with provider(served, route="generate_stream") as p:
        result = await p.invoke(llm(6, stream=True))
    times = list(result.token_times_ns or [])
    assert len(times) == 6 == result.output_units and times == sorted(times)
    assert result.first_byte_ns == times[0]
    assert result.output == "".join(f" tok{i}" for i in range(6))
    truth = fleet.truth(str(result.request_id))
    assert truth.chunks == 6
    # tokens arrive over the execution (5 ms each by default), not all at the end
    assert (times[-1] - times[0]) / 1e6 >= 0.5 * (truth.execution_ms or 0) * 5 / 6


async def test_cold_503_phase_is_retried_and_timed(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    async with provider(served, hold_while_scaling=False) as p:
        check = await p.ensure_cold(10)
        cold = await p.invoke(probe())
        warm = await p.invoke(probe())
    assert check.confirmed
    assert cold.cold is True and cold.cold_confirmed is True
    assert cold.setup_ms is not None
    # time to ready: the replica's boot, give or take one retry interval and the round trips
    assert boot_ms(fleet) - 15 <= cold.setup_ms <= boot_ms(fleet) + 80
    assert warm.cold is False and warm.setup_ms is None
    assert fleet.faults.count("submit") > 3  # several 503 answers before the served one


async def test_held_request_is_cold_by_tgi_total(served: ServedApp, fleet: SimulatedFleet) -> None:
    """With X-Scale-Up-Timeout the proxy holds the request: TGI's x-total-time excludes the
    hold, so the wait beyond it is the cold start (confirmed after scale-to-zero)."""
    async with provider(served, route="generate") as p:
        assert p._invoke_headers["X-Scale-Up-Timeout"] == "300"  # timeout_s by default
        await p.ensure_cold(10)
        confirmed = await p.invoke(llm(2))
        await p.scale_to_zero()  # no ensure_cold: the hold itself is the evidence
        await asyncio.to_thread(fleet.wait_for, lambda c: c.workers == 0, 5)
        inferred = await p.invoke(llm(2))
    for result in (confirmed, inferred):
        assert result.cold is True and fleet.truth(str(result.request_id)).cold
        assert result.setup_ms is not None and abs(result.setup_ms - boot_ms(fleet)) <= 40
        assert result.queue_ms is not None and result.queue_ms <= 5  # TGI never saw the hold
    assert confirmed.cold_confirmed and not inferred.cold_confirmed


async def test_hold_shorter_than_the_boot_falls_back_to_retries(fleet: SimulatedFleet) -> None:
    slow = quick_fleet(1.5, idle_timeout_s=2)
    with serve(emulator(slow)) as served:
        async with provider(served, scale_up_timeout_s=1) as p:
            result = await p.invoke(probe())
    assert result.cold is True and result.cold_confirmed  # the proxy's 503 was seen
    assert result.setup_ms is not None and result.setup_ms >= 1400
    assert slow.counts().cancelled == 1  # the held job the proxy gave up on


async def test_older_proxy_502_only_retried_when_configured(fleet: SimulatedFleet) -> None:
    with serve(emulator(fleet, initializing_status=502)) as served:
        async with provider(served, hold_while_scaling=False) as p:
            with pytest.raises(ServerHTTPError) as info:
                await p.invoke(probe())
        assert info.value.status_code == 502
        options = {"hold_while_scaling": False, "initializing_statuses": [502, 503]}
        async with provider(served, **options) as p:
            result = await p.invoke(probe())
    assert result.cold is True and result.cold_confirmed


async def test_replica_never_ready_is_a_cold_timeout(fleet: SimulatedFleet) -> None:
    slow = quick_fleet(5, idle_timeout_s=2)
    with serve(emulator(slow)) as served:
        async with provider(served, hold_while_scaling=False, timeout_s=1.0) as p:
            with pytest.raises(ColdTimeoutError) as info:
                await p.invoke(probe())
    assert info.value.status_code == 503 and "no replica ready" in str(info.value)
    assert classify(info.value, "huggingface")[0] is Outcome.COLD_TIMEOUT


async def test_model_failures_and_bad_requests_map_by_protocol(served: ServedApp) -> None:
    async with provider(served) as p:
        with pytest.raises(HandlerError) as toolkit:
            await p.invoke(probe(fail="CUDA out of memory"))
    async with provider(served, route="generate") as p:
        with pytest.raises(HandlerError) as tgi:
            await p.invoke(Request(seq=0, payload={"fail": "bad weights", "sleep_ms": 1}))
        with pytest.raises(HandlerError) as streamed:
            await p.invoke(Request(seq=0, payload={"fail": "nan", "chunks": 2}, stream=True))
    assert toolkit.value.status_code == 400 and "CUDA out of memory" in str(toolkit.value)
    assert tgi.value.status_code == 424 and "bad weights" in str(tgi.value)
    # the core's wording: the call named, then TGI's own {"error"} text
    assert str(tgi.value).startswith(f"[huggingface] POST {served.url}/generate: HTTP 424 ")
    assert "stream error: nan" in str(streamed.value)
    for exc in (toolkit.value, tgi.value, streamed.value):
        assert classify(exc, "huggingface")[0] is Outcome.HTTP_5XX
    auth = {"Authorization": f"Bearer {KEY}"}
    async with httpx.AsyncClient() as client:
        missing = await client.post(f"{served.url}/", json={"nope": 1}, headers=auth)
        unauthorized = await client.post(f"{served.url}/generate", json={"inputs": "x"})
    assert missing.status_code == 400 and "inputs" in missing.json()["error"]
    assert unauthorized.status_code == 401


async def test_overloaded_tgi_is_throttled(fleet: SimulatedFleet) -> None:
    with serve(emulator(fleet, max_concurrent_requests=1)) as served:
        async with provider(served) as p:
            await p.invoke(probe())  # a replica is up: requests reach TGI's admission
            results = await asyncio.gather(
                p.invoke(probe(300)), p.invoke(probe(300)), return_exceptions=True
            )
    (throttled,) = [r for r in results if isinstance(r, ThrottledError)]
    assert throttled.status_code == 429 and "overloaded" in str(throttled)


async def test_a_streamed_429_reads_an_http_date_retry_after(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    """Retry-After may be an HTTP date (RFC 9110); TGI's stream route reads it through the
    core's parser, where the plugin's own float-only copy gave None."""
    async with provider(served, route="generate") as p:
        await p.invoke(probe())  # a replica is up
        fleet.faults.next(1, Fault.throttle(30, as_date=True), on="submit")
        with pytest.raises(ThrottledError) as info:
            await p.invoke(Request(seq=1, payload={"chunks": 2, "sleep_ms": 1}, stream=True))
    assert info.value.status_code == 429 and fleet.faults.injected
    assert info.value.retry_after_s is not None and 27 <= info.value.retry_after_s <= 30


async def test_management_state_scaling_and_pause(served: ServedApp, fleet: SimulatedFleet) -> None:
    async with provider(served) as p:
        status = await p.endpoint_status()
        assert status.state == "scaledToZero" and status.url == served.url
        # what a run keeps of the deployment: the model at its revision, and the instance
        deployed = await p.deployed()
        assert deployed["repository"] == "gpubench/emulated" and deployed["revision"]
        assert (deployed["instance_type"], deployed["instance_size"]) == ("nvidia-a10g", "x1")
        assert (deployed["vendor"], deployed["region"]) == ("aws", "us-east-1")
        await p.invoke(probe())
        state = await p.state()
        assert (state.ready, state.starting, state.detail["state"]) == (1, 0, "running")
        with pytest.raises(ConfigError, match="whole minutes"):
            await p.set_scaling(ScalingSettings(idle_timeout_s=1.5))
        with pytest.raises(ConfigError, match="scaling"):
            await p.set_scaling(ScalingSettings(min_workers=3))  # above maxReplica 2
        await p.set_scaling(ScalingSettings(max_workers=1, idle_timeout_s=4))
        assert fleet.scaling == ScalingSettings(0, 1, 4)
        paused = await p.pause()
        assert paused.state == "paused"
        check = await p.ensure_cold(1)
        assert not check.confirmed and "paused" in check.how
        with pytest.raises(ServerHTTPError):  # a paused endpoint is not woken by requests
            await p.invoke(probe())
        assert (await p.resume()).state in ("scaledToZero", "running")
        assert fleet.scaling == ScalingSettings(0, 1, 4)  # pausing kept the user's settings
    assert fleet.scaling == ScalingSettings(0, 2, 2)  # close() restored the original


async def test_url_is_looked_up_and_options_are_checked(served: ServedApp) -> None:
    async with provider(served, url=None) as p:
        assert (await p.invoke(probe())).output == {"echo": "x"}
    with pytest.raises(ConfigError, match="endpoint_name"):
        load_provider("huggingface", url="https://x.example", namespace="org")
    with pytest.raises(ConfigError, match="url"):
        load_provider("huggingface")
    bare = load_provider("huggingface", url="https://x.example", api_key="hf_secret_987654321")
    assert not bare.capabilities.cold_start_control and not bare.capabilities.fleet_state
    assert "hf_secret_987654321" not in repr(bare.options) + str(bare.options.public())
    (info,) = [i for i in list_plugins() if i.name == "huggingface"]
    assert info.ok and "cold_start_control" in info.capabilities
    async with provider(served, namespace="org", endpoint_name="other") as p:
        with pytest.raises(ClientHTTPError) as missing:
            await p.state()
    assert missing.value.status_code == 404


async def test_billing_is_the_catalogs_per_minute_rule(fleet: SimulatedFleet) -> None:
    assert load_catalog().billing_model("huggingface") == BILLING
    assert BILLING.granularity_s == 60 and BILLING.bills("cold_boot") and BILLING.bills("idle")
    with serve(emulator(fleet)) as served:
        async with provider(served) as p:
            await asyncio.gather(*(p.invoke(probe(150)) for _ in range(3)))
    lives_s = [b.stopped_s - b.started_s for b in fleet.billing.workers if b.stopped_s]
    assert lives_s and fleet.billing.billed_s(BILLING, 0.0) == sum(
        60 * math.ceil(s / 60) for s in lives_s
    )


def test_the_doc_pages_targets_are_valid_options() -> None:
    """Every ``[[targets]]`` the provider page shows (HF's own and the OpenAI route's) loads."""
    import re
    import tomllib
    from pathlib import Path

    page = Path(__file__).resolve().parents[3] / "docs" / "providers" / "huggingface.md"
    blocks = re.findall(r"```toml\n(.*?)```", page.read_text(), flags=re.S)
    targets = [t for block in blocks for t in tomllib.loads(block).get("targets", [])]
    assert {t["provider"] for t in targets} == {"huggingface", "openai"}
    for target in targets:
        options = {k: v for k, v in target.items() if k not in ("name", "provider", "api_key_env")}
        provider = load_provider(target["provider"], api_key="hf_doc_check_123456", **options)
        assert provider.name == target["provider"]


async def test_discovered_url_is_the_span_endpoint(served: ServedApp) -> None:
    async with provider(served, url=None) as p:
        assert p.endpoint == served.url
