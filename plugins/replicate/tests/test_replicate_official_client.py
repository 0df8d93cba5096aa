"""The official ``replicate`` client (PyPI ``replicate`` 1.0.x) drives our Replicate emulator.

Where the client and the emulator disagree, the client is right: these calls cover every route
``ReplicateProvider`` uses (creates on a model, a version and a deployment; ``Prefer: wait``; get;
cancel; SSE streaming; the deployment read and ``PATCH``) and every field it reads (``status``,
``metrics.predict_time``, ``created_at``/``started_at``, ``urls``,
``current_release.configuration``), plus what ``replicate.run("owner/name:version")`` needs
(``GET /v1/models/{owner}/{name}/versions/{id}``) and the API's JSON problem bodies for errors.
"""

from __future__ import annotations

import time

import pytest
import replicate  # the testing extra installs it: CI fails, never skips, without it
from gpubench_replicate.emulator import (
    DEFAULT_DEPLOYMENT,
    DEFAULT_MODEL,
    DEFAULT_VERSION,
    make_app,
)

from gpubench_sdk.testing import (
    ServedApp,
    fleet_fixture,
    served_fixture,
)

ReplicateError = replicate.exceptions.ReplicateError

KEY = "r8_official-client-test-key"
PROBE = {"echo": "hi", "sleep_ms": 20}


fleet = fleet_fixture(0.05, max_workers=2, idle_timeout_s=30)
served = served_fixture(make_app, api_key=KEY)


@pytest.fixture
def client(served: ServedApp) -> replicate.Client:
    return replicate.Client(api_token=KEY, base_url=served.url)


def test_predictions_on_a_version_model_and_deployment(client: replicate.Client) -> None:
    on_version = client.predictions.create(version=DEFAULT_VERSION, input=PROBE, wait=True)
    on_model = client.models.predictions.create(model=DEFAULT_MODEL, input=PROBE, wait=10)
    on_deployment = client.deployments.predictions.create(DEFAULT_DEPLOYMENT, input=PROBE)
    on_deployment.wait()  # polls GET /v1/predictions/{id}
    for prediction in (on_version, on_model, on_deployment):
        assert prediction.status == "succeeded", prediction
        assert prediction.output == {"echo": "hi"}
        assert prediction.metrics is not None and prediction.metrics["predict_time"] >= 0.019
        assert prediction.created_at and prediction.started_at and prediction.completed_at
        assert prediction.urls is not None and set(prediction.urls) >= {"get", "cancel", "stream"}
        assert (prediction.model, prediction.version) == (DEFAULT_MODEL, DEFAULT_VERSION)
    got = client.predictions.get(on_version.id)
    assert got.id == on_version.id and got.status == "succeeded"


def test_cancel(client: replicate.Client) -> None:
    prediction = client.predictions.create(version=DEFAULT_VERSION, input={"sleep_ms": 5000})
    canceled = client.predictions.cancel(prediction.id)
    assert canceled.id == prediction.id
    deadline = time.monotonic() + 5
    while prediction.status != "canceled":
        assert time.monotonic() < deadline, prediction
        time.sleep(0.02)
        prediction.reload()


def test_deployment_read_and_update(client: replicate.Client) -> None:
    deployment = client.deployments.get(DEFAULT_DEPLOYMENT)
    release = deployment.current_release
    assert release is not None and release.created_by is not None
    assert (release.model, release.version) == (DEFAULT_MODEL, DEFAULT_VERSION)
    assert release.configuration.max_instances == 2
    owner, name = DEFAULT_DEPLOYMENT.split("/")
    updated = client.deployments.update(owner, name, min_instances=1, max_instances=3)
    assert updated.current_release is not None
    config = updated.current_release.configuration
    assert (config.min_instances, config.max_instances) == (1, 3)
    assert updated.current_release.number == release.number + 1
    on_it = deployment.predictions.create(input=PROBE)
    on_it.wait()
    assert on_it.status == "succeeded"


def test_models_versions_and_run(client: replicate.Client) -> None:
    model = client.models.get(DEFAULT_MODEL)
    assert model.latest_version is not None and model.latest_version.id == DEFAULT_VERSION
    version = model.versions.get(DEFAULT_VERSION)
    assert version.id == DEFAULT_VERSION
    assert "Input" in version.openapi_schema["components"]["schemas"]
    assert [v.id for v in model.versions.list()] == [DEFAULT_VERSION]
    assert client.run(f"{DEFAULT_MODEL}:{DEFAULT_VERSION}", input=PROBE) == {"echo": "hi"}
    assert client.run(DEFAULT_MODEL, input=PROBE) == {"echo": "hi"}


def test_stream(client: replicate.Client) -> None:
    events = list(client.stream(DEFAULT_MODEL, input={"chunks": 3, "sleep_ms": 30}))
    outputs = [e for e in events if e.event.value == "output"]
    assert len(outputs) == 3 and events[-1].event.value == "done"


def test_errors_are_json_problems(client: replicate.Client, served: ServedApp) -> None:
    with pytest.raises(ReplicateError) as unknown:
        client.predictions.get("no-such-prediction")
    assert (unknown.value.status, unknown.value.title) == (404, "Not found")
    with pytest.raises(ReplicateError) as no_version:
        client.models.get(DEFAULT_MODEL).versions.get("0" * 64)
    assert no_version.value.status == 404 and no_version.value.detail
    with pytest.raises(ReplicateError) as no_route:
        client.collections.get("nothing-here")  # a route the emulator does not serve
    assert no_route.value.status == 404 and no_route.value.detail == "Not found."
    with pytest.raises(ReplicateError) as bad_key:
        replicate.Client(api_token="wrong", base_url=served.url).deployments.get(DEFAULT_DEPLOYMENT)
    assert (bad_key.value.status, bad_key.value.title) == (401, "Unauthenticated")
    with pytest.raises(ReplicateError) as bad_input:
        client.predictions.create(version=DEFAULT_VERSION, input="not an object")  # type: ignore[arg-type]
    assert bad_input.value.status == 422 and "input" in (bad_input.value.detail or "")
