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
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Mapping, MutableMapping
from typing import Any

from gpubench_sdk import ScalingSettings
from gpubench_sdk.testing import (
    INSTALL_HINT,
    ASGIApp,
    FaultInjector,
    FleetConfig,
    JobStatus,
    QueueFull,
    SimulatedFleet,
)

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
    fleet: SimulatedFleet,
    *,
    credentials: Mapping[str, str],
    endpoint_name: str = DEFAULT_ENDPOINT,
    inference_component: str | None = None,
    scale_out_delay_s: float = 0.0,
) -> ASGIApp:
    """The emulator app for ``fleet``. ``credentials`` maps access key ids to secrets: every
    request must be signed by one of them."""
    try:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response, StreamingResponse
        from starlette.routing import Route
    except ImportError as exc:
        raise ImportError(f"the SageMaker emulator: {INSTALL_HINT}") from exc

    created_s = time.time()
    scaling_out: list[asyncio.TimerHandle] = []
    no_capacity_failures = [0]  # the CloudWatch metric NoCapacityInvocationFailures

    def error(status: int, code: str, message: str, request_id: str | None = None) -> Response:
        # the code in both places AWS puts it: botocore's REST-JSON parser (sagemaker-runtime)
        # reads the x-amzn-ErrorType header, its JSON 1.1 parser (sagemaker) only ``__type``
        headers = {"x-amzn-ErrorType": code, "x-amzn-RequestId": request_id or str(uuid.uuid4())}
        body = {"__type": code, "message": message}
        return JSONResponse(body, status_code=status, headers=headers)

    async def signed(request: Request) -> tuple[bytes, Response | None]:
        body = await request.body()
        if not sigv4_valid(request.method, str(request.url), request.headers, body, credentials):
            return body, error(
                403,
                "InvalidSignatureException",
                "The request signature we calculated does not match the signature you provided.",
            )
        return body, None

    def copies_up() -> int:
        c = fleet.counts()
        return c.idle + c.running

    def scale_out_from_zero() -> None:
        if fleet.scaling.min_workers == 0 and not scaling_out:
            loop = asyncio.get_running_loop()

            def act() -> None:
                scaling_out.clear()
                fleet.set_scaling(ScalingSettings(min_workers=1))

            scaling_out.append(loop.call_later(scale_out_delay_s, act))

    async def submit(request: Request) -> Any:
        name = request.path_params["name"]
        body, denied = await signed(request)
        if denied is not None:
            return denied
        if name != endpoint_name:  # sagemaker-runtime's words for an unknown endpoint
            return error(400, "ValidationError", f"Endpoint {name} of account {ACCOUNT} not found.")
        component = request.headers.get("x-amzn-sagemaker-inference-component")
        if inference_component is not None:
            if component != inference_component:
                return error(400, "ValidationError", f"Inference Component {component} not found.")
            if copies_up() == 0:
                no_capacity_failures[0] += 1
                scale_out_from_zero()
                return error(400, "ValidationError", NO_CAPACITY_MESSAGE)
        try:
            payload = json.loads(body)
        except ValueError:
            return error(400, "ValidationError", "the model expects a JSON body")
        try:
            return fleet.submit(payload if isinstance(payload, dict) else {"input": payload})
        except QueueFull:
            return error(429, "ThrottlingException", "Rate exceeded")

    async def invocations(request: Request) -> Response:
        job = await submit(request)
        if isinstance(job, Response):
            return job
        await job.done.wait()
        if job.status is not JobStatus.COMPLETED:
            return error(
                424,
                "ModelError",
                f"Received server error (500) from primary with message {job.error!r}",
                job.id,
            )
        output = list(job.stream) if job.stream else job.output
        headers = {"x-Amzn-Invoked-Production-Variant": VARIANT, "x-amzn-RequestId": job.id}
        return JSONResponse(output, headers=headers)

    async def response_stream(request: Request) -> Response:
        job = await submit(request)
        if isinstance(job, Response):
            return job

        async def events() -> AsyncIterator[bytes]:
            sent = 0
            while True:
                finished = job.done.is_set()
                while sent < len(job.stream):
                    yield payload_part((json.dumps(job.stream[sent]) + "\n").encode())
                    sent += 1
                if finished:
                    break
                await asyncio.sleep(0.002)
            if job.status is not JobStatus.COMPLETED:
                yield stream_exception("ModelStreamError", str(job.error))
            elif sent == 0:
                yield payload_part(json.dumps(job.output).encode())

        headers = {
            "X-Amzn-SageMaker-Content-Type": "application/jsonlines",
            "x-Amzn-Invoked-Production-Variant": VARIANT,
            "x-amzn-RequestId": job.id,
        }
        return StreamingResponse(
            events(), media_type="application/vnd.amazon.eventstream", headers=headers
        )

    def describe_endpoint(params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("EndpointName")
        if name != endpoint_name:  # SageMaker's answer for a name it does not know
            raise LookupError(f'Could not find endpoint "{arn("endpoint", str(name))}".')
        c = fleet.counts()
        return {
            "EndpointName": endpoint_name,
            "EndpointArn": arn("endpoint", endpoint_name),
            "EndpointConfigName": f"{endpoint_name}-config",
            "EndpointStatus": "InService",
            "ProductionVariants": [
                {
                    "VariantName": VARIANT,
                    "CurrentInstanceCount": c.idle + c.running,
                    "DesiredInstanceCount": c.workers,
                    "ManagedInstanceScaling": {
                        "Status": "ENABLED",
                        "MinInstanceCount": 0,
                        "MaxInstanceCount": fleet.scaling.max_workers,
                    },
                }
            ],
            "CreationTime": created_s,
            "LastModifiedTime": created_s,
        }

    def describe_component(params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("InferenceComponentName")
        if inference_component is None or name != inference_component:
            where = arn("inference-component", str(name))
            raise LookupError(f'Could not find inference component "{where}".')
        # every member botocore's DescribeInferenceComponentOutput requires, and what we read
        return {
            "InferenceComponentName": inference_component,
            "InferenceComponentArn": arn("inference-component", inference_component),
            "EndpointName": endpoint_name,
            "EndpointArn": arn("endpoint", endpoint_name),
            "VariantName": VARIANT,
            "InferenceComponentStatus": "InService",
            "RuntimeConfig": {
                "DesiredCopyCount": fleet.scaling.min_workers,
                "CurrentCopyCount": copies_up(),
            },
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

    async def control(request: Request) -> Response:
        body, denied = await signed(request)
        if denied is not None:
            return denied
        operation = operations.get(request.headers.get("x-amz-target", ""))
        if operation is None:
            return _json11_error(400, "UnknownOperationException", "not emulated")
        try:
            return JSONResponse(operation(json.loads(body or b"{}")))
        except LookupError as exc:
            return _json11_error(400, "ValidationException", str(exc))
        except ValueError as exc:
            return _json11_error(400, "ValidationException", str(exc))

    def _json11_error(status: int, code: str, message: str) -> Response:
        return JSONResponse({"__type": code, "message": message}, status_code=status)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with fleet:
            yield
            for handle in scaling_out:
                handle.cancel()

    app = Starlette(
        routes=[
            Route("/endpoints/{name}/invocations", invocations, methods=["POST"]),
            Route(
                "/endpoints/{name}/invocations-response-stream", response_stream, methods=["POST"]
            ),
            Route("/", control, methods=["POST"]),
        ],
        lifespan=lifespan,
    )
    app.state.no_capacity_failures = no_capacity_failures
    return FaultInjector(app, fleet, _route, render_error=aws_error)


def _route(scope: MutableMapping[str, Any]) -> str | None:
    """Which fault route a request belongs to (see ``gpubench_sdk.testing.FaultPlan``)."""
    return "submit" if str(scope.get("path", "")).startswith("/endpoints/") else "control"


def main(argv: list[str] | None = None) -> None:
    """Serve an emulator until interrupted: ``python -m gpubench_sagemaker.emulator``."""
    import argparse
    import os

    from gpubench_sdk.testing import Duration, serve_forever

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8688)
    parser.add_argument("--endpoint-name", default=DEFAULT_ENDPOINT)
    parser.add_argument("--inference-component", default=None)
    parser.add_argument("--cold-start-s", type=float, default=0.5)
    parser.add_argument("--max-workers", type=int, default=3)
    parser.add_argument("--min-workers", type=int, default=0)
    parser.add_argument("--idle-timeout-s", type=float, default=1.0)
    args = parser.parse_args(argv)
    # the signing key pair is read from the environment, as boto3 reads it
    credentials = {os.environ["AWS_ACCESS_KEY_ID"]: os.environ["AWS_SECRET_ACCESS_KEY"]}
    config = FleetConfig(
        cold_start=Duration.fixed(args.cold_start_s),
        min_workers=args.min_workers,
        max_workers=args.max_workers,
        idle_timeout_s=args.idle_timeout_s,
    )
    app = make_app(
        SimulatedFleet(config),
        credentials=credentials,
        endpoint_name=args.endpoint_name,
        inference_component=args.inference_component,
    )
    serve_forever(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
