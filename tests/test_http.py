"""The measuring client: the httpx API over aiohttp, against a real server on loopback."""

from __future__ import annotations

import asyncio
import gzip

import httpx
import pytest
from aiohttp import web
from conftest import LoopbackServer

from gpubench_sdk import first_byte_ns, make_client

pytestmark = pytest.mark.anyio


def _app() -> web.Application:
    async def plain(request: web.Request) -> web.Response:
        return web.json_response({"method": request.method, "body": (await request.text())})

    async def zipped(request: web.Request) -> web.Response:
        body = gzip.compress(b'{"zipped": true}')
        return web.Response(
            body=body, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"}
        )

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for i in range(3):
            await response.write(f"data: {i}\n\n".encode())
            await asyncio.sleep(0.05)
        await response.write_eof()
        return response

    async def slow_sized(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Length": "6"})
        await response.prepare(request)
        await response.write(b"abc")
        await asyncio.sleep(0.2)
        await response.write(b"def")
        await response.write_eof()
        return response

    async def see_other(request: web.Request) -> web.Response:
        raise web.HTTPSeeOther("/plain")

    async def set_cookie(request: web.Request) -> web.Response:
        return web.Response(text="ok", headers={"Set-Cookie": "session=abc"})

    app = web.Application()
    app.router.add_route("*", "/plain", plain)
    app.router.add_get("/zipped", zipped)
    app.router.add_get("/stream", stream)
    app.router.add_post("/see-other", see_other)
    app.router.add_get("/slow-sized", slow_sized)
    app.router.add_get("/cookie", set_cookie)
    return app


@pytest.fixture(scope="module")
def server() -> LoopbackServer:
    with LoopbackServer(_app()) as s:
        yield s  # type: ignore[misc]


async def test_request_body_headers_and_first_byte(server: LoopbackServer) -> None:
    async with make_client() as client:
        r = await client.post(f"{server.url}/plain", json={"a": 1})
    assert r.status_code == 200 and r.json() == {"method": "POST", "body": '{"a":1}'}
    fb = first_byte_ns(r)
    assert fb is not None and fb > 0


async def test_gzip_is_decoded_once(server: LoopbackServer) -> None:
    async with make_client() as client:
        r = await client.get(f"{server.url}/zipped")
    assert r.json() == {"zipped": True}


async def test_streams_arrive_as_they_are_sent(server: LoopbackServer) -> None:
    import time

    async with make_client() as client, client.stream("GET", f"{server.url}/stream") as r:
        arrivals = []
        async for chunk in r.aiter_bytes():
            arrivals.append((time.perf_counter(), chunk))
    assert b"".join(c for _, c in arrivals) == b"data: 0\n\ndata: 1\n\ndata: 2\n\n"
    assert arrivals[-1][0] - arrivals[0][0] > 0.08  # not buffered until the end


async def test_a_streamed_sized_body_is_not_buffered(server: LoopbackServer) -> None:
    import time

    async with make_client() as client:
        async with client.stream("GET", f"{server.url}/slow-sized") as r:
            chunks = [(time.perf_counter(), c) async for c in r.aiter_raw()]
        assert b"".join(c for _, c in chunks) == b"abcdef"
        assert chunks[-1][0] - chunks[0][0] > 0.15  # the first chunk came before the second
        plain = await client.get(f"{server.url}/slow-sized")  # not streamed: read at once
        assert plain.content == b"abcdef"


async def test_redirects_are_followed(server: LoopbackServer) -> None:
    async with make_client() as client:
        r = await client.post(f"{server.url}/see-other", json={})
    assert r.status_code == 200 and r.json()["method"] == "GET"  # 303: GET the result URL


async def test_no_cookies_are_kept(server: LoopbackServer) -> None:
    async with make_client() as client:
        await client.get(f"{server.url}/cookie")
        assert len(client.cookies) == 0
        with pytest.raises(ValueError, match="no cookies"):
            client.cookies = {"a": "b"}  # type: ignore[assignment]
        with pytest.raises(ValueError, match="no cookies"):
            client.cookies.set("session", "x")
    async with make_client() as a, make_client() as b:
        assert a.cookies is not b.cookies  # nothing set on one client can reach another


async def test_errors_become_httpx_errors() -> None:
    async with make_client(timeout_s=0.5) as client:
        with pytest.raises(httpx.ConnectError):
            await client.get("http://127.0.0.1:9/")
