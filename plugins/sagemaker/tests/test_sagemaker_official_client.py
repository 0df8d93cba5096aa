"""boto3 (the official AWS SDK) against our SageMaker emulator: every call the plugin makes.

botocore parses a response without checking it against the service model, so a member the
emulator leaves out would only surface in a user's code. Each answer here is therefore also
walked against botocore's own output shape (``data/sagemaker*/service-2.json`` in
site-packages): every member the model marks required, at every depth, must be there.
Calls: sagemaker-runtime ``invoke_endpoint`` and ``invoke_endpoint_with_response_stream``
(answers and every error the plugin maps), sagemaker ``describe_endpoint``,
``describe_inference_component`` and ``update_inference_component_runtime_config`` (and an
unknown name for each describe). ``invoke_endpoint_async`` is not emulated: it runs against
moto in test_sagemaker_moto.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, EventStreamError
from gpubench_sagemaker.emulator import DEFAULT_COMPONENT, DEFAULT_ENDPOINT, make_app

from gpubench_sdk import ScalingSettings
from gpubench_sdk.testing import (
    Fault,
    ServedApp,
    SimulatedFleet,
    fleet_fixture,
    serve,
)

KEY_ID = "AKIAGPUBENCHBOTO0001"
SECRET = "boto-secret-0c4d8e2f9a17"


fleet = fleet_fixture(0.2, min_workers=1, max_workers=2)


@pytest.fixture
def served(fleet: SimulatedFleet) -> Iterator[ServedApp]:
    app = make_app(fleet, credentials={KEY_ID: SECRET}, inference_component=DEFAULT_COMPONENT)
    with serve(app) as s:
        fleet.wait_for(lambda c: c.idle >= 1, 10)
        yield s


def client(served: ServedApp, service: str, secret: str = SECRET) -> Any:
    return boto3.client(
        service,
        region_name="us-east-1",
        endpoint_url=served.url,
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=secret,
        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}),
    )


def missing_required(shape: Any, value: Any, path: str) -> list[str]:
    """Paths of members ``shape`` requires that ``value`` (a parsed answer) lacks."""
    if shape.type_name == "structure" and isinstance(value, dict):
        missing = [f"{path}.{m}" for m in shape.required_members if m not in value]
        for name, member in shape.members.items():
            if name in value:
                missing += missing_required(member, value[name], f"{path}.{name}")
        return missing
    if shape.type_name == "list" and isinstance(value, list):
        return [p for i, v in enumerate(value) for p in missing_required(shape.member, v, path)]
    return []


def assert_complete(api: Any, operation: str, answer: dict[str, Any]) -> None:
    output = api.meta.service_model.operation_model(operation).output_shape
    assert missing_required(output, answer, operation) == []


def invoke(served: ServedApp, payload: Any, **kw: Any) -> Any:
    return client(served, "sagemaker-runtime").invoke_endpoint(
        EndpointName=kw.pop("endpoint", DEFAULT_ENDPOINT),
        InferenceComponentName=DEFAULT_COMPONENT,
        ContentType="application/json",
        Accept="application/json",
        Body=json.dumps(payload).encode(),
        **kw,
    )


def error_of(exc: ClientError) -> tuple[int, str, str]:
    return (
        exc.response["ResponseMetadata"]["HTTPStatusCode"],
        exc.response["Error"]["Code"],
        exc.response["Error"]["Message"],
    )


# -- sagemaker-runtime -----------------------------------------------------------------------


def test_invoke_endpoint(served: ServedApp, fleet: SimulatedFleet) -> None:
    runtime = client(served, "sagemaker-runtime")
    answer = invoke(served, {"echo": "hi", "sleep_ms": 5})
    body = answer["Body"].read()
    assert_complete(runtime, "InvokeEndpoint", {**answer, "Body": body})
    # what the plugin reads: Body, ContentType, InvokedProductionVariant, the request id
    assert json.loads(body)["echo"] == "hi"
    assert answer["ContentType"] == "application/json"
    assert answer["InvokedProductionVariant"] == "AllTraffic"
    request_id = answer["ResponseMetadata"]["RequestId"]
    assert fleet.truth(request_id).status.value == "completed"


def test_invoke_endpoint_with_response_stream(served: ServedApp) -> None:
    runtime = client(served, "sagemaker-runtime")
    answer = runtime.invoke_endpoint_with_response_stream(
        EndpointName=DEFAULT_ENDPOINT,
        InferenceComponentName=DEFAULT_COMPONENT,
        ContentType="application/json",
        Body=json.dumps({"echo": "s", "sleep_ms": 30, "chunks": 3}).encode(),
    )
    assert_complete(runtime, "InvokeEndpointWithResponseStream", answer)
    parts = [event["PayloadPart"]["Bytes"] for event in answer["Body"]]
    assert len(parts) == 3 and all(json.loads(p) for p in parts)  # one JSON line per part
    assert answer["ContentType"] == "application/jsonlines"
    assert answer["InvokedProductionVariant"] == "AllTraffic"


def test_stream_failure_is_a_modelled_stream_error(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    fleet.faults.next(1, Fault.job_failed("CUDA out of memory"))
    answer = client(served, "sagemaker-runtime").invoke_endpoint_with_response_stream(
        EndpointName=DEFAULT_ENDPOINT,
        InferenceComponentName=DEFAULT_COMPONENT,
        ContentType="application/json",
        Body=json.dumps({"echo": "s", "sleep_ms": 20, "chunks": 2}).encode(),
    )
    with pytest.raises(EventStreamError) as info:
        list(answer["Body"])
    assert info.value.response["Error"]["Code"] == "ModelStreamError"
    assert "CUDA out of memory" in info.value.response["Error"]["Message"]


def test_model_failure_is_a_model_error(served: ServedApp, fleet: SimulatedFleet) -> None:
    runtime = client(served, "sagemaker-runtime")
    fleet.faults.next(1, Fault.job_failed("CUDA out of memory"))
    with pytest.raises(runtime.exceptions.ModelError) as info:
        invoke(served, {"echo": 1})
    status, code, message = error_of(info.value)
    assert (status, code) == (424, "ModelError") and "CUDA out of memory" in message


def test_no_copy_is_the_no_capacity_validation_error(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    runtime = client(served, "sagemaker-runtime")
    fleet.set_scaling(ScalingSettings(min_workers=0))
    fleet.wait_for(lambda c: c.workers == 0, 10)
    with pytest.raises(runtime.exceptions.ValidationError) as info:
        invoke(served, {"echo": 1})
    assert "no capacity" in error_of(info.value)[2]


def test_unknown_endpoint_is_a_validation_error(served: ServedApp) -> None:
    runtime = client(served, "sagemaker-runtime")
    with pytest.raises(runtime.exceptions.ValidationError, match=r"nope .* not found"):
        invoke(served, {"echo": 1}, endpoint="nope")


@pytest.mark.parametrize(
    ("fault", "status", "code"),
    [
        (Fault.throttle(retry_after_s=1), 429, "ThrottlingException"),
        (Fault.server_error(503), 503, "ServiceUnavailable"),
        (Fault.server_error(500), 500, "InternalFailure"),
    ],
    ids=["throttled", "unavailable", "internal"],
)
def test_service_errors(
    served: ServedApp, fleet: SimulatedFleet, fault: Fault, status: int, code: str
) -> None:
    fleet.faults.next(1, fault, on="submit")
    with pytest.raises(ClientError) as info:
        invoke(served, {"echo": 1})
    assert error_of(info.value)[:2] == (status, code)


def test_bad_signature_is_refused(served: ServedApp) -> None:
    with pytest.raises(ClientError) as info:
        client(served, "sagemaker", secret="wrong").describe_endpoint(EndpointName=DEFAULT_ENDPOINT)
    assert error_of(info.value)[:2] == (403, "InvalidSignatureException")


# -- sagemaker (control plane) ---------------------------------------------------------------


def test_describe_endpoint(served: ServedApp) -> None:
    control = client(served, "sagemaker")
    answer = control.describe_endpoint(EndpointName=DEFAULT_ENDPOINT)
    assert_complete(control, "DescribeEndpoint", answer)
    assert answer["EndpointStatus"] == "InService"
    variant = answer["ProductionVariants"][0]
    assert variant["VariantName"] == "AllTraffic" and variant["CurrentInstanceCount"] == 1


def test_describe_unknown_endpoint_is_a_validation_exception(served: ServedApp) -> None:
    with pytest.raises(ClientError) as info:
        client(served, "sagemaker").describe_endpoint(EndpointName="nope")
    status, code, message = error_of(info.value)
    assert (status, code) == (400, "ValidationException")
    assert message.startswith('Could not find endpoint "arn:aws:sagemaker:') and "nope" in message


def test_describe_inference_component(served: ServedApp) -> None:
    control = client(served, "sagemaker")
    answer = control.describe_inference_component(InferenceComponentName=DEFAULT_COMPONENT)
    assert_complete(control, "DescribeInferenceComponent", answer)
    assert answer["InferenceComponentStatus"] == "InService"
    assert answer["EndpointArn"].endswith(f":endpoint/{DEFAULT_ENDPOINT}")
    runtime = answer["RuntimeConfig"]
    assert (runtime["DesiredCopyCount"], runtime["CurrentCopyCount"]) == (1, 1)


def test_describe_unknown_component_is_a_validation_exception(served: ServedApp) -> None:
    with pytest.raises(ClientError) as info:
        client(served, "sagemaker").describe_inference_component(InferenceComponentName="nope")
    status, code, message = error_of(info.value)
    assert (status, code) == (400, "ValidationException") and "nope" in message


def test_update_inference_component_runtime_config(
    served: ServedApp, fleet: SimulatedFleet
) -> None:
    control = client(served, "sagemaker")
    answer = control.update_inference_component_runtime_config(
        InferenceComponentName=DEFAULT_COMPONENT, DesiredRuntimeConfig={"CopyCount": 0}
    )
    assert_complete(control, "UpdateInferenceComponentRuntimeConfig", answer)
    assert answer["InferenceComponentArn"].endswith(f"/{DEFAULT_COMPONENT}")
    fleet.wait_for(lambda c: c.workers == 0, 10)
    described = control.describe_inference_component(InferenceComponentName=DEFAULT_COMPONENT)
    runtime = described["RuntimeConfig"]
    assert (runtime["DesiredCopyCount"], runtime["CurrentCopyCount"]) == (0, 0)
