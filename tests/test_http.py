"""The measuring client: the httpx API over aiohttp, against a real server on loopback."""

from __future__ import annotations

import asyncio
import gzip
from pathlib import Path

import httpx
import pytest
from aiohttp import web
from conftest import LoopbackServer, RawServer, Reader, Writer, module_server, stream_parts

from gpubench_sdk import Burst, EchoProbe, Outcome, Store, first_byte_ns, make_client, run
from gpubench_sdk._transport._client import retried

pytestmark = pytest.mark.anyio


def _routes() -> web.RouteTableDef:
    routes = web.RouteTableDef()

    @routes.route("*", "/plain")
    async def plain(request: web.Request) -> web.Response:
        return web.json_response({"method": request.method, "body": (await request.text())})

    @routes.get("/zipped")
    async def zipped(request: web.Request) -> web.Response:
        body = gzip.compress(b'{"zipped": true}')
        return web.Response(
            body=body, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"}
        )

    @routes.get("/stream")
    async def stream(request: web.Request) -> web.StreamResponse:
        events = (f"data: {i}\n\n".encode() for i in range(3))
        return await stream_parts(request, events, 0.05, {"Content-Type": "text/event-stream"})

    @routes.get("/slow-sized")
    async def slow_sized(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Length": "6"})
        await response.prepare(request)
        await response.write(b"abc")
        await asyncio.sleep(0.2)
        await response.write(b"def")
        await response.write_eof()
        return response

    @routes.post("/see-other")
    async def see_other(request: web.Request) -> web.Response:
        raise web.HTTPSeeOther("/plain")

    @routes.post("/echo-error")
    async def echo_error(request: web.Request) -> web.Response:
        asked = await request.json()
        key = request.query.get("token", "")
        return web.json_response(
            {"error": f"invalid key {key}"}, status=asked["status"], headers=asked["headers"]
        )

    @routes.get("/cookie")
    async def set_cookie(request: web.Request) -> web.Response:
        return web.Response(text="ok", headers={"Set-Cookie": "session=abc"})

    return routes


server = module_server(_routes)


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


# ----- resending a request that provably never ran ----------------------------------------


# what conftest's EchoProvider reads, echoing EchoProbe's default payload
_OK_BODY = b'{"output": {"echo": "xxxxxxxxxxxxxxxx"}, "id": "r", "queue_ms": 0, "execution_ms": 0}'


class FlakyKeepAlive(RawServer):
    """A raw HTTP/1.1 server whose "model" fails every other request it handles. After each
    error response it keeps the socket (no ``Connection: close``) but closes it when the next
    request arrives on it, before answering a byte: that request never reaches the model.
    ``after_error`` = "partial" answers half a status line before closing instead."""

    def __init__(self, after_error: str = "drop", fail_first_on_fresh: bool = False) -> None:
        super().__init__(self._script)
        self.after_error = after_error
        self.fail_first_on_fresh = fail_first_on_fresh
        self.handled: list[int] = []  # the status the model answered, per request it saw
        self.dropped = 0

    @property
    def connections(self) -> int:
        return len(self.peers)

    async def _script(self, reader: Reader, writer: Writer, _: RawServer) -> None:
        broken = self.fail_first_on_fresh
        while True:
            await self.read_request(reader)
            if broken:
                self.dropped += 1
                if self.after_error == "partial":
                    writer.write(b"HTTP/1.1 2")
                    await writer.drain()
                return  # RawServer closes the connection
            status = 500 if len(self.handled) % 2 else 200
            self.handled.append(status)
            body = b'{"error": "model failed"}' if status == 500 else _OK_BODY
            reason = b"Internal Server Error" if status == 500 else b"OK"
            writer.write(
                b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\n\r\n%s" % (status, reason, len(body), body)
            )
            await writer.drain()
            broken = status == 500


async def test_a_reused_connection_closed_before_answering_is_resent_once() -> None:
    with FlakyKeepAlive() as server:
        async with make_client() as client:
            statuses, resent = [], []
            for i in range(10):
                r = await client.post(f"{server.url}/predict", json={"i": i})
                statuses.append(r.status_code)
                resent.append(retried(r))
    # Every request reached the model exactly once; each one sent after an error went out
    # on the dead socket first, and says that it was resent.
    assert statuses == server.handled == [200, 500] * 5
    assert server.dropped == 4
    assert [why is not None for why in resent] == [False, False] + [True, False] * 4
    assert "reused connection" in (resent[2] or "")


async def test_no_resend_on_a_fresh_connection_or_after_a_byte() -> None:
    with FlakyKeepAlive(fail_first_on_fresh=True) as server:
        async with make_client() as client:
            with pytest.raises(httpx.RemoteProtocolError):
                await client.post(f"{server.url}/predict", json={})
    assert (server.connections, server.dropped, server.handled) == (1, 1, [])

    with FlakyKeepAlive(after_error="partial") as server:
        async with make_client() as client:
            await client.post(f"{server.url}/predict", json={})
            r = await client.post(f"{server.url}/predict", json={})
            assert r.status_code == 500
            with pytest.raises(httpx.TransportError):
                await client.post(f"{server.url}/predict", json={})
    assert (server.dropped, server.handled) == (1, [200, 500])  # never resent


async def test_the_runner_records_the_server_failures_not_transport(tmp_path: Path) -> None:
    from conftest import EchoProvider

    with FlakyKeepAlive() as server:
        provider = EchoProvider(url=server.url)
        result = await run(
            {"flaky": provider},
            EchoProbe(),
            [Burst(total=12, concurrency=1)],
            store=tmp_path / "s.sqlite",
        )
    with Store(tmp_path / "s.sqlite") as store:
        rows = list(store.invocations(result.run_id))
    outcomes = [r.outcome for r in rows]
    assert outcomes.count(Outcome.HTTP_5XX) == 6 and Outcome.TRANSPORT not in outcomes
    assert server.dropped == 5 and len(server.handled) == 12
    resent = [r for r in rows if r.detail and "transport_retries" in r.detail]
    assert len(resent) == 5


async def test_uvicorn_closing_after_an_unhandled_exception_costs_no_request() -> None:
    """The case as met: uvicorn answers an app's unhandled exception with a 500 that keeps the
    connection open, then resets it when the next request arrives on it."""
    from starlette.applications import Starlette
    from starlette.requests import Request as HTTPRequest
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from gpubench_sdk.testing import serve

    seen: list[int] = []

    async def predict(request: HTTPRequest) -> JSONResponse:
        await request.body()
        seen.append(len(seen))
        if len(seen) % 2 == 0:
            raise RuntimeError("the model failed")
        return JSONResponse({"n": len(seen)})

    app = Starlette(routes=[Route("/predict", predict, methods=["POST"])])
    with serve(app) as served:
        async with make_client() as client:
            answers = [await client.post(f"{served.url}/predict", json={}) for _ in range(6)]
    assert [r.status_code for r in answers] == [200, 500] * 3
    assert "connection" not in answers[1].headers  # no warning that the socket is done for
    assert len(seen) == 6  # every request ran once: none lost to the dead socket
    assert [retried(r) is not None for r in answers] == [False, False, True, False, True, False]


async def test_as_provider_error_names_method_url_status_and_keeps_the_body(
    server: LoopbackServer,
) -> None:
    from gpubench_sdk import (
        ClientHTTPError,
        InvalidResponseError,
        ThrottledError,
        TransportError,
        as_provider_error,
        remember,
    )

    remember("sk-live-7c1e2f9a")
    async with make_client() as client:
        url = server.url.replace("://", "://user:pw-4f2a9c@") + "/echo-error?token=sk-live-7c1e2f9a"
        r = await client.post(url, json={"status": 403, "headers": {"Retry-After": "2"}})
        with pytest.raises(httpx.HTTPStatusError) as info:
            r.raise_for_status()
    err = as_provider_error(info.value, provider="p")
    assert isinstance(err, ClientHTTPError) and err.status_code == 403 and err.provider == "p"
    text = str(err)
    assert text.startswith(f"[p] POST {server.url}/echo-error: HTTP 403 Forbidden: ")
    assert "invalid key ***" in text  # the server's words, the echoed key masked
    assert "sk-live" not in text and "pw-4f2a9c" not in text and "token" not in text

    throttled = httpx.Response(429, headers={"Retry-After": "2"}, request=r.request)
    exc = httpx.HTTPStatusError("429", request=r.request, response=throttled)
    mapped = as_provider_error(exc, provider="p")
    assert isinstance(mapped, ThrottledError) and mapped.retry_after_s == 2.0

    async with make_client(timeout_s=1) as client:
        with pytest.raises(httpx.ConnectError) as refused:
            await client.get("http://127.0.0.1:9/x")
    gone = as_provider_error(refused.value, provider="p")
    assert isinstance(gone, TransportError) and str(gone).startswith(
        "[p] GET http://127.0.0.1:9/x: "
    )
    bad = as_provider_error(ValueError("Expecting value: line 1"), provider="p")
    assert isinstance(bad, InvalidResponseError) and "ValueError: Expecting value" in str(bad)


def test_as_provider_error_names_the_job_unless_the_error_already_does() -> None:
    from gpubench_sdk import ServerHTTPError, TransportError, as_provider_error

    polled = as_provider_error(httpx.ReadError("reset"), provider="p", request_id="job-1")
    assert isinstance(polled, TransportError) and polled.request_id == "job-1"
    named = ServerHTTPError("failed", provider="p", request_id="job-0")
    assert as_provider_error(named, provider="p", request_id="job-1") is named
    assert named.request_id == "job-0"


@pytest.mark.parametrize(
    ("header", "low", "high"),
    [
        ("7", 7, 7),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0, 0),
        ("soon", None, None),
        ("inf", None, None),
    ],
)
def test_retry_after_reads_seconds_and_http_dates(
    header: str, low: float | None, high: float | None
) -> None:
    import email.utils
    import time

    from gpubench_sdk._transport._client import retry_after_s

    def read(value: str) -> float | None:
        return retry_after_s(httpx.Response(429, headers={"Retry-After": value}))

    got = read(header)
    assert got == low if low is None else low <= (got or 0) <= high
    later = read(email.utils.formatdate(time.time() + 30, usegmt=True))
    assert later is not None and 25 <= later <= 31


