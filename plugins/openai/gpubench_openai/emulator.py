"""An OpenAI-compatible server emulator on the testing kit's simulated fleet.

``POST /v1/chat/completions`` and ``/v1/completions`` (streamed as SSE or not), ``GET
/v1/models`` and ``GET /health``, served like vLLM's OpenAI server: a streamed answer sends its
headers at once, then one ``data:`` event per token, a usage chunk when
``stream_options.include_usage`` is set, then ``data: [DONE]``; a client that disconnects
aborts its request. Each request is a fleet job, so it queues for a worker and may wait for
one to boot. Time to first token is then queue + cold start + prefill, prefill taking
``prefill_ms_per_token`` per prompt token (prompt words count as tokens), after which tokens
come every ``1 / tokens_per_s`` seconds. The prefill is simulated as whole token intervals
(the fleet streams evenly spaced chunks), so it is rounded up to one.

A body carrying ``sleep_ms`` (the testing kit's echo probe, sent as extra fields) runs as the
kit defines: execution ``sleep_ms``, ``chunks`` tokens, the answer's text the job's ``echo``.
Faults in ``fleet.faults`` hit the completion routes (route ``submit``). ``usage=False``
emulates a server that never sends usage. Run ``python -m gpubench_openai.emulator --port 0``
to serve one by hand. Needs the testing extra (``pip install 'gpubench-sdk[testing]'``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import math
import time
from collections.abc import AsyncIterator, MutableMapping
from dataclasses import dataclass
from typing import Any

from gpubench_sdk.testing import (
    INSTALL_HINT,
    ASGIApp,
    FaultInjector,
    Job,
    JobStatus,
    QueueFull,
    SimulatedFleet,
)

DEFAULT_MODEL = "emulated-llm"
_ECHO_KEYS = ("sleep_ms", "chunks", "echo", "fail")


@dataclass(frozen=True, slots=True)
class ModelSpeed:
    """How fast the emulated model is: prefill per prompt token and decode rate."""

    prefill_ms_per_token: float = 0.2
    tokens_per_s: float = 200.0
    default_max_tokens: int = 16


def error_body(status: int, message: str, kind: str, code: str | None = None) -> bytes:
    """OpenAI's error body: ``{"error": {"message", "type", "param", "code"}}``."""
    return json.dumps(
        {"error": {"message": message, "type": kind, "param": None, "code": code}}
    ).encode()


def _render_error(status: int, message: str) -> tuple[bytes, str]:
    # OpenAI's 429 says what ran out in ``type`` ("requests", "tokens") and always has the
    # code "rate_limit_exceeded"; its 5xx are type "server_error" (API reference, "Error codes")
    if status == 429:
        return error_body(status, message, "requests", "rate_limit_exceeded"), "application/json"
    return error_body(status, message, "server_error"), "application/json"


