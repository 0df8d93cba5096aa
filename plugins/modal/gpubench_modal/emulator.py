"""A Modal web endpoint emulator on the testing kit's simulated fleet.

- ``POST`` any path: the JSON body becomes a fleet job (a function call). Answered ``200`` with
  the output when it finishes within ``redirect_after_s`` (Modal: 150 s), else ``303 See
  Other`` to the result URL, ``<same path>?__modal_function_call_id=<id>``
  (https://modal.com/docs/guide/webhook-timeouts). Every answer carries the call id in
  ``Modal-Function-Call-Id``.
- ``GET`` the result URL: waits up to ``redirect_after_s`` again, then the result or another
  ``303``. ``POST`` to it is refused (``400 modal-http: bad redirect method``).
- With ``api_key`` (``<token id>:<token secret>``) every request needs ``Modal-Key`` and
  ``Modal-Secret``: else ``401 modal-http: missing credentials for proxy authorization``
  (https://modal.com/docs/guide/webhook-proxy-auth).
- A client that hangs up before the redirect cancels its call (an ASGI app sees the
  disconnect); one that hangs up on a result URL does not (the call runs on).
- Asked for ``text/event-stream``, a job that streams (``"chunks": n``) is answered as
  server-sent events, one ``data:`` event per piece, from the moment it runs
  (https://modal.com/docs/guide/streaming-endpoints).

Faults in ``fleet.faults`` hit ``POST`` (route ``submit``) and result URLs (``poll``). Run
``python -m gpubench_modal.emulator --port 0`` to serve one by hand.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

from gpubench_sdk.testing import (
    INSTALL_HINT,
    ASGIApp,
    FaultInjector,
    FleetConfig,
    Job,
    JobStatus,
    QueueFull,
    SimulatedFleet,
)

LONG_REQUEST_S = 150.0  # https://modal.com/docs/guide/webhook-timeouts
CALL_ID_PARAM = "__modal_function_call_id"
CALL_ID_HEADER = "Modal-Function-Call-Id"


def make_app(
    fleet: SimulatedFleet,
    *,
    api_key: str | None = None,
    redirect_after_s: float = LONG_REQUEST_S,
) -> ASGIApp:
    """The emulator app for ``fleet``; ``redirect_after_s`` scales Modal's 150 s down."""
    try:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import (
            JSONResponse,
            PlainTextResponse,
            Response,
            StreamingResponse,
        )
        from starlette.routing import Route
    except ImportError as exc:
        raise ImportError(f"the Modal emulator: {INSTALL_HINT}") from exc

    token_id, _, token_secret = (api_key or "").partition(":")

    def modal_http(status: int, message: str) -> Response:
        return PlainTextResponse(f"modal-http: {message}", status_code=status)

    def refused(request: Request) -> Response | None:
        if api_key is None:
            return None
        key, secret = request.headers.get("modal-key"), request.headers.get("modal-secret")
        if not key or not secret:
            return modal_http(401, "missing credentials for proxy authorization")
        if not (
            hmac.compare_digest(key.encode(), token_id.encode())
            and hmac.compare_digest(secret.encode(), token_secret.encode())
        ):
            return modal_http(401, "invalid credentials for proxy authorization")
        return None

    def streams(request: Request, job: Job) -> bool:
        """The app streams (SSE) what the function yields, when asked for a stream."""
        wants = "text/event-stream" in request.headers.get("accept", "")
        return wants and bool(job.input.get("chunks"))

    async def started(job: Job) -> None:
        # the fleet has no event for a job's start (only for its end): poll its status
        while job.status is JobStatus.QUEUED:  # noqa: ASYNC110
            await asyncio.sleep(0.002)

    def event_stream(job: Job) -> Response:
        async def events() -> AsyncIterator[str]:
            sent = 0
            while not (job.done.is_set() and sent >= len(job.stream)):
                while sent < len(job.stream):
                    yield f"data: {json.dumps(job.stream[sent])}\n\n"
                    sent += 1
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(job.done.wait(), 0.002)
            if job.status is not JobStatus.COMPLETED:
                # a function that raises mid-stream: the response was already started, so the
                # server can only cut the connection (the chunked body never ends)
                raise RuntimeError(f"function call {job.id} failed mid-stream: {job.error}")

        headers = {CALL_ID_HEADER: job.id}
        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)

    async def answer(request: Request, job: Job, *, cancel_on_hangup: bool) -> Response:
        streamed = streams(request, job)
        finished = asyncio.ensure_future(started(job) if streamed else job.done.wait())
        hung_up = asyncio.ensure_future(_disconnected(request))
        await asyncio.wait({finished, hung_up}, timeout=redirect_after_s,
                           return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
        for waiter in (finished, hung_up):
            waiter.cancel()
        headers = {CALL_ID_HEADER: job.id}
        if streamed and finished.done() and not finished.cancelled():
            return event_stream(job)  # the function runs: its pieces go out as they come
        if not job.done.is_set():
            if hung_up.done() and not hung_up.cancelled():
                if cancel_on_hangup:
                    fleet.cancel(job.id)
                return Response(status_code=499, headers=headers)
            result_url = request.url.replace(query=f"{CALL_ID_PARAM}={job.id}")
            return Response(status_code=303, headers={**headers, "Location": str(result_url)})
        if job.status is not JobStatus.COMPLETED:
            return PlainTextResponse("Internal Server Error", status_code=500, headers=headers)
        output = list(job.stream) if job.stream else job.output
        return JSONResponse(output, headers=headers)

    async def endpoint(request: Request) -> Response:
        if (no := refused(request)) is not None:
            return no
        call_id = request.query_params.get(CALL_ID_PARAM)
        if call_id is not None:
            if request.method != "GET":
                return modal_http(400, "bad redirect method")
            job = fleet.job(call_id)
            if job is None:
                return modal_http(404, "function call not found")
            return await answer(request, job, cancel_on_hangup=False)
        if request.method != "POST":
            return JSONResponse({"detail": "Method Not Allowed"}, status_code=405)
        try:
            payload = json.loads(await request.body())
        except ValueError:  # what a FastAPI endpoint answers for a body it cannot parse
            return JSONResponse({"detail": "body is not valid JSON"}, status_code=422)
        try:
            job = fleet.submit(payload if isinstance(payload, dict) else {"input": payload})
        except QueueFull:
            return modal_http(429, "too many requests")
        return await answer(request, job, cancel_on_hangup=True)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with fleet:
            yield

    app = Starlette(
        routes=[Route("/{path:path}", endpoint, methods=["GET", "POST"])], lifespan=lifespan
    )
    return FaultInjector(app, fleet, _route)


async def _disconnected(request: Any) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _route(scope: MutableMapping[str, Any]) -> str | None:
    """Which fault route a request belongs to (see ``gpubench_sdk.testing.FaultPlan``)."""
    query: bytes = scope.get("query_string", b"")
    return "poll" if CALL_ID_PARAM.encode() in query else "submit"


def main(argv: list[str] | None = None) -> None:
    """Serve an emulator until interrupted: ``python -m gpubench_modal.emulator``."""
    import argparse
    import os

    from gpubench_sdk.testing import Duration, serve_forever

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8690)
    parser.add_argument("--api-key-env", help="require this '<id>:<secret>' (env variable)")
    parser.add_argument("--redirect-after-s", type=float, default=LONG_REQUEST_S)
    parser.add_argument("--cold-start-s", type=float, default=0.5)
    parser.add_argument("--max-workers", type=int, default=3)
    parser.add_argument("--idle-timeout-s", type=float, default=1.0)
    args = parser.parse_args(argv)
    config = FleetConfig(
        cold_start=Duration.fixed(args.cold_start_s),
        max_workers=args.max_workers,
        idle_timeout_s=args.idle_timeout_s,
    )
    key = os.environ[args.api_key_env] if args.api_key_env else None
    app = make_app(SimulatedFleet(config), api_key=key, redirect_after_s=args.redirect_after_s)
    serve_forever(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
