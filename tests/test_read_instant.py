"""A streamed token's time is when its bytes were read from the socket (issue 32), not when the
task reading the stream got to them: on a busy client that task waits behind other streams'
reads, and the wait is the client's. ``arrived_ns`` (and ``sse_events``) give the transport's
reading of the socket read that brought a chunk. A raw loopback server writes the whole answer
in one write, so its bytes are read with the headers, well before the stream is read here."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from gpubench_sdk import arrived_ns, first_byte_ns, make_client, sse_events

pytestmark = pytest.mark.anyio

_BODY = b'data: {"n": 1}\n\ndata: {"n": 2}\n\ndata: [DONE]\n\n'
_ANSWER = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    + f"{len(_BODY):x}\r\n".encode() + _BODY + b"\r\n0\r\n\r\n"
)  # fmt: skip


@asynccontextmanager
async def _server() -> AsyncIterator[str]:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:  # each request of a kept-alive connection
                await reader.readuntil(b"\r\n\r\n")
                writer.write(_ANSWER)  # headers and body in one write: one read for the client
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/s"
    finally:
        server.close()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_chunk_is_timed_by_the_socket_read_that_brought_it(anyio_backend: str) -> None:
    async with _server() as url, make_client() as client:
        async with client.stream("GET", url) as response:
            await asyncio.sleep(0.05)  # the reader's task is busy elsewhere; the bytes are in
            reached = time.perf_counter_ns()
            first = first_byte_ns(response)
            chunks = [(chunk, arrived_ns(response)) async for chunk in response.aiter_raw()]
        async with client.stream("GET", url) as response:
            await asyncio.sleep(0.05)
            reached_sse = time.perf_counter_ns()
            events = [(data, at) async for _, data, at in sse_events(response)]
    assert b"".join(c for c, _ in chunks) == _BODY
    assert all(0 < at < reached for _, at in chunks)  # read before the task got to them
    # the headers came in the same read: the first byte is on the clock of the first token
    assert first is not None and first <= chunks[0][1]
    assert [d for d, _ in events] == ['{"n": 1}', '{"n": 2}', "[DONE]"]
    assert all(0 < at < reached_sse for _, at in events)


async def test_a_response_the_transport_did_not_read_is_timed_now() -> None:
    import httpx

    before = time.perf_counter_ns()
    assert arrived_ns(httpx.Response(200, content=b"x")) >= before
