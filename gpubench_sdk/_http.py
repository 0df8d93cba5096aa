"""The HTTP client handed to providers: the httpx API over an aiohttp connection pool.

Why not httpx's own pool: measured on one core against loopback nginx, a shared
``httpx.AsyncClient`` served 308 req/s with a 125 ms p50 at 64 concurrent requests on a 10 ms
endpoint (hey: 6,114 req/s, 10.4 ms). aiohttp's pool does not degrade that way, so plugin authors
keep the httpx API they know while the sockets are aiohttp's. ``bench/loadgen.py`` re-measures.
"""

from __future__ import annotations

import asyncio
import http.cookiejar
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import httpx

FIRST_BYTE_EXT = "gpubench.first_byte_ns"
STREAM_EXT = "gpubench.stream"
_EAGER_BODY_MAX = 1 << 20


def first_byte_ns(response: httpx.Response) -> int | None:
    """``time.perf_counter_ns()`` when the response's status line and headers had arrived."""
    value = response.extensions.get(FIRST_BYTE_EXT)
    return value if isinstance(value, int) else None


class _BodyStream(httpx.AsyncByteStream):
    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except Exception as exc:
            raise _map_error(exc) from exc

    async def aclose(self) -> None:
        self._response.release()


def _map_error(exc: BaseException) -> Exception:
    """Translate aiohttp's exceptions into httpx's, so plugins catch one family."""
    if isinstance(exc, httpx.HTTPError):
        return exc
    text = str(exc) or type(exc).__name__
    if isinstance(exc, asyncio.TimeoutError | aiohttp.ServerTimeoutError):
        if isinstance(exc, aiohttp.ConnectionTimeoutError):
            return httpx.ConnectTimeout(text)
        return httpx.ReadTimeout(text)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return httpx.ConnectError(text)
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return httpx.RemoteProtocolError(text)
    if isinstance(exc, aiohttp.ClientResponseError):
        return httpx.RemoteProtocolError(text)
    if isinstance(exc, aiohttp.ClientOSError | ConnectionError | OSError):
        return httpx.ReadError(text)
    if isinstance(exc, aiohttp.ClientError):
        return httpx.TransportError(text)
    return httpx.TransportError(f"{type(exc).__name__}: {text}")


class AiohttpTransport(httpx.AsyncBaseTransport):
    """An httpx transport that sends requests through one ``aiohttp.ClientSession``.

    The pool is unbounded: the runner bounds concurrency, and a second limit here would queue
    requests inside the client, which is exactly the distortion a benchmark must not add.
    """

    def __init__(self, *, verify: bool = True) -> None:
        self._verify = verify
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(limit=0, ssl=self._verify)
        self._session = aiohttp.ClientSession(
            connector=connector,
            auto_decompress=False,  # httpx decodes Content-Encoding itself
            skip_auto_headers=("User-Agent", "Accept-Encoding", "Accept"),
            cookie_jar=aiohttp.DummyCookieJar(),
        )
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        session = self._session or self._open()
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        try:
            body = request.content
        except httpx.RequestNotRead:  # a streaming request body
            body = await request.aread()
        try:
            response = await session.request(
                request.method,
                str(request.url),
                headers=list(request.headers.multi_items()),
                data=body or None,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(
                    total=None,
                    sock_connect=timeouts.get("connect"),
                    sock_read=timeouts.get("read"),
                ),
            )
        except Exception as exc:
            raise _map_error(exc) from exc
        arrived = time.perf_counter_ns()
        headers = [(k, v) for k, v in response.raw_headers]
        extensions = {"http_version": b"HTTP/1.1", FIRST_BYTE_EXT: arrived}
        length = response.content_length
        streamed = request.extensions.get(STREAM_EXT, False)
        if length is not None and length <= _EAGER_BODY_MAX and not streamed:
            # A body of known, modest length that nobody streams is read here in one go: the
            # httpx stream machinery around it cost ~15% of the client's time per request.
            try:
                body = await response.read()
            except Exception as exc:
                raise _map_error(exc) from exc
            finally:
                response.release()
            return httpx.Response(
                response.status,
                headers=headers,
                content=body,
                extensions=extensions,
                request=request,
            )
        return httpx.Response(
            response.status,
            headers=headers,
            stream=_BodyStream(response),
            extensions=extensions,
            request=request,
        )

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


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

    async def send(self, request: httpx.Request, *, stream: bool = False, **kwargs: Any) -> Any:
        if stream:  # the caller reads the body as it arrives: the transport must not buffer it
            request.extensions[STREAM_EXT] = True
        return await super().send(request, stream=stream, **kwargs)


def make_client(
    *,
    base_url: str = "",
    headers: dict[str, str] | None = None,
    timeout_s: float = 300.0,
    follow_redirects: bool = True,
    verify: bool = True,
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` fit for measuring: aiohttp pool, no cookie handling.

    Redirects are followed by default because some platforms answer long requests with a 303
    to a result URL (Modal).
    """
    return MeasuringClient(
        base_url=base_url,
        headers=headers,
        timeout=httpx.Timeout(timeout_s),
        follow_redirects=follow_redirects,
        transport=AiohttpTransport(verify=verify),
    )
