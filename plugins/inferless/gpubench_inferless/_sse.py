"""Server-sent events, read as they arrive, each with its arrival time on the runner's clock."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import httpx


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, str, int]]:
    """``(event, data, arrived_ns)`` per event, fields as the HTML spec's event stream defines
    them; ``arrived_ns`` is ``time.perf_counter_ns()`` when the event's last line arrived."""
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
    if data:
        yield event, "\n".join(data), time.perf_counter_ns()
