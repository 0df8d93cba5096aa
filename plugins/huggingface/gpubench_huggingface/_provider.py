"""``HuggingFaceProvider``: dedicated Inference Endpoints, their URL and their management API."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any, Literal, Self

import httpx
from pydantic import Field, model_validator

import gpubench_sdk as sdk
from gpubench_sdk.cost import load_catalog

from . import _protocol as hf

# Per minute while initializing or running, never while paused or scaled to zero; the rules
# and their sources live in the cost catalog (gpubench_sdk/cost/data/prices.json).
BILLING = load_catalog().billing_model("huggingface")
_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
STATE_CHECK_EVERY = 20  # while retrying 503s, ask the management API about every N retries
WARM_WINDOW = 50  # warm send-to-headers times the running median is taken over


class HuggingFaceOptions(sdk.ProviderOptions):
    """One endpoint: its ``url``, and/or ``namespace`` + ``endpoint_name`` for the management
    API (which turns on fleet state, scaling and confirmed cold starts)."""

    url: str | None = Field(
        default=None, description="the endpoint URL (read from the API if unset)"
    )
    namespace: str | None = Field(default=None, pattern=_NAME, description="user or organization")
    endpoint_name: str | None = Field(
        default=None, pattern=_NAME, description="the endpoint's name"
    )
    management_url: str = Field(default=hf.MANAGEMENT_URL, description="management API base")
    route: Literal["toolkit", "generate", "generate_stream"] = Field(
        default="toolkit",
        description="'toolkit': POST / with {inputs, parameters}; 'generate': TGI /generate; "
        "'generate_stream': TGI /generate_stream (SSE). A streamed request always uses "
        "/generate_stream",
    )
    hold_while_scaling: bool = Field(
        default=True, description="send X-Scale-Up-Timeout so the proxy holds a cold request"
    )
    scale_up_timeout_s: int | None = Field(
        default=None, ge=1, description="the X-Scale-Up-Timeout value (default: timeout_s)"
    )
    retry_while_initializing: bool = Field(
        default=True, description="retry the proxy's 503/502 until a replica is ready"
    )
    initializing_statuses: frozenset[int] = Field(
        default=frozenset({503}),
        description="the proxy's answers meaning 'replica initializing' (add 502 for the older "
        "proxy; any other 5xx is a failure)",
    )
    retry_interval_s: float = Field(default=1.0, gt=0, description="delay between those retries")
    cold_threshold_ms: float = Field(
        default=3000.0, gt=0, description="an inferred cold start is at least this long"
    )
    cold_factor: float = Field(
        default=3.0, ge=1.0, description="...and at least this many times the warm median"
    )
    poll_interval_s: float = Field(default=2.0, gt=0, description="ensure_cold: state polling")
    minute_s: float = Field(
        default=hf.SECONDS_PER_MINUTE,
        gt=0,
        description="seconds in a scaleToZeroTimeout minute (60; an emulator may run faster)",
    )

    @model_validator(mode="after")
    def _located(self) -> Self:
        if (self.namespace is None) != (self.endpoint_name is None):
            raise ValueError("set namespace and endpoint_name together (the management API)")
        if self.url is None and self.namespace is None:
            raise ValueError("set url, or namespace and endpoint_name to look the URL up")
        return self


class HuggingFaceProvider(sdk.Provider):
    """Hugging Face Inference Endpoints (dedicated): the toolkit body or TGI's ``/generate`` and
    ``/generate_stream``, the cold proxy's 503s (retried, timed) or ``X-Scale-Up-Timeout``
    holds, TGI's timing headers, and the management API for state, scaling and scale-to-zero.

    Cold starts are confirmed when the proxy answered 503/502 before a replica was ready (the
    time to ready is ``setup_ms``) or when ``ensure_cold`` saw ``scaledToZero`` just before.
    """

    name = "huggingface"
    capabilities = sdk.Capabilities(
        streaming=True,
        fleet_state=True,
        cold_start_control=True,
        scaling_settings=True,
        billing=BILLING,
        # compute.scaling: minReplica, maxReplica, scaleToZeroTimeout (PROVIDERS.md)
        scaling_knobs=frozenset({"min_workers", "max_workers", "scale_down_s"}),
    )
    options: HuggingFaceOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        o = self.options
        managed = o.namespace is not None
        # TGI's /generate reports its phases in headers; the toolkit and SSE streams do not.
        timings = frozenset({"queue_ms", "execution_ms"} if o.route == "generate" else ())
        sdk.with_capabilities(
            self,
            fleet_state=managed,
            cold_start_control=managed,
            scaling_settings=managed,
            server_timings=timings,
        )
        self._judge = ColdJudge(o.cold_threshold_ms, o.cold_factor, o.hold_while_scaling)
        self._routes: dict[str, httpx.URL] = {}
        self._api: httpx.URL | None = None
        self._scaling = sdk.SavedScaling(self.get_scaling, self._put_scaling)

    @property
    def endpoint(self) -> str | None:
        """The endpoint URL, also when it was read from the management API."""
        base = self._routes.get("toolkit")
        return super().endpoint if base is None else sdk.scrub_url(str(base)).rstrip("/")

    async def open(self) -> None:
        o = self.options
        self._send = sdk.Sender.of(self, self._http_error)
        if o.namespace is not None:
            base = o.management_url.rstrip("/")
            self._api = httpx.URL(f"{base}/endpoint/{o.namespace}/{o.endpoint_name}")
        url = o.url
        if url is None:
            shown = (await self.endpoint_status()).url
            url = sdk.required(shown, "url", "an endpoint URL: the API shows none (paused?)")
        base_url = url.rstrip("/")
        # Built once: parsing URL strings on every request is measurable at high rates.
        paths = {"toolkit": "/", "generate": "/generate", "generate_stream": "/generate_stream"}
        self._routes = {route: httpx.URL(base_url + path) for route, path in paths.items()}
        self._invoke_headers: dict[str, str] = {}  # added to the bound ones
        if o.hold_while_scaling:
            hold_s = o.scale_up_timeout_s or math.ceil(o.timeout_s)
            self._invoke_headers[hf.SCALE_UP_TIMEOUT_HEADER] = str(hold_s)

    async def close(self) -> None:
        await self._scaling.restore()

    # ----- requests -------------------------------------------------------------------------

    async def invoke(self, request: sdk.Request) -> sdk.Result:
        o = self.options
        route = "generate_stream" if request.stream else o.route
        build = hf.toolkit_body if route == "toolkit" else hf.tgi_body
        url, body = self._routes[route], build(request.payload)
        first_send_ns = time.perf_counter_ns()
        retries = 0  # the proxy's 503s so far: any means a replica was initializing
        while True:
            send_ns = time.perf_counter_ns()
            try:
                if route == "generate_stream":
                    result, headers_ns = await self._stream(url, body)
                else:
                    result, headers_ns = await self._post(url, body, send_ns)
                break
            except sdk.ServerHTTPError as exc:
                if exc.status_code not in o.initializing_statuses or not o.retry_while_initializing:
                    raise
                if retries % STATE_CHECK_EVERY == 0:
                    await self._refuse_if_stuck(exc)
                retries += 1
                waited_s = (time.perf_counter_ns() - first_send_ns) / 1e9
                if waited_s + o.retry_interval_s >= o.timeout_s - min(1.0, 0.1 * o.timeout_s):
                    raise sdk.ColdTimeoutError(
                        f"no replica ready after {waited_s:.1f} s of HTTP {exc.status_code}",
                        provider=self.name,
                        status_code=exc.status_code,
                    ) from exc
                await asyncio.sleep(o.retry_interval_s)
        if headers_ns is None:
            headers_ns = time.perf_counter_ns()
        result.cold, result.cold_confirmed, result.setup_ms = self._judge.verdict(
            retries > 0,
            to_ready_ms=(headers_ns - first_send_ns) / 1e6,
            to_answer_ms=(headers_ns - send_ns) / 1e6,
            server_ms=(result.detail or {}).get("total_ms"),  # TGI's x-total-time
        )
        return result

    async def _refuse_if_stuck(self, exc: sdk.ServerHTTPError) -> None:
        """A paused or failed endpoint also answers 503, but no wait will make it ready: with
        the management API at hand, ask, and fail at once instead of retrying to the deadline."""
        if self._api is None:
            return
        try:
            state = (await self.endpoint_status()).state
        except sdk.ProviderError:
            return  # the API's own trouble must not fail a request that may still succeed
        if state in hf.STUCK_STATES:
            raise sdk.ServerHTTPError(
                f"endpoint is {state}: requests do not start it ({exc})",
                provider=self.name,
                status_code=exc.status_code,
            ) from exc

    async def _post(
        self, url: httpx.URL, body: dict[str, Any], send_ns: int
    ) -> tuple[sdk.Result, int | None]:
        """The answer, and when its headers came."""
        response = await self._send("POST", url, body, self._invoke_headers)
        headers = response.headers
        arrived = sdk.first_byte_ns(response)
        data = sdk.json_body(response, provider=self.name)
        prompt, generated = hf.token_counts(headers)
        if url == self._routes["generate"]:
            if not isinstance(data, dict) or not isinstance(data.get("generated_text"), str):
                problem = "TGI /generate answered without generated_text"
                raise sdk.invalid_response(response, problem, provider=self.name)
            details = data.get("details") or {}
            generated = details.get("generated_tokens", generated)
            output: Any = data["generated_text"]
        else:
            output = hf.toolkit_output(data)
        to_first_byte_ms = None if arrived is None else (arrived - send_ns) / 1e6
        t = hf.timings_ms(headers, to_first_byte_ms)
        # TGI's other phases, kept with the request (queue and inference have their own fields)
        detail = {k: v for k, v in t.items() if k not in ("queue_ms", "inference_ms")}
        result = sdk.http_result(
            response,
            output=output,
            request_id=headers.get("x-request-id"),
            queue_ms=t.get("queue_ms"),
            execution_ms=t.get("inference_ms", t.get("compute_ms")),
            input_units=prompt,
            output_units=generated if isinstance(generated, int) else None,
            detail=detail or None,
        )
        return result, arrived

    async def _stream(self, url: httpx.URL, body: dict[str, Any]) -> tuple[sdk.Result, int | None]:
        """TGI's SSE token events: each token's arrival time; the last event's text/details.
        A timeout or a broken stream leaves ``invoke`` as the core maps it."""
        times: list[int] = []
        final: dict[str, Any] | None = None
        async with self._send.stream("POST", url, body, self._invoke_headers) as response:
            arrived = sdk.first_byte_ns(response)
            async for _, data, at_ns in sdk.sse_events(response):
                event = sdk.json_event(data, provider=self.name)
                if "error" in event:
                    status = response.status_code
                    error = sdk.stream_error(event["error"], provider=self.name, status_code=status)
                    raise sdk.reclassified(error, hf.HandlerError)
                token = event.get("token")
                if isinstance(token, dict) and not token.get("special"):
                    times.append(at_ns)
                if event.get("generated_text") is not None:
                    final = event
        if final is None:
            raise sdk.InvalidResponseError(
                "the stream ended before its final event", provider=self.name
            )
        details = final.get("details") or {}
        generated = details.get("generated_tokens", len(times))
        result = sdk.http_result(
            response,
            output=final["generated_text"],
            request_id=response.headers.get("x-request-id"),
            first_byte_ns=times[0] if times else arrived,
            output_units=generated if isinstance(generated, int) else None,
            token_times_ns=times or None,
        )
        return result, arrived

    # ----- HTTP and error mapping -------------------------------------------------------------

    def _http_error(self, response: httpx.Response) -> sdk.ProviderError:
        toolkit = response.request.url == self._routes.get("toolkit")
        return hf.http_error(response, self.name, toolkit)

    # ----- the management API -----------------------------------------------------------------

    def _require_api(self) -> httpx.URL:
        return sdk.required(self._api, "namespace", "namespace and endpoint_name (management API)")

    async def endpoint_status(self, action: str | None = None) -> hf.EndpointStatus:
        """``GET /endpoint/{namespace}/{name}``: state, replicas, URL and scaling; with
        ``action``, ``POST .../{action}``, which answers the endpoint object too."""
        api = self._require_api()
        call = ("GET", api) if action is None else ("POST", httpx.URL(f"{api}/{action}"))
        body = sdk.json_body(await self._send(*call), provider=self.name)
        return hf.parse_endpoint(body, self.options.minute_s, self.name)

    async def scale_to_zero(self) -> hf.EndpointStatus:
        """Ask HF to scale the endpoint to zero now (the next request cold-starts it)."""
        return await self.endpoint_status("scale-to-zero")

    async def pause(self) -> hf.EndpointStatus:
        """Pause the endpoint: not billed, and requests do not wake it (``resume`` does)."""
        return await self.endpoint_status("pause")

    async def resume(self) -> hf.EndpointStatus:
        """Resume a paused endpoint; one already running (HF: 400 "already running") is left
        as it is, as ``huggingface_hub``'s ``resume_inference_endpoint(running_ok=True)``."""
        try:
            return await self.endpoint_status("resume")
        except sdk.ClientHTTPError as exc:
            if exc.status_code != 400 or "already running" not in str(exc):
                raise
        return await self.endpoint_status()

    async def state(self) -> sdk.FleetState:
        return (await self.endpoint_status()).fleet_state()

    async def ensure_cold(self, timeout_s: float) -> sdk.ColdCheck:
        """``minReplica`` to 0 (restored on close), ``POST scale-to-zero``, then poll until the
        API reports ``scaledToZero`` with no ready replica."""
        started = time.monotonic()
        status = await self.endpoint_status()
        if status.state in hf.STUCK_STATES:
            how = f"endpoint is {status.state}: requests would not start it; resume or fix it"
            return sdk.ColdCheck(confirmed=False, waited_s=time.monotonic() - started, how=how)
        if status.scaling.min_workers:
            await self.set_scaling(sdk.ScalingSettings(min_workers=0))
        if not status.is_scaled_to_zero:
            status = await self.scale_to_zero()
        in_hand: hf.EndpointStatus | None = status  # the first look needs no call

        async def look() -> tuple[bool, str]:
            nonlocal in_hand
            status, in_hand = in_hand or await self.endpoint_status(), None
            if status.is_scaled_to_zero:
                how = f"minReplica=0, scale-to-zero; API: {hf.SCALED_TO_ZERO}"
                return True, f"{how}, 0 ready replicas"
            return False, f"state {status.state}, {status.ready_replicas} ready replicas"

        poll_s = self.options.poll_interval_s
        return await sdk.wait_cold(
            look, timeout_s=timeout_s, poll=poll_s, started=started, mark=self._judge.mark
        )

    async def get_scaling(self) -> sdk.ScalingSettings:
        return (await self.endpoint_status()).scaling

    async def deployed(self) -> dict[str, Any]:
        """The endpoint's model (repository and revision: a commit of the Hub repository),
        framework, task and instance, from the management API's endpoint object
        (``model.{repository, revision, framework, task}``, ``compute.{instanceType,
        instanceSize, accelerator}``, ``provider.{vendor, region}``: PROVIDERS.md)."""
        if self._api is None:  # called by URL alone: no management API to ask
            return {}
        return hf.deployment_of((await self.endpoint_status()).raw)

    async def set_scaling(self, settings: sdk.ScalingSettings) -> None:
        """``PUT`` the knobs given (``scaleToZeroTimeout`` in whole minutes); restored on close."""
        hf.scaling_payload(settings, self.options.minute_s)  # refuse bad values before saving
        await self._scaling.change(settings)

    async def _put_scaling(self, settings: sdk.ScalingSettings) -> None:
        payload = hf.scaling_payload(settings, self.options.minute_s)
        with sdk.refused_as_config("scaling", payload["compute"]["scaling"], "HF"):
            await self._send("PUT", self._require_api(), payload)


