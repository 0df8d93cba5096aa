"""Client CPU per SSE event: ``gpubench_sdk.sse_events`` against the line reader it replaced.

Run by hand (not a test): ``python bench/sse_reader_bench.py [--events 50000]``.

Before ``sse_events``, the Hugging Face TGI, Inferless and Replicate plugins read their event
streams with httpx's ``aiter_lines`` (decode, split and yield line by line) and a small field
loop. Both readers here consume the same TGI token events, one per read, from a real aiohttp
``StreamReader`` behind gpubench's streamed response, fed one event per event-loop turn, so
the figures include the loop's wake-up and the reader's await (the same for both); the
difference is the readers' own cost. Rounds alternate; the median is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import uvloop
from aiohttp.base_protocol import BaseProtocol
from aiohttp.streams import StreamReader

from gpubench_sdk import sse_events
from gpubench_sdk._transport._stream import StreamedResponse

# A TGI token event (text-generation-inference's /generate_stream, StreamResponse schema)
EVENT = (
    b'data: {"index":1,"token":{"id":1,"text":" t","logprob":-0.1,"special":false},'
    b'"generated_text":null,"details":null}\n\n'
)


async def line_reader(response: httpx.Response) -> AsyncIterator[tuple[str, str, int]]:
    """The reader the three plugins had (fields as the HTML spec defines them)."""
    event, data = "message", list[str]()
    async for line in response.aiter_lines():
        line = line.rstrip("\r")
        if not line:
            if data:
                yield event, "\n".join(data), time.perf_counter_ns()
            event, data = "message", list[str]()
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)


class _Transport:  # what a StreamReader asks of its protocol's transport
    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...
    def is_closing(self) -> bool:
        return False


async def _one(reader: Callable[[httpx.Response], Any], events: int) -> float:
    loop = asyncio.get_running_loop()
    protocol = BaseProtocol(loop)
    protocol.transport = _Transport()  # type: ignore[assignment]
    stream = StreamReader(protocol, 2**16, loop=loop)
    response = StreamedResponse(
        200, headers=[(b"content-type", b"text/event-stream")], stream=httpx.ByteStream(b""),
        request=httpx.Request("POST", "http://127.0.0.1/generate_stream"),
    )  # fmt: skip
    response._reader, response._span = stream, None

    async def feed() -> None:
        for _ in range(events):
            stream.feed_data(EVENT)
            await asyncio.sleep(0)
        stream.feed_eof()

    async def consume() -> int:
        return sum([1 async for _ in reader(response)])

    cpu = time.process_time()
    _, got = await asyncio.gather(feed(), consume())
    assert got == events
    return (time.process_time() - cpu) / events * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    ns = parser.parse_args()
    readers = {"aiter_lines reader": line_reader, "sse_events": sse_events}
    per: dict[str, list[float]] = {name: [] for name in readers}
    for _ in range(ns.rounds):
        for name, reader in readers.items():
            per[name].append(uvloop.run(_one(reader, ns.events)))
    base = statistics.median(per["aiter_lines reader"])
    for name, runs in per.items():
        med = statistics.median(runs)
        print(f"{name:>18}: {med:.2f} us per event ({med / base:.2f}x), runs "
              + " ".join(f"{x:.2f}" for x in runs))  # fmt: skip


if __name__ == "__main__":
    main()
