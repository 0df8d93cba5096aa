"""``LocalProvider``: the benchmark's view of the local runtime, over its HTTP protocol."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Self

import httpx
from pydantic import Field, model_validator

from .._base._errors import (
    ColdTimeoutError,
    ConfigError,
    InvalidResponseError,
    ProviderError,
)
from .._base._secrets import redact
from .._base._types import ColdCheck, FleetState, Request, Result, ScalingSettings
from .._contract._capabilities import Capabilities
from .._contract._provider import Provider, ProviderOptions
from .._transport._client import first_byte_ns, retry_after_s
from .._transport._errors import error_type
from ._config import (
    DEFAULT_HANDLER,
    DEFAULT_LOAD,
    BootTimeout,
    HandlerSpec,
    IdleTimeout,
    LoadSpec,
    LocalRuntimeConfig,
    MaxWorkers,
    MinWorkers,
)
from ._spawn import RuntimeProcess, spawn_runtime

POLL_S = 0.05


class LocalOptions(ProviderOptions):
    """Where the local runtime is; without ``url`` the provider starts (and stops) its own.

    The handler and scaling fields apply only to a runtime the provider starts itself.
    """

    url: str | None = Field(
        default=None, description="a running runtime, e.g. http://127.0.0.1:8000"
    )
    handler: HandlerSpec = DEFAULT_HANDLER
    load: LoadSpec = DEFAULT_LOAD
    min_workers: MinWorkers = 0
    max_workers: MaxWorkers = 4
    idle_timeout_s: IdleTimeout = 5.0
    boot_timeout_s: BootTimeout = 300.0
    env: dict[str, str] = Field(default_factory=dict, description="extra worker environment")

    @model_validator(mode="after")
    def _bounds(self) -> Self:
        if self.min_workers > self.max_workers:  # named, so the plan's error points at it
            expected = f"at most max_workers ({self.max_workers}): min_workers must not exceed it"
            raise ConfigError("min_workers", self.min_workers, expected)
        return self


class LocalProvider(Provider):
    """The embedded local runtime as a benchmark target: real processes, no cloud account.

    Cold starts are confirmed (``ensure_cold`` stops every idle worker and checks ``/health``)
    and reported by the server (``cold``, ``setup_ms`` = worker boot time, ``queue_ms``).
    """

    name = "local"
    capabilities = Capabilities(
        fleet_state=True,
        cold_start_control=True,
        scaling_settings=True,
        server_timings=frozenset({"queue_ms", "execution_ms", "setup_ms"}),
        billing=None,
        scaling_knobs=frozenset({"min_workers", "max_workers", "scale_down_s"}),
    )
    options: LocalOptions

    _runtime: RuntimeProcess | None = None
    _original_scaling: ScalingSettings | None = None

    @property
    def url(self) -> str:
        """The base URL of the runtime in use (known once the provider is open)."""
        return str(self._base).rstrip("/")

    @property
    def endpoint(self) -> str | None:
        # A runtime this provider started itself has a URL only once open; spans then carry it.
        return self.url if hasattr(self, "_base") else super().endpoint

    async def open(self) -> None:
        options = self.options
        url = options.url
        if url is None:
            config = LocalRuntimeConfig(
                handler=options.handler,
                load=options.load,
                min_workers=options.min_workers,
                max_workers=options.max_workers,
                idle_timeout_s=options.idle_timeout_s,
                request_timeout_s=options.timeout_s,
                boot_timeout_s=options.boot_timeout_s,
                api_key=options.api_key,
                env=options.env,
            )
            self._runtime = await spawn_runtime(config)
            url = self._runtime.url
        # Built once: parsing a str URL on every request is measurable overhead at high rates.
        self._base = httpx.URL(url.rstrip("/") + "/")
        self._invoke_url = self._base.join("invoke")
        self._health_url = self._base.join("health")
        self._zero_url = self._base.join("admin/scale-to-zero")
        self._scaling_url = self._base.join("admin/scaling")
        self._headers = {**options.headers, **self.auth_headers()}

    async def close(self) -> None:
        try:
            if self._original_scaling is not None and self._runtime is None:
                await self.set_scaling(self._original_scaling)  # leave a shared runtime as found
        finally:
            self._original_scaling = None
            if self._runtime is not None:
                await self._runtime.stop()
                self._runtime = None

    # ----- requests -------------------------------------------------------------------------

    async def invoke(self, request: Request) -> Result:
        response = await self.client.post(
            self._invoke_url, json=request.payload, headers=self._headers
        )
        arrived_ns = first_byte_ns(response)
        body = self._json(response)
        if response.status_code != 200:
            raise self._error(response, body)
        try:
            cold = bool(body["cold"])
            return Result(
                output=body["output"],
                http_status=200,
                request_id=body["request_id"],
                first_byte_ns=arrived_ns,
                queue_ms=body["queue_ms"],
                execution_ms=body["execution_ms"],
                setup_ms=body["boot_ms"] if cold else None,
                cold=cold,
                cold_confirmed=True,  # the runtime itself says it booted a worker for this
                worker_id=body["worker_id"],
            )
        except (KeyError, TypeError) as exc:
            raise InvalidResponseError(
                f"invoke response lacks {exc}", provider=self.name, status_code=200
            ) from exc

    def _json(self, response: httpx.Response) -> dict[str, Any]:
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict):
            return body
        if response.status_code >= 400:  # e.g. aiohttp's plain-text 404: still an HTTP error
            return {"error": response.text[:200]}
        raise InvalidResponseError(
            "response is not a JSON object", provider=self.name, status_code=response.status_code
        )

    def _error(self, response: httpx.Response, body: dict[str, Any]) -> ProviderError:
        status = response.status_code
        message = redact(f"HTTP {status}: {body.get('error', response.reason_phrase)}")
        kw: dict[str, Any] = {
            "provider": self.name,
            "status_code": status,
            "request_id": body.get("request_id"),
        }
        if status == 504 and body.get("stage") == "queue":
            return ColdTimeoutError(message, **kw)
        if status == 429:  # Retry-After in seconds or as an HTTP date
            kw["retry_after_s"] = retry_after_s(response)
        return error_type(status)(message, **kw)

    async def _call(self, method: str, url: httpx.URL, body: Any = None) -> dict[str, Any]:
        response = await self.client.request(method, url, json=body, headers=self._headers)
        data = self._json(response)
        if response.status_code != 200:
            raise self._error(response, data)
        return data

    # ----- capabilities ---------------------------------------------------------------------

    async def state(self) -> FleetState:
        return self._fleet(await self._call("GET", self._health_url))

    @staticmethod
    def _fleet(health: dict[str, Any]) -> FleetState:
        workers = health.get("workers", {})
        return FleetState(
            ready=workers.get("idle"),
            busy=workers.get("busy"),
            starting=workers.get("starting"),
            queued=health.get("queue"),
            detail=health,
        )

    async def ensure_cold(self, timeout_s: float) -> ColdCheck:
        """Stop idle workers until none is starting, idle or busy, within ``timeout_s``.

        Asking again on every poll stops busy workers as soon as they finish, instead of
        waiting out their idle timeout.
        """
        started = time.monotonic()
        deadline = started + timeout_s
        while True:
            fleet = self._fleet(await self._call("POST", self._zero_url))
            waited_s = time.monotonic() - started
            if fleet.is_cold:
                return ColdCheck(confirmed=True, waited_s=waited_s, how="health: 0 workers")
            min_workers = fleet.detail.get("scaling", {}).get("min_workers", 0)
            if min_workers:
                how = f"min_workers={min_workers} keeps workers running"
                return ColdCheck(confirmed=False, waited_s=waited_s, how=how)
            if time.monotonic() >= deadline:
                how = f"timed out: {fleet.ready} idle, {fleet.busy} busy, {fleet.starting} starting"
                return ColdCheck(confirmed=False, waited_s=waited_s, how=how)
            await asyncio.sleep(POLL_S)

    async def get_scaling(self) -> ScalingSettings:
        data = await self._call("GET", self._scaling_url)
        return ScalingSettings(
            min_workers=data["min_workers"],
            max_workers=data["max_workers"],
            idle_timeout_s=data["idle_timeout_s"],
        )

    async def set_scaling(self, settings: ScalingSettings) -> None:
        """Change the runtime's scaling; a value it refuses raises ``ConfigError``."""
        changes = {
            name: value
            for name in ("min_workers", "max_workers", "idle_timeout_s")
            if (value := getattr(settings, name)) is not None
        }
        if self._original_scaling is None:
            self._original_scaling = await self.get_scaling()
        response = await self.client.patch(self._scaling_url, json=changes, headers=self._headers)
        data = self._json(response)
        if response.status_code == 400 and "field" in data:
            field = str(data["field"])
            expected = str(data.get("error", "")).removeprefix(f"{field}: ")
            raise ConfigError(f"scaling.{field}", changes.get(field), expected)
        if response.status_code != 200:
            raise self._error(response, data)
