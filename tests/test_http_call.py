"""``PreparedCall``, the lean request path: what it sends and answers matches an httpx call of
the same request, against real servers on loopback (an aiohttp app, and the raw keep-alive
server of ``test_http``); errors, timeouts and Retry-After map to the same ``ProviderError``
kinds; secrets stay out of reprs and errors; spans are the transport's."""

from __future__ import annotations

import asyncio
import gzip
import time
from collections.abc import Mapping
from pathlib import Path

import httpx
import pytest
from aiohttp import web
from conftest import LoopbackServer, module_server, stream_parts
from opentelemetry.sdk.trace import ReadableSpan
from test_http import FlakyKeepAlive

from gpubench_sdk import (
    Burst,
    CallResponse,
    ClientHTTPError,
    PreparedCall,
    Provider,
    ProviderOptions,
    Request,
    RequestTimeoutError,
    Result,
    ServerHTTPError,
    Store,
    ThrottledError,
    TransportError,
    Workload,
    arrived_ns,
    as_provider_error,
    first_byte_ns,
    make_client,
    remember,
    run,
    telemetry,
)
from gpubench_sdk._base._types import Invocation
from gpubench_sdk._transport._client import record_retries

pytestmark = pytest.mark.anyio

SECRET = "sk-prepared-call-secret-0123456789"


