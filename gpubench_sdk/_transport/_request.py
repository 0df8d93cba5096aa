"""A request's bytes on the socket in the step that sends it, and the instant they went.

aiohttp buffers a request's headers and writes them with the body from a task of their own
(``write_bytes``). From Python 3.12 it starts that task eagerly, so the bytes leave at once; on
3.11 the task waits its turn in the loop's ready queue, behind every callback that was already
ready: at 16 concurrent streams, that queue (other streams' chunks being read) held a request
back 3 ms at the median and 17 ms at the 99th percentile (``bench/client_tail_bench.py``), time
the runner counted as the provider's. ``_Request`` writes a request whose body is already bytes
in the same step as its headers, and every request notes in the current ``CallLog`` when its
first bytes were handed to the socket: the instant the runner records as ``start_ns``.
"""

from __future__ import annotations

import sys
import time
from contextvars import ContextVar
from typing import Any, Protocol

import aiohttp
from aiohttp import payload

__all__ = ["ATTEMPT", "CallLog", "call_log", "note_call", "record_calls"]


class Connection(Protocol):
    """What the transport reads of the connection a request went out on (aiohttp's, in
    ``_client.py``, or a lean one, ``_lean.py``)."""

    uses: int  # requests sent on it so far
    heard: bool  # a byte arrived since the current request was sent
    read_ns: int  # time.perf_counter_ns() of its latest socket read that brought bytes


# The connection the current task's latest request went out on.
ATTEMPT: ContextVar[Connection | None] = ContextVar("gpubench_http_attempt", default=None)


class CallLog:
    """What the transport did for one invocation: ``sent_ns`` (``time.perf_counter_ns()``
    when its first request went out: its bytes handed to the socket, or, on a connection
    opened for it, when the call began, so that connecting counts as the network's time),
    ``retries`` (why it resent a request, each time it did) and, when the runner collects them,
    ``spans`` (the HTTP client spans of its calls, made after the invocation)."""

    __slots__ = ("call_ns", "retries", "sent_ns", "spans")

    def __init__(self, spans: bool = False) -> None:
        self.sent_ns: int | None = None
        self.call_ns = 0  # when the current call began
        self.retries: list[str] = []
        self.spans: list[Any] | None = [] if spans else None


_CALLS: ContextVar[CallLog | None] = ContextVar("gpubench_http_calls", default=None)


def record_calls(spans: bool = False) -> CallLog:
    """Start a ``CallLog`` for the current context (and the tasks it starts): the runner reads
    it once the invocation is over. ``spans``: collect the calls' spans (``_spans.LateSpan``)."""
    log = CallLog(spans)
    _CALLS.set(log)
    return log


def call_log() -> CallLog | None:
    return _CALLS.get()


def note_call() -> None:
    """A call begins (the transport's round trip)."""
    log = _CALLS.get()
    if log is not None and log.sent_ns is None:
        log.call_ns = time.perf_counter_ns()


def _note_sent(protocol: Any) -> None:
    log = _CALLS.get()
    if log is not None and log.sent_ns is None:
        fresh = getattr(protocol, "uses", 2) <= 1 and log.call_ns  # a connection of its own
        log.sent_ns = fresh or time.perf_counter_ns()


# aiohttp starts its body writer eagerly from Python 3.12 on: nothing to do there.
_INLINE = sys.version_info < (3, 12)


class _Cork:
    """A transport that keeps what is written to it (the request's headers) for one write."""

    __slots__ = ("_real", "chunks")

    def __init__(self, real: Any) -> None:
        self._real = real
        self.chunks: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.chunks.append(bytes(data))

    def writelines(self, data: Any) -> None:
        self.chunks.extend(bytes(d) for d in data)

    def is_closing(self) -> bool:
        return bool(self._real.is_closing())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class _Request(aiohttp.ClientRequest):
    async def send(self, conn: Any) -> aiohttp.ClientResponse:
        body = getattr(self, "_body", None)  # aiohttp >= 3.12: a payload or None
        protocol = conn.protocol
        plain = (
            hasattr(self, "_body")
            and self._continue is None
            and not self.chunked
            and not self.compress
            and protocol is not None
            and not protocol.writing_paused
        )
        if plain and body is None:  # aiohttp writes the headers in this step, no writer task
            _note_sent(protocol)
            return await super().send(conn)
        if not (plain and _INLINE and type(body) is payload.BytesPayload):
            return await super().send(conn)  # the writer task notes the send when it runs
        # No body for aiohttp: it writes the headers now, without a writer task (its
        # Content-Length stays the body's), into a cork that holds them; headers and body then
        # go to the socket in one write (two writes cost a second segment and a second read on
        # the server: 1.4 ms against 1.0 ms a round trip, measured).
        transport = protocol.transport
        if transport is None or transport.is_closing():
            raise aiohttp.ClientConnectionResetError("Cannot write to closing transport")
        cork = _Cork(transport)
        self._body, protocol.transport = None, cork
        _note_sent(protocol)  # nothing awaits between here and the write
        try:
            response = await super().send(conn)
        finally:
            self._body, protocol.transport = body, transport
        cork.chunks.append(body._value)
        transport.write(b"".join(cork.chunks))
        return response

    async def write_bytes(self, writer: Any, conn: Any, *args: Any, **kwargs: Any) -> None:
        _note_sent(conn.protocol)
        await super().write_bytes(writer, conn, *args, **kwargs)
