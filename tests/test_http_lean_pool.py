"""The lean plain-HTTP path of ``PreparedCall`` (``_transport/_lean.py``) against a server that
writes the exact bytes each test needs, on real loopback sockets: what goes out, how each body
framing is read, which connections are kept, and every way an answer can fail."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Iterator

import httpx
import pytest
from conftest import RawServer, Reader, Script, Writer

from gpubench_sdk import PreparedCall, make_client
from gpubench_sdk._transport import _lean
from gpubench_sdk._transport._client import record_retries

pytestmark = pytest.mark.anyio


def _ok(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


def _serving(answer: Callable[[bytes, bytes], bytes], *, close: bool = False) -> Script:
    """Answer every request of a connection with ``answer(head, body)``; ``close``: hang up
    after the first answer."""

    async def script(reader: Reader, writer: Writer, srv: RawServer) -> None:
        while True:
            head, body = await srv.read_request(reader)
            writer.write(answer(head, body))
            await writer.drain()
            if close:
                return

    return script


@pytest.fixture
def echo() -> Iterator[RawServer]:
    with RawServer(_serving(lambda head, body: _ok(body, b"X-Request-Id: r1\r\n"))) as srv:
        yield srv


async def test_the_request_goes_out_as_httpx_builds_it(echo: RawServer) -> None:
    headers = {"Content-Type": "application/json", "Authorization": "Bearer sk-test"}
    async with make_client(headers={"X-Team": "a"}) as client:
        post = PreparedCall(client, "POST", f"{echo.url}/v1/run?x=1&y=%20", headers=headers)
        answer = await post.send(b'{"a": 1}')
        empty = await post.send()
        got = await PreparedCall(client, "GET", f"{echo.url}/health").send()
        built = client.build_request("POST", f"{echo.url}/v1/run?x=1&y=%20", headers=headers)
    assert answer.status_code == 200 and answer.content == b'{"a": 1}'
    assert answer.headers["x-request-id"] == "r1" and answer.first_byte_ns is not None
    assert empty.content == b"" and got.status_code == 200
    (head, body), (empty_head, _), (get_head, _) = echo.requests
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /v1/run?x=1&y=%20 HTTP/1.1" and body == b'{"a": 1}'
    sent = [(k.lower(), v) for k, v in (line.split(": ", 1) for line in lines[1:] if line)]
    expected = [(k, v) for k, v in built.headers.multi_items() if k != "content-length"]
    assert sent[:-1] == expected and sent[-1] == ("content-length", "8")  # httpx's, in order
    assert b"Content-Length: 0\r\n" in empty_head  # a POST without a body says so
    assert b"content-length" not in get_head.lower()  # a GET does not
    assert len(echo.peers) == 1  # one keep-alive connection for all three


async def test_each_body_framing_is_read_whole() -> None:
    body = b"".join(b"data: %d\n\n" % i for i in range(200))

    async def script(reader: Reader, writer: Writer, srv: RawServer) -> None:
        while True:
            head, _ = await srv.read_request(reader)
            path = head.split(b" ")[1]
            if path == b"/chunked":  # chunk sizes and data split across writes
                wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                for i in range(0, len(body), 700):
                    part = body[i : i + 700]
                    wire += b"%x\r\n%s\r\n" % (len(part), part)
                wire += b"0\r\n\r\n"
                for i in range(0, len(wire), 97):
                    writer.write(wire[i : i + 97])
                    await writer.drain()
                    await asyncio.sleep(0)
            elif path == b"/until-close":  # neither length nor chunks: it ends with the socket
                writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + body)
                await writer.drain()
                return
            else:
                writer.write(_ok(body))
                await writer.drain()

    with RawServer(script) as srv:
        async with make_client() as client:
            read = {}
            for path in ("/length", "/chunked", "/until-close"):
                read[path] = (await PreparedCall(client, "GET", srv.url + path).send()).content
                async with PreparedCall(client, "GET", srv.url + path).stream() as streamed:
                    assert (await streamed.aread()) == body, path
    assert read == {path: body for path in read}
    # one connection for both length and chunked answers; then one per answer ending at close
    assert len(srv.peers) == 2


async def test_a_connection_is_kept_only_when_the_answer_allows_it() -> None:
    answers = {
        b"/keep": _ok(b"k"),
        b"/close": b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\nc",
        b"/http10": b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nh",
    }

    def answer(head: bytes, body: bytes) -> bytes:
        return answers[head.split(b" ")[1]]

    with RawServer(_serving(answer)) as srv:
        async with make_client() as client:
            for path in ("/keep", "/keep", "/close", "/keep", "/http10", "/keep", "/keep"):
                assert (await PreparedCall(client, "GET", srv.url + path).send()).status_code == 200
    # a new connection after each answer that closes it (Connection: close, HTTP/1.0)
    assert len(srv.peers) == 3


async def test_an_informational_answer_is_skipped() -> None:
    early = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
    with RawServer(_serving(lambda head, body: early + _ok(b"ok"))) as srv:
        async with make_client() as client:
            call = PreparedCall(client, "GET", f"{srv.url}/x")
            answers = [await call.send() for _ in range(2)]
    assert [(a.status_code, a.content) for a in answers] == [(200, b"ok")] * 2
    assert "link" not in answers[0].headers and len(srv.peers) == 1


async def test_an_idle_connection_the_server_closed_is_not_used() -> None:
    with RawServer(_serving(lambda head, body: _ok(b"x"), close=True)) as srv:
        async with make_client() as client:
            call = PreparedCall(client, "GET", f"{srv.url}/x")
            resends = []
            for _ in range(3):
                seen = record_retries()
                assert (await call.send()).content == b"x"
                resends.append(len(seen))
                await asyncio.sleep(0.05)  # the server's close arrives while the connection idles
    assert len(srv.peers) == 3 and resends == [0, 0, 0]  # known dead: never written to


async def test_an_idle_connection_older_than_the_keepalive_is_closed(
    echo: RawServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_lean, "_KEEPALIVE_S", 0.05)
    async with make_client() as client:
        call = PreparedCall(client, "POST", f"{echo.url}/x")
        await call.send(b"1")
        await call.send(b"2")
        await asyncio.sleep(0.1)
        await call.send(b"3")
    assert len(echo.peers) == 2


@pytest.mark.parametrize(
    "wire",
    [
        b"HELLO\r\n\r\n",  # not HTTP
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort",  # cut short
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhi!!!\r\n",  # no last chunk
        b"",  # hung up before any answer
        b"HTTP/1.1 200 OK\r\nContent-Le",  # mid-headers
    ],
)
async def test_a_broken_answer_is_a_protocol_error(wire: bytes) -> None:
    async def script(reader: Reader, writer: Writer, srv: RawServer) -> None:
        await srv.read_request(reader)
        writer.write(wire)
        await writer.drain()

    with RawServer(script) as srv:
        async with make_client() as client:
            call = PreparedCall(client, "POST", f"{srv.url}/x")
            with pytest.raises(httpx.RemoteProtocolError) as sent:
                await call.send(b"{}")
            with pytest.raises(httpx.RemoteProtocolError):
                async with call.stream(b"{}") as answer:
                    await answer.aread()
    assert sent.value.request.url == call.url  # names the call, as httpx's errors do


async def test_the_read_timeout_counts_from_the_last_byte() -> None:
    async def script(reader: Reader, writer: Writer, srv: RawServer) -> None:
        while True:
            head, _ = await srv.read_request(reader)
            path = head.split(b" ")[1]
            if path == b"/silent":
                await asyncio.sleep(1)
                continue
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            # /slow: a byte every 0.1 s, 0.5 s in all (longer than the timeout, never silent
            # that long); /stall: two bytes, then 0.6 s of silence
            gaps = [0.1] * 5 if path == b"/slow" else [0.01, 0.01, 0.6, 0.01, 0.01]
            for gap in gaps:
                await writer.drain()
                await asyncio.sleep(gap)
                writer.write(b"1\r\nx\r\n")
            writer.write(b"0\r\n\r\n")
            await writer.drain()

    with RawServer(script) as srv:
        async with make_client(timeout_s=0.3) as client:
            slow = await PreparedCall(client, "GET", f"{srv.url}/slow").send()
            with pytest.raises(httpx.ReadTimeout):  # silent 0.6 s mid-body
                await PreparedCall(client, "GET", f"{srv.url}/stall").send()
            with pytest.raises(httpx.ReadTimeout):  # no answer at all
                async with PreparedCall(client, "GET", f"{srv.url}/silent").stream():
                    pass
            after = await PreparedCall(client, "GET", f"{srv.url}/slow").send()
    assert slow.content == after.content == b"xxxxx"
    assert len(srv.peers) == 3  # a timed-out connection is closed, never reused


async def test_a_slow_reader_pauses_the_socket_and_loses_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = bytes(range(256)) * (8 << 12)  # 8 MiB
    paused = []
    pause = _lean.LeanConnection.on_body

    def noting(self: _lean.LeanConnection, chunk: bytes) -> None:
        pause(self, chunk)
        paused.append(self._paused)

    monkeypatch.setattr(_lean.LeanConnection, "on_body", noting)
    with RawServer(_serving(lambda head, _: _ok(body))) as srv:
        async with make_client() as client:
            digest, most = hashlib.sha256(), 0
            async with PreparedCall(client, "GET", f"{srv.url}/big").stream() as answer:
                async for chunk in answer.aiter_raw():
                    digest.update(chunk)
                    most = max(most, len(chunk))
                    await asyncio.sleep(0.002)
            again = await PreparedCall(client, "GET", f"{srv.url}/big").send()
    assert digest.digest() == hashlib.sha256(body).digest() and again.content == body
    assert any(paused) and most < 4 * _lean._HIGH_WATER  # reading paused, the buffer bounded
    assert len(srv.peers) == 1  # read whole: the connection went back and served the next


async def test_a_cancelled_call_leaves_no_connection_behind() -> None:
    async def script(reader: Reader, writer: Writer, srv: RawServer) -> None:
        while True:
            head, _ = await srv.read_request(reader)
            if head.split(b" ")[1] == b"/slow":
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\na")
                await writer.drain()
                await asyncio.sleep(1)
                writer.write(b"b")
            else:
                writer.write(_ok(b"ok"))
            await writer.drain()

    with RawServer(script) as srv:
        async with make_client() as client:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.2):
                    await PreparedCall(client, "GET", f"{srv.url}/slow").send()
            fast = await PreparedCall(client, "GET", f"{srv.url}/fast").send()
    assert fast.content == b"ok" and len(srv.peers) == 2  # the half-read one was closed


async def test_bytes_nobody_asked_for_retire_an_idle_connection() -> None:
    async def script(reader: Reader, writer: Writer, srv: RawServer) -> None:
        while True:
            await srv.read_request(reader)
            writer.write(_ok(b"ok") + b"HTTP/1.1 200 OK\r\n")  # a stray second answer
            await writer.drain()

    with RawServer(script) as srv:
        async with make_client() as client:
            call = PreparedCall(client, "GET", f"{srv.url}/x")
            for _ in range(3):
                assert (await call.send()).content == b"ok"
                await asyncio.sleep(0.02)
    assert len(srv.peers) == 3


async def test_a_refused_connection_is_a_connect_error() -> None:
    async with make_client() as client:
        with pytest.raises(httpx.ConnectError, match=r"Cannot connect to host 127\.0\.0\.1:9 "):
            await PreparedCall(client, "GET", "http://127.0.0.1:9/x").send()


async def test_https_and_head_stay_on_aiohttp(echo: RawServer) -> None:
    async with make_client() as client:
        assert PreparedCall(client, "GET", f"{echo.url}/x")._wire is not None
        assert PreparedCall(client, "HEAD", f"{echo.url}/x")._wire is None
        assert PreparedCall(client, "GET", "https://example.invalid/x")._wire is None
