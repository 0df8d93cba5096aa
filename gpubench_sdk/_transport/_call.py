"""``PreparedCall``: the lean request path for a plugin that sends the same call many times.

httpx's request API costs about a quarter of the client's CPU per request on a fast endpoint
(profiled with py-spy, ``docs/benchmarks.md``): a ``Request`` built (URL merged, headers merged
and encoded), a ``Response`` built around a body that is already read. A ``PreparedCall`` does
that work once, when the plugin opens: it asks the client to build the request (so base URL,
default headers and timeouts are exactly httpx's), and each ``send`` then goes straight to the
measuring client's aiohttp pool and returns a ``CallResponse``: status, headers, body and the
first byte's time (or, from ``stream``, the transport's streamed httpx response, built without
an httpx request). Everything the transport does for an httpx call happens here too: the same
resend of a request that provably never ran, the same HTTP client span when tracing is on, the
same httpx exceptions, redirects followed through httpx's own loop.

Any client it cannot take the lean way (a plain ``httpx.AsyncClient``, one with ``auth``, event
hooks or mounts, credentials in the URL) is called through its ordinary httpx API instead, and
the answer is the same ``CallResponse``: a plugin written with ``PreparedCall`` runs anywhere.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx
import yarl
from multidict import CIMultiDict

from .._base._secrets import remember_auth, scrub_url
from ._client import (
    FIRST_BYTE_EXT,
    RETRIED_EXT,
    AiohttpTransport,
    MeasuringClient,
    _client_timeout,
    first_byte_ns,
    headers_read_ns,
)
from ._errors import map_aiohttp_error
from ._lean import wire_for
from ._spans import (
    CallSpan,
    current_tracer,
    note_error,
    note_status,
    span_start_args,
    start_span,
)
from ._stream import preloaded

# Framing headers are the body's: aiohttp sets them for each body it sends.
_FRAMING = frozenset({"content-length", "transfer-encoding"})


class CallResponse:
    """A response read in full: ``status_code``, ``headers`` (case-insensitive), ``content``,
    ``first_byte_ns`` (``time.perf_counter_ns()`` when the status line and headers arrived, or
    ``None`` from a client that does not measure it), ``json()``, ``text``,
    ``raise_for_status()`` (raises httpx's ``HTTPStatusError``, as an httpx response would)."""

    __slots__ = ("content", "first_byte_ns", "headers", "method", "status_code", "url")

    def __init__(
        self,
        status_code: int,
        headers: Mapping[str, str],
        content: bytes,
        first_byte_ns: int | None,
        method: str,
        url: httpx.URL,
    ) -> None:
        self.status_code = status_code
        self.headers = headers
        self.content = content
        self.first_byte_ns = first_byte_ns
        self.method = method
        self.url = url

    def __repr__(self) -> str:
        return f"<CallResponse [{self.status_code}]>"

    @property
    def reason_phrase(self) -> str:
        return httpx.codes.get_reason_phrase(self.status_code)

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300

    def json(self, **kwargs: Any) -> Any:
        """The body parsed as JSON (``json.loads`` of the bytes, as httpx does)."""
        return json.loads(self.content, **kwargs)

    @property
    def text(self) -> str:
        """The body decoded as httpx decodes it (the Content-Type charset, else UTF-8)."""
        return self.as_httpx().text

    def raise_for_status(self) -> CallResponse:
        if not self.is_success:
            self.as_httpx().raise_for_status()
        return self

    def as_httpx(self) -> httpx.Response:
        """The same answer as a read ``httpx.Response`` (for code that wants one)."""
        extensions: dict[str, Any] = {"http_version": b"HTTP/1.1"}
        if self.first_byte_ns is not None:
            extensions[FIRST_BYTE_EXT] = self.first_byte_ns
        request = httpx.Request(self.method, self.url)  # no headers: nothing secret to carry
        headers = [(k.encode(), v.encode()) for k, v in self.headers.items()]
        return preloaded(self.status_code, tuple(headers), self.content, extensions, request)


class PreparedCall:
    """One method, URL and set of headers, sent many times: ``await call.send(body)``.

    Build it once (in ``Provider.open``) from the provider's client::

        self._call = PreparedCall(self.client, "POST", url, headers={"Content-Type": ...})
        ...
        response = await self._call.send(json.dumps(body).encode())

    The client's base URL, default headers and timeout apply as httpx would apply them, taken
    when the call is prepared. The body is bytes (or ``None``); ``send``'s response is read in
    full, and ``async with call.stream(body) as response`` is for a streamed answer (an httpx
    response, as ``client.stream`` gives). Errors are httpx's
    (``httpx.ReadTimeout``, ``httpx.ConnectError``, ...), so ``Provider``'s mapping to
    ``ProviderError`` is the same as for an httpx call.
    """

    __slots__ = ("_aio_url", "_client", "_given", "_head", "_lean", "_named", "_span", "_timeout",
                 "_wire", "method", "url")  # fmt: skip

    def __init__(
        self,
        client: httpx.AsyncClient,
        method: str,
        url: httpx.URL | str,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        built = client.build_request(method, url, headers=headers)  # httpx's merge, once
        self._client = client
        self._given = dict(headers or {})
        self.method = built.method
        self.url = built.url
        head = [(k, v) for k, v in built.headers.multi_items() if k.lower() not in _FRAMING]
        self._head: CIMultiDict[str] = CIMultiDict(head)
        auth = self._head.get("authorization")
        if auth is not None:  # sent past the transport's _exchange, which would register it
            remember_auth(auth)
        self._aio_url = yarl.URL(str(built.url), encoded=True)  # already percent-encoded
        timeouts: dict[str, float | None] = built.extensions.get("timeout", {})
        self._timeout = _client_timeout(timeouts.get("connect"), timeouts.get("read"))
        self._span = span_start_args(self.method, self.url)
        # what a streamed answer and its errors name: method and URL, no header (nothing secret)
        self._named = httpx.Request(self.method, self.url)
        self._lean = (
            isinstance(client, MeasuringClient)
            and isinstance(client._transport, AiohttpTransport)
            and not built.url.userinfo
        )
        # plain HTTP goes through the lean pool (_lean.py): the request's bytes, built once
        self._wire = wire_for(built) if self._lean else None

    def __repr__(self) -> str:  # never the headers: they may carry the API key
        return f"<PreparedCall {self.method} {scrub_url(str(self.url)).split('?', 1)[0]}>"

    async def send(self, content: bytes | None = None) -> CallResponse:
        """Send the call with ``content`` as its body; the response, read in full."""
        client = self._client
        if not (self._lean and client._plain()):  # type: ignore[attr-defined]
            return await self._send_httpx(content)
        transport = client._transport
        assert isinstance(transport, AiohttpTransport)
        span = self._open_span()
        try:
            response, resent = await transport.roundtrip(
                self.method, self._aio_url, self._head, content, self._timeout, self._wire
            )
            arrived = headers_read_ns()
            try:
                body = await response.read()
            except Exception as exc:
                raise map_aiohttp_error(exc) from exc
            finally:
                response.release()
        except BaseException as exc:
            self._failed(span, exc)
            raise
        status = response.status
        if span is not None:
            note_status(span, status, resent is not None)
            span.end()
        headers = response.headers
        if "Content-Encoding" in headers or (
            300 <= status < 400 and "Location" in headers and status != 304
        ):
            return await self._through_httpx(response, body, arrived, resent, content)
        return CallResponse(status, headers, body, arrived, self.method, self.url)

    @contextlib.asynccontextmanager
    async def stream(self, content: bytes | None = None) -> AsyncIterator[httpx.Response]:
        """Send the call with ``content`` as its body; its response with the status line and
        headers read and the body still to come (``aiter_raw``, ``aiter_bytes``, ``aread``),
        as httpx's ``client.stream`` gives it, closed when the block ends::

            async with self._call.stream(body) as response:
                async for chunk in response.aiter_raw():
                    ...

        The same response as ``client.stream``'s, without building an httpx request per call
        (a fifth of the client's time on a 16-token stream, profiled); ``gpubench_sdk.
        arrived_ns(response)`` times each chunk as for any streamed response of the measuring
        client. A redirect is followed through httpx's own loop, as ``send`` does.
        """
        client = self._client
        if not (self._lean and client._plain()):  # type: ignore[attr-defined]
            async with client.stream(
                self.method, self.url, content=content, headers=self._given
            ) as answer:
                yield answer
            return
        transport = client._transport
        assert isinstance(transport, AiohttpTransport)
        span = self._open_span()
        began = time.perf_counter()
        try:
            response, resent = await transport.roundtrip(
                self.method, self._aio_url, self._head, content, self._timeout, self._wire
            )
            answer = await transport.answer(response, resent, self._named, span, streamed=True)
        except BaseException as exc:
            self._failed(span, exc)
            raise
        if span is not None:
            note_status(span, answer.status_code, resent is not None)
        answer.default_encoding = client._default_encoding
        try:
            if answer.has_redirect_location:
                request = client.build_request(
                    self.method, self.url, content=content, headers=self._given
                )
                answer = await client._redirected(  # type: ignore[attr-defined]
                    request, answer, client.follow_redirects
                )
            yield answer
        finally:
            await answer.aclose()  # the connection back to the pool; the span ends
            answer.elapsed = datetime.timedelta(seconds=time.perf_counter() - began)

    def _open_span(self) -> CallSpan | None:
        """With tracing on, the HTTP client span the transport opens for an httpx call."""
        tracer = current_tracer()
        return None if tracer is None else start_span(tracer, *self._span)

    def _failed(self, span: CallSpan | None, exc: BaseException) -> None:
        """The call failed before an answer: its span ends with the error, and an httpx
        request error names the call (method and URL, no header), as httpx's would."""
        if span is not None:
            note_error(span, exc)
            span.end()
        if isinstance(exc, httpx.RequestError) and getattr(exc, "_request", None) is None:
            exc.request = self._named

    async def _through_httpx(
        self,
        response: Any,
        body: bytes,
        arrived: int,
        resent: str | None,
        content: bytes | None,
    ) -> CallResponse:
        """A compressed body (httpx decodes it) or a redirect (httpx's loop follows it)."""
        client = self._client
        assert isinstance(client, MeasuringClient)
        extensions: dict[str, Any] = {"http_version": b"HTTP/1.1", FIRST_BYTE_EXT: arrived}
        if resent is not None:
            extensions[RETRIED_EXT] = resent
        request = client.build_request(self.method, self.url, content=content, headers=self._given)
        answer = httpx.Response(
            response.status, headers=response.raw_headers, content=body,
            extensions=extensions, request=request,
        )  # fmt: skip
        await answer.aread()  # decodes Content-Encoding
        if answer.has_redirect_location:
            answer = await client._redirected(request, answer, client.follow_redirects)
        return _from_httpx(answer)

    async def _send_httpx(self, content: bytes | None) -> CallResponse:
        response = await self._client.request(
            self.method, self.url, content=content, headers=self._given
        )
        return _from_httpx(response)


def _from_httpx(response: httpx.Response) -> CallResponse:
    request = response.request  # the last hop's, after redirects
    return CallResponse(
        response.status_code,
        response.headers,
        response.content,
        first_byte_ns(response),
        request.method,
        request.url,
    )
