"""A SageMaker emulator on the testing kit's simulated fleet: what moto does not implement.

One ASGI app speaks both planes, each SigV4-signed and checked against ``credentials``:

- sagemaker-runtime (REST-JSON): ``POST /endpoints/{name}/invocations`` and
  ``/invocations-response-stream`` (the answer in event-stream framing, one ``PayloadPart``
  per streamed chunk, as the fleet produces them);
- sagemaker (JSON 1.1, ``POST /`` with ``X-Amz-Target: SageMaker.<Operation>``):
  ``DescribeEndpoint``, ``DescribeInferenceComponent`` and
  ``UpdateInferenceComponentRuntimeConfig``.

With ``inference_component`` set, the fleet's ``min_workers`` is the component's copy count
and only copies that are up serve: while none is, invocations fail with the ``ValidationError``
SageMaker answers ("... has no capacity to process this request"), and the first such failure
raises the copy count to one, as the scale-out policy on the ``NoCapacityInvocationFailures``
alarm does (after ``scale_out_delay_s``). Without a component the fleet's workers are the
endpoint's instances. Faults in ``fleet.faults`` apply to invocations (route ``submit``) and to
the control plane (``control``). Run ``python -m gpubench_sagemaker.emulator --port 0``.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

from gpubench_sdk import ScalingSettings
from gpubench_sdk import testing as kit

from ._wire import payload_part, sigv4_valid, stream_exception

DEFAULT_ENDPOINT = "gpubench-emulated"
DEFAULT_COMPONENT = "gpubench-emulated-ic"
VARIANT = "AllTraffic"
NO_CAPACITY_MESSAGE = (
    "Inference Component has no capacity to process this request. ApplicationAutoScaling may "
    "be in-progress (if configured) or try to increase the capacity by invoking "
    "UpdateInferenceComponentRuntimeConfig API."
)
ACCOUNT = "123456789012"
_ERROR_CODES = {429: "ThrottlingException", 500: "InternalFailure", 503: "ServiceUnavailable"}


def aws_error(status: int, message: str) -> tuple[bytes, str]:
    """A REST-JSON error body; botocore reads the code from ``__type``."""
    code = _ERROR_CODES.get(status, "InternalFailure" if status >= 500 else "ValidationError")
    return json.dumps({"__type": code, "message": message}).encode(), "application/json"


def arn(kind: str, name: str) -> str:
    """The ARN SageMaker gives a resource of this kind (``endpoint``, ``inference-component``)."""
    return f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:{kind}/{name}"


def make_app(
    fleet: kit.SimulatedFleet,
    *,
    credentials: Mapping[str, str],
    endpoint_name: str = DEFAULT_ENDPOINT,
    inference_component: str | None = None,
    scale_out_delay_s: float = 0.0,
) -> kit.ASGIApp:
    """The emulator app for ``fleet``. ``credentials`` maps access key ids to secrets: every
    request must be signed by one of them."""
    emu = kit.Emulator(fleet, name="SageMaker", error_body=aws_error)
    created_s = time.time()
    scaling_out: list[asyncio.TimerHandle] = []  # the alarm's action, while it is pending
    no_capacity_failures = [0]  # the CloudWatch metric NoCapacityInvocationFailures

    def fail(status: int, code: str, message: str, request_id: str | None = None) -> kit.Reject:
        # the code in both places AWS puts it: botocore's REST-JSON parser (sagemaker-runtime)
        # reads the x-amzn-ErrorType header, its JSON 1.1 parser (sagemaker) only ``__type``
        headers = {"x-amzn-ErrorType": code, "x-amzn-RequestId": request_id or str(uuid.uuid4())}
        body = {"__type": code, "message": message}
        return kit.Reject(status, message, response=emu.json(body, status, headers))

    async def signed(request: kit.Request) -> bytes:
        body = await request.body()
        if not sigv4_valid(request.method, str(request.url), request.headers, body, credentials):
            raise fail(403, "InvalidSignatureException", "The request signature we calculated "
                       "does not match the signature you provided.")  # fmt: skip
        return body

    def scale_out_from_zero() -> None:
        if fleet.scaling.min_workers == 0 and not scaling_out:

            def act() -> None:
                scaling_out.clear()
                fleet.set_scaling(ScalingSettings(min_workers=1))

            scaling_out.append(emu.later(scale_out_delay_s, act))

    async def submit(request: kit.Request) -> Any:
        name = request.path_params["name"]
        body = await signed(request)
        if name != endpoint_name:  # sagemaker-runtime's words for an unknown endpoint
            raise fail(400, "ValidationError", f"Endpoint {name} of account {ACCOUNT} not found.")
        component = request.headers.get("x-amzn-sagemaker-inference-component")
        if inference_component is not None:
            if component != inference_component:
                raise fail(400, "ValidationError", f"Inference Component {component} not found.")
            if fleet.counts().ready == 0:
                no_capacity_failures[0] += 1
                scale_out_from_zero()
                raise fail(400, "ValidationError", NO_CAPACITY_MESSAGE)
        try:
            payload = json.loads(body)
        except ValueError:
            raise fail(400, "ValidationError", "the model expects a JSON body") from None
        try:
            return emu.submit(payload if isinstance(payload, dict) else {"input": payload})
        except kit.Reject:
            raise fail(429, "ThrottlingException", "Rate exceeded") from None

    @emu.route("/endpoints/{name}/invocations", "POST", fault="submit")
    async def invocations(request: kit.Request) -> Any:
        job = await submit(request)
        await job.done.wait()
        if job.status is not kit.JobStatus.COMPLETED:
            message = f"Received server error (500) from primary with message {job.error!r}"
            raise fail(424, "ModelError", message, job.id)
        headers = {"x-Amzn-Invoked-Production-Variant": VARIANT, "x-amzn-RequestId": job.id}
        return emu.json(job.result, headers=headers)

    @emu.route("/endpoints/{name}/invocations-response-stream", "POST", fault="submit")
    async def response_stream(request: kit.Request) -> Any:
        job = await submit(request)

        async def events() -> AsyncIterator[bytes]:
            sent = 0
            async for piece in kit.follow(job, 0.002):
                yield payload_part((json.dumps(piece) + "\n").encode())
                sent += 1
            if job.status is not kit.JobStatus.COMPLETED:
                yield stream_exception("ModelStreamError", str(job.error))
            elif sent == 0:
                yield payload_part(json.dumps(job.output).encode())

        headers = {
            "X-Amzn-SageMaker-Content-Type": "application/jsonlines",
            "x-Amzn-Invoked-Production-Variant": VARIANT,
            "x-amzn-RequestId": job.id,
        }
        return emu.stream(events(), "application/vnd.amazon.eventstream", headers)

    def describe_endpoint(params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("EndpointName")
        if name != endpoint_name:  # SageMaker's answer for a name it does not know
            raise LookupError(f'Could not find endpoint "{arn("endpoint", str(name))}".')
        c = fleet.counts()
        scaling = {"Status": "ENABLED", "MinInstanceCount": 0,
                   "MaxInstanceCount": fleet.scaling.max_workers}  # fmt: skip
        variant = {"VariantName": VARIANT, "CurrentInstanceCount": c.ready,
                   "DesiredInstanceCount": c.workers,
                   "ManagedInstanceScaling": scaling}  # fmt: skip
        return {"EndpointName": endpoint_name, "EndpointArn": arn("endpoint", endpoint_name),
                "EndpointConfigName": f"{endpoint_name}-config", "EndpointStatus": "InService",
                "ProductionVariants": [variant], "CreationTime": created_s,
                "LastModifiedTime": created_s}  # fmt: skip

    def describe_component(params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("InferenceComponentName")
        if inference_component is None or name != inference_component:
            where = arn("inference-component", str(name))
            raise LookupError(f'Could not find inference component "{where}".')
        # every member botocore's DescribeInferenceComponentOutput requires, and what we read
        runtime = {
            "DesiredCopyCount": fleet.scaling.min_workers,
            "CurrentCopyCount": fleet.counts().ready,
        }
        return {
            "InferenceComponentName": inference_component,
            "InferenceComponentArn": arn("inference-component", inference_component),
            "EndpointName": endpoint_name,
            "EndpointArn": arn("endpoint", endpoint_name),
            "VariantName": VARIANT,
            "InferenceComponentStatus": "InService",
            "RuntimeConfig": runtime,
            "CreationTime": created_s,
            "LastModifiedTime": created_s,
        }

    def update_component(params: dict[str, Any]) -> dict[str, Any]:
        described = describe_component(params)
        copies = (params.get("DesiredRuntimeConfig") or {}).get("CopyCount")
        if not isinstance(copies, int) or copies < 0:
            raise ValueError("DesiredRuntimeConfig.CopyCount must be an integer >= 0")
        fleet.set_scaling(ScalingSettings(min_workers=copies))
        return {"InferenceComponentArn": described["InferenceComponentArn"]}

    operations = {
        "SageMaker.DescribeEndpoint": describe_endpoint,
        "SageMaker.DescribeInferenceComponent": describe_component,
        "SageMaker.UpdateInferenceComponentRuntimeConfig": update_component,
    }

    @emu.route("/", "POST")
    async def control(request: kit.Request) -> Any:
        body = await signed(request)
        operation = operations.get(request.headers.get("x-amz-target", ""))
        if operation is None:
            return emu.json({"__type": "UnknownOperationException", "message": "not emulated"}, 400)
        try:
            return operation(json.loads(body or b"{}"))
        except (LookupError, ValueError) as exc:
            return emu.json({"__type": "ValidationException", "message": str(exc)}, 400)

    return emu.app(no_capacity_failures=no_capacity_failures)


def main(argv: list[str] | None = None) -> None:
    """Serve an emulator until interrupted: ``python -m gpubench_sagemaker.emulator``."""
    parser = kit.EmulatorParser(__doc__, port=8688, min_flag="--min-workers", key_help=None)
    parser.add_argument("--endpoint-name", default=DEFAULT_ENDPOINT)
    parser.add_argument("--inference-component", default=None)
    args = parser.parse(argv)
    # the signing key pair is read from the environment, as boto3 reads it
    credentials = {os.environ["AWS_ACCESS_KEY_ID"]: os.environ["AWS_SECRET_ACCESS_KEY"]}
    args.serve(make_app(args.fleet(), credentials=credentials, **args.own()))


if __name__ == "__main__":
    main()
