"""Cloud Run specifics over loopback: ID tokens (audience, cache, refresh), the Admin API's
proto3 JSON and long-running operations, and settings restored on failure and cancellation."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from gpubench_cloudrun import CloudRunProvider, IdToken
from gpubench_cloudrun.emulator import DEFAULT_SERVICE, make_app

from gpubench_sdk import (
    ClientHTTPError,
    ProviderError,
    Request,
    ScalingSettings,
    ThrottledError,
)
from gpubench_sdk.testing import (
    Fault,
    ServedApp,
    SimulatedFleet,
    fleet_fixture,
    serve,
)

ADMIN_PATH = "/v2/" + DEFAULT_SERVICE


class FakeTokens:
    """Mints ``fake-id:<audience>:<n>`` tokens valid ``lifetime_s``; never real credentials."""

    def __init__(self, lifetime_s: float = 3600.0) -> None:
        self.lifetime_s = lifetime_s
        self.minted: list[str] = []

    def __call__(self, audience: str) -> IdToken:
        token = f"fake-id:{audience}:{len(self.minted)}"
        self.minted.append(token)
        return IdToken(token, time.time() + self.lifetime_s)


fleet = fleet_fixture(0.2, max_workers=2, idle_timeout_s=0.3)


@pytest.fixture
def served(fleet: SimulatedFleet) -> Iterator[ServedApp]:
    # only tokens minted for this very URL pass: the audience check Cloud Run makes
    holder: dict[str, str] = {}
    app = make_app(fleet, authorize=lambda t: t.startswith(f"fake-id:{holder['url']}:"))
    with serve(app) as s:
        holder["url"] = s.url
        yield s


def provider(served: ServedApp, tokens: FakeTokens | None = None, **extra: Any) -> Any:
    options: dict[str, Any] = {
        "service": DEFAULT_SERVICE,
        "admin_endpoint": served.url,
        "admin_login": "anonymous",
        "idle_reclaim_s": 0.8,
        **extra,
    }
    return CloudRunProvider(token_source=tokens or FakeTokens(), **options)


def admin_service(served: ServedApp) -> dict[str, Any]:
    body: dict[str, Any] = httpx.get(served.url + ADMIN_PATH).json()
    return body


def request(seq: int = 0) -> Request:
    return Request(seq=seq, payload={"echo": f"gpubench-{seq}", "sleep_ms": 5})


def test_id_token_has_the_service_url_as_audience_and_is_cached(served: ServedApp) -> None:
    tokens = FakeTokens()

    async def go() -> list[Any]:
        async with provider(served, tokens) as p:
            return await asyncio.gather(*(p.invoke(request(i)) for i in range(5)))

    results = asyncio.run(go())
    assert [r.output for r in results] == [{"echo": f"gpubench-{i}"} for i in range(5)]
    assert tokens.minted == [f"fake-id:{served.url}:0"]  # one token for five requests


def test_id_token_is_refreshed_before_it_expires(served: ServedApp) -> None:
    tokens = FakeTokens(lifetime_s=200)  # inside the 300 s refresh margin: always stale

    async def go() -> None:
        async with provider(served, tokens) as p:
            for i in range(3):
                await p.invoke(request(i))

    asyncio.run(go())
    assert len(tokens.minted) == 3


def test_wrong_audience_is_refused(served: ServedApp) -> None:
    async def go() -> None:
        async with provider(served, audience="https://elsewhere.run.app") as p:
            await p.invoke(request())

    with pytest.raises(ClientHTTPError) as info:
        asyncio.run(go())
    assert info.value.status_code == 401


def test_a_429_names_the_call_and_reads_an_http_date_retry_after(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    """Retry-After may be an HTTP date (RFC 9110); the core's parser reads it, where Cloud
    Run's own copy gave None. The message names the call, in the core's wording."""
    fleet.faults.next(1, Fault.throttle(retry_after_s=30, as_date=True))

    async def go() -> None:
        async with provider(served) as p:
            await p.invoke(request())

    too_many = r"\[cloudrun\] POST http://\S+: HTTP 429 Too Many Requests"
    with pytest.raises(ThrottledError, match=too_many) as info:
        asyncio.run(go())
    assert info.value.retry_after_s is not None and 28 < info.value.retry_after_s <= 30


def test_public_service_needs_no_token(fleet: SimulatedFleet) -> None:
    with serve(make_app(fleet)) as s:

        async def go() -> Any:
            async with CloudRunProvider(url=s.url, auth_mode="none") as p:
                return await p.invoke(request())

        result = asyncio.run(go())
    assert result.output == {"echo": "gpubench-0"} and result.cold is None


def test_describe_reads_scaling_gpu_and_revisions(served: ServedApp) -> None:
    async def go() -> Any:
        async with provider(served) as p:
            return await p.describe()

    info = asyncio.run(go())
    assert (info.min_instances, info.max_instances) == (0, 2)  # min 0 omitted from the JSON
    assert "minInstanceCount" not in admin_service(served)["template"]["scaling"]
    assert (info.accelerator, info.gpus, info.cpu, info.memory) == ("nvidia-l4", "1", "4", "16Gi")
    assert info.revisions and info.latest_ready_revision == info.revisions[0]
    assert info.uri == served.url


def test_ensure_cold_without_a_roll_is_only_inferred(served: ServedApp) -> None:
    async def go() -> tuple[Any, Any]:
        async with provider(served, roll_revision=False) as p:
            check = await p.ensure_cold(5)
            return check, await p.invoke(request())

    check, result = asyncio.run(go())
    assert not check.confirmed and "inferred" in check.how
    assert result.cold is True and result.cold_confirmed is False


def test_ensure_cold_confirms_and_close_restores_after_a_failure(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    httpx.patch(  # the user's service keeps one warm instance
        served.url + ADMIN_PATH,
        json={
            **admin_service(served),
            "template": {
                **admin_service(served)["template"],
                "scaling": {"minInstanceCount": 1, "maxInstanceCount": 2},
                "labels": {"team": "ml"},
            },
        },
    ).raise_for_status()
    fleet.wait_for(lambda c: c.idle >= 1, 5)
    before = admin_service(served)

    async def go() -> None:
        async with provider(served) as p:
            check = await p.ensure_cold(10)
            assert check.confirmed, check
            assert fleet.counts().is_cold, fleet.counts()
            during = admin_service(served)["template"]
            assert (
                "minInstanceCount" not in during["scaling"]
                and "gpubench-cold-roll" in (during["labels"])
            )
            result = await p.invoke(request())
            assert result.cold is True and result.cold_confirmed is True
            assert fleet.truth(result.request_id).cold is True
            raise RuntimeError("the benchmark failed")

    with pytest.raises(RuntimeError):
        asyncio.run(go())
    after = admin_service(served)
    assert after["template"]["scaling"] == before["template"]["scaling"]
    assert after["template"]["labels"] == {"team": "ml"}
    assert fleet.scaling.min_workers == 1


def test_cancelled_run_still_restores(served: ServedApp, fleet: SimulatedFleet) -> None:
    fleet.set_scaling(ScalingSettings(min_workers=1))
    fleet.wait_for(lambda c: c.idle >= 1, 5)

    async def go() -> None:
        p = provider(served, idle_reclaim_s=30)

        async def cold_run() -> None:
            async with p:
                await p.ensure_cold(60)  # cancelled while it waits for idle instances

        task = asyncio.create_task(cold_run())
        deadline = time.monotonic() + 5
        while fleet.scaling.min_workers != 0:
            assert time.monotonic() < deadline, "min instances never went to 0"
            await asyncio.sleep(0.02)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert task.cancelled()

    asyncio.run(go())
    assert fleet.scaling.min_workers == 1
    assert "gpubench-cold-roll" not in admin_service(served)["template"].get("labels", {})


def test_update_waits_for_a_running_operation(fleet: SimulatedFleet) -> None:
    with serve(make_app(fleet, operation_delay_s=0.3)) as s:

        async def go() -> float:
            async with provider(s, auth_mode="none", roll_revision=True, idle_reclaim_s=0) as p:
                started = time.monotonic()
                await p.ensure_cold(5)
                return time.monotonic() - started

        assert asyncio.run(go()) >= 0.3  # the operation was polled until done


def test_admin_errors_are_mapped(served: ServedApp) -> None:
    async def go() -> None:
        options = {"service": "projects/p/locations/us-central1/services/missing"}
        async with provider(served, **options):
            pass

    with pytest.raises(ProviderError) as info:
        asyncio.run(go())
    assert isinstance(info.value, ClientHTTPError) and info.value.status_code == 404


def test_admin_faults_are_mapped_by_status(served: ServedApp, fleet: SimulatedFleet) -> None:
    """A 429 reaches the plugin through google-api-core's exceptions (not as a transport
    failure); a 503 on a read is retried by the client itself (run_v2's default retry for
    get_service and list_revisions covers ServiceUnavailable), so opening still succeeds."""

    async def go() -> None:
        async with provider(served):
            pass

    fleet.faults.next(1, Fault.throttle(), on="control")
    with pytest.raises(ThrottledError) as info:
        asyncio.run(go())
    assert info.value.status_code == 429
    fleet.faults.next(1, Fault.server_error(503), on="control")
    asyncio.run(go())
    assert [i.fault.status for i in fleet.faults.injected] == [429, 503]


def test_billing_comes_from_the_cost_catalog() -> None:
    billing = CloudRunProvider.capabilities.billing
    assert billing is not None and billing.granularity_s == pytest.approx(0.1)
    assert billing.billed_s(1.01) == pytest.approx(1.1)  # rounded up to 100 ms
    assert {"cold_boot", "execution", "idle"} <= billing.billed_phases


def test_ensure_cold_answers_within_its_timeout(served: ServedApp) -> None:
    async def go() -> tuple[Any, float]:
        async with provider(served, idle_reclaim_s=30) as p:
            started = time.monotonic()
            check = await p.ensure_cold(1.0)
            return check, time.monotonic() - started

    check, took_s = asyncio.run(go())
    assert not check.confirmed and "timed out first" in check.how
    assert took_s < 1.0  # inside the runner's own deadline, which is the same number
