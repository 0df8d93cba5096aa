"""The response bodies the transport hands to httpx: preloaded, or streamed straight from
aiohttp's reader (the per-read cost of an LLM stream lives here)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from ._errors import map_aiohttp_error as _map_error
from ._spans import CallSpan, note_error

if TYPE_CHECKING:
    from asyncio import AbstractEventLoop, TimerHandle


class BodyReader(Protocol):
    """A response body's reader: aiohttp's ``StreamReader``, or the lean pool's answer."""

    async def readany(self) -> bytes: ...
    def iter_any(self) -> AsyncIterator[bytes]: ...
    def at_eof(self) -> bool: ...
    def exception(self) -> BaseException | None: ...


class Answer(Protocol):
    """A round trip's answer whose body is read as it comes: aiohttp's ``ClientResponse``, or
    the lean pool's (``_lean.LeanResponse``)."""

    @property
    def content(self) -> BodyReader: ...
    def release(self) -> Any: ...


# A read timeout timer may fire this early (uvloop's timers have millisecond resolution): then
# it is due, not re-armed for the remaining fraction of a millisecond.
_TIMER_SLACK_S = 0.001


class LazyReadTimeout:
    """aiohttp's per-connection read timeout (``sock_read``) with one timer per silence, not
    one per network read.

    aiohttp's ``ResponseHandler`` cancels its timer and schedules a new one on every
    ``data_received``; an LLM stream is one read per token, and that timer churn cost ~1 us
    per read on uvloop, ~2 us on asyncio (``bench/stream_layers_bench.py --timer``), plus three
    GC-tracked objects per read and the collections they trigger. Here a read only moves the
    deadline; the one timer, when it fires early, re-arms itself for the deadline. A timeout
    still fires ``sock_read`` seconds after the last byte (within the loop's timer resolution).
    Mixed in before ``ResponseHandler``, whose ``_read_timeout``, ``_read_timeout_handle`` and
    ``_on_read_timeout`` it uses (read in aiohttp 3.14; ``tests/test_http_stream_timeout.py``
    guards the coupling).
    """

    _loop: AbstractEventLoop
    _read_timeout: float | None
    _read_timeout_handle: TimerHandle | None
    _on_read_timeout: Callable[[], None]  # aiohttp's: fails the response with a timeout
    _read_due = 0.0  # loop.time() at which the connection has been silent too long

    def _reschedule_timeout(self) -> None:
        timeout = self._read_timeout
        if not timeout:
            if self._read_timeout_handle is not None:
                self._read_timeout_handle.cancel()
                self._read_timeout_handle = None
            return
        self._read_due = due = self._loop.time() + timeout
        if self._read_timeout_handle is None:
            self._read_timeout_handle = self._loop.call_at(due, self._read_timer_fired)

    def _read_timer_fired(self) -> None:
        self._read_timeout_handle = None
        if self._loop.time() + _TIMER_SLACK_S < self._read_due:  # bytes came meanwhile
            self._read_timeout_handle = self._loop.call_at(self._read_due, self._read_timer_fired)
        else:
            self._on_read_timeout()


def preloaded(
    status: int,
    headers: tuple[tuple[bytes, bytes], ...],
    body: bytes,
    extensions: dict[str, Any],
    request: httpx.Request,
) -> httpx.Response:
    """An ``httpx.Response`` whose identity-encoded body is already read and closed.

    ``httpx.Response(content=...)`` re-reads the bytes through its decoder and chunker (5% of
    the client's time per request, profiled); here the body is stored where ``Response.read``
    stores it (``_content``, httpx 0.27-0.28; ``tests/test_http_lean.py`` guards the coupling)
    and the stream marked consumed, exactly the state ``read()`` leaves.
    """
    response = httpx.Response(
        status, headers=headers, stream=httpx.ByteStream(body), extensions=extensions,
        request=request,
    )  # fmt: skip
    response._content = body
    response._num_bytes_downloaded = len(body)  # as read() would count it
    response.is_stream_consumed = response.is_closed = True
    return response


class BodyStream(httpx.AsyncByteStream):
    """A streamed body; its HTTP client span (if tracing) ends when the stream is closed."""

    def __init__(self, response: Answer, span: CallSpan | None) -> None:
        self._response = response
        self._span = span

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except Exception as exc:
            error = _map_error(exc)
            if self._span is not None:
                note_error(self._span, error)
            raise error from exc

    async def aclose(self) -> None:
        try:
            await _finish_body(self._response.content)
        finally:
            self._response.release()
            if self._span is not None:
                self._span.end()
                self._span = None


# How long, and how many bytes, a body its reader stopped reading is still read for when it is
# closed (the end of a stream a plugin stopped at its last event: the chunked terminator is
# microseconds behind; a stream abandoned mid-answer gives up quickly).
_FINISH_S = 0.05
_FINISH_BYTES = 65_536


async def _finish_body(reader: BodyReader) -> None:
    """Read what is left of a response body that its reader stopped short of (an SSE plugin
    stops at ``data: [DONE]``), so that its connection goes back to the pool reusable.

    HTTP/1.1 answers one request at a time per connection: aiohttp closes a connection whose
    response did not reach its end, and the next request then opens one of its own (its
    connect and the server's accept counted in that request's time: 1% of the requests of a
    closed loop of 4, each 2-3 ms slower at p99, ``docs/benchmarks.md``). Clients people use do
    this too: the OpenAI SDK reads a stream to its end after ``[DONE]``. Bounded (50 ms, 64
    KiB), quiet on errors (the connection is then closed, as before); cancellation still
    leaves at once.
    """
    if reader.at_eof() or reader.exception() is not None:
        return
    left = _FINISH_BYTES
    with contextlib.suppress(Exception):
        async with asyncio.timeout(_FINISH_S):
            while left > 0 and (chunk := await reader.readany()):
                left -= len(chunk)


class StreamedResponse(httpx.Response):
    """A streamed response whose raw bytes come straight from aiohttp's reader.

    httpx's ``aiter_raw`` reaches the socket through three async generators and a chunker
    (its own, the client's ``BoundAsyncStream``, the transport's ``BodyStream``): ~1 us each
    per network read, and an LLM stream is one read per token. Here it is one generator;
    ``aiter_bytes``/``aiter_lines``/``aiter_text`` build on it, and everything else (a
    ``chunk_size``, a consumed or closed stream, ``aclose``) is httpx's own.
    """

    _reader: BodyReader
    _span: CallSpan | None
    _handler: Any = None  # the connection's protocol: its read_ns, the latest socket read's
    read_ns = 0  # when the bytes of the chunk aiter_raw gave last were read (0: not known)

    async def aiter_raw(self, chunk_size: int | None = None) -> AsyncIterator[bytes]:
        if chunk_size is not None or self.is_stream_consumed or self.is_closed:
            async for chunk in super().aiter_raw(chunk_size):
                yield chunk
            return
        self.is_stream_consumed = True
        self._num_bytes_downloaded = 0
        read = self._reader.readany
        handler = self._handler
        try:
            while chunk := await read():
                self._num_bytes_downloaded += len(chunk)
                # readany takes every byte read so far: the latest socket read brought the
                # last of them (the tokens of one chunk share its time; ``arrived_ns``)
                if handler is not None:
                    self.read_ns = handler.read_ns
                yield chunk
        except Exception as exc:
            error = _map_error(exc)
            if isinstance(error, httpx.RequestError) and getattr(error, "_request", None) is None:
                error.request = self.request
            if self._span is not None:
                note_error(self._span, error)
            raise error from exc
        await self.aclose()
