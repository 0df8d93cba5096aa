"""The HTTP client handed to providers: the httpx API over an aiohttp connection pool.

Why not httpx's own pool: measured on one core against loopback nginx, a shared
``httpx.AsyncClient`` served 308 req/s with a 125 ms p50 at 64 concurrent requests on a 10 ms
endpoint (hey: 6,114 req/s, 10.4 ms). aiohttp's pool does not degrade that way, so plugin authors
keep the httpx API they know while the sockets are aiohttp's. ``bench/loadgen.py`` re-measures.
"""

from __future__ import annotations

import datetime
import functools
import http.cookiejar
import logging
import ssl
import time
from collections.abc import Awaitable
from typing import Any, Protocol

import aiohttp
import httpx
import yarl
from aiohttp.client_proto import ResponseHandler
from httpx._client import USE_CLIENT_DEFAULT, BoundAsyncStream, ClientState, UseClientDefault

from .._base._secrets import remember_auth
from ._errors import as_provider_error, retry_after_s
from ._errors import map_aiohttp_error as _map_error
from ._lean import LeanPool, LeanResponse, Wire
from ._request import ATTEMPT, _Request, call_log, note_call, record_calls
from ._spans import CallSpan, current_tracer, note_error, note_status, start_http_span
from ._stream import BodyStream, LazyReadTimeout, StreamedResponse, preloaded

__all__ = [
    "AiohttpTransport",
    "MeasuringClient",
    "as_provider_error",
    "first_byte_ns",
    "make_client",
    "record_calls",
    "record_retries",
    "retried",
    "retry_after_s",
]

FIRST_BYTE_EXT = "gpubench.first_byte_ns"
STREAM_EXT = "gpubench.stream"
RETRIED_EXT = "gpubench.retried"
_EAGER_BODY_MAX = 1 << 20
_httpx_log = logging.getLogger("httpx")  # where httpx logs each request, at INFO


class _ReadAnswer(Protocol):  # a PreparedCall's CallResponse (defined above this module)
    @property
    def first_byte_ns(self) -> int | None: ...


def first_byte_ns(response: httpx.Response | _ReadAnswer) -> int | None:
    """``time.perf_counter_ns()`` when the response's status line and headers had arrived
    (an httpx response of the measuring client, or a ``PreparedCall``'s answer)."""
    if isinstance(response, httpx.Response):
        value = response.extensions.get(FIRST_BYTE_EXT)
    else:
        value = response.first_byte_ns
    return value if isinstance(value, int) else None


class _Handler(LazyReadTimeout, ResponseHandler):  # one read-timeout timer per silence
    """aiohttp's connection protocol, counting requests sent and noting any byte answered."""

    uses = 0  # requests sent on this connection so far
    heard = False  # a byte arrived since the current request was sent
    read_ns = 0  # time.perf_counter_ns() of the latest socket read that brought bytes

    def set_response_params(self, *args: Any, **kwargs: Any) -> None:
        # aiohttp calls this once per request, on the connection it was given (from the pool
        # or new), just before sending: the request is now this connection's.
        self.uses += 1
        self.heard = False
        ATTEMPT.set(self)  # same task as the transport's call: it sees the value
        super().set_response_params(*args, **kwargs)

    def data_received(self, data: bytes) -> None:
        # When the bytes came off the socket, not when the task that reads them runs: on a busy
        # loop the task waits in the ready queue behind other streams' reads, and that wait is
        # the client's, never the provider's (one clock read per socket read).
        if data:
            self.read_ns = time.perf_counter_ns()
        self.heard = True
        super().data_received(data)


def headers_read_ns() -> int:
    """For a response whose headers were just read (the call's round trip returned): when the
    socket read that completed them happened, on the connection of the current task's latest
    request, so that the first byte is on the clock its first streamed token is (a token read
    with the headers is not timed before them); now, where that is not known."""
    handler = ATTEMPT.get()
    read = 0 if handler is None else handler.read_ns
    return read or time.perf_counter_ns()


class _Connector(aiohttp.TCPConnector):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if hasattr(self, "_factory"):  # aiohttp >= 3.9 builds protocols with it
            self._factory = functools.partial(_Handler, loop=self._loop)  # type: ignore[assignment]


@functools.lru_cache(maxsize=32)
def _client_timeout(connect: float | None, read: float | None) -> aiohttp.ClientTimeout:
    """aiohttp's timeout for httpx's (a frozen value: one per setting, not per request)."""
    return aiohttp.ClientTimeout(total=None, sock_connect=connect, sock_read=read)