def test_retry_after_reads_a_header_value_from_any_client() -> None:
    """The public parser takes the header's value itself (botocore's header dict, a
    ``CallResponse``'s headers): the same reading, a date included; nothing is ``None``."""
    import email.utils
    import time

    from gpubench_sdk import retry_after_s

    assert retry_after_s("7") == 7.0 and retry_after_s(None) is None
    assert retry_after_s("") is None and retry_after_s("-3") == 0.0
    later = retry_after_s(email.utils.formatdate(time.time() + 30, usegmt=True))
    assert later is not None and 25 <= later <= 31


def test_as_provider_error_shows_the_providers_own_detail_instead_of_the_body() -> None:
    from gpubench_sdk import ClientHTTPError, ThrottledError, as_provider_error, remember

    remember("sk-live-detail-5e1b")
    request = httpx.Request("POST", "https://api.example/v1/chat?key=sk-live-detail-5e1b")
    body = b'{"error": {"message": "Rate limit reached", "type": "requests"}}'
    answer = httpx.Response(429, headers={"Retry-After": "4"}, content=body, request=request)
    exc = httpx.HTTPStatusError("429", request=request, response=answer)
    error = as_provider_error(exc, provider="p", detail="Rate limit reached (requests)")
    assert isinstance(error, ThrottledError) and error.retry_after_s == 4.0
    assert str(error) == (
        "[p] POST https://api.example/v1/chat: HTTP 429 Too Many Requests: "
        "Rate limit reached (requests)"
    )
    echoed = "bad key sk-live-detail-5e1b " + "x" * 400
    answer = httpx.Response(401, content=b"{}", request=request)
    exc = httpx.HTTPStatusError("401", request=request, response=answer)
    error = as_provider_error(exc, provider="p", detail=echoed)
    assert isinstance(error, ClientHTTPError) and "sk-live" not in str(error)
    assert str(error).endswith("...") and len(str(error)) < 400  # cut as a body is