def _routes() -> web.RouteTableDef:
    routes = web.RouteTableDef()

    @routes.route("*", "/echo")
    async def echo(request: web.Request) -> web.Response:
        seen = {k.lower(): v for k, v in request.headers.items()}
        return web.json_response(
            {"method": request.method, "body": await request.text(), "headers": seen},
            headers={"X-Request-Id": "rid-1"},
        )

    @routes.get("/slow")
    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(float(request.query.get("s", "1")))
        return web.Response(text="late")

    @routes.route("*", "/status/{code}")
    async def status(request: web.Request) -> web.Response:
        code = int(request.match_info["code"])
        headers = {"Retry-After": "7"} if code == 429 else {}
        return web.json_response({"error": f"code {code}"}, status=code, headers=headers)

    @routes.get("/zipped")
    async def zipped(request: web.Request) -> web.Response:
        body = gzip.compress(b'{"zipped": true}')
        return web.Response(body=body, headers={"Content-Encoding": "gzip"})

    @routes.post("/see-other")
    async def see_other(request: web.Request) -> web.Response:
        raise web.HTTPSeeOther("/echo")

    @routes.get("/latin")
    async def latin(request: web.Request) -> web.Response:
        return web.Response(body="café".encode("latin-1"), content_type="text/plain",
                            charset="latin-1")  # fmt: skip

    @routes.get("/stalls")
    async def stalls(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Length": "6"})
        await response.prepare(request)
        await response.write(b"abc")
        await asyncio.sleep(2)  # the rest never comes in time
        return response

    @routes.post("/events")
    async def events(request: web.Request) -> web.StreamResponse:
        got = await request.read()
        parts = [b"data: " + got + b"\n\n", b"data: 1\n\n", b"data: 2\n\n"]
        headers = {"Content-Type": "text/event-stream", "X-Request-Id": "rid-s"}
        return await stream_parts(request, parts, 0.02, headers, chunked=True)

    @routes.get("/chunked")
    async def chunked(request: web.Request) -> web.StreamResponse:
        parts = (b'{"parts": ', b"[1, 2, ", b"3]}")
        return await stream_parts(request, parts, 0.01, chunked=True)

    return routes


server = module_server(_routes)


async def test_sends_what_httpx_sends_and_answers_the_same(server: LoopbackServer) -> None:
    headers = {"X-Custom": "1", "Content-Type": "application/json"}
    async with make_client(headers={"X-Default": "d"}) as client:
        call = PreparedCall(client, "post", f"{server.url}/echo", headers=headers)
        before = time.perf_counter_ns()
        lean = await call.send(b'{"a": 1}')
        after = time.perf_counter_ns()
        again = await call.send(b"[]")  # the same call, another body
        plain = await client.post(f"{server.url}/echo", content=b'{"a": 1}', headers=headers)
    assert isinstance(lean, CallResponse) and lean.status_code == 200
    assert lean.json() == plain.json()  # method, body and every header the server saw
    assert lean.json()["headers"]["x-default"] == "d" and lean.json()["body"] == '{"a": 1}'
    assert again.json()["body"] == "[]" and again.json()["headers"]["content-length"] == "2"
    assert lean.headers.get("x-request-id") == "rid-1"  # case-insensitive, as httpx's
    assert lean.text == plain.text and lean.reason_phrase == "OK"
    assert lean.first_byte_ns is not None and before < lean.first_byte_ns < after
    assert first_byte_ns(lean) == lean.first_byte_ns  # the public helper reads either kind
    assert lean.raise_for_status() is lean
    as_httpx = lean.as_httpx()
    assert as_httpx.json() == lean.json() and as_httpx.request.url == call.url


async def test_base_url_get_and_text_charset(server: LoopbackServer) -> None:
    async with make_client(base_url=server.url) as client:
        got = await PreparedCall(client, "GET", "/echo").send()
        latin = await PreparedCall(client, "GET", "/latin").send()
    assert got.json()["method"] == "GET" and got.json()["body"] == ""
    assert "content-length" not in got.json()["headers"]  # no body, no framing header
    assert latin.text == "café"  # decoded as httpx decodes: the declared charset


async def test_status_errors_map_as_an_httpx_calls_do(server: LoopbackServer) -> None:
    async with make_client() as client:
        answers = {
            code: await PreparedCall(client, "POST", f"{server.url}/status/{code}").send(b"{}")
            for code in (404, 429, 503)
        }
    errors = {}
    for code, answer in answers.items():
        with pytest.raises(httpx.HTTPStatusError) as caught:
            answer.raise_for_status()
        errors[code] = as_provider_error(caught.value, provider="p")
    assert isinstance(errors[404], ClientHTTPError) and errors[404].status_code == 404
    assert isinstance(errors[503], ServerHTTPError)
    throttled = errors[429]
    assert isinstance(throttled, ThrottledError) and throttled.retry_after_s == 7.0
    assert f"POST {server.url}/status/429: HTTP 429" in str(throttled)
    assert "code 429" in str(throttled)  # the server's body, as for an httpx response


async def test_transport_errors_and_timeouts_are_httpxs(server: LoopbackServer) -> None:
    async with make_client(timeout_s=0.2) as client:
        slow = PreparedCall(client, "GET", f"{server.url}/slow?s=2")
        started = time.perf_counter()
        with pytest.raises(httpx.ReadTimeout) as timeout:
            await slow.send()
        assert time.perf_counter() - started < 1.9  # the client's read timeout, not the server
        with pytest.raises(httpx.ConnectError) as refused:
            await PreparedCall(client, "GET", "http://127.0.0.1:9/x").send()
    timed_out = as_provider_error(timeout.value, provider="p")
    assert isinstance(timed_out, RequestTimeoutError)
    assert f"GET {server.url}/slow" in str(timed_out) and "s=2" not in str(timed_out)
    assert isinstance(as_provider_error(refused.value, provider="p"), TransportError)


async def test_a_body_that_stalls_times_out_and_a_chunked_one_is_read_whole(
    server: LoopbackServer,
) -> None:
    async with make_client(timeout_s=0.3) as client:
        first_byte_then_nothing = PreparedCall(client, "GET", f"{server.url}/stalls")
        with pytest.raises(httpx.ReadTimeout) as caught:
            await first_byte_then_nothing.send()
        chunked = await PreparedCall(client, "GET", f"{server.url}/chunked").send()
    assert isinstance(as_provider_error(caught.value, provider="p"), RequestTimeoutError)
    assert chunked.json() == {"parts": [1, 2, 3]} and "content-length" not in chunked.headers


async def test_gzip_and_redirects_go_through_httpx(server: LoopbackServer) -> None:
    async with make_client() as client:
        zipped = await PreparedCall(client, "GET", f"{server.url}/zipped").send()
        moved = await PreparedCall(client, "POST", f"{server.url}/see-other").send(b"{}")
    assert zipped.json() == {"zipped": True}
    assert moved.status_code == 200 and moved.json()["method"] == "GET"  # 303: GET the result
    assert moved.method == "GET" and moved.url == f"{server.url}/echo"
    async with make_client(follow_redirects=False) as client:
        kept = await PreparedCall(client, "POST", f"{server.url}/see-other").send(b"{}")
    assert kept.status_code == 303 and kept.headers["location"] == "/echo"


async def test_any_other_client_is_called_through_httpx(server: LoopbackServer) -> None:
    seen: list[str] = []

    async def hook(request: httpx.Request) -> None:
        seen.append(str(request.url))

    async with httpx.AsyncClient(auth=("user", "pw")) as plain:
        answer = await PreparedCall(plain, "GET", f"{server.url}/echo").send()
    assert answer.json()["headers"]["authorization"].startswith("Basic ")  # httpx's auth flow
    assert answer.first_byte_ns is None  # a plain client does not measure it
    async with make_client() as client:
        call = PreparedCall(client, "GET", f"{server.url}/echo")
        client.event_hooks["request"].append(hook)  # added after preparing: still honoured
        await call.send()
    assert seen == [f"{server.url}/echo"]
    async with make_client() as client:
        call = PreparedCall(client, "GET", f"{server.url}/echo")
        assert "authorization" not in (await call.send()).json()["headers"]
        client.auth = ("late", "pw")  # so is auth set after preparing
        late = await call.send()
    assert late.json()["headers"]["authorization"].startswith("Basic ")


async def test_secrets_stay_out_of_reprs_and_errors(server: LoopbackServer) -> None:
    remember(SECRET)
    async with make_client(timeout_s=0.2) as client:
        call = PreparedCall(
            client, "GET", f"{server.url}/slow?s=2&token={SECRET}",
            headers={"Authorization": f"Bearer {SECRET}"},
        )  # fmt: skip
        with pytest.raises(httpx.ReadTimeout) as caught:
            await call.send()
        ok = await PreparedCall(client, "GET", f"{server.url}/echo").send()
    error = as_provider_error(caught.value, provider="p")
    for text in (repr(call), str(error), repr(error), repr(ok)):
        assert SECRET not in text


async def test_a_request_that_never_ran_is_resent_once_and_recorded() -> None:
    with FlakyKeepAlive() as server:
        async with make_client() as client:
            call = PreparedCall(client, "POST", f"{server.url}/predict")
            statuses, resends = [], []
            for i in range(6):
                seen = record_retries()
                statuses.append((await call.send(b'{"i": %d}' % i)).status_code)
                resends.append(len(seen))
    assert statuses == server.handled == [200, 500] * 3  # each reached the model once
    assert server.dropped == 2 and resends == [0, 0, 1, 0, 1, 0]


async def test_a_streamed_call_is_what_client_stream_gives(server: LoopbackServer) -> None:
    headers = {"Accept": "text/event-stream"}
    async with make_client() as client:
        call = PreparedCall(client, "POST", f"{server.url}/events", headers=headers)
        before = time.perf_counter_ns()
        async with call.stream(b"hello") as lean:
            chunks, times = [], []
            async for chunk in lean.aiter_raw():
                chunks.append(chunk)
                times.append(arrived_ns(lean))
            read_all = time.perf_counter_ns()
        pool = client._transport._lean  # type: ignore[attr-defined]  # plain HTTP: the lean pool
        idle = sum(len(kept) for kept in pool._idle.values())  # the connection went back
        async with client.stream(
            "POST", f"{server.url}/events", content=b"hello", headers=headers
        ) as plain:
            expected = await plain.aread()
    assert lean.is_closed and lean.elapsed.total_seconds() > 0.04  # the block's end closed it
    assert b"".join(chunks) == expected == b"data: hello\n\ndata: 1\n\ndata: 2\n\n"
    assert len(chunks) == 3  # one socket read per event, 20 ms apart
    assert lean.status_code == plain.status_code == 200
    assert lean.headers["x-request-id"] == "rid-s" and lean.request.url == call.url
    assert before < first_byte_ns(lean) <= times[0] < times[1] < times[2] < read_all  # type: ignore[operator]
    assert times[2] - times[0] > 30_000_000  # each chunk timed by its read, not by the block
    assert "content-length" not in {k.lower() for k in lean.headers}
    assert idle == 1


async def test_a_streamed_calls_errors_are_httpxs(server: LoopbackServer) -> None:
    async with make_client(timeout_s=0.3) as client:
        async with PreparedCall(client, "POST", f"{server.url}/status/429").stream(b"{}") as busy:
            assert busy.status_code == 429
            await busy.aread()  # the body, for the error to show
            with pytest.raises(httpx.HTTPStatusError) as status:
                busy.raise_for_status()
        stalls = PreparedCall(client, "GET", f"{server.url}/stalls")
        with pytest.raises(httpx.ReadTimeout) as timeout:
            async with stalls.stream() as answer:
                await answer.aread()
        with pytest.raises(httpx.ConnectError) as refused:
            async with PreparedCall(client, "GET", "http://127.0.0.1:9/x").stream():
                pass
        async with PreparedCall(client, "POST", f"{server.url}/see-other").stream(b"{}") as moved:
            await moved.aread()  # 303: httpx's loop GETs the result
    throttled = as_provider_error(status.value, provider="p")
    assert isinstance(throttled, ThrottledError) and throttled.retry_after_s == 7.0
    assert f"POST {server.url}/status/429: HTTP 429" in str(throttled) and "code 429" in str(
        throttled
    )
    assert isinstance(as_provider_error(timeout.value, provider="p"), RequestTimeoutError)
    assert refused.value.request.url == "http://127.0.0.1:9/x"  # named, as httpx names it
    assert isinstance(as_provider_error(refused.value, provider="p"), TransportError)
    assert moved.status_code == 200 and moved.json()["method"] == "GET"


async def test_a_streamed_call_on_any_other_client_is_client_stream(
    server: LoopbackServer,
) -> None:
    remember(SECRET)
    async with httpx.AsyncClient(auth=("user", SECRET)) as plain:
        call = PreparedCall(plain, "POST", f"{server.url}/events")
        async with call.stream(b"x") as answer:
            body = await answer.aread()
    assert body.startswith(b"data: x\n\n") and first_byte_ns(answer) is None
    assert SECRET not in repr(call) and SECRET not in repr(answer)


class _Prepared(Provider):
    """A provider on the lean path, as the built-in HTTP plugin is."""

    name = "prepared"

    class Options(ProviderOptions):
        url: str

    async def open(self) -> None:
        self._call = PreparedCall(self.client, "POST", self.options.url)  # type: ignore[attr-defined]

    async def invoke(self, request: Request) -> Result:
        response = (await self._call.send(b"{}")).raise_for_status()
        return Result(
            output=response.json(),
            http_status=response.status_code,
            first_byte_ns=response.first_byte_ns,
        )


class _PreparedStream(_Prepared):
    """A streaming provider on the lean path, as the OpenAI plugin is."""

    name = "prepared-stream"

    async def invoke(self, request: Request) -> Result:
        times: list[int] = []
        async with self._call.stream(b"go") as response:
            response.raise_for_status()
            async for _ in response.aiter_raw():
                times.append(arrived_ns(response))
        return Result(
            output={}, http_status=response.status_code, first_byte_ns=first_byte_ns(response),
            token_times_ns=times,
        )  # fmt: skip


class _Any(Workload):
    name = "any"

    def request(self, seq: int) -> Request:
        return Request(seq=seq, payload={})

    def read(self, output: object) -> tuple[int | None, int | None]:
        return (None, None)


async def _traced_run(
    targets: Mapping[str, Provider], shape: Burst, tmp_path: Path
) -> tuple[list[Invocation], list[ReadableSpan]]:
    """Run ``targets`` traced in memory: what was stored, and the finished HTTP call spans."""
    setup = telemetry.configure(in_memory=True, set_global=False)
    result = await run(
        targets, _Any(), [shape], store=tmp_path / "r.sqlite", instruments=setup.instruments()
    )
    with Store(tmp_path / "r.sqlite") as store:
        invs = list(store.invocations(result.run_id))
    assert setup.spans is not None
    return invs, [s for s in setup.spans.get_finished_spans() if s.name == "POST"]


async def test_the_runner_stores_and_traces_lean_calls(
    server: LoopbackServer, tmp_path: Path
) -> None:
    targets = {
        "ok": _Prepared(url=f"{server.url}/echo"),
        "busy": _Prepared(url=f"{server.url}/status/429"),
    }
    invs, calls = await _traced_run(targets, Burst(total=8, concurrency=4), tmp_path)
    ok = [i for i in invs if i.target == "ok"]
    busy = [i for i in invs if i.target == "busy"]
    assert len(ok) == len(busy) == 8
    for inv in ok:
        assert inv.outcome.value == "ok" and inv.http_status == 200
        assert inv.first_byte_ns is not None and inv.start_ns < inv.first_byte_ns <= inv.end_ns
    assert all(i.outcome.value == "throttled" and i.retry_after_s == 7.0 for i in busy)
    assert len(calls) == 16 and all(s.parent is not None for s in calls)
    statuses = sorted(int(str((s.attributes or {})["http.response.status_code"])) for s in calls)
    assert statuses == [200] * 8 + [429] * 8
    attrs = dict(calls[0].attributes or {})
    assert attrs["server.address"] == "127.0.0.1" and attrs["http.request.method"] == "POST"
    assert str(attrs["url.full"]).startswith(server.url)


async def test_the_runner_stores_and_traces_lean_streams(
    server: LoopbackServer, tmp_path: Path
) -> None:
    targets = {"s": _PreparedStream(url=f"{server.url}/events")}
    invs, calls = await _traced_run(targets, Burst(total=6, concurrency=3), tmp_path)
    assert len(invs) == 6
    for inv in invs:
        assert inv.outcome.value == "ok" and inv.first_byte_ns is not None
        assert inv.token_times_ns is not None and len(inv.token_times_ns) == 3
        assert inv.start_ns < inv.first_byte_ns <= inv.token_times_ns[0] <= inv.end_ns
    assert len(calls) == 6 and all(s.parent is not None for s in calls)
    for span in calls:  # each ended when its stream closed, after the last event (40 ms on)
        assert span.end_time is not None and span.start_time is not None
        assert span.end_time - span.start_time > 35_000_000
        assert (span.attributes or {})["http.response.status_code"] == 200