_DIED = (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError, ConnectionError)


def _never_ran(exc: Exception) -> bool:
    """True when the request went out on a kept-alive connection that died before answering
    anything: the server had closed it (uvicorn does after an unhandled exception, without
    ``Connection: close``), so the request provably never reached the application."""
    proto = ATTEMPT.get()
    return (
        proto is not None
        and proto.uses > 1
        and not proto.heard
        and isinstance(exc, _DIED)
        and not isinstance(exc, aiohttp.ClientConnectorError | TimeoutError)
    )


def retried(response: httpx.Response) -> str | None:
    """Why the transport resent this request once on a fresh connection, if it did."""
    value = response.extensions.get(RETRIED_EXT)
    return value if isinstance(value, str) else None


def record_retries() -> list[str]:
    """Start collecting, for the current context, why requests were resent; the list fills as
    the transport resends (the runner keeps a whole ``CallLog``: ``record_calls``)."""
    return record_calls().retries


class AiohttpTransport(httpx.AsyncBaseTransport):
    """An httpx transport that sends requests through one ``aiohttp.ClientSession``.

    The pool is unbounded: the runner bounds concurrency, and a second limit here would queue
    requests inside the client, which is exactly the distortion a benchmark must not add.
    """

    def __init__(self, *, verify: bool | ssl.SSLContext = True) -> None:
        self._verify = verify
        self._session: aiohttp.ClientSession | None = None
        self._fresh: aiohttp.ClientSession | None = None
        self._lean: LeanPool | None = None  # prepared plain-HTTP calls' connections (_lean.py)

    def _open(self) -> aiohttp.ClientSession:
        self._session = self._new_session(_Connector(limit=0, ssl=self._verify))
        return self._session

    def _fresh_session(self) -> aiohttp.ClientSession:
        """A session whose every request opens its own connection: for the rare resend."""
        if self._fresh is None:
            self._fresh = self._new_session(
                aiohttp.TCPConnector(limit=0, ssl=self._verify, force_close=True)
            )
        return self._fresh

    @staticmethod
    def _new_session(connector: aiohttp.BaseConnector) -> aiohttp.ClientSession:
        session = aiohttp.ClientSession(
            connector=connector,
            request_class=_Request,  # a body on the socket in the step that sends it
            auto_decompress=False,  # httpx decodes Content-Encoding itself
            skip_auto_headers=("User-Agent", "Accept-Encoding", "Accept"),
            cookie_jar=aiohttp.DummyCookieJar(),
        )
        # aiohttp silently resends idempotent requests after any connection error, fresh
        # connection or not; ours resends only what provably never ran, and says so.
        if hasattr(session, "_retry_connection"):
            session._retry_connection = False
        return session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        tracer = current_tracer()
        if tracer is None:  # tracing off: one ContextVar read
            return await self._exchange(request, None)
        span = start_http_span(tracer, request)
        try:
            response = await self._exchange(request, span)
        except BaseException as exc:
            note_error(span, exc)
            span.end()
            raise
        note_status(span, response.status_code, RETRIED_EXT in response.extensions)
        if response.is_closed:  # read in full: the call is over (a stream ends it on close)
            span.end()
        return response

    async def _exchange(self, request: httpx.Request, span: CallSpan | None) -> httpx.Response:
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        try:
            body = request.content
        except httpx.RequestNotRead:  # a streaming request body
            body = await request.aread()
        timeout = _client_timeout(timeouts.get("connect"), timeouts.get("read"))
        url, head = request.url, request.headers.multi_items()
        if url.userinfo:  # httpx already sent it as an Authorization header; aiohttp refuses both
            url = url.copy_with(userinfo=b"")
        auth = request.headers.get("authorization")
        if auth is not None and auth[:6].lower() == "basic ":
            # A Basic credential httpx built (from a URL's userinfo, or an httpx.BasicAuth a
            # plugin passed) is registered as sent, however its URL or pair came about.
            remember_auth(auth)
        response, resent = await self.roundtrip(
            request.method, str(url), head, body or None, timeout
        )
        streamed = request.extensions.get(STREAM_EXT, False)
        return await self.answer(response, resent, request, span, streamed)

    async def answer(
        self,
        response: aiohttp.ClientResponse | LeanResponse,
        resent: str | None,
        request: httpx.Request,
        span: CallSpan | None,
        streamed: bool,
    ) -> httpx.Response:
        """The httpx response of a round trip that just returned (``roundtrip``): read in full
        when nobody streams it and it is short, else streamed straight from aiohttp's reader
        (closing it releases the connection and ends ``span``)."""
        arrived = headers_read_ns()
        headers = response.raw_headers
        extensions: dict[str, Any] = {"http_version": b"HTTP/1.1", FIRST_BYTE_EXT: arrived}
        if resent is not None:
            extensions[RETRIED_EXT] = resent
        length = response.content_length
        if length is not None and length <= _EAGER_BODY_MAX and not streamed:
            # A body of known, modest length that nobody streams is read here in one go: the
            # httpx stream machinery around it cost ~15% of the client's time per request.
            try:
                body = await response.read()
            except Exception as exc:
                raise _map_error(exc) from exc
            finally:
                response.release()
            if "Content-Encoding" in response.headers:  # httpx decodes it: its own path
                return httpx.Response(
                    response.status,
                    headers=headers,
                    content=body,
                    extensions=extensions,
                    request=request,
                )
            return preloaded(response.status, headers, body, extensions, request)
        streamed_response = StreamedResponse(
            response.status,
            headers=headers,
            stream=BodyStream(response, span),
            extensions=extensions,
            request=request,
        )
        streamed_response._reader, streamed_response._span = response.content, span
        streamed_response._handler = ATTEMPT.get()
        return streamed_response

    async def roundtrip(
        self,
        method: str,
        url: str | yarl.URL,
        headers: Any,
        body: bytes | None,
        limits: aiohttp.ClientTimeout,
        wire: Wire | None = None,
    ) -> tuple[aiohttp.ClientResponse | LeanResponse, str | None]:
        """Send one request and wait for its status line and headers: (the response, why it
        was resent once on a fresh connection, if it was). With a ``wire`` (a prepared plain-HTTP
        call's bytes), through the lean pool instead of aiohttp's. Errors leave as httpx's."""
        note_call()
        resent: str | None = None
        ATTEMPT.set(None)
        if wire is not None:
            pool = self._lean or self._open_lean()

            def send(fresh: bool) -> Awaitable[aiohttp.ClientResponse | LeanResponse]:
                return pool.roundtrip(wire, body, limits, fresh=fresh)

        else:
            session = self._session or self._open()

            def send(fresh: bool) -> Awaitable[aiohttp.ClientResponse | LeanResponse]:
                return aiohttp.ClientSession.request(
                    self._fresh_session() if fresh else session,
                    method=method,
                    url=url,
                    headers=headers,
                    data=body,
                    allow_redirects=False,
                    timeout=limits,
                )

        try:
            try:
                return await send(False), None
            except Exception as exc:
                if not _never_ran(exc):
                    raise
                # Once, on a connection of its own (the pool may hold more dead ones).
                resent = f"{type(exc).__name__} on a reused connection before any response byte"
                log = call_log()
                if log is not None:
                    log.retries.append(resent)
                return await send(True), resent
        except Exception as exc:
            raise _map_error(exc) from exc

    def _open_lean(self) -> LeanPool:
        self._lean = LeanPool()
        return self._lean

    async def aclose(self) -> None:
        for session in (self._session, self._fresh):
            if session is not None:
                await session.close()
        if self._lean is not None:
            self._lean.close()
        self._session = self._fresh = self._lean = None


