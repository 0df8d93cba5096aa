"""A provider on ``PreparedCall``, the lean request path, next to the same provider written
with an ordinary httpx call: both measure the same thing; the prepared one spends less of the
client's CPU per request (no httpx ``Request``/``Response`` built per call; to a plain
``http://`` URL like this one, not aiohttp's request machinery either). The same pair
again for a streamed answer: ``call.stream(body)`` against ``client.stream(...)``, each
timing every event as it arrived.

Run it: ``python examples/prepared_call.py`` (needs the ``testing`` extra for the local
endpoint it serves). It serves a small JSON model on loopback (and its streaming route, 8
Server-Sent Events an answer), runs 300 requests at 16 concurrent through each provider, and
prints what each measured and the process's CPU per request (the local server runs in this
process too: the same share of all four figures).
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import anyio

from gpubench_sdk import (
    Burst,
    PreparedCall,
    Provider,
    ProviderOptions,
    Request,
    Result,
    Store,
    Workload,
    first_byte_ns,
    run,
    sse_events,
)
from gpubench_sdk.testing import serve


class ModelOptions(ProviderOptions):
    url: str


class PreparedModel(Provider):
    """The same call every time but for its body: prepared once, in ``open``."""

    name = "prepared-model"
    Options = ModelOptions

    async def open(self) -> None:
        assert isinstance(self.options, ModelOptions)
        headers = {**self.auth_headers(), "Content-Type": "application/json"}
        self._call = PreparedCall(self.client, "POST", self.options.url, headers=headers)

    async def invoke(self, request: Request) -> Result:
        body = json.dumps(dict(request.payload)).encode()
        r = (await self._call.send(body)).raise_for_status()
        answer = r.json()
        return Result(
            output=answer["output"],
            request_id=answer["id"],
            http_status=r.status_code,
            first_byte_ns=r.first_byte_ns,
        )


class HttpxModel(Provider):
    """The same provider with an ordinary httpx call (what most plugins write)."""

    name = "httpx-model"
    Options = ModelOptions

    async def invoke(self, request: Request) -> Result:
        assert isinstance(self.options, ModelOptions)
        r = await self.client.post(
            self.options.url, json=dict(request.payload), headers=self.auth_headers()
        )
        r.raise_for_status()
        answer = r.json()
        return Result(
            output=answer["output"],
            request_id=answer["id"],
            http_status=r.status_code,
            first_byte_ns=first_byte_ns(r),
        )


class PreparedStreamModel(PreparedModel):
    """A streamed answer on the prepared call: ``call.stream(body)``."""

    name = "prepared-stream-model"

    async def invoke(self, request: Request) -> Result:
        body = json.dumps(dict(request.payload)).encode()
        async with self._call.stream(body) as r:
            r.raise_for_status()
            words, times = await _read_events(r)
        return Result(output=" ".join(words), http_status=r.status_code,
                      first_byte_ns=first_byte_ns(r), token_times_ns=times)  # fmt: skip


class HttpxStreamModel(HttpxModel):
    """The same streamed answer with httpx's ``client.stream``."""

    name = "httpx-stream-model"

    async def invoke(self, request: Request) -> Result:
        assert isinstance(self.options, ModelOptions)
        async with self.client.stream(
            "POST", self.options.url, json=dict(request.payload), headers=self.auth_headers()
        ) as r:
            r.raise_for_status()
            words, times = await _read_events(r)
        return Result(output=" ".join(words), http_status=r.status_code,
                      first_byte_ns=first_byte_ns(r), token_times_ns=times)  # fmt: skip


async def _read_events(response: Any) -> tuple[list[str], list[int]]:
    """Each event's word, and when the network read that brought it happened."""
    words, times = [], []
    async for _event, data, arrived in sse_events(response):
        words.append(data)
        times.append(arrived)
    return words, times


class Prompts(Workload):
    name = "prompts"

    def request(self, seq: int) -> Request:
        return Request(seq=seq, payload={"prompt": f"request {seq}"})

    def read(self, output: Any) -> tuple[int | None, int | None]:
        return (None, len(str(output)))


async def model(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
    """A JSON model as a bare ASGI app: echoes the prompt after 2 ms."""
    if scope["type"] != "http":  # lifespan: nothing to set up
        message = await receive()
        await send({"type": f"{message['type']}.complete"})
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    await asyncio.sleep(0.002)
    seen = json.loads(body or b"{}")
    if scope["path"].endswith("/stream"):  # 8 events, one word each, 1 ms apart
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for k in range(8):
            await send({"type": "http.response.body", "body": b"data: w%d\n\n" % k,
                        "more_body": True})  # fmt: skip
            await asyncio.sleep(0.001)
        await send({"type": "http.response.body", "body": b""})
        return
    answer = json.dumps({"output": seen.get("prompt", ""), "id": "r-1"}).encode()
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": answer})


async def measure(provider: Provider, store: Path) -> tuple[int, float, float]:
    """(requests ok with a first byte recorded, p50 ms, process CPU us per request)."""
    cpu = time.process_time()
    result = await run({"model": provider}, Prompts(), [Burst(300, 16)], store=store)
    cpu_us = (time.process_time() - cpu) / 300 * 1e6
    with Store(store) as s:
        invs = s.invocations(result.run_id)
    ok = [i for i in invs if i.ok and i.first_byte_ns is not None and i.output_units]
    latencies = sorted(i.latency_ms for i in ok)
    return len(ok), latencies[len(latencies) // 2] if latencies else float("nan"), cpu_us


def main() -> int:
    out = Path(tempfile.mkdtemp())
    with serve(model) as served:
        url, streamed = f"{served.url}/predict", f"{served.url}/stream"
        anyio.run(measure, PreparedModel(url=url), out / "warm-up.sqlite")  # imports, pools
        rows = {}
        for name, provider in (
            ("PreparedCall", PreparedModel(url=url)),
            ("httpx call", HttpxModel(url=url)),
            ("PreparedCall stream", PreparedStreamModel(url=streamed)),
            ("httpx stream", HttpxStreamModel(url=streamed)),
        ):
            rows[name] = anyio.run(measure, provider, out / f"{provider.name}.sqlite")
    for name, (ok, p50, cpu_us) in rows.items():
        print(f"{name:>19}: {ok}/300 ok, p50 {p50:.2f} ms, CPU {cpu_us:.0f} us/request")
    return 0 if all(ok == 300 for ok, _, _ in rows.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
