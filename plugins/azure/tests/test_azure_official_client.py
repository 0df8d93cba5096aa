"""``azure-mgmt-appcontainers`` (Microsoft's official client, asyncio flavour, as the plugin
uses it) against our emulator over HTTPS on loopback, trusting a throwaway CA through
azure-core's documented ``connection_verify`` option.

Every call the plugin makes is here on its own: ``container_apps.get``, ``begin_update`` with
its long-running operation (``202`` + ``Location`` polled until done), ``list_revisions`` and
``list_replicas``, the bearer token the client sends, and the errors it maps (404, 401, 429,
503). The sync client, which a user's own script is likelier to use, reads the same app.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.core import exceptions as aexc
from azure.core.credentials import AccessToken
from azure.mgmt.appcontainers import ContainerAppsAPIClient as SyncClient
from azure.mgmt.appcontainers.aio import ContainerAppsAPIClient
from gpubench_azure._arm import app_info
from gpubench_azure.emulator import DEFAULT_APP, SUBSCRIPTION, make_app

from gpubench_sdk.testing import (
    Fault,
    ServedApp,
    SimulatedFleet,
    fleet_fixture,
    serve,
    throwaway_tls,
)

ARM_TOKEN = "arm-token-9d1c7b3e5f"
GROUP, APP = "gpubench", "llama"


class Token:
    """A static token: azure-core's (sync and async) token-credential protocol."""

    def __init__(self, token: str = ARM_TOKEN) -> None:
        self.token = token

    def get_token(self, *scopes: str, **kw: Any) -> AccessToken:
        return AccessToken(self.token, int(time.time()) + 3600)

    async def close(self) -> None:
        pass


class AsyncToken(Token):
    async def get_token(self, *scopes: str, **kw: Any) -> AccessToken:  # type: ignore[override]
        return AccessToken(self.token, int(time.time()) + 3600)


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, str]:
    return throwaway_tls(tmp_path_factory.mktemp("tls"))


fleet = fleet_fixture(2.5, max_workers=3)


@pytest.fixture
def served(fleet: SimulatedFleet, tls: tuple[str, str, str]) -> Iterator[ServedApp]:
    app = make_app(fleet, arm_token=ARM_TOKEN, operation_delay_s=0.3)
    with serve(app, tls=tls[1:]) as s:
        yield s


def client(served: ServedApp, ca: str, token: str = ARM_TOKEN) -> ContainerAppsAPIClient:
    return ContainerAppsAPIClient(
        AsyncToken(token),  # type: ignore[arg-type]
        SUBSCRIPTION,
        base_url=served.url,
        credential_scopes=["https://management.azure.com/.default"],
        connection_verify=ca,
        polling_interval=0.05,
    )


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_get_app(served: ServedApp, tls: tuple[str, str, str]) -> None:
    async def go() -> Any:
        async with client(served, tls[0]) as c:
            return await c.container_apps.get(GROUP, APP)

    app = run(go())
    info = app_info(app)  # what the plugin reads
    assert info.id == DEFAULT_APP and info.location == "eastus"
    assert (info.min_replicas, info.max_replicas, info.cooldown_s) == (0, 3, 1)
    assert info.fqdn == served.url.removeprefix("https://")
    assert info.workload_profile == "NC8as-T4" and info.cpu == 8.0 and info.memory == "56Gi"
    assert info.latest_ready_revision and info.latest_ready_revision.startswith("llama--")


def test_update_is_a_long_running_operation_that_rolls_a_revision(
    served: ServedApp, fleet: SimulatedFleet, tls: tuple[str, str, str]
) -> None:
    scale = {"minReplicas": 1, "maxReplicas": 2, "cooldownPeriod": 7, "rules": []}

    async def go() -> tuple[Any, Any, float]:
        async with client(served, tls[0]) as c:
            before = await c.container_apps.get(GROUP, APP)
            started = time.monotonic()
            poller = await c.container_apps.begin_update(
                GROUP, APP, {"properties": {"template": {"scale": scale}}}
            )
            assert not poller.done()  # 202: the operation is still running
            return before, await poller.result(), time.monotonic() - started

    before, after, took = run(go())
    assert took >= 0.25  # it waited for the operation (0.3 s), polling its Location
    assert after.properties.template.scale.min_replicas == 1
    assert after.properties.template.scale.cooldown_period == 7
    assert after.properties.latest_revision_name != before.properties.latest_revision_name
    assert (fleet.scaling.min_workers, fleet.scaling.max_workers) == (1, 2)
    assert fleet.scaling.idle_timeout_s == 7
    # the merge patch kept the containers
    assert after.properties.template.containers[0].resources.cpu == 8.0


