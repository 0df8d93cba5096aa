"""Plain-HTTP/1.1 round trips for ``PreparedCall``: a keep-alive pool of asyncio protocols
parsed by ``httptools``, beside aiohttp's.

Why: aiohttp's request machinery (a ``ClientRequest`` and a ``ClientResponse`` built per
request, its tracing hooks, URL and header handling, a ``StreamReader``, two timers) was a third
of the whole client's CPU on a 16-token stream (``bench/http_floor_bench.py``); a prepared call
sends the same method, URL and headers every time, so its request head is built once, and the
rest is one write, one parser, one deque of body chunks.

What takes this path: a ``PreparedCall`` to an ``http://`` URL (not ``HEAD``, whose answer has
no body the parser could know of). Everything else (TLS, an httpx call, a plain
``httpx.AsyncClient``) goes through aiohttp. It behaves as the aiohttp path does, where a
plugin or the runner can see it: the same timeouts (``sock_connect``, ``sock_read`` from the
last byte, one timer per silence), the same errors (a dead kept-alive connection raises what
aiohttp raises, so the transport's one resend applies; everything else is httpx's own), the
same ``uses``/``heard``/``read_ns`` the transport reads of a connection, an unbounded pool,
idle connections closed after aiohttp's 15 s, no decompression (httpx decodes). One request per
connection at a time: no pipelining.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator

import aiohttp
import httptools
import httpx
from multidict import CIMultiDict, CIMultiDictProxy

from ._request import ATTEMPT, _note_sent
from ._stream import LazyReadTimeout

__all__ = ["LeanPool", "Wire", "wire_for"]

_KEEPALIVE_S = 15.0  # aiohttp's keepalive_timeout: an idle connection older than this is closed
# A body its reader does not keep up with: socket reads pause past the high mark (the bytes
# wait in the kernel, as aiohttp's StreamReader makes them) and resume below the low one.
_HIGH_WATER = 1 << 20
_LOW_WATER = 1 << 18
_FRAMING = frozenset({b"content-length", b"transfer-encoding"})
_BODILESS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})  # aiohttp's GET_METHODS


class Wire:
    """A prepared call's request, as bytes up to its framing: method, target, headers."""

    __slots__ = ("head", "host", "key", "port", "zero")

    def __init__(self, host: str, port: int, head: bytes, method: str) -> None:
        self.host, self.port, self.key = host, port, (host, port)
        self.head = head
        # a bodiless request of a method that carries one says so, as aiohttp and httpx do
        self.zero = head + (b"\r\n" if method in _BODILESS else b"Content-Length: 0\r\n\r\n")

    def bytes_for(self, body: bytes | None) -> bytes:
        if not body:
            return self.zero
        return b"%sContent-Length: %d\r\n\r\n%s" % (self.head, len(body), body)


def wire_for(request: httpx.Request) -> Wire | None:
    """The lean path's request for an httpx request built once (``client.build_request``), or
    ``None`` where the request needs aiohttp: not ``http://``, ``HEAD``, or credentials."""
    url = request.url
    if url.scheme != "http" or request.method in ("HEAD", "CONNECT") or url.userinfo:
        return None
    lines = [b"%s %s HTTP/1.1\r\n" % (request.method.encode("ascii"), url.raw_path)]
    lines += [k + b": " + v + b"\r\n" for k, v in request.headers.raw if k.lower() not in _FRAMING]
    return Wire(url.raw_host.decode("ascii"), url.port or 80, b"".join(lines), request.method)


