"""``google-cloud-run`` (Google's official client, REST transport) against our Cloud Run emulator.

The plugin drives the Admin API with this very client, so every call it makes is here on its
own: ``ServicesClient.get_service`` and ``update_service`` (with the long-running operation,
done at once or polled until done), ``RevisionsClient.list_revisions``, and the errors it maps
(404, 400, 429, 503). The client parses proto3 JSON leniently (unknown fields are dropped);
the emulator's bodies are also parsed strictly here, so a field the real API does not have (a
misspelling the client would silently drop) fails the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from google.api_core import exceptions as gexc
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import run_v2
from google.protobuf import json_format
from gpubench_cloudrun.emulator import DEFAULT_SERVICE, make_app

from gpubench_sdk.testing import Duration, Fault, FleetConfig, ServedApp, SimulatedFleet, serve


@pytest.fixture
def fleet() -> SimulatedFleet:
    return SimulatedFleet(FleetConfig(cold_start=Duration.fixed(0.1), max_workers=3))


@pytest.fixture
def served(fleet: SimulatedFleet) -> Iterator[ServedApp]:
    with serve(make_app(fleet)) as s:
        yield s


def clients(served: ServedApp) -> tuple[Any, Any]:
    kw: dict[str, Any] = {
        "transport": "rest",
        "credentials": AnonymousCredentials(),  # type: ignore[no-untyped-call]
        "client_options": ClientOptions(api_endpoint=served.url),
    }
    return run_v2.ServicesClient(**kw), run_v2.RevisionsClient(**kw)


def test_get_service(served: ServedApp) -> None:
    services, _ = clients(served)
    service = services.get_service(name=DEFAULT_SERVICE)
    # what the plugin reads (gpubench_cloudrun._admin.service_info)
    assert service.name == DEFAULT_SERVICE and service.uri == served.url
    template = service.template
    assert (template.scaling.min_instance_count, template.scaling.max_instance_count) == (0, 3)
    assert template.node_selector.accelerator == "nvidia-l4"
    assert template.containers[0].resources.limits["nvidia.com/gpu"] == "1"
    assert template.gpu_zonal_redundancy_disabled is True
    assert service.latest_ready_revision.startswith(f"{DEFAULT_SERVICE}/revisions/")


def test_service_and_revision_bodies_parse_strictly(served: ServedApp) -> None:
    base = f"{served.url}/v2/{DEFAULT_SERVICE}"
    service = httpx.get(base).text
    json_format.Parse(service, run_v2.Service.pb(run_v2.Service()), ignore_unknown_fields=False)
    for revision in httpx.get(f"{base}/revisions").json()["revisions"]:
        message = run_v2.Revision.pb(run_v2.Revision())
        json_format.ParseDict(revision, message, ignore_unknown_fields=False)


def test_get_unknown_service_is_not_found(served: ServedApp) -> None:
    services, _ = clients(served)
    with pytest.raises(gexc.NotFound) as info:
        services.get_service(name="projects/p/locations/us-central1/services/missing")
    assert info.value.code == 404 and "missing" in info.value.message


def test_list_revisions(served: ServedApp) -> None:
    _, revisions = clients(served)
    names = [r.name for r in revisions.list_revisions(parent=DEFAULT_SERVICE)]
    assert len(names) == 1 and names[0].startswith(f"{DEFAULT_SERVICE}/revisions/")


def test_update_service_rolls_a_revision(served: ServedApp, fleet: SimulatedFleet) -> None:
    services, revisions = clients(served)
    service = services.get_service(name=DEFAULT_SERVICE)
    before = service.latest_ready_revision
    service.template.scaling.min_instance_count = 1
    service.template.labels["gpubench-cold-roll"] = "abc"  # what ensure_cold changes
    operation = services.update_service(service=service)
    updated = operation.result(timeout=10)
    assert updated.template.scaling.min_instance_count == 1
    assert updated.template.labels["gpubench-cold-roll"] == "abc"
    assert updated.latest_ready_revision != before
    assert fleet.scaling.min_workers == 1
    assert len(list(revisions.list_revisions(parent=DEFAULT_SERVICE))) == 2


def test_update_operation_is_polled_until_done(fleet: SimulatedFleet) -> None:
    with serve(make_app(fleet, operation_delay_s=0.3)) as s:
        services, _ = clients(s)
        service = services.get_service(name=DEFAULT_SERVICE)
        service.template.labels["k"] = "v"
        operation = services.update_service(service=service)
        assert not operation.done()  # GET .../operations/ID says it is still running
        assert operation.result(timeout=10).template.labels["k"] == "v"


def test_invalid_update_is_a_bad_request(served: ServedApp) -> None:
    services, _ = clients(served)
    service = services.get_service(name=DEFAULT_SERVICE)
    service.template.scaling.min_instance_count = 5  # above max_instance_count 3
    with pytest.raises(gexc.BadRequest) as info:  # over REST the class follows the status
        services.update_service(service=service)
    assert info.value.code == 400 and "min_instance_count" in info.value.message


@pytest.mark.parametrize(
    ("fault", "error"),
    [(Fault.throttle(), gexc.TooManyRequests), (Fault.server_error(503), gexc.ServiceUnavailable)],
    ids=["429", "503"],
)
def test_admin_faults(served: ServedApp, fleet: SimulatedFleet, fault: Fault, error: type) -> None:
    # retry=None: run_v2 retries a 503 on reads by itself (ServiceUnavailable is in its
    # default retry), which would hide the error this checks
    services, _ = clients(served)
    fleet.faults.next(1, fault, on="control")
    with pytest.raises(error):
        services.get_service(name=DEFAULT_SERVICE, retry=None)
