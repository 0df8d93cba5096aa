"""``ModalProvider``: a Modal web endpoint (``https://WORKSPACE--APP-FUNCTION.modal.run``).

Protocol facts, with their sources:

- Proxy auth: a Proxy Auth Token's id and secret in the ``Modal-Key`` and ``Modal-Secret``
  headers; without them a protected endpoint answers ``401`` "modal-http: missing credentials
  for proxy authorization" (https://modal.com/docs/guide/webhook-proxy-auth).
- Long requests: web endpoints answer within 150 s; a call still running then gets a ``303``
  to the *result URL*, the original URL with ``?__modal_function_call_id=fc-...``, which must
  be fetched with ``GET`` and blocks up to 150 s again, redirecting again until the result is
  ready (https://modal.com/docs/guide/webhook-timeouts). Followed here by hand, with ``GET``:
  the call id is kept (a failure while waiting names it), at most ``max_redirects`` hops.
- Each answer carries the function call's id in ``Modal-Function-Call-Id`` (a header Modal's
  edge adds; seen in responses in the wild, not documented as an API): the request id.
- A streamed answer (``Request.stream``: ``Accept: text/event-stream``) is read piece by piece,
  each with its arrival time: Modal passes a ``StreamingResponse`` through as the app writes
  it, server-sent events (one piece per ``data:`` event, the HTML spec's framing) or
  newline-delimited pieces (NDJSON, plain text) (https://modal.com/docs/guide/streaming-endpoints).
- Nothing in the answer says whether a container was started for it: Modal's control plane
  (``min_containers``, ``scaledown_window``, container lists) is reachable only through the
  ``modal`` client's gRPC API. A cold start is inferred from ``cold_threshold_ms``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any, Self

import httpx
from pydantic import Field, model_validator

import gpubench_sdk as sdk
from gpubench_sdk.cost import load_catalog

CALL_ID_HEADER = "Modal-Function-Call-Id"
CALL_ID_PARAM = "__modal_function_call_id"
LONG_REQUEST_S = 150.0  # https://modal.com/docs/guide/webhook-timeouts
_REDIRECTS = (301, 302, 303, 307, 308)
_STREAMED = ("text/event-stream", "application/x-ndjson", "text/plain")


class ModalOptions(sdk.ColdThresholdOptions):
    """Options of a Modal web endpoint. ``api_key`` (from ``api_key_env``/``api_key_file``)
    is a Proxy Auth Token written ``<token id>:<token secret>`` (``wk-...:ws-...``);
    ``cold_threshold_ms`` is the kit's (``ColdThresholdOptions``)."""

    url: str = Field(description="the endpoint, e.g. https://ws--app-fn.modal.run/generate")
    max_redirects: int = Field(
        default=40, ge=0, description="result-URL redirects followed (150 s each: 40 is 100 min)"
    )
    gpu: str | None = Field(
        default=None, description="the function's GPU type, kept with the run (e.g. 'L40S')"
    )

    @model_validator(mode="after")
    def _token_shape(self) -> Self:
        key = self.api_key
        if key is not None:
            token_id, sep, secret = key.get_secret_value().partition(":")
            if not (sep and token_id and secret):
                raise sdk.ConfigError(
                    "api_key",
                    "(hidden)",
                    "a Proxy Auth Token written '<token id>:<token secret>' (wk-...:ws-...)",
                )
            # each is sent in a header of its own: either may be echoed alone in an error
            sdk.remember(token_id)
            sdk.remember(secret)
        return self


