"""Server-sent events, read as they arrive, each with its arrival time on the runner's clock."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx

from gpubench_sdk import InvalidResponseError


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


def json_event(data: str, provider: str) -> dict[str, Any]:
    """An event's data as the JSON object TGI sends; ``InvalidResponseError`` if it is not."""
    try:
        event = json.loads(data)
    except ValueError as exc:
        raise InvalidResponseError("a stream event is not JSON", provider=provider) from exc
    if not isinstance(event, dict):
        raise InvalidResponseError("a stream event is not a JSON object", provider=provider)
    return event