class ColdJudge:
    """Whether a request met a cold endpoint, and how long it waited for a replica: facts
    first (the proxy's 503s, a verified ``scaledToZero``: ``ensure_cold`` tells ``mark``), then
    TGI's own total, then a warm baseline."""

    def __init__(self, threshold_ms: float, factor: float, holds: bool) -> None:
        self.threshold_ms = threshold_ms
        self.holds = holds  # the proxy holds cold requests (X-Scale-Up-Timeout)
        self._warm = sdk.WarmBaseline(threshold_ms, factor, WARM_WINDOW)
        self.mark = sdk.ColdMark()

    def verdict(
        self,
        initializing: bool,
        *,
        to_ready_ms: float,
        to_answer_ms: float,
        server_ms: float | None,
    ) -> tuple[bool | None, bool, float | None]:
        """``(cold, confirmed, setup_ms)`` for a request that got an answer.

        ``initializing``: the proxy answered 503 first. ``to_ready_ms`` runs from the first
        send, ``to_answer_ms`` from the last, to the answer's headers; ``server_ms`` is TGI's
        ``x-total-time``. The time to ready is ``to_ready_ms`` less the server's own time
        (``server_ms``, else the warm median of send-to-headers, else nothing). A stream's
        headers come before its tokens, so its figures exclude them.
        """
        cold_next = self.mark.take() is not None
        median_ms = self._warm.median_ms
        own_ms = server_ms if server_ms is not None else median_ms
        if initializing or cold_next:
            ready_ms = max(0.0, to_ready_ms - (own_ms or 0.0))
            return True, True, ready_ms if initializing or own_ms is not None else None
        if server_ms is not None:  # TGI's total: the rest of the wait is the proxy's hold
            cold = to_answer_ms - server_ms >= self.threshold_ms
        elif not self.holds:
            cold = False  # a replica answered at once: without one the proxy would have 503'd
        else:
            cold = self._warm.is_cold(to_answer_ms)
        if cold:
            return True, False, max(0.0, to_answer_ms - (own_ms or 0.0))
        self._warm.add(to_answer_ms)
        return False, False, None
