"""How much of a short stream's client CPU is aiohttp's, against the least HTTP/1.1 client.

Run by hand (not a test): ``python bench/http_floor_bench.py [--pairs 3] [--total 6000]``.

Issue 32's throughput target (gpubench at 0.9x the raw aiohttp reader's requests/s per core)
asks what a cheaper HTTP layer would buy. Both clients here do what the raw reader of
``client_tail_bench.py`` does (16-token SSE streams at 64 concurrent, closed loop, split events,
``json.loads`` each) on the same server (``client_tail_bench.py --serve``, pinned to CPU 0, each
client a fresh process on CPU 1, interleaved):

* ``aiohttp``: ``ClientSession.post`` and ``content.iter_any``;
* ``floor``: a keep-alive pool of ``asyncio.Protocol`` connections parsed by ``httptools``, the
  request's bytes built once, no timeouts, TLS, proxies, redirects or resends: less than any
  real client can do, so its CPU is a floor, not a design.

The difference is the most a replacement of aiohttp could save gpubench per request.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import subprocess
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

BENCH = Path(__file__).parent
BODY = {
    "model": "bench-llm",
    "stream": True,
    "max_tokens": 16,
    "stream_options": {"include_usage": True},
    "messages": [{"role": "user", "content": "one two three four five six seven eight"}],
}
CONCURRENCY = 64


def _events(buf: bytes, seen: list[int]) -> bytes:
    """Parse the complete events in ``buf`` as the raw reader does, counting them in
    ``seen[0]``; the rest."""
    while b"\n\n" in buf:
        event, buf = buf.split(b"\n\n", 1)
        if event.startswith(b"data: ") and event[6:] != b"[DONE]":
            json.loads(event[6:])
            seen[0] += 1
    return buf


class _Connection(asyncio.Protocol):
    """One keep-alive connection; its parser's callbacks fill ``chunks`` and wake the reader."""

    def __init__(self) -> None:
        import httptools

        self.parser = httptools.HttpResponseParser(self)
        self.transport: Any = None
        self.chunks: deque[bytes] = deque()
        self.wake: asyncio.Future[None] | None = None
        self.headers: asyncio.Future[None] | None = None
        self.complete = False
        self.lost = False
        self.keep_alive = False

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_headers_complete(self) -> None:
        self.keep_alive = self.parser.should_keep_alive()  # read here: reset once the body ends
        if self.headers is not None:
            self.headers.set_result(None)

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)
        self._wake()

    def on_message_complete(self) -> None:
        self.complete = True
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self.complete = self.lost = True
        self._wake()

    def _wake(self) -> None:
        if self.wake is not None and not self.wake.done():
            self.wake.set_result(None)


async def _floor(url: str, total: int, seen: list[int]) -> int:
    host, port = url.split("//")[1].split("/")[0].split(":")
    body = json.dumps(BODY).encode()
    request = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    loop = asyncio.get_running_loop()
    idle: list[_Connection] = []
    left = itertools.count()

    async def one() -> None:
        if idle:
            conn = idle.pop()
        else:
            _, conn = await loop.create_connection(_Connection, host, int(port))
        conn.complete, conn.headers = False, loop.create_future()
        conn.transport.write(request)
        await conn.headers
        if conn.parser.get_status_code() != 200:
            raise RuntimeError(f"HTTP {conn.parser.get_status_code()}")
        buf = b""
        while True:
            while conn.chunks:
                buf = _events(buf + conn.chunks.popleft(), seen)
            if conn.complete:
                break
            conn.wake = loop.create_future()
            await conn.wake
        if not conn.lost and conn.keep_alive:
            idle.append(conn)

    async def slot() -> None:
        while next(left) < total:
            await one()

    await asyncio.gather(*(slot() for _ in range(CONCURRENCY)))
    return total


async def _aiohttp(url: str, total: int, seen: list[int]) -> int:
    import aiohttp

    left = itertools.count()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def one() -> None:
            async with session.post(f"{url}/chat/completions", json=BODY) as resp:
                resp.raise_for_status()
                buf = b""
                async for chunk in resp.content.iter_any():
                    buf = _events(buf + chunk, seen)

        async def slot() -> None:
            while next(left) < total:
                await one()

        await asyncio.gather(*(slot() for _ in range(CONCURRENCY)))
    return total


def _client(kind: str, url: str, total: int) -> None:
    import uvloop

    seen = [0]
    cpu, began = time.process_time(), time.perf_counter()
    done = uvloop.run((_floor if kind == "floor" else _aiohttp)(url, total, seen))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - began
    # every answer read whole: 16 tokens, the finish chunk and the usage chunk
    assert seen[0] == done * 18, f"{kind}: {seen[0]} events for {done} answers"
    print(json.dumps({"rps": done / wall, "cpu_us": cpu / done * 1e6}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--total", type=int, default=6000, help="requests a client run")
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.client:
        _client(ns.client, ns.url, ns.total)
        return
    server = subprocess.Popen(
        ["taskset", "-c", "0", sys.executable, str(BENCH / "client_tail_bench.py"), "--serve",
         "--ttft-ms", "0", "--itl-ms", "0"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    runs: dict[str, list[dict[str, float]]] = {"aiohttp": [], "floor": []}
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        for pair in range(ns.pairs):
            for kind in ("aiohttp", "floor") if pair % 2 == 0 else ("floor", "aiohttp"):
                cmd = ["taskset", "-c", "1", sys.executable, __file__, "--client", kind,
                       "--url", url, "--total", str(ns.total)]  # fmt: skip
                out = subprocess.run(cmd, capture_output=True, text=True, check=True)
                runs[kind].append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(kind, runs[kind][-1], flush=True)
    finally:
        server.terminate()
        server.wait(10)
    cpu = {k: statistics.median(r["cpu_us"] for r in v) for k, v in runs.items()}
    rps = {k: statistics.median(r["rps"] for r in v) for k, v in runs.items()}
    print(
        f"16-token streams at {CONCURRENCY} concurrent, median of {ns.pairs}: aiohttp "
        f"{rps['aiohttp']:,.0f} req/s, {cpu['aiohttp']:.0f} us/request; floor "
        f"{rps['floor']:,.0f} req/s, {cpu['floor']:.0f} us/request: aiohttp costs "
        f"{cpu['aiohttp'] - cpu['floor']:+.0f} us a request over the floor"
    )


if __name__ == "__main__":
    main()
