"""``CogProvider``: a self-hosted Cog container (Cloud Run, Kubernetes, a VM) speaking Cog's own
HTTP API, the same prediction object Replicate serves.

Sources: ``python/cog/server/http.py`` in github.com/replicate/cog (read 2026-11) and Cog 0.23.1's
server itself (``coglet``, the Rust server that ``python -m cog.server.http`` starts), observed on
loopback in ``tests/test_cog_real_server.py``: ``POST /predictions`` (body ``{"input": {...},
"id"?}``; waits for the result), ``PUT /predictions/{id}`` (idempotent creation),
``POST /predictions/{id}/cancel`` (200 ``{}``; 404 ``{}`` when unknown). A prediction comes back
as ``{"id", "status", "output", "error"?, "logs", "metrics": {"predict_time": s}}``: 0.23 sends
no ``created_at``/``started_at`` (older Cogs did). While ``setup()`` runs every prediction gets
``503 {"error": "Setup has not finished yet. ...", "status": "failed"}``; a container whose one
slot is taken answers ``409 {"error": "At capacity - all prediction slots busy", "status":
"failed"}`` (older Cogs: ``{"detail": "Already running a prediction"}``), and it frees that slot
just *after* answering. ``GET /health-check`` -> ``{"status": STARTING|READY|BUSY|SETUP_FAILED|
DEFUNCT, "setup": {"started_at", "completed_at"?, "status", "logs"}, "version": {...}}`` with
nanosecond RFC 3339 stamps (``2026-12-01T14:27:03.939287774+00:00``).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from typing import Any, Literal

import httpx
from pydantic import Field

import gpubench_sdk as sdk

from . import _prediction as p

READY = "READY"
BUSY = "BUSY"
STARTING = "STARTING"
SETUP_FAILED = "SETUP_FAILED"
DEFUNCT = "DEFUNCT"

SETUP_POLL_MAX_S = 0.1  # /health-check is read at most this far apart while setup runs
SLOT_POLL_MAX_S = 0.02  # a 409 from a slot being freed is retried at most this far apart
DEADLINE_MARGIN_S = 0.05  # give up waiting this long before timeout_s, to say why


class CogOptions(sdk.ProviderOptions):
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
        description="a prediction that waited at least this long (its round trip minus "
        "predict_time) makes gpubench read /health-check to tell a setup (cold start) from a wait",
    )
    slot_wait_s: float = Field(
        default=0.5,
        ge=0,
        description="how long a 409 'at capacity' is retried while fewer of this target's "
        "predictions are in flight than it has seen answered together (the container frees "
        "its slot just after answering)",
    )


@dataclass(slots=True)
class _Waits:
    """What one invoke waited for before its prediction ran: the container's setup (it answered
    503) and a slot still being freed (it answered 409)."""

    setup_health: dict[str, Any] | None = None  # /health-check once setup had finished
    setup_wait_s: float = 0.0
    slot_retries: int = 0
    slot_wait_s: float = 0.0
    cold_check_error: str | None = None  # /health-check failed after the prediction succeeded

    def detail(self) -> dict[str, Any] | None:
        out: dict[str, Any] = {}
        if self.setup_health is not None:
            out["setup_wait_ms"] = round(self.setup_wait_s * 1e3, 3)
        if self.slot_retries:
            out["slot_retries"] = self.slot_retries
            out["slot_wait_ms"] = round(self.slot_wait_s * 1e3, 3)
        if self.cold_check_error is not None:
            out["cold_check_error"] = self.cold_check_error
        return out or None


class CogProvider(p.PredictionProvider):
    """Cog's synchronous predictions, cancel, and ``/health-check`` as fleet state.

    Each prediction carries an id chosen here, so an abandoned invoke can cancel it.
    ``metrics.predict_time`` (seconds) becomes ``execution_ms``; ``started_at - created_at``
    becomes ``queue_ms`` where the container sends them (Cog before 0.23).

    **Setup is the cold start.** A container answers 503 while ``setup()`` runs: the invoke
    then reads ``/health-check`` until the setup has finished (within ``timeout_s``), sends the
    prediction again and reports it cold, confirmed by the container, with ``setup_ms =
    setup.completed_at - setup.started_at``. Where a proxy holds the request during setup
    instead, the first prediction (and any that waited ``cold_threshold_ms``) reads
    ``/health-check`` too: it was cold if the setup ended after it was created (the
    container's ``created_at``, else the time it was sent, by this machine's clock).

    **A 409 is throttling only when the container really is busy.** Cog frees its slot just
    after answering, so a request sent at once on a kept-alive connection can get 409 from a
    container that is about to be idle. The provider counts its own predictions in flight and
    remembers the most it has seen answered together (the slots it knows of: 1 for one Cog
    container, more behind a proxy). A 409 while fewer of ours are in flight than that is a
    slot being freed (or another client's prediction): retried every few ms for up to
    ``slot_wait_s``. With every known slot taken by our own predictions, the container is busy
    with our load: the 409 is recorded as throttled at once. Waits show in ``Result.detail``
    (``setup_wait_ms``, ``slot_retries``, ``slot_wait_ms``).

    Cog's ``Prefer: respond-async`` is not used: Cog has no ``GET /predictions/{id}``, so an
    async prediction's result only arrives by webhook.
    """

    name = "cog"
    capabilities = sdk.Capabilities(
        fleet_state=True,
        # queue_ms too where the container sends created_at/started_at (Cog before 0.23)
        server_timings=frozenset({"execution_ms"}),
    )
    options: CogOptions
    _busy_statuses = frozenset({409})  # "At capacity": throttling, unless a slot is being freed

    _seen_first = False
    _sending = 0  # this target's prediction requests awaiting their answer
    _capacity = 1  # the most of them seen answered together: the slots we know of

    async def open(self) -> None:
        self._base = httpx.URL(self.options.url.rstrip("/") + "/")
        self._predictions_url = self._base.join("predictions")
        self._health_url = self._base.join("health-check")
        await super().open()

    async def invoke(self, request: sdk.Request) -> sdk.Result:
        return await sdk.run_job(_CogPrediction(self, request), provider=self.name)

    async def _create(
        self, method: str, url: httpx.URL, body: dict[str, Any], waits: _Waits
    ) -> tuple[httpx.Response, float, float]:
        """Send the prediction, waiting out the container's setup (503) and a slot being
        freed (409); returns the response and when (wall, monotonic) it was sent."""
        deadline = time.monotonic() + self.options.timeout_s - DEADLINE_MARGIN_S
        slot_delay_s = 0.001
        while True:
            sent_wall, sent = time.time(), time.monotonic()
            try:
                self._sending += 1
                try:
                    response = await self._send(method, url, body)
                    # All of ours in flight now were running together: that many slots exist.
                    self._capacity = max(self._capacity, self._sending)
                finally:
                    self._sending -= 1
                return response, sent_wall, sent
            except sdk.ServerHTTPError as exc:
                if exc.status_code != 503 or waits.setup_health is not None:
                    raise
                await self._await_setup(exc, deadline, waits)
            except sdk.ThrottledError as exc:
                if exc.status_code != 409 or self._sending >= self._capacity:
                    raise  # a proxy's 429, or our own load fills every slot we know of
                if waits.slot_wait_s + slot_delay_s > self.options.slot_wait_s:
                    raise  # taken for longer than a slot takes to free: someone else's load
                if time.monotonic() + slot_delay_s > deadline:
                    raise
                await asyncio.sleep(slot_delay_s)
                waits.slot_retries += 1
                waits.slot_wait_s += time.monotonic() - sent
                slot_delay_s = min(slot_delay_s * 2, SLOT_POLL_MAX_S)

    async def _await_setup(
        self, refused: sdk.ServerHTTPError, deadline: float, waits: _Waits
    ) -> None:
        """After a 503: if the container is running its setup, read ``/health-check`` until
        the setup has finished; otherwise the 503 stands."""
        began = time.monotonic()
        said_setup = "setup" in str(refused).lower()  # Cog: "Setup has not finished yet"
        saw_starting = False
        delay_s = 0.01
        while True:
            try:
                health = await self._send.json("GET", self._health_url)
            except sdk.ServerHTTPError as exc:  # a proxy with no container (yet) behind it
                if exc.status_code != 503 or not said_setup:
                    raise refused from exc
                health = {}
            status = health.get("status")
            if status in (SETUP_FAILED, DEFUNCT):
                setup = health.get("setup")
                logs = setup.get("logs") if isinstance(setup, dict) else None
                raise sdk.ServerHTTPError(
                    sdk.redact(f"container setup failed ({status}): {str(logs)[-300:]}"),
                    provider=self.name,
                    status_code=503,
                ) from refused
            if status in (READY, BUSY):
                if not (said_setup or saw_starting):
                    raise refused  # up and running: the 503 came from something else
                waits.setup_health = health
                waits.setup_wait_s = time.monotonic() - began
                return
            saw_starting = saw_starting or status == STARTING
            if not (saw_starting or said_setup):
                raise refused  # not a container in setup: the 503 is the answer
            if time.monotonic() + delay_s > deadline:
                raise sdk.ColdTimeoutError(
                    f"the container was still in setup after {time.monotonic() - began:.1f} s "
                    f"(timeout_s={self.options.timeout_s:g})",
                    provider=self.name,
                ) from refused
            await asyncio.sleep(delay_s)
            delay_s = min(delay_s * 1.5, SETUP_POLL_MAX_S)

    async def _result(
        self,
        prediction: dict[str, Any],
        response: httpx.Response,
        sent_wall: float,
        sent: float,
        waits: _Waits,
    ) -> sdk.Result:
        round_trip_ms = (time.monotonic() - sent) * 1e3
        self._check_outcome(prediction, deadline_passed=False)
        queue_ms, execution_ms = p.phases_ms(prediction)
        waited_ms = queue_ms if queue_ms is not None else round_trip_ms - (execution_ms or 0.0)
        cold: bool | None = False
        confirmed = False
        setup_ms: float | None = None
        first, self._seen_first = not self._seen_first, True
        if waits.setup_health is not None:
            # The container itself answered "setup has not finished" to this very request.
            cold, confirmed, setup_ms = True, True, _setup_ms(waits.setup_health)
        elif first or waited_ms >= self.options.cold_threshold_ms:
            cold, confirmed, setup_ms = await self._setup_before(
                prediction, sent_wall, waited_ms, waits
            )
        return sdk.Result(
            output=prediction.get("output"),
            http_status=200,
            request_id=prediction["id"],
            first_byte_ns=sdk.first_byte_ns(response),
            queue_ms=queue_ms,
            execution_ms=execution_ms,
            setup_ms=setup_ms,
            cold=cold,
            cold_confirmed=confirmed,
            detail=waits.detail(),
        )

    async def _setup_before(
        self, prediction: dict[str, Any], sent_wall: float, waited_ms: float, waits: _Waits
    ) -> tuple[bool | None, bool, float | None]:
        """``(cold, confirmed, setup_ms)``: whether the container's setup ended after
        ``prediction`` was created. With the container's own ``created_at`` both stamps are
        its clock (a fact); without it (Cog 0.23) the send time on this machine's clock
        stands in, and only a prediction that waited ``cold_threshold_ms`` can be cold.

        The prediction itself has succeeded: a ``/health-check`` that fails (a proxy's 429 or
        5xx, a reset, a body that is not JSON) leaves its cold start unknown (``cold`` None,
        ``detail["cold_check_error"]`` says why), rather than recording a failed request."""
        try:
            health = await self._send.json("GET", self._health_url)
        except sdk.ProviderError as exc:
            waits.cold_check_error = str(exc)
            return None, False, None
        setup = health.get("setup")
        setup_end = sdk.iso_seconds(setup.get("completed_at")) if isinstance(setup, dict) else None
        created = sdk.iso_seconds(prediction.get("created_at"))
        if setup_end is None:
            return None, False, None
        if created is not None:
            cold = setup_end > created
        else:
            cold = setup_end > sent_wall and waited_ms >= self.options.cold_threshold_ms
        return cold, cold and created is not None, _setup_ms(health) if cold else None

    async def state(self) -> sdk.FleetState:
        """One container's health: READY -> ready 1, BUSY -> busy 1, STARTING -> starting 1;
        SETUP_FAILED and DEFUNCT count as no worker (see ``detail``), and so does a 503 from
        a proxy with no container behind it."""
        try:
            health = await self._send.json("GET", self._health_url)
        except sdk.ServerHTTPError as exc:
            if exc.status_code != 503:
                raise
            # A proxy with no container behind it (scaled to zero) answers 503.
            return sdk.FleetState(ready=0, busy=0, starting=0, detail={"http_status": 503})
        status = health.get("status")
        return sdk.FleetState(  # queued and throttled unknown: /health-check tells neither
            ready=int(status == READY),
            busy=int(status == BUSY),
            starting=int(status == STARTING),
            detail=health,
        )


class _CogPrediction(sdk.Job[dict[str, Any]]):
    """One synchronous prediction under an id chosen here, so that an abandoned invoke can
    cancel it while the container still runs it."""

    terminal = p.TERMINAL_STATES

    def __init__(self, provider: CogProvider, request: sdk.Request) -> None:
        self.p = provider
        self.id = uuid.uuid4().hex
        self.body: dict[str, Any] = {"id": self.id, "input": dict(request.payload)}
        self.waits = _Waits()

    async def submit(self) -> dict[str, Any]:
        method, url = "POST", self.p._predictions_url
        if self.p.options.mode == "put":
            method, url = "PUT", self.p._base.join(f"predictions/{self.id}")
        created = await self.p._create(method, url, self.body, self.waits)
        self.response, self.sent_wall, self.sent = created
        self.answer = self.p._prediction(self.response)
        return self.answer

    async def status(self) -> dict[str, Any]:
        """Cog has no ``GET /predictions/{id}``: a prediction that is not over is an error."""
        status = self.answer["status"]
        problem = f"a synchronous prediction came back {status!r}"
        raise sdk.InvalidResponseError(problem, provider=self.p.name, request_id=self.id)

    async def result(self, state: dict[str, Any]) -> sdk.Result:
        return await self.p._result(state, self.response, self.sent_wall, self.sent, self.waits)

    async def cancel(self) -> None:  # cancelled or timed out mid-flight: free the container
        await self.p._send("POST", self.p._base.join(f"predictions/{self.id}/cancel"))


def _setup_ms(health: dict[str, Any]) -> float | None:
    """``setup.completed_at - setup.started_at`` from a ``/health-check`` body, in ms."""
    setup = health.get("setup")
    if not isinstance(setup, dict):
        return None
    return sdk.span_ms(
        sdk.iso_seconds(setup.get("started_at")), sdk.iso_seconds(setup.get("completed_at"))
    )
