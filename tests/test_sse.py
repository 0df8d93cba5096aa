"""``gpubench_sdk.SSEParser``/``sse_events``: the event stream format, checked against httpx-sse's
decoder (an independent implementation of the same WHATWG algorithm), and every event's arrival
time against the time a real server on loopback sent it."""

from __future__ import annotations

import asyncio
import itertools
import re
import time
import zlib

import pytest
from aiohttp import web
from conftest import LoopbackServer, module_server
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gpubench_sdk import SSEParser, make_client, sse_events

httpx_sse = pytest.importorskip("httpx_sse")


def _reference(text: str) -> list[tuple[str, str]]:
    """httpx-sse's reading of a whole stream, less the events it dispatches without a data
    line (an ``id`` alone, say), which the spec does not dispatch."""
    decoder = httpx_sse._decoders.SSEDecoder()
    out, had_data = [], False
    for line in re.split(r"\r\n|\r|\n", text)[:-1]:  # the text ends with a line end
        had_data |= line.partition(":")[0] == "data"
        sse = decoder.decode(line)
        if sse is not None and had_data:
            out.append((sse.event or "message", sse.data))
        had_data &= bool(line)
    return out


_text = st.text(st.characters(blacklist_characters="\r\n", codec="utf-8"), max_size=12)
_line = st.one_of(
    st.builds(lambda v: f"data:{v}", _text),
    st.builds(lambda v: f"data: {v}", _text),
    st.builds(lambda v: f"event: {v}", st.sampled_from(["output", "done", "error", ""])),
    st.builds(lambda v: f":{v}", _text),  # a comment
    st.builds(lambda v: f"id: {v}", st.integers(0, 99)),
    st.just("retry: 3000"),
)
_event = st.builds(
    lambda head, data, tail: [*head, f"data: {data}", *tail],
    st.lists(_line, max_size=3),
    _text,
    st.lists(_line, max_size=2),
)


@settings(max_examples=300, deadline=None)
@given(
    events=st.lists(_event, min_size=1, max_size=6),
    eol=st.sampled_from(["\n", "\r\n", "\r"]),
    cuts=st.lists(st.integers(0, 400), max_size=8),
)
# edge cases, checked every run (the suite is derandomized: tests/conftest.py)
@example(events=[["data: "]], eol="\r", cuts=[])  # an empty event, bare-CR line ends
@example(events=[["data: a"]], eol="\r\n", cuts=[8])  # cut between a CRLF's \r and \n
@example(events=[["data: a"]], eol="\r\n", cuts=[0, 400])  # cuts at both ends and past them
@example(events=[["event: ", ":", "id: 0", "data:"]], eol="\n", cuts=[1, 2, 3])  # empty fields
@example(events=[["data: é"]], eol="\n", cuts=[7])  # a cut inside a two-byte character
def test_events_match_httpx_sse_however_the_bytes_are_cut(
    events: list[list[str]], eol: str, cuts: list[int]
) -> None:
    text = "".join(eol.join(lines) + eol + eol for lines in events)
    raw = text.encode()
    parser, got = SSEParser(), []
    points = sorted({min(c, len(raw)) for c in cuts} | {0, len(raw)})
    for a, b in itertools.pairwise(points):
        got += [(name, data.decode()) for name, data in parser.feed_events(raw[a:b])]
    got += [(name, data.decode()) for name, data in parser.flush_events()]
    assert got == _reference(text)
    data_only, parser = [], SSEParser()
    for a, b in itertools.pairwise(points):
        data_only += [data.decode() for data in parser.feed(raw[a:b])]
    data_only += [data.decode() for _, data in parser.flush_events()]  # a held-back \r
    assert data_only == [data for _, data in got]


def test_named_multiline_and_commented_events() -> None:
    parser = SSEParser()
    stream = (
        b": keep-alive\n\n"
        b"event: output\ndata: a\ndata:b\n\n"
        b"id: 7\n\n"  # no data: not an event
        b"data\n\n"  # a field name alone is an empty value: an empty event
        b"event: done\ndata: {}\n\n"
    )
    assert parser.feed_events(stream) == [("output", b"a\nb"), ("message", b""), ("done", b"{}")]
    assert not parser.pending and parser.flush_events() == []
    assert parser.feed_events(b"data: cut") == [] and parser.pending
    assert parser.flush_events() == [("message", b"cut")]  # given at the end, as before


# ----- over a real socket: arrival times against send times ----------------------------------

SENT: list[int] = []  # perf_counter_ns just before each event was written (same clock, process)


def _routes() -> web.RouteTableDef:
    routes = web.RouteTableDef()

    @routes.get("/events")
    async def events(request: web.Request) -> web.StreamResponse:
        gzip = request.query.get("gzip") == "1"
        headers = {"Content-Type": "text/event-stream"}
        if gzip:
            headers["Content-Encoding"] = "gzip"
        response = web.StreamResponse(headers=headers)
        await response.prepare(request)
        packer = zlib.compressobj(wbits=31)  # gzip framing, flushed per event
        SENT.clear()
        for i in range(10):
            body = f"event: output\ndata: {i}\n\n".encode()
            if i == 5:  # two events in one write: they arrive in one read
                body += b"data: 5b\n\n"
            if gzip:
                body = packer.compress(body) + packer.flush(zlib.Z_SYNC_FLUSH)
            SENT.append(time.perf_counter_ns())
            await response.write(body)
            await asyncio.sleep(0.03)
        tail = b"event: done\ndata: end"  # the stream closes without the blank line
        await response.write(packer.compress(tail) + packer.flush() if gzip else tail)
        await response.write_eof()
        return response

    return routes


server = module_server(_routes)


@pytest.mark.anyio
@pytest.mark.parametrize("gzip", [False, True])
async def test_each_event_is_timed_by_the_read_that_brought_it(
    server: LoopbackServer, gzip: bool
) -> None:
    async with make_client() as client:
        url = f"{server.url}/events?gzip={int(gzip)}"
        async with client.stream("GET", url) as response:
            got = [event async for event in sse_events(response)]
    names_data = [(name, data) for name, data, _ in got]
    assert names_data == [
        *[("output", str(i)) for i in range(6)],
        ("message", "5b"),
        *[("output", str(i)) for i in range(6, 10)],
        ("done", "end"),
    ]
    arrived = [at for _, _, at in got]
    assert arrived[5] == arrived[6]  # one read, one arrival time
    timed = [a for i, a in enumerate(arrived[:-1]) if i != 6]
    lags_ms = [(a - s) / 1e6 for a, s in zip(timed, SENT, strict=True)]
    assert all(lag > 0 for lag in lags_ms), lags_ms  # never before the server sent it
    assert sorted(lags_ms)[len(lags_ms) // 2] < 20, lags_ms  # read as it came, not batched


@pytest.mark.anyio
async def test_a_response_read_whole_gives_the_same_events(server: LoopbackServer) -> None:
    async with make_client() as client:
        response = await client.get(f"{server.url}/events?gzip=1")  # not streamed: read
        got = [(name, data) async for name, data, _ in sse_events(response)]
    assert got[0] == ("output", "0") and got[6] == ("message", "5b") and len(got) == 12
