"""``RunPodProvider``: RunPod Serverless queue endpoints, with their control plane."""

from __future__ import annotations

import contextlib
import re
import time
from typing import Any, Literal

import httpx
from pydantic import Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

import gpubench_sdk as sdk
from gpubench_sdk import first_byte_ns as arrived_ns
from gpubench_sdk.cost import load_catalog

from . import _protocol as rp

# A base URL that already names the endpoint: the hosted API's (or the emulator's) /v2/{id}.
_ENDPOINT_PATH = re.compile(r"/v2/(?P<id>[A-Za-z0-9_-]+)/?$")


class RunPodOptions(sdk.PollingOptions):
    """Options of a RunPod target; ``api_key`` comes from ``api_key_env``/``api_key_file``."""

    base_url: str = Field(
        default=rp.API_URL,
        description="jobs go to <base_url>/<endpoint_id>/run, or <base_url>/run without an "
        "endpoint_id (emulator: <url>/v2; runpod's local API server: http://localhost:8000)",
    )
    endpoint_id: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_-]+$",
        validate_default=True,
        description="the endpoint's id; leave out when base_url is the endpoint's own URL "
        "(https://api.runpod.ai/v2/<id>) or a server with /run at its root (runpod's local API)",
    )
    rest_url: str = Field(default=rp.REST_URL, description="control plane base (<url>/v1)")
    mode: Literal["run", "runsync"] = Field(
        default="run",
        description="'run': submit then poll /status (cancellable); 'runsync': hold the request "
        "until the job ends (no polling granularity), falling back to polling",
    )
    poll_method: Literal["auto", "GET", "POST"] = Field(
        default="auto",
        description="method of /status and /stream: the hosted API takes GET, runpod's local "
        "API server POST only; 'auto' starts with GET when the URL names an endpoint, POST when "
        "not, and switches once for good if the server answers 405",
    )
    runsync_wait_ms: int | None = Field(
        default=None, ge=rp.RUNSYNC_MIN_WAIT_MS, le=rp.RUNSYNC_MAX_WAIT_MS
    )
    cold_threshold_ms: float = Field(
        default=1000.0,
        gt=0,
        description="a delayTime above this means the job waited for a worker to boot",
    )
    execution_timeout_ms: int | None = Field(
        default=None, ge=1, description="RunPod policy.executionTimeout for each job"
    )

    @field_validator("endpoint_id")
    @classmethod
    def _named_for_the_hosted_api(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None and str(info.data.get("base_url", "")).rstrip("/") == rp.API_URL:
            raise PydanticCustomError(
                "endpoint_id_missing",
                f"the endpoint's id for the hosted API (or base_url = '{rp.API_URL}/<id>'; "
                "for runpod's local API server, base_url = 'http://localhost:8000')",
            )
        return value


class RunPodProvider(sdk.Provider):
    """RunPod Serverless: ``/run`` + ``/status`` (or ``/runsync``), ``/stream``, ``/cancel``,
    ``/health`` and the REST control plane for scaling and confirmed cold starts.

    ``delayTime`` (queue, including any cold boot) and ``executionTime`` become ``queue_ms`` and
    ``execution_ms``. A request is cold when RunPod's ``delayTime`` exceeds
    ``cold_threshold_ms``, or when it is the first after a confirmed ``ensure_cold``.

    Without an endpoint id (a server with the job routes at its root, such as the ``runpod``
    package's local API server) only the job routes are used: no fleet state, scaling, cold
    start control, server timings or billing, which all belong to a hosted endpoint.
    """

    name = "runpod"
    capabilities = sdk.Capabilities(
        streaming=True,
        fleet_state=True,
        cold_start_control=True,
        scaling_settings=True,
        server_timings=frozenset({"queue_ms", "execution_ms"}),
        billing=load_catalog().billing_model("runpod"),
        # PATCH /v1/endpoints/{id}: workersMin, workersMax, idleTimeout (PROVIDERS.md); a
        # worker's concurrency_modifier (docs.runpod.io/serverless/workers/concurrent-handler)
        scaling_knobs=frozenset({"min_workers", "max_workers", "scale_down_s", "concurrency"}),
    )
    options: RunPodOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        o = self.options
        base = o.base_url.rstrip("/")
        self.endpoint_id = o.endpoint_id
        if o.endpoint_id is not None:
            base = f"{base}/{o.endpoint_id}"
        elif (named := _ENDPOINT_PATH.search(httpx.URL(base).path)) is not None:
            self.endpoint_id = named["id"]
        self._base = base
        if self.endpoint_id is None:  # job routes only: nothing names an endpoint to manage
            sdk.with_capabilities(
                self,
                fleet_state=False,
                cold_start_control=False,
                scaling_settings=False,
                server_timings=frozenset(),  # recorded if sent, but none is promised
                billing=None,
            )
        self._cold = sdk.ColdMark()
        self._scaling = sdk.SavedScaling(self.get_scaling, self._patch_scaling)
        self._poll_method = o.poll_method
        if o.poll_method == "auto":
            self._poll_method = "GET" if self.endpoint_id is not None else "POST"

    @property
    def endpoint(self) -> str:
        return sdk.scrub_url(self._base)

    async def open(self) -> None:
        o = self.options
        # Built once: parsing URL strings on every request is measurable at high rates.
        self._api = httpx.URL(self._base + "/")
        self._run_url = self._api.join("run")
        runsync = self._api.join("runsync")
        if o.runsync_wait_ms is not None:
            runsync = runsync.copy_add_param("wait", str(o.runsync_wait_ms))
        self._runsync_url = runsync
        self._health_url = self._api.join("health")
        self._rest_endpoint = httpx.URL(f"{o.rest_url.rstrip('/')}/endpoints/{self.endpoint_id}")
        self._send = sdk.Sender.of(self)

    async def close(self) -> None:
        await self._scaling.restore()

    # ----- requests -------------------------------------------------------------------------

    async def invoke(self, request: sdk.Request) -> sdk.Result:
        body: dict[str, Any] = {"input": dict(request.payload)}
        if self.options.execution_timeout_ms is not None:
            body["policy"] = {"executionTimeout": self.options.execution_timeout_ms}
        job = _StreamJob(self, body) if request.stream else _RunJob(self, body)
        return await sdk.run_polled(self, job)

    def _result(self, job: dict[str, Any], arrived: int | None) -> sdk.Result:
        status = job["status"]
        job_id = str(job["id"])
        kw: dict[str, Any] = {"provider": self.name, "request_id": job_id}
        if status == rp.FAILED:
            raise sdk.ServerHTTPError(sdk.redact(f"job FAILED: {job.get('error')}"), **kw)
        if status == rp.TIMED_OUT:
            raise sdk.RequestTimeoutError("job TIMED_OUT (executionTimeout policy)", **kw)
        if status == rp.CANCELLED:
            raise sdk.JobCancelledError("job CANCELLED by the platform or another client", **kw)
        delay_ms = sdk.finite_number(job.get("delayTime"))
        # The fleet verified empty just before (ensure_cold) makes it a fact, not a guess.
        confirmed = bool(self._cold.take())
        cold = confirmed or (delay_ms is not None and delay_ms >= self.options.cold_threshold_ms)
        return sdk.Result(
            output=job.get("output"),
            http_status=200,
            request_id=job_id,
            first_byte_ns=arrived,
            queue_ms=delay_ms,
            execution_ms=sdk.finite_number(job.get("executionTime")),
            cold=cold if delay_ms is not None or cold else None,
            cold_confirmed=confirmed,
            worker_id=job.get("workerId"),
        )

    async def _poll(self, url: httpx.URL) -> httpx.Response:
        """One read of /status or /stream (``run_job`` retries a passing 429/5xx/blip)."""
        method = self._poll_method
        try:
            return await self._send(method, url)
        except sdk.ClientHTTPError as exc:
            if exc.status_code != 405 or self.options.poll_method != "auto":
                raise
        # 405: this server polls with the other method (runpod 1.12.0's local API server,
        # rp_fastapi.py, routes POST only). Switched once, for the provider's lifetime; a
        # 405 to a POST just sent is still an error.
        if self._poll_method != method:  # another request switched meanwhile
            return await self._send(self._poll_method, url)
        self._poll_method = "POST" if method == "GET" else "GET"
        return await self._send(self._poll_method, url)

    # ----- capabilities ---------------------------------------------------------------------

    def _managed(self, capability: str) -> None:
        if self.endpoint_id is None:
            raise sdk.CapabilityError(self.name, f"{capability} (needs an endpoint_id)")

    async def state(self) -> sdk.FleetState:
        self._managed("fleet_state")
        health = await self._send.json("GET", self._health_url)
        workers = health.get("workers") or {}
        jobs = health.get("jobs") or {}
        return sdk.FleetState(
            ready=workers.get("idle", workers.get("ready")),
            busy=workers.get("running"),
            starting=workers.get("initializing"),
            queued=jobs.get("inQueue"),
            throttled=workers.get("throttled"),
            detail=health,
        )

    async def ensure_cold(self, timeout_s: float) -> sdk.ColdCheck:
        """Set ``workersMin`` to 0, wait out ``idleTimeout`` and confirm through ``/health``
        that no worker is idle, starting or running (RunPod has no "scale to zero now")."""
        self._managed("cold_start_control")
        started = time.monotonic()
        scaling = await sdk.lower_min_workers(self)

        async def look() -> tuple[bool, str]:
            fleet = await self.state()
            if fleet.is_cold and not fleet.queued:
                how = f"workersMin=0, idleTimeout={scaling.idle_timeout_s:g}s"
                return True, f"{how}; /health: 0 workers"
            return False, f"{fleet.ready} idle, {fleet.busy} running, {fleet.starting} starting"

        return await sdk.wait_cold(
            look, timeout_s=timeout_s, poll=self.options.polling, started=started, mark=self._cold
        )

    async def get_scaling(self) -> sdk.ScalingSettings:
        self._managed("scaling_settings")
        data = await self._send.json("GET", self._rest_endpoint)
        return sdk.read_scaling(
            data, "workersMin", "workersMax", "idleTimeout", provider=self.name, where="endpoint"
        )

    async def deployed(self) -> dict[str, Any]:
        """The endpoint's worker image, template and GPU types, as RunPod's REST API says them:
        ``GET /v1/endpoints/{id}?includeTemplate=true`` answers ``template.imageName``,
        ``templateId``, ``gpuTypeIds``, ``gpuCount`` and the endpoint's ``version``
        (docs.runpod.io/api-reference/endpoints/GET/endpoints/endpointId)."""
        if self.endpoint_id is None:
            return {}
        url = self._rest_endpoint.copy_add_param("includeTemplate", "true")
        data = await self._send.json("GET", url)
        template = data.get("template")
        if not isinstance(template, dict):  # asked for, but an older API may leave it out
            template = {}
        found = {
            "image": template.get("imageName"),
            "template_id": data.get("templateId"),
            "gpu_types": data.get("gpuTypeIds"),
            "gpu_count": data.get("gpuCount"),
            "endpoint_version": data.get("version"),
        }
        return {k: v for k, v in found.items() if v is not None}

    async def set_scaling(self, settings: sdk.ScalingSettings) -> None:
        """PATCH the fields given (RunPod changes only those); restored in ``close()``."""
        await self._scaling.change(settings)

    async def _patch_scaling(self, settings: sdk.ScalingSettings) -> None:
        changes = sdk.scaling_fields(
            settings, "workersMin", "workersMax", "idleTimeout", expected="whole seconds on RunPod"
        )
        with sdk.refused_as_config("scaling", changes, "RunPod"):
            await self._send("PATCH", self._rest_endpoint, changes)


class _RunJob(sdk.Job[dict[str, Any]]):
    """``/run`` (or ``/runsync``, whose job may come back finished) + ``/status`` + ``/cancel``."""

    terminal = rp.TERMINAL_STATES

    def __init__(self, provider: RunPodProvider, body: dict[str, Any]) -> None:
        self.p, self.body = provider, body
        self.response: httpx.Response | None = None

    async def submit(self) -> dict[str, Any] | None:
        p = self.p
        url = p._runsync_url if p.options.mode == "runsync" else p._run_url
        self.response = await p._send("POST", url, self.body)
        job = _job_of(self.response)
        self.id = str(job["id"])
        return job

    async def status(self) -> dict[str, Any]:
        self.response = await self.p._poll(self.p._api.join(f"status/{self.id}"))
        return _job_of(self.response)

    async def result(self, state: dict[str, Any]) -> sdk.Result:
        return self.p._result(state, arrived_ns(self.response) if self.response else None)

    async def cancel(self) -> None:
        await self.p._send("POST", self.p._api.join(f"cancel/{self.id}"))


class _StreamJob(_RunJob):
    """``/run``, then ``/stream/{id}`` polled (JSON, not SSE): each answer drains what the
    generator yielded since the last; the first chunk's arrival is the first byte."""

    chunks: list[Any]
    first_ns: int | None = None

    async def submit(self) -> dict[str, Any] | None:
        await super().submit()
        self.chunks = []
        return None  # the stream is read at once

    async def status(self) -> dict[str, Any]:
        response = await self.p._poll(self.p._api.join(f"stream/{self.id}"))
        data = sdk.json_object(response, provider=self.p.name)
        items = data.get("stream") or []
        if not isinstance(items, list):
            raise sdk.invalid_response(response, "stream is not a list", provider=self.p.name)
        if items and self.first_ns is None:
            self.first_ns = arrived_ns(response)
        self.chunks += [item.get("output") if isinstance(item, dict) else item for item in items]
        return data

    async def result(self, state: dict[str, Any]) -> sdk.Result:
        final = {**state, "id": self.id}
        # /status adds delayTime/executionTime/workerId; a server that has forgotten the job
        # once streamed (runpod's local API server) answers another state, or an error.
        with contextlib.suppress(sdk.ProviderError):
            polled = _job_of(await self.p._poll(self.p._api.join(f"status/{self.id}")))
            if polled["status"] == final["status"]:
                final = polled
        result = self.p._result(final, self.first_ns)
        result.output = self.chunks
        return result


def _job_of(response: httpx.Response) -> dict[str, Any]:
    """The job in an answer of /run, /runsync or /status, with a status RunPod defines."""
    return sdk.job_state(response, rp.STATES, provider="runpod", id_key="id")