def make_app(
    fleet: SimulatedFleet,
    *,
    api_key: str | None = None,
    model: str = DEFAULT_MODEL,
    speed: ModelSpeed | None = None,
    usage: bool = True,
) -> ASGIApp:
    """The emulator app for ``fleet``; with ``api_key`` every request must carry it
    (``Authorization: Bearer <key>``)."""
    try:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response, StreamingResponse
        from starlette.routing import Route
    except ImportError as exc:
        raise ImportError(f"the OpenAI emulator: {INSTALL_HINT}") from exc

    pace = speed or ModelSpeed()
    created_s = int(time.time())  # the model's "created" in /v1/models
    itl_s = 1.0 / pace.tokens_per_s

    def error(status: int, message: str, kind: str, code: str | None = None) -> Response:
        body = error_body(status, message, kind, code)
        return Response(body, status_code=status, media_type="application/json")

    def authorized(request: Request) -> bool:
        if api_key is None:
            return True
        given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        return hmac.compare_digest(given.encode(), api_key.encode())

    def job_input(body: dict[str, Any], chat: bool) -> tuple[dict[str, Any], int, int]:
        """The fleet job for a request, how many leading chunks are prefill, prompt tokens."""
        if "sleep_ms" in body:  # the testing kit's echo probe
            return {k: body[k] for k in _ECHO_KEYS if k in body}, 0, 0
        if chat:
            text = " ".join(
                str(m.get("content", "")) for m in body.get("messages") or [] if isinstance(m, dict)
            )
        else:
            text = str(body.get("prompt", ""))
        prompt_tokens = len(text.split())
        n = body.get("max_tokens") or body.get("max_completion_tokens") or pace.default_max_tokens
        prefill = math.ceil(prompt_tokens * pace.prefill_ms_per_token / 1e3 / itl_s)
        total = prefill + int(n)
        return {"sleep_ms": total * itl_s * 1e3, "chunks": total}, prefill, prompt_tokens

    def token_text(job: Job, index: int) -> str:
        echo = job.input.get("echo")
        return f"{echo} " if echo is not None else f"tok{index} "

    async def completions(request: Request) -> Response:
        chat = request.url.path.endswith("/chat/completions")
        if not authorized(request):
            return error(
                401, "Incorrect API key provided", "invalid_request_error", "invalid_api_key"
            )
        try:
            body = json.loads(await request.body())
        except ValueError:
            return error(400, "body is not valid JSON", "invalid_request_error")
        if not isinstance(body, dict):
            return error(400, "body must be a JSON object", "invalid_request_error")
        if body.get("model") != model:
            return error(404, f"The model `{body.get('model')}` does not exist.",
                         "invalid_request_error", "model_not_found")  # fmt: skip
        if chat and not isinstance(body.get("messages"), list):
            return error(400, "messages: field required", "invalid_request_error")
        stream = bool(body.get("stream"))
        payload, prefill, prompt_tokens = job_input(body, chat)
        if stream and "sleep_ms" in body and not payload.get("chunks"):
            payload["chunks"] = 1
        try:
            job = fleet.submit(payload)
        except QueueFull as exc:
            return error(429, f"server busy: {exc}", "requests", "rate_limit_exceeded")
        kind = "chat.completion" if chat else "text_completion"
        headers = {"x-request-id": job.id}
        if stream:
            opts = body.get("stream_options")
            want_usage = usage and isinstance(opts, dict) and bool(opts.get("include_usage"))
            events = _events(job, chat, prefill, prompt_tokens, want_usage, kind)
            return StreamingResponse(events, media_type="text/event-stream", headers=headers)
        if not await _wait_or_disconnect(request, job):
            return Response(status_code=499)
        if job.status is not JobStatus.COMPLETED:
            return error(500, f"the model failed: {job.error}", "server_error")
        n = max(len(job.stream) - prefill, 0)
        text = "".join(token_text(job, i) for i in range(n)) if n else token_text(job, 0)
        choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        answer: dict[str, Any] = {
            "id": job.id,
            "object": kind,
            "created": int(time.time()),
            "model": model,
            "choices": [choice],
        }
        if usage:
            answer["usage"] = _usage(prompt_tokens, max(n, 1))
        return JSONResponse(answer, headers=headers)

    async def _events(
        job: Job, chat: bool, prefill: int, prompt_tokens: int, want_usage: bool, kind: str
    ) -> AsyncIterator[bytes]:
        sent = prefill
        # every chunk of one answer carries the same id and "created" (OpenAI, vLLM)
        base = {
            "id": job.id,
            "object": f"{kind}.chunk" if chat else kind,
            "created": int(time.time()),
            "model": model,
        }
        try:
            if chat:  # vLLM's first chunk: the role, no content
                first = {**base, "choices": [{"index": 0, "delta": {"role": "assistant"}}]}
                yield b"data: " + json.dumps(first).encode() + b"\n\n"
            while True:
                done = job.done.is_set()
                while sent < len(job.stream):
                    text = token_text(job, sent - prefill)
                    delta = {"delta": {"content": text}} if chat else {"text": text}
                    event = {**base, "choices": [{"index": 0, **delta, "finish_reason": None}]}
                    yield b"data: " + json.dumps(event).encode() + b"\n\n"
                    sent += 1
                if done:
                    break
                # the fleet appends tokens on its own schedule; look again within 0.5 ms
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(job.done.wait(), 0.0005)
            if job.status is not JobStatus.COMPLETED:
                err = {"error": {"message": f"the model failed: {job.error}",
                                 "type": "server_error", "code": 500}}  # fmt: skip
                yield b"data: " + json.dumps(err).encode() + b"\n\n"
            else:
                if not len(job.stream) > prefill:  # a job without chunks answers at its end
                    text = token_text(job, 0)
                    delta = {"delta": {"content": text}} if chat else {"text": text}
                    event = {**base, "choices": [{"index": 0, **delta, "finish_reason": None}]}
                    yield b"data: " + json.dumps(event).encode() + b"\n\n"
                n = max(len(job.stream) - prefill, 1)
                end: dict[str, Any] = {"delta": {}} if chat else {"text": ""}
                last = {**base, "choices": [{"index": 0, **end, "finish_reason": "length"}]}
                yield b"data: " + json.dumps(last).encode() + b"\n\n"
                if want_usage:
                    chunk = {**base, "choices": [], "usage": _usage(prompt_tokens, n)}
                    yield b"data: " + json.dumps(chunk).encode() + b"\n\n"
            yield b"data: [DONE]\n\n"
        finally:
            if not job.done.is_set():  # the client went away: abort, as vLLM does
                fleet.cancel(job.id)

    async def _wait_or_disconnect(request: Request, job: Job) -> bool:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(job.done.wait(), 0.05)
                return True
            if await request.is_disconnected():
                fleet.cancel(job.id)
                return False

    async def models(request: Request) -> Response:
        if not authorized(request):
            return error(
                401, "Incorrect API key provided", "invalid_request_error", "invalid_api_key"
            )
        # the Model object's required fields: id, object, created, owned_by (vLLM owns "vllm")
        entry = {"id": model, "object": "model", "created": created_s, "owned_by": "gpubench"}
        return JSONResponse({"object": "list", "data": [entry]})

    async def health(request: Request) -> Response:
        return Response(status_code=200)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with fleet:
            yield

    app = Starlette(
        routes=[
            Route("/v1/chat/completions", completions, methods=["POST"]),
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
    return FaultInjector(app, fleet, _route, render_error=_render_error)


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _route(scope: MutableMapping[str, Any]) -> str | None:
    """Which fault route a request belongs to (see ``gpubench_sdk.testing.FaultPlan``)."""
    path: str = scope.get("path", "")
    return "submit" if path.endswith("completions") else "control"


def main(argv: list[str] | None = None) -> None:
    """Serve an emulator until interrupted: ``python -m gpubench_openai.emulator``."""
    import argparse
    import os

    from gpubench_sdk.testing import Duration, FleetConfig, serve_forever

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--api-key-env", help="require the key in this environment variable")
    parser.add_argument("--cold-start-s", type=float, default=0.5)
    parser.add_argument("--max-workers", type=int, default=2)
    parser.add_argument("--idle-timeout-s", type=float, default=1.0)
    parser.add_argument("--tokens-per-s", type=float, default=200.0)
    parser.add_argument("--prefill-ms-per-token", type=float, default=0.2)
    parser.add_argument("--no-usage", action="store_true", help="never send usage")
    args = parser.parse_args(argv)
    config = FleetConfig(
        cold_start=Duration.fixed(args.cold_start_s),
        max_workers=args.max_workers,
        idle_timeout_s=args.idle_timeout_s,
    )
    key = os.environ[args.api_key_env] if args.api_key_env else None
    speed = ModelSpeed(args.prefill_ms_per_token, args.tokens_per_s)
    app = make_app(
        SimulatedFleet(config), api_key=key, model=args.model, speed=speed, usage=not args.no_usage
    )
    serve_forever(app, host=args.host, port=args.port, path="/v1")


if __name__ == "__main__":
    main()
