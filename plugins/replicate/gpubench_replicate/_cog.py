"""``CogProvider``: a self-hosted Cog container (Cloud Run, Kubernetes, a VM) speaking Cog's own
HTTP API, the same prediction object Replicate serves.

Source (read 2026-11): ``python/cog/server/http.py`` in github.com/replicate/cog:
``POST /predictions`` (body ``{"input": {...}, "id"?}``; waits for the result unless
``Prefer: respond-async``, then 202), ``PUT /predictions/{id}`` (idempotent creation: a PUT for
the id already running returns its current state, 202), ``POST /predictions/{id}/cancel``
(200 ``{}``, 404 ``{}`` when unknown), 409 ``{"detail": "Already running a prediction"}`` when
busy, ``GET /health-check`` -> ``{"status": STARTING|READY|BUSY|SETUP_FAILED|DEFUNCT,
"setup": {"started_at", "completed_at", "logs", "status"}}``.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, ClassVar, Literal

import httpx
from pydantic import Field

from gpubench_sdk import (
    Capabilities,
    FleetState,
    InvalidResponseError,
    ProviderOptions,
    Request,
    Result,
    ServerHTTPError,
    first_byte_ns,
)

from . import _prediction as p

READY = "READY"
BUSY = "BUSY"
STARTING = "STARTING"
SETUP_FAILED = "SETUP_FAILED"
DEFUNCT = "DEFUNCT"


class CogOptions(ProviderOptions):
    """A Cog container's base URL; ``api_key`` only when a proxy in front requires one."""

    url: str = Field(pattern=r"^https?://", description="the container's base URL")
    mode: Literal["post", "put"] = Field(
        default="post",
        description="'post': POST /predictions with our id; 'put': PUT /predictions/{id} "
        "(idempotent: a retried request joins the running prediction)",
    )
    cold_threshold_ms: float = Field(
        default=1000.0,
        gt=0,
        description="a queue phase at least this long makes gpubench read /health-check to "
        "tell a setup (cold start) from a wait",
    )


class CogProvider(p.PredictionProvider):
    """Cog's synchronous predictions, cancel, and ``/health-check`` as fleet state.

    Each prediction carries an id chosen here, so an abandoned invoke can cancel it.
    ``metrics.predict_time`` (seconds) becomes ``execution_ms`` and ``started_at - created_at``
    ``queue_ms``. A prediction is cold when the container's setup (``/health-check``'s
    ``setup.completed_at``) ended after the prediction was created: then ``setup_ms`` is that
    setup (``completed_at - started_at``). Health is read after the first prediction and after
    any with a queue phase of ``cold_threshold_ms`` or more, so warm requests cost nothing extra.

    Cog's ``Prefer: respond-async`` is not used: Cog has no ``GET /predictions/{id}``, so an
    async prediction's result only arrives by webhook.
    """

    name = "cog"
    capabilities = Capabilities(
        fleet_state=True,
        server_timings=frozenset({"queue_ms", "execution_ms"}),
    )
    Options: ClassVar[type[ProviderOptions]] = CogOptions
    _busy_statuses = frozenset({409})  # "Already running a prediction": capacity, not a bug

    _seen_first = False

    @property
    def _opts(self) -> CogOptions:
        assert isinstance(self.options, CogOptions)
        return self.options

    async def open(self) -> None:
        self._base = httpx.URL(self._opts.url.rstrip("/") + "/")
        self._predictions_url = self._base.join("predictions")
        self._health_url = self._base.join("health-check")
        self._headers = {**self._opts.headers, **self.auth_headers()}

    async def invoke(self, request: Request) -> Result:
        prediction_id = uuid.uuid4().hex
        body: dict[str, Any] = {"id": prediction_id, "input": dict(request.payload)}
        if self._opts.mode == "put":
            url = self._base.join(f"predictions/{prediction_id}")
            method = "PUT"
        else:
            url, method = self._predictions_url, "POST"
        began = time.monotonic()
        done = False
        try:
            response = await self._send(method, url, body)
            prediction = self._prediction(response)
            result = await self._result(prediction, first_byte_ns(response), began)
            done = True
            return result
        finally:
            if not done:  # cancelled or timed out mid-flight: free the container
                await self._cancel_quietly(self._base.join(f"predictions/{prediction_id}/cancel"))

    async def _result(
        self, prediction: dict[str, Any], arrived_ns: int | None, began: float
    ) -> Result:
        if prediction["status"] not in p.TERMINAL_STATES:
            raise InvalidResponseError(
                f"a synchronous prediction came back {prediction['status']!r}",
                provider=self.name,
                request_id=prediction["id"],
            )
        self._check_outcome(prediction, deadline_passed=False)
        queue_ms, execution_ms = p.phases_ms(prediction)
        cold: bool | None = False
        setup_ms: float | None = None
        first, self._seen_first = not self._seen_first, True
        if first or (queue_ms is not None and queue_ms >= self._opts.cold_threshold_ms):
            cold, setup_ms = await self._setup_before(prediction)
        return Result(
            output=prediction.get("output"),
            http_status=200,
            request_id=prediction["id"],
            first_byte_ns=arrived_ns,
            queue_ms=queue_ms,
            execution_ms=execution_ms,
            setup_ms=setup_ms,
            cold=cold,
            # The container's own clock says its setup ended after this prediction arrived:
            # a reported fact, not a guess from timings.
            cold_confirmed=cold is True,
        )

    async def _setup_before(self, prediction: dict[str, Any]) -> tuple[bool | None, float | None]:
        """Whether the container's setup ended after ``prediction`` was created (both stamps
        from the container's clock), and how long that setup took in ms."""
        health = self._json(await self._send("GET", self._health_url))
        setup = health.get("setup")
        setup = setup if isinstance(setup, dict) else {}
        setup_start = p.parse_time_s(setup.get("started_at"))
        setup_end = p.parse_time_s(setup.get("completed_at"))
        created = p.parse_time_s(prediction.get("created_at"))
        if setup_end is None or created is None:
            return None, None
        if setup_end <= created:
            return False, None
        setup_ms = None if setup_start is None else max(0.0, (setup_end - setup_start) * 1e3)
        return True, setup_ms

    async def state(self) -> FleetState:
        """One container's health: READY -> ready 1, BUSY -> busy 1, STARTING -> starting 1;
        SETUP_FAILED and DEFUNCT count as no worker (see ``detail``), and so does a 503 from
        a proxy with no container behind it."""
        try:
            health = self._json(await self._send("GET", self._health_url))
        except ServerHTTPError as exc:
            if exc.status_code != 503:
                raise
            # A proxy with no container behind it (scaled to zero) answers 503.
            return FleetState(ready=0, busy=0, starting=0, detail={"http_status": 503})
        status = health.get("status")
        return FleetState(
            ready=int(status == READY),
            busy=int(status == BUSY),
            starting=int(status == STARTING),
            queued=None,
            throttled=None,
            detail=health,
        )
