"""When each content token of an OpenAI-style stream (server-sent events) reached the client."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterable


async def token_times(chunks: AsyncIterable[bytes], times: list[int]) -> None:
    """Read ``chunks`` as they arrive and append to ``times``, per event carrying content (a
    choice's delta with text), the ``perf_counter_ns`` at which its chunk arrived; ``[DONE]``
    ends the chunk it is in."""
    buf = b""
    async for chunk in chunks:
        now = time.perf_counter_ns()
        *events, buf = (buf + chunk).split(b"\n\n")
        for event in events:
            data = event[6:]
            if data == b"[DONE]":
                break
            choices = json.loads(data).get("choices")
            if choices and choices[0].get("delta", {}).get("content"):
                times.append(now)