class LeanConnection(LazyReadTimeout, asyncio.Protocol):
    """One keep-alive connection; the parser's callbacks fill the current answer's state."""

    uses = 0  # requests sent on this connection so far (the transport's resend reads it)
    heard = False  # a byte arrived since the current request was sent
    read_ns = 0  # time.perf_counter_ns() of the latest socket read that brought bytes

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self._read_timeout: float | None = None
        self._read_timeout_handle: asyncio.TimerHandle | None = None
        self.lost = False
        self.spoiled = False  # it carried bytes outside an answer: never reused
        self.busy = False  # a request is out on it
        self.idle_since = 0.0
        self.origin: tuple[str, int] = ("", 0)  # the pool's key
        self._paused = False
        self._waiter: asyncio.Future[None] | None = None
        self._begin()

    def _begin(self) -> None:
        """A new exchange: the state of its answer, empty."""
        self.status = 0
        self.raw_headers: list[tuple[bytes, bytes]] = []
        self.headed = False  # status line and headers read
        self.keep_alive = False
        self.complete = False
        self.error: BaseException | None = None
        self.chunks: deque[bytes] = deque()
        self.buffered = 0

    # -- asyncio's side ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        # when the bytes came off the socket, not when the task reading them runs (as aiohttp's
        # handler in _client.py notes it): the loop's queue is the client's wait
        self.read_ns = time.perf_counter_ns()
        self.heard = True
        if not self.busy:  # bytes nobody asked for: the connection is not fit to reuse
            self.close()
            return
        if self._read_timeout:
            self._reschedule_timeout()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(httpx.RemoteProtocolError(f"invalid HTTP response: {exc}"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._stop_timer()
        if self.busy and not self.complete and self.error is None:
            if exc is not None:
                self.error = aiohttp.ClientOSError(*exc.args)
            elif not self.headed:
                self.error = aiohttp.ServerDisconnectedError()
            elif self._until_close():
                self.complete = True  # a body delimited by the connection's end: it ended
            else:
                self.error = aiohttp.ClientPayloadError("Response payload is not completed")
        self._wake()

    # -- httptools' side ----------------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.headed:  # a second answer to one request: bytes nobody asked for
            self.spoiled = True

    def on_header(self, name: bytes, value: bytes) -> None:
        self.raw_headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200 and status != 101:  # informational (103 Early Hints): the answer
            self.raw_headers.clear()  # is still to come, as aiohttp skips these
            return
        self.status = status
        self.keep_alive = self._parser.should_keep_alive()  # reset once the body ends: read now
        self.headed = True
        self._wake()

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)
        self.buffered += len(body)
        if self.buffered > _HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if not self.headed:  # the end of an informational answer
            return
        self.complete = True
        self._stop_timer()
        self._wake()

    # -- the exchange's side ------------------------------------------------------------------

    def send(self, data: bytes, read_timeout: float | None) -> None:
        """Write a request (its answer's state reset, the read timeout armed)."""
        self.uses += 1  # counted first: a write that fails is this use's (the resend reads it)
        self.heard = False
        self.busy = True
        transport = self.transport
        if transport is None or transport.is_closing() or self.lost:
            raise aiohttp.ClientConnectionResetError("Cannot write to closing transport")
        self._begin()
        self._read_timeout = read_timeout
        if read_timeout:
            self._reschedule_timeout()
        _note_sent(self)  # nothing awaits between here and the write
        transport.write(data)

    async def wait(self) -> None:
        """Until the parser or the socket has news (raises a failure that came before)."""
        if self.error is not None:
            raise self.error
        self._waiter = waiter = self._loop.create_future()
        await waiter
        if self.error is not None and not self.chunks:
            raise self.error

    def take(self) -> bytes:
        """The body bytes read so far (resuming socket reads paused for them)."""
        chunks = self.chunks
        data = chunks.popleft() if len(chunks) == 1 else b"".join(chunks)
        chunks.clear()
        self.buffered = 0
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return data

    def close(self) -> None:
        self._stop_timer()
        if self.transport is not None:
            self.transport.close()
        self.lost = True

    def _on_read_timeout(self) -> None:  # LazyReadTimeout's: the connection was silent too long
        self._fail(httpx.ReadTimeout("Timeout on reading data from socket"))
        self.close()

    def _fail(self, error: BaseException) -> None:
        if self.error is None and not self.complete:
            self.error = error
        self._wake()

    def _stop_timer(self) -> None:
        self._read_timeout = None
        self._reschedule_timeout()  # LazyReadTimeout's: no timeout cancels the timer

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _until_close(self) -> bool:
        """An answer with neither a length nor chunks: its body is all that comes (RFC 9112
        section 6.3)."""
        names = {k.lower() for k, _ in self.raw_headers}
        return b"content-length" not in names and b"transfer-encoding" not in names


class LeanResponse:
    """The part of ``aiohttp.ClientResponse`` the transport reads (``status``, ``headers``,
    ``raw_headers``, ``content_length``, ``read``, ``release``), with ``content`` the body's
    reader (``readany``, ``iter_any``, ``at_eof``, ``exception``), as aiohttp's
    ``StreamReader`` offers it."""

    __slots__ = ("_conn", "_headers", "_pool", "raw_headers", "status")

    def __init__(self, conn: LeanConnection, pool: LeanPool) -> None:
        self._conn: LeanConnection | None = conn
        self._pool = pool
        self.status = conn.status
        self.raw_headers = tuple(conn.raw_headers)
        self._headers: CIMultiDictProxy[str] | None = None

    @property
    def headers(self) -> CIMultiDictProxy[str]:
        if self._headers is None:  # decoded as aiohttp decodes them
            self._headers = CIMultiDictProxy(
                CIMultiDict(
                    (k.decode("utf-8", "surrogateescape"), v.decode("utf-8", "surrogateescape"))
                    for k, v in self.raw_headers
                )
            )
        return self._headers

    @property
    def content_length(self) -> int | None:
        for name, value in self.raw_headers:
            if name.lower() == b"content-length":
                try:
                    return int(value)
                except ValueError:
                    return None
        return None

    @property
    def content(self) -> LeanResponse:
        return self

    async def readany(self) -> bytes:
        """The body bytes read since the last call, waiting for some; ``b""`` at its end."""
        conn = self._conn
        if conn is None:
            return b""
        while not conn.chunks:
            if conn.complete:
                return b""
            await conn.wait()
        return conn.take()

    async def iter_any(self) -> AsyncIterator[bytes]:
        while chunk := await self.readany():
            yield chunk

    async def read(self) -> bytes:
        parts = []
        while chunk := await self.readany():
            parts.append(chunk)
        return b"".join(parts)

    def at_eof(self) -> bool:
        conn = self._conn
        return conn is None or (conn.complete and not conn.chunks)

    def exception(self) -> BaseException | None:
        conn = self._conn
        return None if conn is None else conn.error

    def release(self) -> None:
        """The exchange is over: a connection whose answer came whole back to the pool, any
        other closed (the next request on it would read the rest of this one)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            self._pool.put_back(conn)


class LeanPool:
    """Keep-alive connections per origin, unbounded (the runner bounds concurrency)."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, int], list[LeanConnection]] = {}
        self._closed = False

    async def roundtrip(
        self, wire: Wire, body: bytes | None, limits: aiohttp.ClientTimeout, *, fresh: bool
    ) -> LeanResponse:
        """Send ``wire`` with ``body`` and wait for the answer's status line and headers, on an
        idle connection (or, ``fresh``, a new one). Errors: httpx's, or the aiohttp exceptions
        of a dead connection (the transport's resend reads them)."""
        conn = None if fresh else self._take(wire.key)
        if conn is None:
            conn = await self._connect(wire, limits.sock_connect)
        ATTEMPT.set(conn)
        try:
            conn.send(wire.bytes_for(body), limits.sock_read)
            while not conn.headed:
                await conn.wait()
        except BaseException:
            conn.busy = False
            conn.close()
            raise
        return LeanResponse(conn, self)

    def put_back(self, conn: LeanConnection) -> None:
        conn.busy = False
        reusable = (
            conn.complete
            and conn.keep_alive
            and not (conn.lost or conn.spoiled)
            and conn.error is None
        )
        if not reusable or self._closed:
            conn.close()
            return
        if conn._paused:  # it stopped reading for a body nobody read to the end
            conn.take()
        conn.idle_since = conn._loop.time()
        self._idle.setdefault(conn.origin, []).append(conn)

    def close(self) -> None:
        self._closed = True
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()

    def _take(self, key: tuple[str, int]) -> LeanConnection | None:
        conns = self._idle.get(key)
        while conns:
            conn = conns.pop()  # the most recently used: the likeliest still open
            if not conn.lost and conn._loop.time() - conn.idle_since < _KEEPALIVE_S:
                return conn
            conn.close()
        return None

    async def _connect(self, wire: Wire, limit_s: float | None) -> LeanConnection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(limit_s):
                _, conn = await loop.create_connection(
                    lambda: LeanConnection(loop), wire.host, wire.port
                )
        except TimeoutError:
            raise httpx.ConnectTimeout(
                f"Connection timeout to host http://{wire.host}:{wire.port}"
            ) from None
        except OSError as exc:
            reason = exc.strerror or exc  # worded as aiohttp's ClientConnectorError
            raise httpx.ConnectError(
                f"Cannot connect to host {wire.host}:{wire.port} ssl:default [{reason}]"
            ) from exc
        conn.origin = wire.key
        return conn
