"""Token timestamps through a whole run: many concurrent streams, each token's stored time
against the time the server sent it (both ``time.perf_counter_ns``, CLOCK_MONOTONIC on Linux,
one clock for server and client)."""

from __future__ import annotations

import asyncio
import itertools
import json
import statistics
import time
from pathlib import Path
from typing import Any

from gpubench_openai import OpenAIProvider

from gpubench_sdk import Burst, LLMCompletion, Outcome, Store, run
from gpubench_sdk.testing import serve

STREAMS, TOKENS, GAP_S = 40, 15, 0.02


def paced_server(sent: dict[str, list[int]]) -> Any:
    """An ASGI OpenAI-compatible server: ``max_tokens`` token events ``GAP_S`` apart per
    stream, noting when each was handed to the socket, under the stream's ``x-request-id``."""
    ids = itertools.count()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (kind := (await receive())["type"]) != "lifespan.shutdown":
                await send({"type": f"{kind}.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        n = json.loads(body)["max_tokens"]
        sid = f"r{next(ids)}"
        times = sent[sid] = []
        head = [(b"content-type", b"text/event-stream"), (b"x-request-id", sid.encode())]
        await send({"type": "http.response.start", "status": 200, "headers": head})

        async def chunk(data: dict[str, Any]) -> None:
            event = b"data: " + json.dumps({"id": sid, **data}).encode() + b"\n\n"
            await send({"type": "http.response.body", "body": event, "more_body": True})

        for _ in range(n):
            await asyncio.sleep(GAP_S)
            times.append(time.perf_counter_ns())
            await chunk({"choices": [{"index": 0, "delta": {"content": "t"}}]})
        await chunk({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
        await chunk({"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": n}})
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})

    return app


def test_every_stored_token_time_follows_its_send_time_closely(tmp_path: Path) -> None:
    sent: dict[str, list[int]] = {}
    with serve(paced_server(sent)) as served:
        result = asyncio.run(
            run(
                {"llm": OpenAIProvider(base_url=f"{served.url}/v1", model="m")},
                LLMCompletion(prompt_tokens=4, max_tokens=TOKENS, stream=True),
                [Burst(total=STREAMS, concurrency=STREAMS)],
                store=tmp_path / "s.sqlite",
            )
        )
    with Store(tmp_path / "s.sqlite") as store:
        origin = store.run(result.run_id).origin_ns
        invocations = list(store.invocations(result.run_id))
    assert [i.outcome for i in invocations] == [Outcome.OK] * STREAMS
    lags_ms: list[float] = []
    for inv in invocations:
        assert inv.request_id is not None and inv.token_times_ns is not None
        arrived = [origin + t for t in inv.token_times_ns]
        sends = sent[inv.request_id]
        assert len(arrived) == len(sends) == TOKENS == inv.output_units
        lags_ms += [(a - s) / 1e6 for a, s in zip(arrived, sends, strict=True)]
    # Never before the server sent it: a token time is an arrival on the same clock.
    assert min(lags_ms) > 0, min(lags_ms)
    # Read as it came: loopback takes microseconds; generous bounds for a loaded machine (the
    # bench measures the real figures: p50 0.1-0.2 ms at this load on a quiet core).
    assert statistics.median(lags_ms) < 10, statistics.median(lags_ms)
    assert sorted(lags_ms)[int(0.9 * len(lags_ms))] < 100
