"""``FalProvider``: fal apps through the queue API (submit, status, result, cancel) or
``fal.run``."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import AsyncIterator
from typing import Any, Literal

import httpx
from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

import gpubench_sdk as sdk
from gpubench_sdk.cost import load_catalog

from . import _protocol as fal

log = logging.getLogger(__name__)
_APP_ID = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*")
_BROKE_OFF = (httpx.HTTPError, sdk.ThrottledError, sdk.ServerHTTPError, sdk.InvalidResponseError)


class FalOptions(sdk.PollingOptions):
    """Options of a fal target; ``api_key`` comes from ``api_key_env``/``api_key_file``."""

    app_id: str = Field(
        description="the app or model id, owner/app[/subpath] (e.g. fal-ai/flux/dev)"
    )
    queue_url: str = Field(
        default=fal.QUEUE_URL, description="queue API base (emulator: <url>/queue)"
    )
    run_url: str = Field(
        default=fal.RUN_URL, description="synchronous API base (emulator: <url>/run)"
    )
    mode: Literal["queue", "run"] = Field(
        default="queue",
        description="'queue': submit, follow the status, fetch the result (cancellable, "
        "measures the queue wait); 'run': one held request to fal.run",
    )
    status_updates: Literal["poll", "stream"] = Field(
        default="poll",
        description="follow a queued request by polling /status or by its SSE /status/stream",
    )
    logs: bool = Field(default=False, description="ask for runner logs with each status (logs=1)")
    start_timeout_s: float | None = Field(
        default=None,
        gt=fal.MIN_REQUEST_TIMEOUT_S,
        description="X-Fal-Request-Timeout: fal gives up on a request not started by then",
    )
    cold_threshold_ms: float = Field(
        default=1000.0,
        gt=0,
        description="a wait from IN_QUEUE to IN_PROGRESS above this counts as a cold start",
    )

    @field_validator("app_id")
    @classmethod
    def _owner_and_app(cls, value: str) -> str:
        if not _APP_ID.fullmatch(value):
            raise PydanticCustomError(
                "fal_app_id",
                "an app id owner/app[/subpath] of letters, digits, '_', '.' and '-' "
                "(e.g. fal-ai/flux/dev, as in https://fal.run/fal-ai/flux/dev)",
            )
        return value


class FalProvider(sdk.Provider):
    """fal: the queue API (``queue.fal.run``) or the synchronous route (``fal.run``).

    In queue mode the request's way through the queue is followed by polling ``/status`` or
    reading ``/status/stream``: the time from the submit's answer to the first ``IN_PROGRESS``
    is ``queue_ms`` (a runner booting and running ``setup()`` shows up there) and a wait above
    ``cold_threshold_ms`` marks the request cold. fal reports ``metrics.inference_time``, which
    becomes ``execution_ms``; it reports no setup time and no runner counts over its public
    API, and scaling (``keep_alive``, ``min_concurrency``) lives in the app's code, so neither
    fleet state nor cold start control is offered. A streamed request (``Request.stream``) uses
    ``fal.run/{app}/stream`` (server-sent events) in either mode.
    """

    name = "fal"
    key_scheme = "key"
    capabilities = sdk.Capabilities(
        streaming=True,
        server_timings=frozenset({"execution_ms"}),
        # the catalog's rules, with their source and date (gpubench_sdk/cost/data/prices.json)
        billing=load_catalog().billing_model("fal"),
        # fal.App / `fal apps scale`: min_concurrency, max_concurrency, keep_alive,
        # max_multiplexing (docs.fal.ai/documentation/deployment/scale-your-application)
        scaling_knobs=frozenset({"min_workers", "max_workers", "scale_down_s", "concurrency"}),
    )
    options: FalOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.options.mode == "run":  # a held request reports no metrics: nothing is promised
            sdk.with_capabilities(self, server_timings=frozenset())

    @property
    def endpoint(self) -> str:
        o = self.options
        base = o.queue_url if o.mode == "queue" else o.run_url
        return sdk.scrub_url(f"{base.rstrip('/')}/{o.app_id}")

    async def open(self) -> None:
        o = self.options
        self._submit_url = httpx.URL(f"{o.queue_url.rstrip('/')}/{o.app_id}")
        self._run = httpx.URL(f"{o.run_url.rstrip('/')}/{o.app_id}")
        self._requests = f"{o.queue_url.rstrip('/')}/{fal.app_base(o.app_id)}/requests"
        self._logs = {"logs": "1"} if o.logs else {}  # the query of both status reads
        headers = {**o.headers, **self.auth_headers()}
        if o.start_timeout_s is not None:
            headers[fal.REQUEST_TIMEOUT_HEADER] = str(o.start_timeout_s)
        # fal's {"detail"} shown on a status >= 400 (_http_error)
        self._send = sdk.Sender(self.client, self.name, headers, _http_error)

    # ----- requests -------------------------------------------------------------------------

    async def invoke(self, request: sdk.Request) -> sdk.Result:
        if request.stream:
            return await self._stream(request)
        if self.options.mode == "run":
            return await self._run_sync(request)
        return await sdk.run_polled(self, _QueuedRequest(self, request))

    def _urls(self, submitted: dict[str, Any], request_id: str) -> dict[str, str]:
        """The URLs fal answered with (its docs say to use them), else the documented ones."""
        fallback = fal.request_urls(self._requests, request_id)
        return {
            name: value if isinstance(value := submitted.get(name), str) and value else default
            for name, default in fallback.items()
        }

    async def _follow_stream(self, status_url: str) -> tuple[int | None, int | None]:
        """Read ``/status/stream`` to its COMPLETED event: when the first event no longer
        IN_QUEUE and the COMPLETED one came. A stream that breaks off (reset, 429, 5xx,
        closed early) is left, and the request polled: it runs on at fal whatever became of
        the stream."""
        url = httpx.URL(f"{status_url.rstrip('/')}/stream").copy_merge_params(self._logs)
        progress_ns: int | None = None
        try:
            async with self._send.stream("GET", url) as response:
                async for _, data in _events(response):
                    status = self._parse_status(data, response)
                    if status["status"] != fal.IN_QUEUE and progress_ns is None:
                        progress_ns = time.perf_counter_ns()
                    if status["status"] == fal.COMPLETED:
                        return progress_ns, time.perf_counter_ns()
        except _BROKE_OFF as exc:
            if isinstance(exc, sdk.InvalidResponseError) and "ended in the middle" not in str(exc):
                raise  # a status fal would not send: not a broken connection
            log.info("fal status stream broke off (%s); polling instead", type(exc).__name__)
        return progress_ns, None

    def _parse_status(self, text: str, response: httpx.Response) -> dict[str, Any]:
        try:
            status = json.loads(text)
        except ValueError as exc:
            raise _invalid("a status is not JSON", response) from exc
        if not isinstance(status, dict) or status.get("status") not in fal.STATUSES:
            got = status.get("status") if isinstance(status, dict) else status
            raise _invalid(f"not a queue status: {got!r}", response)
        return status

    def _raise_if_failed(self, status: dict[str, Any], request_id: str) -> None:
        error = status.get("error")
        if not error:
            return
        kind = str(status.get("error_type") or "")
        message = sdk.redact(
            f"request COMPLETED with an error ({kind or 'no error_type'}): {error}"
        )
        kw: dict[str, Any] = {"provider": self.name, "request_id": request_id}
        if "timeout" in kind:
            raise sdk.RequestTimeoutError(message, **kw)
        if "cancel" in kind:
            raise sdk.JobCancelledError(message, **kw)
        raise sdk.ServerHTTPError(message, **kw)

    async def _run_sync(self, request: sdk.Request) -> sdk.Result:
        response = await self._send("POST", self._run, dict(request.payload))
        request_id = response.headers.get(fal.REQUEST_ID_HEADER)
        problem = "the result is not JSON"
        return sdk.json_result(response, provider=self.name, problem=problem, request_id=request_id)

    async def _stream(self, request: sdk.Request) -> sdk.Result:
        """``fal.run/{app}/stream``: each event's data is one JSON piece of output; the first
        event's arrival is the first byte. An ``error`` event fails the request."""
        url = httpx.URL(f"{self._run}/stream")
        events: list[Any] = []
        first: int | None = None
        # A timeout or a broken connection escapes to the invoke boundary (as_provider_error).
        async with self._send.stream("POST", url, dict(request.payload)) as response:
            request_id = response.headers.get(fal.REQUEST_ID_HEADER)
            async for event, data in _events(response):
                first = first or time.perf_counter_ns()
                try:
                    piece = json.loads(data)
                except ValueError as exc:
                    raise _invalid("an SSE event is not JSON", response) from exc
                if event == "error":
                    detail = piece.get("detail") if isinstance(piece, dict) else piece
                    raise sdk.ServerHTTPError(
                        f"the stream failed: {detail}", provider=self.name, request_id=request_id
                    )
                events.append(piece)
        return sdk.http_result(
            response,
            output=events,
            request_id=request_id,
            first_byte_ns=first,
            output_units=len(events),
        )


