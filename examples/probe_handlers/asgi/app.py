"""The GPU probe as a plain ASGI app, for Cloud Run, Modal or any container platform.

``POST /`` (or ``/probe``) with a JSON object of options runs the probe and answers its
result; ``GET /health`` answers ``{"status": "ok"}``. One probe runs at a time: two at once
would share the GPU and halve each other's figures. No framework, so the image needs only
an ASGI server: ``uvicorn app:app --host 0.0.0.0 --port $PORT``. Deploy: docs/gpu-probe.md.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from gpubench_sdk.probe import handle

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_one_at_a_time = threading.Lock()  # held in the worker thread, so any event loop may serve


def _probe(options: dict[str, Any]) -> dict[str, Any]:
    with _one_at_a_time:
        return handle(options)


async def _answer(send: Send, status: int, body: Any) -> None:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


async def _body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["type"] != "http":
        return
    path, method = scope["path"].rstrip("/") or "/", scope["method"]
    if path == "/health" and method == "GET":
        return await _answer(send, 200, {"status": "ok"})
    if path not in ("/", "/probe"):
        return await _answer(send, 404, {"error": f"no route {path}: POST / or GET /health"})
    if method != "POST":
        return await _answer(send, 405, {"error": "POST a JSON object of probe options"})
    try:
        options = json.loads(await _body(receive) or b"{}")
    except ValueError as exc:
        return await _answer(send, 400, {"error": f"body is not JSON: {exc}"})
    if not isinstance(options, dict):
        return await _answer(send, 400, {"error": "body must be a JSON object of probe options"})
    try:  # in a worker thread: the probe blocks for seconds, health checks must not
        result = await asyncio.to_thread(_probe, options)
    except ValueError as exc:  # gpubench_sdk.ConfigError: a bad option, named
        return await _answer(send, 400, {"error": str(exc)})
    await _answer(send, 200, result)
