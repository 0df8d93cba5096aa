"""The measuring client's lean paths behave exactly as httpx's own: a preloaded body, the
send that skips httpx's no-op machinery, the one-generator stream; each checked against a real
aiohttp server on loopback, next to a plain ``httpx.AsyncClient`` where behaviour must match."""

from __future__ import annotations

import base64

import httpx
import pytest
from aiohttp import web
from conftest import LoopbackServer, module_server, stream_parts

from gpubench_sdk import as_provider_error, make_client
from gpubench_sdk._transport._stream import StreamedResponse

pytestmark = pytest.mark.anyio


def _routes() -> web.RouteTableDef:
    routes = web.RouteTableDef()

    @routes.get("/item/{n}")
    async def item(request: web.Request) -> web.Response:
        seen = {"auth": request.headers.get("Authorization"), "hook": request.headers.get("X-H")}
        return web.json_response({"item": request.match_info["n"], **seen})

    @routes.get("/moved")
    async def moved(request: web.Request) -> web.Response:
        raise web.HTTPFound("/item/7")

    @routes.get("/teapot")
    async def teapot(request: web.Request) -> web.Response:
        return web.Response(status=418, text="short and stout")

    @routes.get("/lines")
    async def lines(request: web.Request) -> web.StreamResponse:
        parts = (b"one\ntw", b"o\nthree\n")
        return await stream_parts(request, parts, 0.02, {"Content-Type": "text/plain"})

    return routes


server = module_server(_routes)


async def test_preloaded_response_is_a_read_httpx_response(server: LoopbackServer) -> None:
    async with make_client() as client:
        response = await client.get(f"{server.url}/item/3")
    assert response.json()["item"] == "3"
    assert response.content == response.read() and response.text.startswith("{")
    assert response.is_closed and response.is_stream_consumed
    assert response.request.url == f"{server.url}/item/3"
    assert response.elapsed.total_seconds() > 0
    assert response.num_bytes_downloaded == len(response.content)  # as read() counts it
    response.raise_for_status()  # needs .request: set


async def test_redirects_match_httpx(server: LoopbackServer) -> None:
    async with make_client() as ours, httpx.AsyncClient(follow_redirects=True) as theirs:
        a, b = await ours.get(f"{server.url}/moved"), await theirs.get(f"{server.url}/moved")
        assert a.json() == b.json() and a.status_code == b.status_code == 200
        assert [r.status_code for r in a.history] == [r.status_code for r in b.history] == [302]
        not_followed = await ours.get(f"{server.url}/moved", follow_redirects=False)
    assert not_followed.status_code == 302
    assert not_followed.next_request is not None
    assert str(not_followed.next_request.url) == f"{server.url}/item/7"


async def test_auth_and_hooks_take_httpx_path(server: LoopbackServer) -> None:
    async def hook(request: httpx.Request) -> None:
        request.headers["X-H"] = "hooked"

    async with make_client() as client:
        with_auth = await client.get(f"{server.url}/item/1", auth=("u", "p"))
        client.event_hooks["request"] = [hook]
        hooked = await client.get(f"{server.url}/item/2")
    assert with_auth.json()["auth"] == "Basic " + base64.b64encode(b"u:p").decode()
    assert hooked.json()["hook"] == "hooked"


async def test_errors_name_the_request(server: LoopbackServer) -> None:
    async with make_client() as client:
        teapot = await client.get(f"{server.url}/teapot")
        with pytest.raises(httpx.HTTPStatusError) as status:
            teapot.raise_for_status()
        port = server.url.rsplit(":", 1)[1]
        dead = f"http://127.0.0.1:{int(port) + 1 if int(port) < 65535 else 1}/x?token=s3cr3t-value"
        with pytest.raises(httpx.ConnectError) as refused:
            await client.get(dead)
    assert "short and stout" in str(as_provider_error(status.value, provider="p"))
    error = as_provider_error(refused.value, provider="p")
    assert "GET http://127.0.0.1:" in str(error)  # the transport error names its request
    assert "s3cr3t" not in str(error)


async def test_stream_reads_through_one_generator_as_httpx_would(server: LoopbackServer) -> None:
    async with make_client() as ours, httpx.AsyncClient() as theirs:
        async with ours.stream("GET", f"{server.url}/lines") as response:
            assert isinstance(response, StreamedResponse)
            got = [line async for line in response.aiter_lines()]
            assert response.num_bytes_downloaded == len(b"one\ntwo\nthree\n")
        assert response.is_closed
        async with theirs.stream("GET", f"{server.url}/lines") as expected:
            assert got == [line async for line in expected.aiter_lines()]
        async with ours.stream("GET", f"{server.url}/lines") as response:
            chunks = [c async for c in response.aiter_raw(chunk_size=4)]  # httpx's chunker
        assert b"".join(chunks) == b"one\ntwo\nthree\n" and {len(c) for c in chunks[:-1]} == {4}
        with pytest.raises(httpx.StreamConsumed):
            async for _ in response.aiter_raw():
                pass
