"""A streamed body its reader stops short of (an SSE plugin stops at ``data: [DONE]``) is read to
its end when the response closes, so that its connection goes back to the pool reusable; one
abandoned mid-answer is given up within a bound, its connection closed. Real sockets: the
server notes the client port each request came in on."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from aiohttp import web
from conftest import LoopbackServer, module_server

from gpubench_sdk import PreparedCall, make_client
from gpubench_sdk._transport import _stream

pytestmark = pytest.mark.anyio

PEERS: list[int] = []  # the client port of each request, in order


def _routes() -> web.RouteTableDef:
    routes = web.RouteTableDef()

    @routes.route("*", "/done-then-end")
    async def done_then_end(request: web.Request) -> web.StreamResponse:
        """Three events and ``[DONE]``, then ``wait`` seconds before the body's end (the
        chunked terminator: what a server's own epilogue delays)."""
        PEERS.append(request.transport.get_extra_info("peername")[1])  # type: ignore[union-attr]
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for i in range(3):
            await response.write(f"data: {i}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await asyncio.sleep(float(request.query.get("wait", "0.005")))
        await response.write_eof()
        return response

    @routes.get("/endless")
    async def endless(request: web.Request) -> web.StreamResponse:
        PEERS.append(request.transport.get_extra_info("peername")[1])  # type: ignore[union-attr]
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        while True:  # until the client hangs up
            await response.write(b"data: more\n\n")
            await asyncio.sleep(0.005)

    return routes


server = module_server(_routes)


@pytest.fixture(autouse=True)
def _peers() -> Iterator[None]:
    PEERS.clear()
    yield


async def _until_done(response: object) -> None:
    async for line in response.aiter_lines():  # type: ignore[attr-defined]
        if line == "data: [DONE]":
            break  # as the OpenAI plugin does: the answer is complete


async def test_a_stream_stopped_at_its_last_event_keeps_its_connection(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_stream, "_FINISH_S", 5.0)  # a loaded machine's late terminator too
    url = f"{server.url}/done-then-end?wait=0.005"
    async with make_client() as client:
        for _ in range(4):
            began = time.perf_counter()
            async with client.stream("GET", url) as response:
                await _until_done(response)
            assert time.perf_counter() - began >= 0.005  # the block ended at the body's end
        call = PreparedCall(client, "POST", url)
        for _ in range(4):
            async with call.stream(b"{}") as response:  # the lean path closes the same way
                await _until_done(response)
    # one connection per pool (httpx's calls go through aiohttp's, a plain-HTTP prepared
    # call through the lean one), each reused every time
    assert len(PEERS) == 8 and len(set(PEERS[:4])) == len(set(PEERS[4:])) == 1


async def test_without_reading_to_the_end_each_request_needs_a_connection(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # what the runs did before: the connection of an unfinished response is closed by aiohttp
    monkeypatch.setattr(_stream, "_FINISH_BYTES", 0)
    async with make_client() as client:
        for _ in range(3):  # the end 0.2 s after [DONE]: surely not read when the block ends
            async with client.stream("GET", f"{server.url}/done-then-end?wait=0.2") as response:
                await _until_done(response)
    assert len(PEERS) == 3 and len(set(PEERS)) == 3


def _streamed(client: httpx.AsyncClient, via: str, url: str) -> Any:
    """``client.stream`` (aiohttp's pool), or a prepared call's (the lean plain-HTTP pool)."""
    if via == "httpx":
        return client.stream("GET", url)
    return PreparedCall(client, "GET", url).stream()


@pytest.mark.parametrize("via", ["httpx", "prepared"])
async def test_a_stream_abandoned_mid_answer_is_given_up_quickly(
    server: LoopbackServer, via: str
) -> None:
    async with make_client() as client:
        began = time.perf_counter()
        async with _streamed(client, via, f"{server.url}/endless") as response:
            async for _ in response.aiter_raw():
                break  # the plugin stops reading: an error, or all it wanted
        closed = time.perf_counter() - began
        # a later request finds no half-read connection: it gets a connection of its own
        async with _streamed(client, via, f"{server.url}/done-then-end") as response:
            await _until_done(response)
    assert closed < 0.5  # the 50 ms bound, and the loop's slack on a loaded machine
    assert len(PEERS) == 2 and PEERS[0] != PEERS[1]


@pytest.mark.parametrize("via", ["httpx", "prepared"])
async def test_a_body_that_ends_late_is_not_waited_for(server: LoopbackServer, via: str) -> None:
    async with make_client() as client:
        began = time.perf_counter()
        async with _streamed(client, via, f"{server.url}/done-then-end?wait=2") as response:
            await _until_done(response)
        assert time.perf_counter() - began < 1.0  # the bound, not the server's 2 s
