"""A streamed web endpoint answer, read piece by piece as it arrives.

Modal passes a ``StreamingResponse`` through as the app writes it
(https://modal.com/docs/guide/streaming-endpoints): server-sent events (``text/event-stream``,
one piece per ``data:`` event, the HTML spec's framing) or newline-delimited pieces (NDJSON,
plain text). Each piece comes with its arrival time on the runner's clock.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import httpx

from gpubench_sdk import json_or_text


async def pieces(response: httpx.Response) -> AsyncIterator[tuple[Any, int]]:
    """``(piece, arrived_ns)``: JSON where it parses, else the text."""
    sse = response.headers.get("content-type", "").startswith("text/event-stream")
    data: list[str] = []
    async for line in response.aiter_lines():
        line = line.rstrip("\r")
        if not sse:
            if line:
                yield json_or_text(line), time.perf_counter_ns()
            continue
        if not line:  # an event ends at a blank line
            if data:
                yield json_or_text("\n".join(data)), time.perf_counter_ns()
            data = []
            continue
        field, _, value = line.partition(":")
        if field == "data":
            data.append(value.removeprefix(" "))
    if data:
        yield json_or_text("\n".join(data)), time.perf_counter_ns()
