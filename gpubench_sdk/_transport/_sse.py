"""Server-Sent Events over raw bytes, built for per-token timing: one parser for every plugin.

The format is the WHATWG HTML "Server-sent events" one (html.spec.whatwg.org/multipage/
server-sent-events.html#event-stream-interpretation): events are separated by a blank line;
``data:`` lines (one optional space after the colon) are joined with ``\\n``; lines starting
with ``:`` are comments (servers send them as keep-alives); ``event:`` names the event
(``message`` when absent); ``id:``/``retry:`` are not needed for timing. Lines end in ``\\n``,
``\\r\\n`` or ``\\r``. An event without a ``data`` line is not dispatched.

Why bytes and whole-event splits: an LLM server sends one small event per token, and per-line
Python work costs microseconds per token (httpx's ``aiter_lines`` decodes, splits and yields
line by line through three generators). ``feed`` finds event boundaries with ``bytes.split``
(C speed) and takes the common one-line ``data: {...}`` event without looking at its lines;
only multi-line, named or commented events go through the general path.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import httpx

__all__ = ["SSEParser", "sse_events"]

_DATA = b"data:"
_DATA_SP = b"data: "
_MESSAGE = "message"


class SSEParser:
    """Feed network chunks as they arrive; get the events they complete.

    ``feed`` returns each completed event's ``data`` (bytes; the event's name is not looked
    at), ``feed_events`` its ``(event name, data)``. An event split across chunks (even inside
    ``\\r\\n``) is returned once its blank line arrives. ``pending`` tells whether a partial
    event is buffered (a stream that ends with one was cut mid-event).
    """

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    @property
    def pending(self) -> bool:
        return bool(self._buf.strip())

    def feed(self, chunk: bytes) -> list[bytes]:
        blocks = self._complete(chunk)
        return [] if blocks is None else _data_of(blocks)

    def feed_events(self, chunk: bytes) -> list[tuple[str, bytes]]:
        blocks = self._complete(chunk)
        return [] if blocks is None else _events_of(blocks)

    def flush_events(self) -> list[tuple[str, bytes]]:
        """At the end of the stream: what is buffered, read as if its blank line had come."""
        rest, self._buf = self._buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n"), b""
        return _events_of(rest.rstrip(b"\n")) if rest.strip() else []

    def _complete(self, chunk: bytes) -> bytes | None:
        """The complete events the buffer and ``chunk`` hold (LF line ends, without the final
        blank line); the rest stays buffered."""
        if not self._buf and chunk[-2:] == b"\n\n" and b"\r" not in chunk:
            # The usual read: whole events, LF line ends, nothing pending (one event per token
            # from vLLM, TGI, OpenAI): no buffer to join, no boundary to search for.
            return chunk[:-2]
        data = self._buf + chunk if self._buf else chunk
        if b"\r" in data:
            if data.endswith(b"\r"):  # maybe half of a \r\n: decide when the next byte comes
                self._buf = data
                return None
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        end = data.rfind(b"\n\n")
        if end < 0:
            self._buf = data
            return None
        self._buf = data[end + 2 :]
        return data[:end]


def _data_of(blocks: bytes) -> list[bytes]:
    out: list[bytes] = []
    for block in blocks.split(b"\n\n"):
        if b"\n" not in block:  # the one-line event: fast path
            if block[:6] == _DATA_SP:
                out.append(block[6:])
                continue
            if block[:5] == _DATA:
                out.append(block[5:])
                continue
        if block.strip(b"\n"):
            parsed = _general(block)
            if parsed is not None:
                out.append(parsed[1])
    return out


def _events_of(blocks: bytes) -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    for block in blocks.split(b"\n\n"):
        if b"\n" not in block:
            if block[:6] == _DATA_SP:
                out.append((_MESSAGE, block[6:]))
                continue
            if block[:5] == _DATA:
                out.append((_MESSAGE, block[5:]))
                continue
        if block.strip(b"\n"):
            parsed = _general(block)
            if parsed is not None:
                out.append(parsed)
    return out


def _general(block: bytes) -> tuple[str, bytes] | None:
    """An event with several lines, comments or other fields; None when it has no data."""
    parts: list[bytes] = []
    name = _MESSAGE
    for line in block.split(b"\n"):
        if not line or line[:1] == b":":
            continue  # blank (leading newlines) or a comment: keep-alive
        field, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if field == b"data":
            parts.append(value)
        elif field == b"event":
            name = value.decode("utf-8", "replace") or _MESSAGE
        # id, retry or unknown fields: not needed for timing
    return (name, b"\n".join(parts)) if parts else None


def arrived_ns(response: httpx.Response) -> int:
    """``time.perf_counter_ns()`` when the bytes of the chunk ``aiter_raw`` gave last were read
    from the socket (the token time of the events in it), for a streamed response of the
    measuring client; for any other response, now. Call it as each chunk comes."""
    read = getattr(response, "read_ns", 0)  # StreamedResponse's (here without its aiohttp)
    return read if read else time.perf_counter_ns()


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, str, int]]:
    """``(event, data, arrived_ns)`` for each event of a streamed response, as it arrives.

    ``arrived_ns`` is ``time.perf_counter_ns()`` when the socket read that completed the
    event brought its bytes (``gpubench_sdk.arrived_ns``; the runner's clock: store it as a
    token time). The bytes come straight from the transport (``aiter_raw``), or through
    httpx's decoder when the response has a ``Content-Encoding`` (or was read already); data
    is UTF-8, as the format requires. An
    event the stream ends without its blank line is still given, as the line readers this
    replaced gave it (each plugin checks that its final event came).
    """
    parser = SSEParser()
    feed, clock = parser.feed_events, time.perf_counter_ns
    # aiter_raw is the lean path; aiter_bytes decodes a Content-Encoding and serves a body
    # already read (a plugin that did not stream the request)
    decoded = "content-encoding" in response.headers or response.is_stream_consumed
    async for chunk in response.aiter_bytes() if decoded else response.aiter_raw():
        arrived = arrived_ns(response)  # when its bytes were read from the socket, else now
        for event, data in feed(chunk):
            yield event, data.decode("utf-8", "replace"), arrived
    for event, data in parser.flush_events():
        yield event, data.decode("utf-8", "replace"), clock()