class _RefusingJar(http.cookiejar.CookieJar):
    def set_cookie(self, cookie: http.cookiejar.Cookie) -> None:
        raise ValueError("gpubench's client keeps no cookies; send them as a Cookie header")


class _NoCookies(httpx.Cookies):
    """Benchmarks send independent requests; parsing Set-Cookie on every response cost 11% of
    the client's time at 64 concurrent (urllib compatibility objects built per response)."""

    def __init__(self) -> None:
        super().__init__()
        self.jar = _RefusingJar()

    def extract_cookies(self, response: httpx.Response) -> None:
        return None


class MeasuringClient(httpx.AsyncClient):
    """``httpx.AsyncClient`` that keeps no cookies and tells its transport what is streamed."""

    def __init__(self, **kwargs: Any) -> None:
        self._no_cookies = _NoCookies()
        super().__init__(**kwargs)

    @property
    def cookies(self) -> httpx.Cookies:
        return self._no_cookies

    @cookies.setter
    def cookies(self, value: Any) -> None:
        if value:
            raise ValueError("gpubench's client keeps no cookies; send them as a Cookie header")

    def _merge_cookies(self, cookies: Any = None) -> Any:
        # The client's jar is always empty (it refuses cookies): httpx's merge would only copy
        # it, per request; a request's own ``cookies=`` still go through unchanged.
        return cookies

    async def send(
        self,
        request: httpx.Request,
        *,
        stream: bool = False,
        auth: Any = USE_CLIENT_DEFAULT,
        follow_redirects: Any = USE_CLIENT_DEFAULT,
    ) -> httpx.Response:
        if stream:  # the caller reads the body as it arrives: the transport must not buffer it
            request.extensions[STREAM_EXT] = True
        default_auth = isinstance(auth, UseClientDefault) and self._auth is None
        if not (default_auth or auth is None) or not self._lean_ok(request):
            return await super().send(
                request, stream=stream, auth=auth, follow_redirects=follow_redirects
            )
        follow = (
            self.follow_redirects
            if isinstance(follow_redirects, UseClientDefault)
            else bool(follow_redirects)
        )
        return await self._send_lean(request, stream, follow)

    def _lean_ok(self, request: httpx.Request) -> bool:
        """Whether httpx's send would do nothing here but call the transport: no auth (nor
        credentials in the URL), no event hooks, no mounts, and the client still open."""
        return not request.url.userinfo and self._plain()

    def _plain(self) -> bool:
        """No auth, mounts or event hooks, client open: what a lean send needs of the client."""
        return (
            self._auth is None
            and not self._mounts
            and not self._event_hooks["request"]
            and not self._event_hooks["response"]
            and self._state is not ClientState.CLOSED
        )

    async def _send_lean(
        self, request: httpx.Request, stream: bool, follow: bool
    ) -> httpx.Response:
        """``AsyncClient.send`` without its per-request generators and context managers (an
        auth flow that does nothing, the redirect loop, a logging call that formats the reason
        phrase): together 10% of the client's time per request, profiled. A redirect goes on
        through httpx's own loop, so behaviour is httpx's in every case."""
        self._state = ClientState.OPENED
        self._set_timeout(request)
        began = time.perf_counter()
        try:
            response = await self._transport.handle_async_request(request)
        except httpx.RequestError as exc:  # as httpx's request_context does: name the request
            if getattr(exc, "_request", None) is None:
                exc.request = request
            raise
        response.request = request
        response.default_encoding = self._default_encoding
        if response.is_closed:  # preloaded by the transport: nothing to bind or read
            response.elapsed = datetime.timedelta(seconds=time.perf_counter() - began)
        else:
            assert isinstance(response.stream, httpx.AsyncByteStream)
            response.stream = BoundAsyncStream(response.stream, response=response, start=began)
        if _httpx_log.isEnabledFor(logging.INFO):
            _httpx_log.info(
                'HTTP Request: %s %s "%s %d %s"', request.method, request.url,
                response.http_version, response.status_code, response.reason_phrase,
            )  # fmt: skip
        if response.has_redirect_location:
            response = await self._redirected(request, response, follow)
        if not stream:
            try:
                await response.aread()
            except BaseException:
                await response.aclose()
                raise
        return response

    async def _redirected(
        self, request: httpx.Request, response: httpx.Response, follow: bool
    ) -> httpx.Response:
        """A redirect answered: httpx's own loop takes it from here (or, not following, the
        response names its ``next_request``), so behaviour is httpx's in every case."""
        try:
            nxt = self._build_redirect_request(request, response)
            if not follow:
                response.next_request = nxt
                return response
            await response.aread()
        except BaseException:
            await response.aclose()
            raise
        return await self._send_handling_redirects(nxt, follow_redirects=True, history=[response])


def make_client(
    *,
    base_url: str = "",
    headers: dict[str, str] | None = None,
    timeout_s: float = 300.0,
    follow_redirects: bool = True,
    verify: bool | ssl.SSLContext = True,
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` fit for measuring: aiohttp pool, no cookie handling.

    Redirects are followed by default because some platforms answer long requests with a 303
    to a result URL (Modal). ``verify`` may be an ``ssl.SSLContext`` that trusts a private CA.
    """
    return MeasuringClient(
        base_url=base_url,
        headers=headers,
        timeout=httpx.Timeout(timeout_s),
        follow_redirects=follow_redirects,
        transport=AiohttpTransport(verify=verify),
    )