def test_revisions_and_replicas(
    served: ServedApp, fleet: SimulatedFleet, tls: tuple[str, str, str]
) -> None:
    fleet.faults.clear()

    async def go() -> tuple[list[Any], list[Any], list[Any]]:
        async with client(served, tls[0]) as c:
            poller = await c.container_apps.begin_update(
                GROUP, APP, {"properties": {"template": {"scale": {"minReplicas": 2}}}}
            )
            await poller.result()
            revisions = [r async for r in c.container_apps_revisions.list_revisions(GROUP, APP)]
            active = [r for r in revisions if r.properties.active]
            booting = await c.container_apps_revision_replicas.list_replicas(
                GROUP, APP, active[0].name
            )
            await asyncio.to_thread(fleet.wait_for, lambda n: n.idle == 2, 15)
            up = await c.container_apps_revision_replicas.list_replicas(GROUP, APP, active[0].name)
            return revisions, list(booting.value), list(up.value)

    revisions, booting, up = run(go())
    assert len(revisions) == 2 and [r.properties.active for r in revisions] == [False, True]
    assert {r.properties.running_state for r in booting} == {"NotRunning"}
    assert len(up) == 2 and {r.properties.running_state for r in up} == {"Running"}
    assert all(r.properties.containers[0].ready for r in up)


def test_sync_client_reads_the_same_app(served: ServedApp, tls: tuple[str, str, str]) -> None:
    c = SyncClient(
        Token(),  # type: ignore[arg-type]
        SUBSCRIPTION,
        base_url=served.url,
        credential_scopes=["https://management.azure.com/.default"],
        connection_verify=tls[0],
    )
    with c:
        assert c.container_apps.get(GROUP, APP).id == DEFAULT_APP


@pytest.mark.parametrize(
    ("case", "error"),
    [
        ("missing", aexc.ResourceNotFoundError),
        ("bad-token", aexc.ClientAuthenticationError),
        ("throttled", aexc.HttpResponseError),
        ("unavailable", aexc.HttpResponseError),
    ],
)
def test_errors(
    case: str,
    error: type[Exception],
    served: ServedApp,
    fleet: SimulatedFleet,
    tls: tuple[str, str, str],
) -> None:
    token, app = ARM_TOKEN, APP
    if case == "missing":
        app = "nope"
    elif case == "bad-token":
        token = "wrong"
    elif case == "throttled":  # azure-core retries 429 and 503: fail every try
        fleet.faults.next(10, Fault.throttle(0), on="control")
    else:
        fleet.faults.next(10, Fault.server_error(503), on="control")

    async def go() -> None:
        async with client(served, tls[0], token) as c:
            await c.container_apps.get(GROUP, app, retry_total=0)

    with pytest.raises(error) as info:
        run(go())
    status = {"missing": 404, "bad-token": 401, "throttled": 429, "unavailable": 503}[case]
    assert getattr(info.value, "status_code", None) == status


def test_plain_http_is_refused_by_the_sdk(fleet: SimulatedFleet) -> None:
    """Why the emulator serves TLS: the client will not send a bearer token over http."""
    with serve(make_app(fleet)) as plain:

        async def go() -> None:
            async with client(plain, ca="") as c:
                await c.container_apps.get(GROUP, APP, retry_total=0)

        with pytest.raises(aexc.ServiceRequestError, match="https"):
            run(go())


def test_tls_files(tls: tuple[str, str, str]) -> None:
    assert all(Path(p).read_bytes().startswith(b"-----BEGIN") for p in tls)
