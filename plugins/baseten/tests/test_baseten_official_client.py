"""``baseten`` (Baseten's official SDK: inference and management clients) against our emulator.

Both clients take ``base_url_override`` (``baseten.client.InferenceClient`` and
``ManagementClient``, 0.13.1), so they reach the emulator as they would Baseten. They send
``Authorization: Bearer <key>``; the plugin sends ``Api-Key <key>``: the emulator, like Baseten,
takes both. The SDK validates every answer against Baseten's OpenAPI models (pydantic) and
checks each operation's success code (201 for ``async_predict``, 202 for ``wake``), so a field
missing or of the wrong type, or a wrong status, fails here.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from baseten.client import InferenceClient, ManagementClient
from baseten.client.inferenceapi import AsyncPredictRequest, PredictInput, ResponseErrorResponse
from baseten.client.managementapi import ResponseError as ManagementResponseError
from baseten.client.managementapi import UpdateAutoscalingSettings
from gpubench_baseten.emulator import make_app

from gpubench_sdk import ScalingSettings
from gpubench_sdk.testing import (
    JobStatus,
    ServedApp,
    SimulatedFleet,
    fleet_fixture,
    served_fixture,
)

KEY = "bt_official_4e8a1c"
MODEL, DEP = "m0del1", "dep1oy1"


fleet = fleet_fixture(0.2, max_workers=2, idle_timeout_s=1)
served = served_fixture(make_app, api_key=KEY, model_id=MODEL, deployment_id=DEP)


@pytest.fixture
def inference(served: ServedApp) -> Iterator[InferenceClient]:
    with InferenceClient(api_key=KEY, model_id=MODEL, base_url_override=served.url) as client:
        yield client


@pytest.fixture
def management(served: ServedApp) -> Iterator[ManagementClient]:
    with ManagementClient(api_key=KEY, base_url_override=served.url) as client:
        yield client


def test_predict_on_an_environment_and_a_deployment(inference: InferenceClient) -> None:
    out = inference.api.predict(
        env_name="production", request=PredictInput({"echo": "a", "sleep_ms": 5})
    )
    assert out.root == {"echo": "a"}
    out = inference.api.predict_deployment(deployment_id=DEP, request=PredictInput({"echo": "b"}))
    assert out.root == {"echo": "b"}
    out = inference.api.predict_production(request=PredictInput({"echo": "c"}))
    assert out.root == {"echo": "c"}


def test_async_predict_status_queue_and_cancel(
    inference: InferenceClient, fleet: SimulatedFleet
) -> None:
    api = inference.api
    first = api.async_predict(
        env_name="production",
        request=AsyncPredictRequest(model_input={"echo": "x", "sleep_ms": 400}),
    )
    second = api.async_predict(
        env_name="production",
        request=AsyncPredictRequest(model_input={"echo": "y", "sleep_ms": 400}),
    )
    queue = api.get_async_queue_status(env_name="production")
    assert (
        queue.deployment_id == DEP
        and queue.num_queued_requests + queue.num_in_progress_requests == 2
    )
    status = api.get_async_request_status(request_id=first.request_id)
    assert status.status in ("QUEUED", "IN_PROGRESS") and status.deployment_id == DEP
    deadline = time.monotonic() + 10
    while (
        status := api.get_async_request_status(request_id=first.request_id)
    ).status != "SUCCEEDED":
        assert time.monotonic() < deadline, status
        time.sleep(0.06)  # Baseten allows 20 status reads per second (429 beyond)
    assert status.errors == [] and status.created_at < status.status_at
    answer = api.cancel_async_request(request_id=first.request_id)  # finished: not cancellable
    assert answer.canceled is False and "SUCCEEDED" in answer.message
    assert fleet.truth(second.request_id).status in (
        JobStatus.QUEUED,
        JobStatus.RUNNING,
        JobStatus.COMPLETED,
    )


def test_cancel_of_a_queued_request(inference: InferenceClient, fleet: SimulatedFleet) -> None:

    fleet.set_scaling(ScalingSettings(max_workers=1))
    api = inference.api
    busy = api.async_predict(
        env_name="production", request=AsyncPredictRequest(model_input={"sleep_ms": 2000})
    )
    waiting = api.async_predict(
        env_name="production", request=AsyncPredictRequest(model_input={"sleep_ms": 10})
    )
    answer = api.cancel_async_request(request_id=waiting.request_id)
    assert answer.canceled is True
    assert api.get_async_request_status(request_id=waiting.request_id).status == "CANCELED"
    assert fleet.truth(waiting.request_id).status is JobStatus.CANCELLED
    assert fleet.truth(busy.request_id).status is not JobStatus.CANCELLED


def test_wake_starts_a_replica(inference: InferenceClient, fleet: SimulatedFleet) -> None:
    inference.api.wake_production()  # the SDK demands 202
    fleet.wait_for(lambda c: c.idle == 1, 10)


def test_deployment_and_autoscaling(management: ManagementClient, fleet: SimulatedFleet) -> None:
    api = management.api
    dep = api.get_models_deployments_production(model_id=MODEL)
    assert dep.id == DEP and dep.status == "SCALED_TO_ZERO" and dep.active_replica_count == 0
    assert dep.autoscaling_settings is not None
    assert (dep.autoscaling_settings.min_replica, dep.autoscaling_settings.max_replica) == (0, 2)
    answer = api.patch_models_deployments_autoscaling_settings(
        model_id=MODEL,
        deployment_id=DEP,
        request=UpdateAutoscalingSettings(min_replica=1, scale_down_delay=30, concurrency_target=2),
    )
    assert answer.status == "ACCEPTED"
    fleet.wait_for(lambda c: c.idle == 1, 10)
    dep = api.get_models_deployments_deployment_id(model_id=MODEL, deployment_id=DEP)
    assert dep.status == "ACTIVE" and dep.active_replica_count == 1
    assert dep.autoscaling_settings is not None and dep.autoscaling_settings.concurrency_target == 2
    assert fleet.scaling.min_workers == 1 and fleet.scaling.idle_timeout_s == 30
    again = api.patch_models_deployments_production_autoscaling_settings(
        model_id=MODEL, request=UpdateAutoscalingSettings(min_replica=1)
    )
    assert again.status == "UNCHANGED"


def test_errors_reach_the_sdk_as_its_error_types(
    served: ServedApp, management: ManagementClient
) -> None:
    wrong = InferenceClient(api_key="wrong", model_id=MODEL, base_url_override=served.url)
    with wrong as client, pytest.raises(ResponseErrorResponse) as info:
        client.api.predict(env_name="production", request=PredictInput({"echo": "x"}))
    assert info.value.status_code == 401
    assert info.value.error_response.error_code == "unauthorized"
    with InferenceClient(api_key=KEY, model_id=MODEL, base_url_override=served.url) as client:
        job = client.api.async_predict(
            env_name="production", request=AsyncPredictRequest(model_input={"sleep_ms": 5})
        )
        with pytest.raises(ResponseErrorResponse) as limited:  # 20 status reads a second
            for _ in range(25):
                client.api.get_async_request_status(request_id=job.request_id)
    assert limited.value.status_code == 429
    assert limited.value.error_response.error_code == "rate_limited"
    with pytest.raises(ManagementResponseError) as bad:
        management.api.patch_models_deployments_autoscaling_settings(
            model_id=MODEL,
            deployment_id=DEP,
            request=UpdateAutoscalingSettings(scale_down_delay=4000),
        )
    assert bad.value.status_code == 400 and "scale_down_delay" in bad.value.body
