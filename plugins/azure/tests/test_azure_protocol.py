"""The Azure provider against its emulator over HTTPS on loopback, beyond the conformance
suite: scale rules and cooldown set and put back, replicas while booting, an unconfirmed cold
check, the region check, ingress auth modes, and Resource Manager errors and credentials."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from gpubench_azure import AzureProvider
from gpubench_azure.emulator import DEFAULT_APP, make_app

from gpubench_sdk import ClientHTTPError, ConfigError, Request, ScalingSettings, ThrottledError
from gpubench_sdk.testing import (
    Fault,
    ServedApp,
    SimulatedFleet,
    fleet_fixture,
    serve,
    throwaway_tls,
)

TOKEN_ENV = "GPUBENCH_TEST_AZURE_PROTOCOL_TOKEN"
TOKEN = "arm-token-protocol-7e2c9a"
KEY = "ingress-key-protocol-4d1b"


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, str]:
    return throwaway_tls(tmp_path_factory.mktemp("tls"))


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)


fleet = fleet_fixture(0.3, max_workers=2, idle_timeout_s=5)


def served_app(fleet: SimulatedFleet, tls: tuple[str, str, str], **kw: Any) -> Any:
    return serve(make_app(fleet, api_key=KEY, arm_token=TOKEN, **kw), tls=tls[1:])


@pytest.fixture
def served(fleet: SimulatedFleet, tls: tuple[str, str, str]) -> Iterator[ServedApp]:
    with served_app(fleet, tls) as s:
        yield s


def provider(served: ServedApp, tls: tuple[str, str, str], **options: Any) -> AzureProvider:
    base: dict[str, Any] = {
        "app": DEFAULT_APP,
        "arm_endpoint": served.url,
        "arm_token_env": TOKEN_ENV,
        "ca_file": tls[0],
        "api_key": KEY,
        "arm_poll_interval_s": 0.05,
        "replica_poll_s": 0.05,
    }
    return AzureProvider(**{**base, **options})


def ask(p: AzureProvider, sleep_ms: float = 5) -> Any:
    return p.invoke(Request(seq=0, payload={"echo": "x", "sleep_ms": sleep_ms}))


def test_cooldown_and_scale_rule_are_set_for_the_run_and_put_back(
    served: ServedApp, fleet: SimulatedFleet, tls: tuple[str, str, str]
) -> None:
    async def go() -> tuple[Any, Any, Any]:
        async with provider(served, tls, cold_cooldown_s=1, http_concurrency=4) as p:
            during = p.app_info
            check = await p.ensure_cold(10)
            return during, check, p.app_info

    during, check, after_cold = asyncio.run(go())
    assert during is not None and after_cold is not None
    rule = {"name": "gpubench-http", "http": {"metadata": {"concurrentRequests": "4"}}}
    assert list(during.rules) == [rule]
    assert check.confirmed and "cooldownPeriod=1s" in check.how
    assert after_cold.cooldown_s == 1
    assert fleet.scaling.idle_timeout_s == 5  # put back by close()

    async def read() -> Any:
        async with provider(served, tls) as p:
            return p.app_info

    restored = asyncio.run(read())
    assert restored.rules == () and restored.cooldown_s == 5


def test_booting_replicas_are_starting_then_ready(
    served: ServedApp, fleet: SimulatedFleet, tls: tuple[str, str, str]
) -> None:
    async def go() -> tuple[Any, Any]:
        async with provider(served, tls) as p:
            await p.set_scaling(ScalingSettings(min_workers=1))
            booting = await p.state()
            await asyncio.to_thread(fleet.wait_for, lambda c: c.idle == 1, 5)
            return booting, await p.state()

    booting, up = asyncio.run(go())
    assert (booting.ready, booting.starting) == (0, 1)
    assert (up.ready, up.busy, up.starting) == (1, 0, 0)
    assert fleet.scaling.min_workers == 0  # put back


def test_a_replica_that_stays_leaves_the_cold_check_unconfirmed(
    served: ServedApp, fleet: SimulatedFleet, tls: tuple[str, str, str]
) -> None:
    async def go() -> tuple[Any, Any]:
        async with provider(served, tls) as p:
            busy = asyncio.create_task(ask(p, 3000))  # keeps its replica up
            await asyncio.to_thread(fleet.wait_for, lambda c: c.running == 1, 5)
            check = await p.ensure_cold(0.5)
            after = await ask(p)
            busy.cancel()
            return check, after

    check, after = asyncio.run(go())
    assert not check.confirmed and "1 replica(s) still listed" in check.how
    assert after.cold_confirmed is False


def test_region_must_be_the_apps_location(served: ServedApp, tls: tuple[str, str, str]) -> None:
    async def go() -> None:
        async with provider(served, tls, region="westus3"):
            pass

    with pytest.raises(ConfigError) as info:
        asyncio.run(go())
    assert info.value.field == "region" and "'eastus'" in str(info.value)


def test_a_429_names_the_call_and_reads_an_http_date_retry_after(
    served: ServedApp, fleet: SimulatedFleet, tls: tuple[str, str, str]
) -> None:
    """Retry-After may be an HTTP date (RFC 9110); the core's parser reads it, where Azure's
    own copy gave None. The message names the call, in the core's wording."""
    fleet.faults.next(1, Fault.throttle(retry_after_s=30, as_date=True))

    async def go() -> None:
        async with provider(served, tls) as p:
            await ask(p)

    too_many = r"\[azure\] POST https://\S+: HTTP 429 Too Many Requests"
    with pytest.raises(ThrottledError, match=too_many) as info:
        asyncio.run(go())
    assert info.value.retry_after_s is not None and 28 < info.value.retry_after_s <= 30


def test_functions_key_auth(fleet: SimulatedFleet, tls: tuple[str, str, str]) -> None:
    with served_app(fleet, tls, auth="functions-key") as s:

        async def go(mode: str) -> Any:
            async with provider(s, tls, auth_mode=mode) as p:
                return await ask(p)

        assert asyncio.run(go("functions-key")).output == {"echo": "x"}
        with pytest.raises(ClientHTTPError) as info:
            asyncio.run(go("bearer"))
        assert info.value.status_code == 401


def test_a_refused_arm_token_names_the_role_and_hides_the_token(
    served: ServedApp, tls: tuple[str, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "arm-token-wrong-0b7f3e")

    async def go() -> None:
        async with provider(served, tls):
            pass

    with pytest.raises(ClientHTTPError) as info:
        asyncio.run(go())
    text = str(info.value) + repr(info.value)
    assert info.value.status_code == 401 and "Contributor" in text
    assert "arm-token-wrong-0b7f3e" not in text and TOKEN not in text


def test_credentials_and_files_are_named_when_missing(
    served: ServedApp, tls: tuple[str, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TOKEN_ENV)

    async def go(**options: Any) -> None:
        async with provider(served, tls, **options):
            pass

    with pytest.raises(ConfigError) as info:
        asyncio.run(go())
    assert info.value.field == "arm_token_env"
    with pytest.raises(ConfigError) as info:
        asyncio.run(go(ca_file="/nonexistent/ca.pem"))
    assert info.value.field == "ca_file"


def test_bad_options_are_named() -> None:
    with pytest.raises(ValueError, match="app"):
        AzureProvider(app="/subscriptions/x/containerApps/y")
    with pytest.raises(ValueError, match="api_key_env"):
        AzureProvider(url="https://example.com", auth_mode="functions-key")
    with pytest.raises(ValueError, match="'app'"):
        AzureProvider()
