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
  each with its arrival time (https://modal.com/docs/guide/streaming-endpoints).
- Nothing in the answer says whether a container was started for it: Modal's control plane
  (``min_containers``, ``scaledown_window``, container lists) is reachable only through the
  ``modal`` client's gRPC API. A cold start is inferred from ``cold_threshold_ms``.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar, Self
from urllib.parse import parse_qs, urlsplit

import httpx
from pydantic import Field, model_validator

import gpubench_sdk as sdk
from gpubench_sdk.cost import load_catalog

from ._stream import pieces

CALL_ID_HEADER = "modal-function-call-id"
CALL_ID_PARAM = "__modal_function_call_id"
LONG_REQUEST_S = 150.0  # https://modal.com/docs/guide/webhook-timeouts
_REDIRECTS = (301, 302, 303, 307, 308)


class ModalOptions(sdk.ProviderOptions):
    """Options of a Modal web endpoint. ``api_key`` (from ``api_key_env``/``api_key_file``)
    is a Proxy Auth Token written ``<token id>:<token secret>`` (``wk-...:ws-...``)."""

    url: str = Field(description="the endpoint, e.g. https://ws--app-fn.modal.run/generate")
    max_redirects: int = Field(
        default=40,
        ge=0,
        description="result-URL redirects followed (150 s each: 40 is 100 min)",
    )
    cold_threshold_ms: float | None = Field(
        default=None,
        gt=0,
        description="infer 'cold' when the first byte takes longer (None: no guess)",
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
    capabilities = sdk.Capabilities(streaming=True, billing=load_catalog().billing_model("modal"))
    Options: ClassVar[type[sdk.ProviderOptions]] = ModalOptions
    options: ModalOptions

    def auth_headers(self) -> dict[str, str]:
        return sdk.key_headers(self.options.api_key, "modal")

    async def open(self) -> None:
        self._headers = {**self.options.headers, **self.auth_headers()}
        self._cold = sdk.ColdMark(self.options.cold_threshold_ms)  # no ensure_cold: inferred only

    async def invoke(self, request: sdk.Request) -> sdk.Result:
        o = self.options
        headers = self._headers
        if request.stream:  # Modal sends text/event-stream on as written, unbuffered
            headers = {**headers, "Accept": "text/event-stream"}
        sent_ns = time.perf_counter_ns()
        call_id: str | None = None
        response = await self._send(
            self.client.build_request("POST", o.url, json=dict(request.payload), headers=headers),
            call_id=None,
            stream=request.stream,
        )
        redirects = 0
        while response.status_code in _REDIRECTS:
            await response.aclose()
            location = response.headers.get("location")
            if not location:
                raise sdk.InvalidResponseError(
                    f"HTTP {response.status_code} without a Location",
                    provider=self.name,
                    status_code=response.status_code,
                    request_id=call_id,
                )
            target = response.url.join(location)
            call_id = _call_id(target) or call_id
            if redirects >= o.max_redirects:
                raise sdk.RequestTimeoutError(
                    f"still running after {redirects} result-URL redirects "
                    f"(max_redirects = {o.max_redirects})",
                    provider=self.name,
                    request_id=call_id,
                )
            redirects += 1
            # RFC 9110: a 303 is followed with GET; Modal refuses another POST there
            response = await self._send(
                self.client.build_request("GET", target, headers=headers),
                call_id=call_id,
                stream=request.stream,
            )
        call_id = response.headers.get(CALL_ID_HEADER) or call_id
        try:
            if response.status_code >= 400:
                await self._read(response, call_id)
                raise self._http_error(response, call_id)
            if request.stream:
                output, times = await self._pieces(response, call_id)
            else:
                output, times = self._document(response, call_id), []
        finally:
            await response.aclose()
        arrived_ns = sdk.first_byte_ns(response)
        cold, _ = self._cold.judge(sent_ns, arrived_ns)
        return sdk.Result(
            output=output,
            http_status=response.status_code,
            request_id=call_id,
            first_byte_ns=arrived_ns,
            cold=cold,
            token_times_ns=times or None,
        )

    async def _send(
        self, request: httpx.Request, *, call_id: str | None, stream: bool
    ) -> httpx.Response:
        try:
            return await self.client.send(request, stream=stream, follow_redirects=False)
        except httpx.HTTPError as exc:
            raise self._transport_error(exc, call_id) from exc

    async def _read(self, response: httpx.Response, call_id: str | None) -> None:
        try:
            await response.aread()
        except httpx.HTTPError as exc:
            raise self._transport_error(exc, call_id) from exc

    async def _pieces(self, response: httpx.Response, call_id: str | None) -> tuple[Any, list[int]]:
        """A streamed answer piece by piece; one that is not a stream is read whole."""
        kind = response.headers.get("content-type", "")
        if not kind.startswith(("text/event-stream", "application/x-ndjson", "text/plain")):
            await self._read(response, call_id)
            return self._document(response, call_id), []
        output: list[Any] = []
        times: list[int] = []
        try:
            async for piece, at_ns in pieces(response):
                output.append(piece)
                times.append(at_ns)
        except httpx.HTTPError as exc:
            raise self._transport_error(exc, call_id) from exc
        return output, times

    def _document(self, response: httpx.Response, call_id: str | None) -> Any:
        try:
            return response.json()
        except ValueError as exc:
            if "json" in response.headers.get("content-type", ""):
                raise sdk.InvalidResponseError(
                    "the answer says JSON but does not parse",
                    provider=self.name,
                    status_code=response.status_code,
                    request_id=call_id,
                ) from exc
            return response.text

    def _transport_error(self, exc: httpx.HTTPError, call_id: str | None) -> sdk.ProviderError:
        return sdk.as_provider_error(exc, provider=self.name, request_id=call_id)

    def _http_error(self, response: httpx.Response, call_id: str | None) -> sdk.ProviderError:
        """The core's error for a status >= 400 (as_provider_error: the call named, a 429's
        ``Retry-After`` in seconds or as an HTTP date), naming the function call; a 401 for
        missing proxy credentials says how to give the token."""
        detail = None
        if response.status_code == 401 and "proxy authorization" in response.text:
            detail = f"{response.text.strip()[:200]} (give a Proxy Auth Token as"
            detail += " '<token id>:<token secret>' in api_key_env)"
        return sdk.status_error(response, provider=self.name, request_id=call_id, detail=detail)


def _call_id(url: httpx.URL) -> str | None:
    values = parse_qs(urlsplit(str(url)).query).get(CALL_ID_PARAM)
    return values[0] if values else None
