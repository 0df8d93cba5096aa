"""``SageMakerProvider``: SageMaker real-time endpoints (and their inference components)
through boto3, run in worker threads so the event loop never blocks.

The control plane for a benchmark: fleet state from ``describe_endpoint`` and the inference
component, scale to zero by copy count, and the user's copy count put back. API fields:
DescribeEndpoint ``ProductionVariants[].CurrentInstanceCount`` / ``DesiredInstanceCount``;
DescribeInferenceComponent ``RuntimeConfig.CurrentCopyCount`` / ``DesiredCopyCount`` and
``InferenceComponentStatus``; UpdateInferenceComponentRuntimeConfig
``DesiredRuntimeConfig.CopyCount`` (botocore data/sagemaker/2017-07-24/service-2.json).
Scaling to zero needs an endpoint with inference components and managed instance scaling
(MinInstanceCount 0): https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling-zero-instances.html
"""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
from pydantic import Field

import gpubench_sdk as sdk
from gpubench_sdk.cost import load_catalog

from . import _aws

T = TypeVar("T")
COLD_POLL = sdk.Polling(0.05, 5.0)  # DescribeInferenceComponent while the copies go
COLD_MARGIN_S = 1.0  # room for the last describe call inside ensure_cold's timeout


class SageMakerOptions(sdk.ProviderOptions):
    """Options of a SageMaker target. Credentials come from boto3's chain unless
    ``aws_access_key_id`` is given with the secret in ``api_key_env``/``api_key_file``."""

    endpoint_name: str = Field(pattern=r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$", max_length=63)
    inference_component: str | None = Field(
        default=None, description="invoke this inference component (needed for scale to zero)"
    )
    region: str | None = Field(default=None, description="AWS region (default: boto3's)")
    profile: str | None = Field(default=None, description="boto3 profile name")
    aws_access_key_id: str | None = Field(default=None, pattern=r"^[A-Z0-9]{16,128}$")
    runtime_url: str | None = Field(default=None, description="sagemaker-runtime endpoint URL")
    control_url: str | None = Field(default=None, description="sagemaker endpoint URL")
    s3_url: str | None = Field(default=None, description="S3 endpoint URL (async inference)")
    content_type: str = "application/json"
    accept: str = "application/json"
    async_input_s3: str | None = Field(
        default=None,
        pattern=r"^s3://[^/]+(/.*)?$",
        description="s3://bucket/prefix: use async inference, inputs uploaded here",
    )
    async_poll_interval_s: float = Field(default=0.5, gt=0)
    max_concurrency: int = Field(default=64, ge=1, le=1024, description="boto3 threads")
    cold_wait_s: float = Field(
        default=900.0,
        gt=0,
        description="how long an invocation retries while the component scales out from zero",
    )
    cold_retry_max_s: float = Field(default=5.0, gt=0, description="retry delay cap")


class SageMakerProvider(sdk.Provider):
    """AWS SageMaker: ``invoke_endpoint``, ``invoke_endpoint_with_response_stream`` (the first
    ``PayloadPart`` is the first byte; every part's arrival is a token time) and
    ``invoke_endpoint_async`` (S3 in and out); ``describe_endpoint`` for the fleet and the
    inference component's copy count for confirmed cold starts, restored in ``close()``.

    An invocation that finds no model copy (``ModelNotReadyException``, or a
    ``ValidationError`` saying the component has no capacity) is retried until a copy is up,
    within ``cold_wait_s``: that time is the cold start (``setup_ms``), and the request is
    marked cold on the service's own word.
    """

    name = "sagemaker"
    capabilities = sdk.Capabilities(
        streaming=True,
        fleet_state=True,
        cold_start_control=True,
        billing=load_catalog().billing_model("sagemaker"),
        # inference components' MinInstanceCount/MaxInstanceCount (serverless endpoints:
        # ProvisionedConcurrency/MaxConcurrency); no idle delay to set (PROVIDERS.md)
        scaling_knobs=frozenset({"min_workers", "max_workers"}),
    )
    options: SageMakerOptions

    _control: Any = None  # the sagemaker (control plane) client, once open

    @property
    def endpoint(self) -> str:
        o = self.options
        # the service's documented host: https://docs.aws.amazon.com/general/latest/gr/sagemaker.html
        base = o.runtime_url or f"https://runtime.sagemaker.{o.region or '<region>'}.amazonaws.com"
        return f"{base.rstrip('/')}/endpoints/{o.endpoint_name}"

    async def open(self) -> None:
        o = self.options
        secret = o.api_key.get_secret_value() if o.api_key is not None else None
        if (o.aws_access_key_id is None) != (secret is None):
            expected = "both aws_access_key_id and api_key_env (the secret), or neither"
            raise sdk.ConfigError("aws_access_key_id", o.aws_access_key_id, expected)
        self._limiter = anyio.CapacityLimiter(o.max_concurrency)
        self._saved = sdk.SavedSettings[int](self._set_copies)  # the user's copy count
        # resolving credentials and building botocore clients (service models loaded from
        # disk) block: not on the loop
        self._runtime, self._control, self._s3 = await anyio.to_thread.run_sync(
            self._make_clients, secret
        )

    def _make_clients(self, secret: str | None) -> tuple[Any, Any, Any]:
        o = self.options
        session = _aws.make_session(
            region=o.region,
            profile=o.profile,
            access_key_id=o.aws_access_key_id,
            secret_access_key=secret,
        )
        config = _aws.client_config(o.max_concurrency, o.timeout_s)
        runtime = session.client("sagemaker-runtime", endpoint_url=o.runtime_url, config=config)
        control = session.client("sagemaker", endpoint_url=o.control_url, config=config)
        s3 = None
        if o.async_input_s3 is not None:
            from botocore.config import Config

            s3_config = config.merge(Config(s3={"addressing_style": "path"}))
            s3 = session.client("s3", endpoint_url=o.s3_url, config=s3_config)
        for client in (runtime, control, s3):
            if client is not None:
                _aws.trace_http_calls(client)
        return runtime, control, s3

    async def close(self) -> None:
        control = self._control
        if control is None:
            return
        try:
            await sdk.shielded(self._saved.restore(), timeout_s=600)
        finally:
            self._control = None
            for client in (self._runtime, control, self._s3):
                if client is not None:
                    client.close()  # the connection pools

    async def _call(self, operation: str, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        with sdk.sdk_errors(lambda exc: _aws.map_error(exc, operation)):
            # abandon_on_cancel: a cancelled run does not wait for a call boto3 cannot
            # interrupt (SageMaker has no API to cancel a real-time invocation either)
            return await anyio.to_thread.run_sync(
                functools.partial(fn, *args, **kw), abandon_on_cancel=True, limiter=self._limiter
            )

    # ----- requests -------------------------------------------------------------------------

    def _params(self) -> dict[str, Any]:
        o = self.options
        params: dict[str, Any] = {"EndpointName": o.endpoint_name, "ContentType": o.content_type}
        if o.inference_component:
            params["InferenceComponentName"] = o.inference_component
        return params

    async def invoke(self, request: sdk.Request) -> sdk.Result:
        """One request; while the endpoint scales out from zero, retried until ready."""
        body = json.dumps(dict(request.payload)).encode()
        started = time.monotonic()
        refused = False
        for delay_s in sdk.Polling(0.05, self.options.cold_retry_max_s, backoff=2.0).delays():
            attempt_started = time.monotonic()
            try:
                result = await self._invoke_once(request, body)
                break
            except sdk.ColdTimeoutError:
                if time.monotonic() - started + delay_s > self.options.cold_wait_s:
                    raise
                refused = True  # the service itself says no copy is up
                await anyio.sleep(delay_s)
        # SageMaker routes only to copies that are up, so a request that was not refused is
        # warm (even right after ensure_cold: a copy came back meanwhile); one that was
        # refused waited for a copy to boot and load the model
        result.cold = result.cold_confirmed = refused
        if refused:
            result.setup_ms = (attempt_started - started) * 1e3
        return result

    async def _invoke_once(self, request: sdk.Request, body: bytes) -> sdk.Result:
        if self.options.async_input_s3 is not None:
            return await self._invoke_async(body)
        if request.stream:
            return await self._call(
                "InvokeEndpointWithResponseStream",
                self._stream_blocking,
                self._params(),
                body,
            )
        params = {**self._params(), "Body": body, "Accept": self.options.accept}
        response = await self._call("InvokeEndpoint", self._invoke_blocking, params)
        return self._result(response, response.pop("_first_byte_ns"))

    def _invoke_blocking(self, params: dict[str, Any]) -> dict[str, Any]:
        response: dict[str, Any] = self._runtime.invoke_endpoint(**params)
        response["_first_byte_ns"] = time.perf_counter_ns()  # headers parsed: the body follows
        response["Body"] = response["Body"].read()
        return response

    def _stream_blocking(self, params: dict[str, Any], body: bytes) -> sdk.Result:
        response = self._runtime.invoke_endpoint_with_response_stream(
            **params, Body=body, Accept=self.options.accept
        )
        parts: list[bytes] = []
        times_ns: list[int] = []
        for event in response["Body"]:
            part = event.get("PayloadPart")
            if part is not None:
                times_ns.append(time.perf_counter_ns())
                parts.append(part["Bytes"])
        result = self._result(
            {**response, "Body": b"".join(parts)},
            times_ns[0] if times_ns else None,
            streamed=True,
        )
        result.token_times_ns = times_ns
        return result

    def _result(
        self, response: dict[str, Any], arrived_ns: int | None, streamed: bool = False
    ) -> sdk.Result:
        raw: bytes = response["Body"]
        content_type = str(response.get("ContentType") or self.options.accept)
        try:
            output: Any = _decode(raw, content_type, streamed)
        except ValueError as exc:
            raise sdk.InvalidResponseError(
                f"the {content_type} body does not parse: {exc}",
                provider=self.name,
                status_code=200,
            ) from exc
        meta = response.get("ResponseMetadata") or {}
        variant = response.get("InvokedProductionVariant")
        return sdk.Result(
            output=output,
            http_status=int(meta.get("HTTPStatusCode") or 200),
            request_id=meta.get("RequestId"),
            first_byte_ns=arrived_ns,
            detail={"invoked_production_variant": variant} if variant else None,
        )

    async def _invoke_async(self, body: bytes) -> sdk.Result:
        """Async inference: upload the input, ``invoke_endpoint_async``, then poll S3 until
        the output or failure object exists (https://docs.aws.amazon.com/sagemaker/latest/dg/
        async-inference-check-predictions.html)."""
        o = self.options
        assert o.async_input_s3 is not None
        bucket, _, prefix = o.async_input_s3.removeprefix("s3://").partition("/")
        key = f"{prefix.rstrip('/')}/{uuid.uuid4()}.json".lstrip("/")
        await self._call("PutObject", self._s3.put_object, Bucket=bucket, Key=key, Body=body)
        params: dict[str, Any] = {
            "EndpointName": o.endpoint_name,
            "InputLocation": f"s3://{bucket}/{key}",
            "ContentType": o.content_type,
            "Accept": o.accept,
        }
        answer = await self._call(
            "InvokeEndpointAsync", self._runtime.invoke_endpoint_async, **params
        )
        locations = {
            "output": answer.get("OutputLocation"),
            "failure": answer.get("FailureLocation"),
        }
        while True:
            for kind, location in locations.items():
                if not location:
                    continue
                found = await self._call("GetObject", self._get_s3_object, location)
                if found is None:
                    continue
                data, arrived_ns = found
                if kind == "failure":
                    raise sdk.ServerHTTPError(
                        f"async inference failed: {data[:200]!r}", provider=self.name
                    )
                result = self._result({"Body": data, "ContentType": o.accept}, arrived_ns)
                result.request_id = answer.get("InferenceId")
                return result
            await anyio.sleep(o.async_poll_interval_s)

    def _get_s3_object(self, location: str) -> tuple[bytes, int] | None:
        from botocore.exceptions import ClientError

        bucket, _, key = location.removeprefix("s3://").partition("/")
        try:
            obj = self._s3.get_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            if _aws.error_code(exc) in ("NoSuchKey", "404", "NotFound"):
                return None
            raise
        return obj["Body"].read(), time.perf_counter_ns()

    # ----- control --------------------------------------------------------------------------

    def _require_control(self) -> Any:
        if self._control is None:
            raise RuntimeError(f"{self!r} is not open: use 'async with provider:'")
        return self._control

    async def _component(self) -> dict[str, Any]:
        described: dict[str, Any] = await self._call(
            "DescribeInferenceComponent",
            self._require_control().describe_inference_component,
            InferenceComponentName=self.options.inference_component,
        )
        return described

    async def _set_copies(self, copies: int) -> None:
        await self._call(
            "UpdateInferenceComponentRuntimeConfig",
            self._require_control().update_inference_component_runtime_config,
            InferenceComponentName=self.options.inference_component,
            DesiredRuntimeConfig={"CopyCount": copies},
        )

    async def state(self) -> sdk.FleetState:
        """Instances (or model copies, with a component) that are up: SageMaker does not say
        which are busy, so ``busy`` stays unknown."""
        endpoint: dict[str, Any] = await self._call(
            "DescribeEndpoint",
            self._require_control().describe_endpoint,
            EndpointName=self.options.endpoint_name,
        )
        variants = endpoint.get("ProductionVariants") or []
        current = sum(int(v.get("CurrentInstanceCount") or 0) for v in variants)
        desired = sum(int(v.get("DesiredInstanceCount") or 0) for v in variants)
        detail: dict[str, Any] = {
            "endpoint_status": endpoint.get("EndpointStatus"),
            "current_instance_count": current,
            "desired_instance_count": desired,
            "variants": [v.get("VariantName") for v in variants],
        }
        if self.options.inference_component is None:
            return sdk.FleetState(ready=current, starting=max(0, desired - current), detail=detail)
        component = await self._component()
        runtime = component.get("RuntimeConfig") or {}
        copies = int(runtime.get("CurrentCopyCount") or 0)
        wanted = int(runtime.get("DesiredCopyCount") or 0)
        detail.update(
            component_status=component.get("InferenceComponentStatus"),
            current_copy_count=copies,
            desired_copy_count=wanted,
        )
        return sdk.FleetState(ready=copies, starting=max(0, wanted - copies), detail=detail)

    async def ensure_cold(self, timeout_s: float) -> sdk.ColdCheck:
        """Copy count 0, then wait until the component reports no copy: confirmed by the
        service's own count."""
        expected = "an inference component: only endpoints with inference components scale to zero"
        sdk.required(self.options.inference_component, "inference_component", expected)
        started = time.monotonic()
        runtime = (await self._component()).get("RuntimeConfig") or {}
        wanted = int(runtime.get("DesiredCopyCount") or 0)
        self._saved.keep(wanted)
        if wanted != 0:
            await self._set_copies(0)

        async def look() -> tuple[bool, str]:
            component = await self._component()
            copies = int((component.get("RuntimeConfig") or {}).get("CurrentCopyCount") or 0)
            if copies == 0 and component.get("InferenceComponentStatus") in ("InService", None):
                return True, "CopyCount=0; DescribeInferenceComponent: CurrentCopyCount 0"
            return False, f"CurrentCopyCount {copies}"

        # answer inside timeout_s (the runner's deadline is the same number)
        return await sdk.wait_cold(
            look, timeout_s=timeout_s, poll=COLD_POLL, started=started, margin_s=COLD_MARGIN_S
        )


def _decode(raw: bytes, content_type: str, streamed: bool) -> Any:
    text = raw.decode()
    if not streamed:
        return json.loads(text) if "json" in content_type else text
    # a stream's parts are often JSON lines (LMI/TGI containers); else the text as it came
    lines = [line for line in text.splitlines() if line.strip()]
    try:
        return [json.loads(line) for line in lines]
    except ValueError:
        return text
