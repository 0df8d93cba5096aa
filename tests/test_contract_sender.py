"""``Sender`` (``_contract._sender``): a provider's checked send and stream, bound once, against a
real server on loopback."""

from __future__ import annotations

import httpx
import pytest
from aiohttp import web
from conftest import LoopbackServer, module_server
from pydantic import SecretStr

from gpubench_sdk import (
    ClientHTTPError,
    InvalidResponseError,
    Provider,
    ProviderError,
    ProviderOptions,
    Request,
    Result,
    Sender,
    ServerHTTPError,
    ThrottledError,
    TransportError,
    make_client,
)

pytestmark = pytest.mark.anyio


def _app() -> web.RouteTableDef:
    routes = web.RouteTableDef()

    @routes.post("/echo")
    async def echo(request: web.Request) -> web.Response:
        body = await request.json() if request.can_read_body else None
        headers = {name.lower(): value for name, value in request.headers.items()}
        return web.json_response({"body": body, "headers": headers})

    @routes.get("/busy")
    async def busy(request: web.Request) -> web.Response:
        return web.json_response({"detail": "slow down"}, status=429, headers={"Retry-After": "2"})

    @routes.get("/missing")
    async def missing(request: web.Request) -> web.Response:
        return web.json_response({"detail": "no such thing"}, status=404)

    @routes.get("/list")
    async def listing(request: web.Request) -> web.Response:
        return web.json_response([1, 2])

    @routes.get("/events")
    async def events(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for n in range(3):
            await response.write(f"data: {n}\n\n".encode())
        return response

    return routes


server = module_server(_app)


def _teapot(response: httpx.Response) -> ProviderError:
    return ServerHTTPError(f"teapot: {response.json()['detail']}", provider="acme")


async def test_a_call_sends_the_bound_headers_and_the_body_as_json(server: LoopbackServer) -> None:
    async with make_client(timeout_s=5) as client:
        send = Sender(client, "acme", {"Authorization": "Bearer k", "X-Team": "a"})
        response = await send("POST", f"{server.url}/echo", {"n": 1}, {"X-Team": "b"})
    answer = response.json()
    assert answer["body"] == {"n": 1}
    assert answer["headers"]["authorization"] == "Bearer k"
    assert answer["headers"]["x-team"] == "b"  # a call's own header wins over the bound one


async def test_a_status_error_is_the_cores_error_or_the_providers_own(
    server: LoopbackServer,
) -> None:
    async with make_client(timeout_s=5) as client:
        plain = Sender(client, "acme", {})
        with pytest.raises(ThrottledError) as info:
            await plain("GET", f"{server.url}/busy")
        assert info.value.retry_after_s == 2.0 and info.value.provider == "acme"
        with pytest.raises(ClientHTTPError, match=r"GET .*/missing"):
            await plain("GET", f"{server.url}/missing")
        own = Sender(client, "acme", {}, _teapot)
        with pytest.raises(ServerHTTPError, match="teapot: no such thing"):
            await own("GET", f"{server.url}/missing")


async def test_a_broken_connection_is_a_transport_error() -> None:
    async with make_client(timeout_s=5) as client:
        send = Sender(client, "acme", {})
        with pytest.raises(TransportError):
            await send("GET", "http://127.0.0.1:9/nothing-listens")


async def test_a_stream_is_read_as_it_comes_and_its_error_status_raised_first(
    server: LoopbackServer,
) -> None:
    async with make_client(timeout_s=5) as client:
        send = Sender(client, "acme", {"Accept": "text/event-stream"})
        async with send.stream("GET", f"{server.url}/events") as response:
            text = b"".join([chunk async for chunk in response.aiter_bytes()]).decode()
        assert text == "data: 0\n\ndata: 1\n\ndata: 2\n\n"
        with pytest.raises(ServerHTTPError, match="teapot: no such thing"):
            async with Sender(client, "acme", {}, _teapot).stream("GET", f"{server.url}/missing"):
                pytest.fail("the body of a failed stream is not handed out")


async def test_json_reads_the_answer_as_an_object_or_names_the_call(server: LoopbackServer) -> None:
    async with make_client(timeout_s=5) as client:
        send = Sender(client, "acme", {"Authorization": "Bearer k"})
        answer = await send.json("POST", f"{server.url}/echo", {"n": 1})
        assert answer["body"] == {"n": 1} and answer["headers"]["authorization"] == "Bearer k"
        with pytest.raises(InvalidResponseError, match=r"GET .*/list: response is not a JSON"):
            await send.json("GET", f"{server.url}/list")
        with pytest.raises(ThrottledError):
            await send.json("GET", f"{server.url}/busy")


class _KeyedProvider(Provider):
    name = "keyed"
    key_scheme = "api-key"

    async def invoke(self, request: Request) -> Result:
        raise NotImplementedError


async def test_of_binds_the_providers_client_name_headers_and_key(server: LoopbackServer) -> None:
    options = ProviderOptions(api_key=SecretStr("k1"), headers={"X-Team": "a"})
    async with _KeyedProvider(options) as provider:
        send = Sender.of(provider, _teapot)
        assert send.client is provider.client and send.provider == "keyed"
        answer = (await send("POST", f"{server.url}/echo")).json()
        assert answer["headers"]["authorization"] == "Api-Key k1"  # the class's key_scheme
        assert answer["headers"]["x-team"] == "a"
        with pytest.raises(ServerHTTPError, match="teapot"):
            await send("GET", f"{server.url}/missing")