class _QueuedRequest(sdk.Job[dict[str, Any]]):
    """A request through fal's queue: submitted, followed on its status stream or by polling
    ``status_url`` to COMPLETED, its result read at ``response_url``; cancelled at
    ``cancel_url``. The time from the submit's answer to the first status no longer IN_QUEUE
    is ``queue_ms`` (a runner booting and running ``setup()`` shows up there)."""

    terminal = frozenset({fal.COMPLETED})

    def __init__(self, provider: FalProvider, request: sdk.Request) -> None:
        self.p, self.payload = provider, dict(request.payload)
        self.progress_ns: int | None = None
        self.done_ns: int | None = None
        self.response: httpx.Response | None = None

    async def submit(self) -> None:
        p = self.p
        response = await p._send("POST", p._submit_url, self.payload)
        submitted = sdk.json_object(response, provider=p.name)
        request_id = submitted.get("request_id")
        if not isinstance(request_id, str) or not request_id:
            raise _invalid("the submit answer has no request_id", response)
        self.id, self.urls = request_id, p._urls(submitted, request_id)
        self.start_ns = sdk.first_byte_ns(response) or time.perf_counter_ns()
        if p.options.status_updates == "stream":
            self.progress_ns, self.done_ns = await p._follow_stream(self.urls["status_url"])
        return None  # then polled at once (after a stream: COMPLETED, or where it broke off)

    async def status(self) -> dict[str, Any]:
        """One status read; once COMPLETED without an error, the result too."""
        p = self.p
        url = httpx.URL(self.urls["status_url"]).copy_merge_params(p._logs)
        response = await p._send("GET", url)
        status = p._parse_status(response.text, response)
        if status["status"] != fal.IN_QUEUE and self.progress_ns is None:
            self.progress_ns = sdk.first_byte_ns(response) or time.perf_counter_ns()
        if status["status"] == fal.COMPLETED:
            self.done_ns = self.done_ns or time.perf_counter_ns()  # the run ended before this
            if not status.get("error"):
                self.response = await p._send("GET", self.urls["response_url"])
        return status

    async def result(self, state: dict[str, Any]) -> sdk.Result:
        self.p._raise_if_failed(state, str(self.id))
        response, start_ns, done_ns = self.response, self.start_ns, self.done_ns
        assert response is not None and done_ns is not None
        progress_ns = self.progress_ns
        queue_ms = (progress_ns - start_ns) / 1e6 if progress_ns is not None else None
        metrics = state.get("metrics") if isinstance(state.get("metrics"), dict) else {}
        inference_s = sdk.finite_number(metrics.get("inference_time")) if metrics else None
        if queue_ms is not None and inference_s is not None:
            # A status seen late (a poll that skipped IN_PROGRESS, a loaded client) dates the
            # start too late; the run began at least inference_time before COMPLETED was seen.
            queue_ms = max(0.0, min(queue_ms, (done_ns - start_ns) / 1e6 - inference_s * 1e3))
        detail: dict[str, Any] = {"metrics": metrics} if metrics else {}
        if state.get("logs"):
            detail["logs"] = state["logs"]
        return sdk.json_result(
            response,
            provider=self.p.name,
            problem="the result is not JSON",
            request_id=self.id,
            queue_ms=queue_ms,
            execution_ms=inference_s * 1e3 if inference_s is not None else None,
            cold=None if queue_ms is None else queue_ms >= self.p.options.cold_threshold_ms,
            detail=detail or None,
        )

    async def cancel(self) -> None:
        await self.p._send("PUT", self.urls["cancel_url"])


def _http_error(response: httpx.Response) -> sdk.ProviderError:
    """The core's error for a status >= 400 (its body read), with fal's request id; a 504
    marked ``X-Fal-Request-Timeout-Type`` is the caller's ``X-Fal-Request-Timeout`` running out
    before a runner took the request, so a timeout rather than a server error."""
    request_id = response.headers.get(fal.REQUEST_ID_HEADER)
    error = sdk.status_error(response, provider="fal", request_id=request_id)
    if response.status_code == 504 and response.headers.get(fal.REQUEST_TIMEOUT_TYPE_HEADER):
        return sdk.reclassified(error, sdk.RequestTimeoutError)
    return error


def _invalid(message: str, response: httpx.Response) -> sdk.InvalidResponseError:
    return sdk.invalid_response(response, message, provider="fal")


async def _events(response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
    """``(event, data)`` for each server-sent event of ``response`` (fal's keep-alive comment
    every 15 s skipped); ``InvalidResponseError`` if the stream stops in the middle of one."""
    parser = sdk.SSEParser()
    async for chunk in response.aiter_bytes():
        for event, data in parser.feed_events(chunk):
            yield event, data.decode("utf-8", "replace")
    if parser.pending:
        raise _invalid("the event stream ended in the middle of an event", response)
