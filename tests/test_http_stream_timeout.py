"""The read timeout of a streamed response: one timer per silence, not one per network read
(``_http_stream.LazyReadTimeout``), with aiohttp's meaning kept: the call fails ``timeout_s``
after the last byte, however long the stream as a whole."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from aiohttp import web
from aiohttp.client_proto import ResponseHandler
from conftest import LoopbackServer, module_server

from gpubench_sdk import make_client
from gpubench_sdk._transport._stream import LazyReadTimeout

pytestmark = pytest.mark.anyio


def _routes() -> web.RouteTableDef:
    routes = web.RouteTableDef()

    @routes.get("/trickle")
    async def trickle(request: web.Request) -> web.StreamResponse:
        """``n`` events ``gap`` seconds apart, then ``stall`` seconds of silence, then the end."""
        n, gap = int(request.query["n"]), float(request.query["gap"])
        stall = float(request.query.get("stall", 0))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for i in range(n):
            await response.write(f"data: {i}\n\n".encode())
            await asyncio.sleep(gap)
        await asyncio.sleep(stall)
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    return routes


server = module_server(_routes)


async def test_a_stream_longer_than_the_read_timeout_is_not_cut(server: LoopbackServer) -> None:
    # 14 events 0.1 s apart: 1.4 s of stream against a 0.5 s read timeout. A timer armed once
    # and never moved would cut it at 0.5 s; the deadline must follow the bytes.
    async with make_client(timeout_s=0.5) as client:
        url = f"{server.url}/trickle?n=14&gap=0.1"
        async with client.stream("GET", url) as r:
            body = b"".join([chunk async for chunk in r.aiter_raw()])
    assert body.count(b"\n\n") == 15 and body.endswith(b"data: [DONE]\n\n")


async def test_a_silent_stream_fails_with_a_read_timeout_after_the_last_byte(
    server: LoopbackServer,
) -> None:
    async with make_client(timeout_s=0.4) as client:
        url = f"{server.url}/trickle?n=3&gap=0.05&stall=5"
        async with client.stream("GET", url) as r:
            last = time.perf_counter()
            with pytest.raises(httpx.ReadTimeout):
                async for _ in r.aiter_raw():
                    last = time.perf_counter()
            silent = time.perf_counter() - last
    assert 0.35 <= silent < 2.5, silent  # 0.4 s after the last byte, not at the stall's end


async def test_one_timer_per_silence_not_one_per_read(server: LoopbackServer) -> None:
    """Guards the coupling to aiohttp's ``ResponseHandler`` (``_reschedule_timeout``,
    ``_read_timeout_handle``): with it, reads move a deadline and the timer stays the same
    object; aiohttp's own would make a new timer on every read."""
    assert hasattr(ResponseHandler, "_reschedule_timeout")
    url = f"{server.url}/trickle?n=30&gap=0.01"
    async with make_client(timeout_s=30) as client, client.stream("GET", url) as r:
        protocol = r._reader._protocol  # type: ignore[attr-defined]
        assert isinstance(protocol, LazyReadTimeout)
        timers = set()
        reads = 0
        async for _ in r.aiter_raw():
            reads += 1
            if protocol._read_timeout_handle is not None:
                timers.add(id(protocol._read_timeout_handle))
    assert reads >= 20  # the events came in separate reads, as an LLM stream's tokens do
    assert len(timers) == 1, (reads, len(timers))


async def test_a_timer_that_fires_early_waits_out_the_rest() -> None:
    loop = asyncio.get_running_loop()

    fired = asyncio.Event()

    class Probe(LazyReadTimeout):
        def __init__(self) -> None:
            self._loop = loop
            self._read_timeout = 0.3
            self._read_timeout_handle = None
            self.fired_at: float | None = None

        def _on_read_timeout(self) -> None:
            self.fired_at = loop.time()
            fired.set()

    probe = Probe()
    start = loop.time()
    probe._reschedule_timeout()
    for _ in range(4):  # bytes at 0.1 s intervals: the deadline moves to 0.4 + 0.3 s
        await asyncio.sleep(0.1)
        probe._reschedule_timeout()
    last = loop.time()
    await asyncio.wait_for(fired.wait(), 5)
    assert probe.fired_at is not None and probe.fired_at - start >= 0.7 - 0.002
    assert probe.fired_at - last >= 0.3 - 0.002  # never before the deadline (timer slack)
    assert probe.fired_at - last < 1.5  # and not long after it (a loaded machine)
    probe._read_timeout = None  # a response without sock_read: no timer at all
    probe._reschedule_timeout()
    assert probe._read_timeout_handle is None