class ModalProvider(sdk.Provider):
    """Modal web endpoints: POST the payload as JSON, follow ``303`` result-URL redirects
    with ``GET`` (counting them), report the function call id, infer cold starts from
    ``cold_threshold_ms``. No control plane: see docs/providers/modal.md for setting
    ``min_containers``/``scaledown_window`` before a cold-start run."""

    name = "modal"
    key_scheme = "modal"
    capabilities = sdk.Capabilities(
        streaming=True,
        billing=load_catalog().billing_model("modal"),
        # @app.function(min_containers, max_containers, scaledown_window) and
        # @modal.concurrent(max_inputs) (modal.com/docs/guide/concurrent-inputs)
        scaling_knobs=frozenset({"min_workers", "max_workers", "scale_down_s", "concurrency"}),
    )
    options: ModalOptions

    async def open(self) -> None:
        self._headers = {**self.options.headers, **self.auth_headers()}
        self._cold = self.options.cold_mark()  # no ensure_cold: inferred only

    async def invoke(self, request: sdk.Request) -> sdk.Result:
        o = self.options
        headers = self._headers
        if request.stream:  # Modal sends text/event-stream on as written, unbuffered
            headers = {**headers, "Accept": "text/event-stream"}
        sent_ns = time.perf_counter_ns()
        call_id: str | None = None
        # once the call has an id, every failure names it
        with sdk.naming_errors(self.name, lambda: call_id):
            post = self.client.build_request(
                "POST", o.url, json=dict(request.payload), headers=headers
            )
            response = await self.client.send(post, stream=request.stream, follow_redirects=False)
            redirects = 0
            while response.status_code in _REDIRECTS:
                await response.aclose()
                location = response.headers.get("location")
                if not location:
                    raise sdk.InvalidResponseError(
                        f"HTTP {response.status_code} without a Location",
                        provider=self.name,
                        status_code=response.status_code,
                    )
                target = response.url.join(location)
                call_id = target.params.get(CALL_ID_PARAM) or call_id
                if redirects >= o.max_redirects:
                    raise sdk.RequestTimeoutError(
                        f"still running after {redirects} result-URL redirects "
                        f"(max_redirects = {o.max_redirects})",
                        provider=self.name,
                    )
                redirects += 1
                # RFC 9110: a 303 is followed with GET; Modal refuses another POST there
                get = self.client.build_request("GET", target, headers=headers)
                response = await self.client.send(
                    get, stream=request.stream, follow_redirects=False
                )
            call_id = response.headers.get(CALL_ID_HEADER) or call_id
            try:
                output, times = await self._output(response, request.stream)
            finally:
                await response.aclose()
        cold, _ = self._cold.judge(sent_ns, sdk.first_byte_ns(response))
        return sdk.http_result(
            response, output=output, request_id=call_id, cold=cold, token_times_ns=times or None
        )

    async def _output(self, response: httpx.Response, stream: bool) -> tuple[Any, list[int]]:
        """The answer's output, and each piece's arrival time where it was streamed (SSE,
        NDJSON or plain text, asked for with ``stream``); a status >= 400 is raised."""
        kind = response.headers.get("content-type", "")
        if stream and response.status_code < 400 and kind.startswith(_STREAMED):
            pieces = [piece async for piece in _pieces(response)]
            return [output for output, _ in pieces], [at_ns for _, at_ns in pieces]
        await response.aread()
        if response.status_code >= 400:
            raise self._http_error(response)
        try:
            return response.json(), []
        except ValueError as exc:
            if "json" in kind:
                raise sdk.InvalidResponseError(
                    "the answer says JSON but does not parse",
                    provider=self.name,
                    status_code=response.status_code,
                ) from exc
            return response.text, []

    def _http_error(self, response: httpx.Response) -> sdk.ProviderError:
        """The core's error for a status >= 400 (as_provider_error: the call named, a 429's
        ``Retry-After`` in seconds or as an HTTP date), naming the function call; a 401 for
        missing proxy credentials says how to give the token."""
        detail = None
        if response.status_code == 401 and "proxy authorization" in response.text:
            detail = f"{response.text.strip()[:200]} (give a Proxy Auth Token as"
            detail += " '<token id>:<token secret>' in api_key_env)"
        return sdk.status_error(response, provider=self.name, detail=detail)


async def _pieces(response: httpx.Response) -> AsyncIterator[tuple[Any, int]]:
    """``(piece, arrived_ns)``: JSON where it parses, else the text. Server-sent events are one
    piece per event (``sse_events``, timed by the network read); NDJSON and plain text one
    per line."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        async for _, data, arrived_ns in sdk.sse_events(response):
            yield sdk.json_or_text(data), arrived_ns
        return
    async for line in response.aiter_lines():
        if line := line.rstrip("\r"):
            yield sdk.json_or_text(line), time.perf_counter_ns()
