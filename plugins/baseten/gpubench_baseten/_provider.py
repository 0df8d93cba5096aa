"""``BasetenProvider``: a Baseten model's ``predict``/``async_predict``, with its management API."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, Literal, Self

import httpx
from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

import gpubench_sdk as sdk
from gpubench_sdk.cost import load_catalog

from . import _protocol as bt


class BasetenOptions(sdk.PollingOptions):
    """Options of a Baseten target; ``api_key`` comes from ``api_key_env``/``api_key_file``."""

    model_id: str = Field(description="the model's id (model-<model_id>.api.baseten.co)")
    environment: str = Field(
        default="production",
        pattern=r"^[A-Za-z0-9_-]+$",
        description="the environment to call (/environments/<env>/predict)",
    )
    deployment_id: str | None = Field(
        default=None,
        description="call this deployment (/deployment/<id>/predict) instead of an environment",
    )
    base_url: str | None = Field(
        default=None, description="inference host (default https://model-<model_id>.api.baseten.co)"
    )
    api_url: str = Field(default=bt.API_URL, description="management API host")
    mode: Literal["predict", "async"] = Field(
        default="predict",
        description="'predict': one held request (the output comes back); 'async': "
        "async_predict then poll /async_request (queue and run times from Baseten's "
        "timestamps; the output goes to webhook_endpoint, Baseten keeps none)",
    )
    webhook_endpoint: str | None = Field(
        default=None, description="async mode: where Baseten posts outputs"
    )
    max_time_in_queue_s: int | None = Field(default=None, ge=10, le=259_200)
    concurrency_target: int | None = Field(
        default=None, ge=1, description="set for the run (restored after): requests per replica"
    )
    scale_down_delay_s: int | None = Field(
        default=None,
        ge=0,
        le=bt.MAX_SCALE_DOWN_DELAY_S,
        description="set for the run (restored after): how long an idle replica stays up "
        "(Baseten's default 900 s makes each cold start sample wait that long)",
    )
    poll_interval_s: float = Field(default=0.1, gt=0, description="first poll delay")
    poll_max_interval_s: float = Field(
        default=1.0, gt=0, description="backoff cap (20 polls/s max)"
    )
    cold_threshold_ms: float = Field(
        default=1000.0, gt=0, description="async: a queue wait above this counts as a cold start"
    )
    predict_cold_threshold_ms: float | None = Field(
        default=None,
        gt=0,
        description="predict: infer a cold start from a wait for the answer above this "
        "(None: only cold starts confirmed through the management API are marked)",
    )

    @field_validator("model_id", "deployment_id")
    @classmethod
    def _alphanumeric(cls, value: str | None) -> str | None:
        if value is not None and not (value.isascii() and value.isalnum()):
            raise PydanticCustomError(
                "baseten_id",
                "Baseten's alphanumeric id, as in https://model-<model_id>.api.baseten.co "
                "(the model's page shows it)",
            )
        return value

    @model_validator(mode="after")
    def _one_target(self) -> Self:
        if self.deployment_id is not None and "environment" in self.model_fields_set:
            raise PydanticCustomError(
                "deployment_or_environment",
                "either deployment_id or environment, not both (a deployment is called directly)",
            )
        return self


class BasetenProvider(sdk.Provider):
    """Baseten: ``predict`` (held; streamed when the model streams) or ``async_predict`` polled
    through ``/async_request``, and the management API for fleet state (``active_replica_count``,
    deployment ``status``), autoscaling (``min_replica``, ``max_replica``, ``scale_down_delay``,
    ``concurrency_target``) and confirmed cold starts (``min_replica`` 0, the scale-down delay
    waited out, ``SCALED_TO_ZERO`` with no active replica).
    """

    name = "baseten"
    key_scheme = "api-key"
    capabilities = sdk.Capabilities(
        streaming=True,
        fleet_state=True,
        cold_start_control=True,
        scaling_settings=True,
        # the catalog's rules, with their source and date (gpubench_sdk/cost/data/prices.json)
        billing=load_catalog().billing_model("baseten"),
        # autoscaling settings: min_replica, max_replica, scale_down_delay, concurrency_target
        # (PROVIDERS.md, docs.baseten.co autoscaling)
        scaling_knobs=frozenset({"min_workers", "max_workers", "scale_down_s", "concurrency"}),
    )
    options: BasetenOptions

    _original: dict[str, int] | None = None

    @property
    def endpoint(self) -> str:
        return sdk.scrub_url(self._route("predict"))

    def _route(self, operation: str) -> str:
        o = self.options
        base = (o.base_url or bt.inference_url(o.model_id)).rstrip("/")
        if o.deployment_id is not None:
            return f"{base}/deployment/{o.deployment_id}/{operation}"
        return f"{base}/environments/{o.environment}/{operation}"

    async def open(self) -> None:
        o = self.options
        self._base = (o.base_url or bt.inference_url(o.model_id)).rstrip("/")
        self._predict = httpx.URL(self._route("predict"))
        self._async_predict = httpx.URL(self._route("async_predict"))
        self._queue_status = httpx.URL(self._route("async_queue_status"))
        self._send = sdk.Sender.of(self)
        self._cold = sdk.ColdMark(o.predict_cold_threshold_ms)
        deployment = o.deployment_id or (
            o.environment if o.environment in ("production", "development") else None
        )
        self._admin = None if deployment is None else DeploymentAdmin(self, deployment)
        for_the_run = {
            "concurrency_target": o.concurrency_target,
            "scale_down_delay": o.scale_down_delay_s,
        }
        if changes := {k: v for k, v in for_the_run.items() if v is not None}:
            await self._change(changes)

    async def close(self) -> None:
        original, self._original = self._original, None
        if original:  # leave the deployment as the user configured it
            await self._admin_or_fail("scaling_settings").patch(original)

    # ----- requests -------------------------------------------------------------------------

    async def invoke(self, request: sdk.Request) -> sdk.Result:
        if self.options.mode == "async" and not request.stream:
            return await self._async(request)
        started = time.perf_counter_ns()
        if request.stream:
            result = await self._predict_streamed(request)
        else:
            response = await self._send("POST", self._predict, dict(request.payload))
            request_id = response.headers.get(bt.REQUEST_ID_HEADER)
            problem = "the prediction is not JSON"
            result = sdk.json_result(
                response, provider=self.name, problem=problem, request_id=request_id
            )
        # confirmed after ensure_cold, else inferred from predict_cold_threshold_ms, else unknown
        result.cold, result.cold_confirmed = self._cold.judge(started, result.first_byte_ns)
        return result

    async def _predict_streamed(self, request: sdk.Request) -> sdk.Result:
        """A streaming model's answer: its body arrives in pieces; the first piece is the first
        byte, each network read a chunk."""
        chunks: list[str] = []
        times: list[int] = []
        # A timeout or a broken connection escapes to the invoke boundary, which makes it the
        # core's ProviderError (as_provider_error); a status >= 400 is one with its body's start.
        async with self._send.stream("POST", self._predict, dict(request.payload)) as response:
            async for text in response.aiter_text():
                if text:
                    times.append(time.perf_counter_ns())
                    chunks.append(text)
        return sdk.http_result(
            response,
            output="".join(chunks),
            request_id=response.headers.get(bt.REQUEST_ID_HEADER),
            first_byte_ns=times[0] if times else sdk.first_byte_ns(response),
            output_units=len(chunks),
            token_times_ns=times,
        )

    async def _async(self, request: sdk.Request) -> sdk.Result:
        o = self.options
        body: dict[str, Any] = {"model_input": dict(request.payload)}
        if o.webhook_endpoint is not None:
            body["webhook_endpoint"] = o.webhook_endpoint
        if o.max_time_in_queue_s is not None:
            body["max_time_in_queue_seconds"] = o.max_time_in_queue_s
        result = await sdk.run_polled(self, _AsyncRequest(self, body))
        if self._cold.take():  # the deployment was verified scaled to zero just before
            result.cold, result.cold_confirmed = True, True
        return result

    # ----- capabilities ---------------------------------------------------------------------

    def _admin_or_fail(self, capability: str) -> DeploymentAdmin:
        expected = f"the deployment's id: {capability} for environment "
        expected += f"{self.options.environment!r} goes through its deployment"
        return sdk.required(self._admin, "deployment_id", expected)

    async def state(self) -> sdk.FleetState:
        admin = self._admin_or_fail("fleet_state")
        queue: dict[str, Any] | None = None
        with contextlib.suppress(sdk.ProviderError):  # a model without async support has none
            queue = await self._send.json("GET", self._queue_status)
        return await admin.state(queue)

    async def get_scaling(self) -> sdk.ScalingSettings:
        settings = await self._admin_or_fail("scaling_settings").settings()
        return sdk.read_scaling(
            settings,
            "min_replica",
            "max_replica",
            "scale_down_delay",
            idle_default=bt.DEFAULT_SCALE_DOWN_DELAY_S,
            provider=self.name,
            where="autoscaling_settings",
        )

    async def set_scaling(self, settings: sdk.ScalingSettings) -> None:
        """PATCH the fields given; restored in ``close()``."""
        changes = sdk.scaling_fields(
            settings,
            "min_replica",
            "max_replica",
            "scale_down_delay",
            idle_range=(0, bt.MAX_SCALE_DOWN_DELAY_S),
            expected=f"whole seconds 0..{bt.MAX_SCALE_DOWN_DELAY_S} (Baseten's scale_down_delay)",
        )
        await self._change(changes)

    async def _change(self, changes: dict[str, int]) -> None:
        """PATCH ``changes``, first remembering each field's value before this run changed it
        (restored in ``close()``)."""
        admin = self._admin_or_fail("scaling_settings")
        current = await admin.settings()
        before = {k: v for k, v in current.items() if k in changes and isinstance(v, int)}
        self._original = {**before, **(self._original or {})}  # a field's first value stays
        await admin.patch(changes)

    async def ensure_cold(self, timeout_s: float) -> sdk.ColdCheck:
        """``min_replica`` 0, then wait until the deployment reports no active replica
        (Baseten has no "scale to zero now": the scale-down delay runs its course)."""
        admin = self._admin_or_fail("cold_start_control")
        started = time.monotonic()
        scaling = await sdk.lower_min_workers(self)

        async def look() -> tuple[bool, str]:
            data = await admin.deployment()
            active, status = data.get("active_replica_count"), data.get("status")
            if active == 0:
                how = f"min_replica=0, scale_down_delay={scaling.idle_timeout_s:g}s; deployment "
                return True, f"{how}{status}, active_replica_count 0"
            return False, f"{active} active replicas ({status})"

        return await sdk.wait_cold(
            look, timeout_s=timeout_s, poll=self.options.polling, started=started, mark=self._cold
        )


class _AsyncRequest(sdk.Job[dict[str, Any]]):
    """``async_predict``, then ``GET /async_request/{id}`` to its end; ``DELETE`` of the same
    URL when abandoned (Baseten cancels a request still QUEUED; a running one finishes)."""

    terminal = bt.TERMINAL_STATES

    def __init__(self, provider: BasetenProvider, body: dict[str, Any]) -> None:
        self.p, self.body = provider, body
        self.progress_at: float | None = None  # Unix seconds

    async def submit(self) -> None:
        response = await self.p._send("POST", self.p._async_predict, self.body)
        request_id = sdk.json_object(response, provider=self.p.name).get("request_id")
        if not isinstance(request_id, str) or not request_id:
            problem = "the async_predict answer has no request_id"
            raise sdk.invalid_response(response, problem, provider=self.p.name)
        self.id, self.url = request_id, httpx.URL(f"{self.p._base}/async_request/{request_id}")

    async def status(self) -> dict[str, Any]:
        self.response = await self.p._send("GET", self.url)
        what = "an async request"
        status = sdk.job_state(self.response, bt.STATES, provider=self.p.name, what=what)
        if status["status"] == bt.IN_PROGRESS and self.progress_at is None:
            self.progress_at = sdk.iso_seconds(status.get("status_at"))
        return status

    async def result(self, state: dict[str, Any]) -> sdk.Result:
        status = state["status"]
        kw: dict[str, Any] = {"provider": self.p.name, "request_id": self.id}
        errors = sdk.redact(str(state.get("errors") or ""))
        if status == bt.FAILED:
            raise sdk.ServerHTTPError(f"async request FAILED: {errors}", **kw)
        if status in (bt.CANCELED, bt.EXPIRED):
            raise sdk.JobCancelledError(f"async request {status} {errors}".strip(), **kw)
        queue_ms = sdk.span_ms(sdk.iso_seconds(state.get("created_at")), self.progress_at)
        ended = sdk.iso_seconds(state.get("status_at"))
        return sdk.http_result(
            self.response,
            output=None,  # Baseten keeps no async output: it went to the webhook, if any
            request_id=self.id,
            queue_ms=queue_ms,
            execution_ms=sdk.span_ms(self.progress_at, ended),
            cold=None if queue_ms is None else queue_ms >= self.p.options.cold_threshold_ms,
            detail={"status": status, "webhook_status": state.get("webhook_status")},
        )

    async def cancel(self) -> None:
        await self.p._send("DELETE", self.url)


_SETTLE_TIMEOUT_S = 30.0  # how long a QUEUED settings change may take to show


class DeploymentAdmin:
    """Baseten's management API for one deployment: its replicas and status (``GET
    /v1/models/{model}/deployments/{dep}``) and its ``autoscaling_settings``."""

    def __init__(self, provider: BasetenProvider, deployment: str) -> None:
        o = provider.options
        self._send = provider._send
        self.url = httpx.URL(
            f"{o.api_url.rstrip('/')}/v1/models/{o.model_id}/deployments/{deployment}"
        )
        self._settings_url = httpx.URL(f"{self.url}/autoscaling_settings")

    async def deployment(self) -> dict[str, Any]:
        return await self._send.json("GET", self.url)

    async def settings(self) -> dict[str, Any]:
        data = await self.deployment()
        settings = data.get("autoscaling_settings")
        if not isinstance(settings, dict):
            raise sdk.InvalidResponseError(
                f"deployment {data.get('id')!r} has no autoscaling_settings (status "
                f"{data.get('status')!r}): it has not finished deploying",
                provider="baseten",
            )
        return settings

    async def patch(self, changes: dict[str, int]) -> None:
        """PATCH the given fields (Baseten changes only those); wait for a QUEUED change."""
        with sdk.refused_as_config("scaling", changes, "Baseten"):
            answer = await self._send.json("PATCH", self._settings_url, changes)
        # QUEUED: applied later (e.g. while the deployment updates): wait for it
        if answer.get("status") == "QUEUED":
            deadline = time.monotonic() + _SETTLE_TIMEOUT_S
            while time.monotonic() < deadline:
                current = await self.settings()
                if all(current.get(k) == v for k, v in changes.items()):
                    break
                await asyncio.sleep(0.5)

    async def state(self, queue: dict[str, Any] | None) -> sdk.FleetState:
        """Replicas up (Baseten counts them without telling idle from busy) and, from the async
        queue status, requests waiting."""
        data = await self.deployment()
        active = data.get("active_replica_count")
        if not isinstance(active, int):
            raise sdk.InvalidResponseError(
                "deployment lacks active_replica_count", provider="baseten"
            )
        starting = data.get("status") in bt.STARTING_STATES
        queued = queue.get("num_queued_requests") if queue else None
        return sdk.FleetState(
            ready=0 if starting else active,
            busy=None,
            starting=active if starting else 0,
            queued=queued if isinstance(queued, int) else None,
            detail={"status": data.get("status"), "active_replica_count": active, **(queue or {})},
        )
