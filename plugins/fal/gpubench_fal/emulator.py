"""A fal emulator on the testing kit's simulated fleet, for tests and demos.

fal serves its queue API on ``queue.fal.run`` and direct calls on ``fal.run``: same paths,
two hosts. One emulator serves both under two prefixes: the queue under ``/queue`` (``POST
/queue/{app}[/{subpath}]``, ``GET .../requests/{id}/status`` with ``logs=1``, ``GET
.../requests/{id}/status/stream`` (SSE), ``GET .../requests/{id}``, ``PUT
.../requests/{id}/cancel``) and direct calls under ``/run`` (``POST /run/{app}``, ``POST
/run/{app}/stream`` answering SSE; a dropped connection cancels the request). Point the provider
at it with ``queue_url=<url>/queue`` and ``run_url=<url>/run``; the official ``fal-client``
with ``FAL_QUEUE_RUN_HOST=<host:port>/queue`` and ``FAL_RUN_HOST=<host:port>/run`` (it only
speaks https: serve it with TLS). Status answers 202 while the request is pending and 200 once
COMPLETED. Faults in ``fleet.faults`` apply to submits and direct calls (route ``submit``),
status and result reads (``poll``) and cancels (``control``). Run ``python -m
gpubench_fal.emulator --port 8787`` to serve one by hand. Needs the testing extra.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, MutableMapping
from datetime import UTC, datetime
from typing import Any

from gpubench_sdk.testing import (
    INSTALL_HINT,
    ASGIApp,
    FaultInjector,
    Job,
    JobStatus,
    QueueFull,
    SimulatedFleet,
    fleet_lifespan,
    hold,
)

from . import _protocol as fal

RATE_WINDOW_S = 1.0


def make_app(
    fleet: SimulatedFleet,
    *,
    api_key: str | None = None,
    submits_per_s: int | None = None,
    keepalive_s: float = 15.0,
) -> ASGIApp:
    """The emulator app for ``fleet``. With ``api_key`` every request must carry
    ``Authorization: Key <api_key>``; ``submits_per_s`` caps submits and direct calls per
    second (429 with ``Retry-After`` beyond); ``keepalive_s`` spaces the comment lines of an
    SSE status stream (fal: 15 s)."""
    try:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response, StreamingResponse
        from starlette.routing import Route
    except ImportError as exc:
        raise ImportError(f"the fal emulator: {INSTALL_HINT}") from exc

    apps: dict[str, str] = {}  # request id -> app base (owner/alias) it was submitted to
    submits: deque[float] = deque()
    expired: set[str] = set()  # requests not started within their X-Fal-Request-Timeout

    def error(status: int, detail: str, **headers: str) -> Response:
        return JSONResponse({"detail": detail}, status_code=status, headers=headers or None)

    def denied(request: Request) -> Response | None:
        if api_key is None:
            return None
        given = request.headers.get("authorization", "")
        if not given.startswith("Key ") or not hmac.compare_digest(
            given.removeprefix("Key ").encode(), api_key.encode()
        ):
            return error(401, "Invalid or missing credentials: Authorization: Key <FAL_KEY>")
        return None

    def throttled() -> Response | None:
        if submits_per_s is None:
            return None
        now = time.monotonic()
        while submits and submits[0] <= now - RATE_WINDOW_S:
            submits.popleft()
        if len(submits) >= submits_per_s:
            return error(429, "rate limit exceeded", **{"Retry-After": "1"})
        submits.append(now)
        return None

    async def payload_of(request: Request) -> dict[str, Any] | Response:
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError:
            return error(422, "body is not valid JSON")
        return body if isinstance(body, dict) else error(422, "body must be a JSON object")

    def runner_logs(job: Job) -> list[dict[str, Any]]:
        """What a runner would log for the request: its start and its end, timestamped."""
        wall_origin = time.time() - time.perf_counter()
        lines = []
        for at_s, message in (
            (job.started_s, f"{job.worker_id} started the request"),
            (job.finished_s, f"{job.worker_id} finished the request: {job.status.value}"),
        ):
            if at_s is not None:
                stamp = datetime.fromtimestamp(wall_origin + at_s, UTC).isoformat()
                lines.append(
                    {"message": message, "level": "INFO", "source": "user", "timestamp": stamp}
                )
        return lines

    def urls(request: Request, base: str, request_id: str) -> dict[str, str]:
        own = f"{str(request.base_url).rstrip('/')}/queue/{base}/requests/{request_id}"
        return {"response_url": own, "status_url": f"{own}/status", "cancel_url": f"{own}/cancel"}

    def status_body(request: Request, job: Job, with_logs: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"request_id": job.id, **urls(request, apps[job.id], job.id)}
        if job.status is JobStatus.QUEUED:
            ahead = sum(
                1 for t in fleet.truths() if t.status is JobStatus.QUEUED and t.seq < job.seq
            )
            return {"status": fal.IN_QUEUE, "queue_position": ahead, **body}
        job_logs = runner_logs(job) if with_logs else None
        if job.status is JobStatus.RUNNING:
            return {"status": fal.IN_PROGRESS, "logs": job_logs, **body}
        done: dict[str, Any] = {"status": fal.COMPLETED, "logs": job_logs, **body}
        if job.execution_ms is not None:
            done["metrics"] = {"inference_time": job.execution_ms / 1e3}
        if job.status is not JobStatus.COMPLETED:
            done["error"], done["error_type"] = failure(job)
        return done

    def failure(job: Job) -> tuple[str, str]:
        if job.id in expired:
            return f"not started within its {fal.REQUEST_TIMEOUT_HEADER}", fal.ERROR_TIMEOUT
        if job.status is JobStatus.TIMED_OUT:
            return job.error or "request timed out", fal.ERROR_TIMEOUT
        if job.status is JobStatus.CANCELLED:
            return "request cancelled", fal.ERROR_CANCELLED
        return job.error or "runner error", fal.ERROR_RUNNER

    def find(request: Request) -> Job | Response:
        job = fleet.job(request.path_params["request_id"])
        base = f"{request.path_params['owner']}/{request.path_params['alias']}"
        if job is None or apps.get(job.id) != base:
            return error(404, "Request not found")
        return job

    async def start(request: Request, app_path: str) -> Job | Response:
        """The job a submit or a direct call to ``app_path`` starts, or the answer refusing it."""
        if (refused := denied(request) or throttled()) is not None:
            return refused
        if app_path.count("/") < 1:
            return error(404, "Application not found: use <owner>/<app>")
        payload = await payload_of(request)
        if isinstance(payload, Response):
            return payload
        start_timeout = request.headers.get(fal.REQUEST_TIMEOUT_HEADER)
        try:
            timeout_s = float(start_timeout) if start_timeout is not None else None
        except ValueError:
            timeout_s = 0.0
        if timeout_s is not None and not timeout_s > fal.MIN_REQUEST_TIMEOUT_S:
            return error(422, f"{fal.REQUEST_TIMEOUT_HEADER} must be seconds > 1")
        try:
            job = fleet.submit(payload, job_id=str(uuid.uuid4()))
        except QueueFull as exc:
            return error(429, f"too many requests in the queue: {exc}", **{"Retry-After": "1"})
        apps[job.id] = fal.app_base(app_path)
        if timeout_s is not None:  # not started by then: fal gives up on the request
            asyncio.get_running_loop().call_later(timeout_s, expire, job)
        return job

    def expire(job: Job) -> None:
        if job.status is JobStatus.QUEUED:
            expired.add(job.id)
            fleet.cancel(job.id)

    async def submit(request: Request) -> Response:
        job = await start(request, request.path_params["app"])
        if isinstance(job, Response):
            return job
        # the status at submission (IN_QUEUE with its position) and the request's URLs
        return JSONResponse(status_body(request, job, with_logs=False))

    async def status(request: Request) -> Response:
        if (refused := denied(request)) is not None:
            return refused
        job = find(request)
        if isinstance(job, Response):
            return job
        body = status_body(request, job, request.query_params.get("logs") in ("1", "true"))
        return JSONResponse(body, status_code=200 if body["status"] == fal.COMPLETED else 202)

    async def status_stream(request: Request) -> Response:
        if (refused := denied(request)) is not None:
            return refused
        job = find(request)
        if isinstance(job, Response):
            return job
        with_logs = request.query_params.get("logs") in ("1", "true")

        async def events() -> AsyncIterator[bytes]:
            last: tuple[Any, ...] | None = None
            quiet_since = time.monotonic()
            while True:
                body = status_body(request, job, with_logs)
                key = (body["status"], body.get("queue_position"))
                if key != last:
                    last, quiet_since = key, time.monotonic()
                    yield f"data: {json.dumps(body)}\n\n".encode()
                    if body["status"] == fal.COMPLETED:
                        return
                elif time.monotonic() - quiet_since >= keepalive_s:
                    quiet_since = time.monotonic()
                    yield b": keep-alive\n\n"
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(job.done.wait()), 0.01)

        return StreamingResponse(events(), media_type="text/event-stream")

    async def result(request: Request) -> Response:
        if (refused := denied(request)) is not None:
            return refused
        job = find(request)
        if isinstance(job, Response):
            return job
        if not job.status.terminal:
            return error(400, "Request is still in progress")
        if job.status is not JobStatus.COMPLETED:
            message, _ = failure(job)
            return error(504 if job.status is JobStatus.TIMED_OUT else 500, message)
        return JSONResponse(job.output, headers={fal.REQUEST_ID_HEADER: job.id})

    async def cancel(request: Request) -> Response:
        if (refused := denied(request)) is not None:
            return refused
        job = find(request)
        if isinstance(job, Response):
            return JSONResponse({"status": "NOT_FOUND"}, status_code=404)
        if job.status.terminal:
            return JSONResponse({"status": "ALREADY_COMPLETED"}, status_code=400)
        # a queued request is removed; a running one's runner is told to stop
        queued = job.status is JobStatus.QUEUED
        fleet.cancel(job.id)
        if queued:
            return JSONResponse({"status": "OK"})
        return JSONResponse({"status": "CANCELLATION_REQUESTED"}, status_code=202)

    async def run(request: Request) -> Response:
        app_path: str = request.path_params["app"]
        streaming = app_path.endswith("/stream")
        job = await start(request, app_path.removesuffix("/stream"))
        if isinstance(job, Response):
            return job
        if streaming:
            return await stream(request, job)
        if not await hold(request, job, fleet):  # a hang-up cancels a direct call (fal docs)
            return error(499, "client closed the connection")
        if job.id in expired:  # a timeout the caller set: fal marks it (fal_client won't retry)
            headers = {fal.REQUEST_TIMEOUT_TYPE_HEADER: "user"}
            return error(504, failure(job)[0], **headers)
        if job.status is not JobStatus.COMPLETED:
            message, _ = failure(job)
            return error(504 if job.status is JobStatus.TIMED_OUT else 500, message)
        return JSONResponse(job.output, headers={fal.REQUEST_ID_HEADER: job.id})

    async def stream(request: Request, job: Job) -> Response:
        # The answer starts with the first piece of output (or the failure, as a status code).
        while not job.stream and not job.done.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(job.done.wait()), 0.01)
            if not job.done.is_set() and await request.is_disconnected():
                fleet.cancel(job.id)
                return error(499, "client closed the connection")
        if job.done.is_set() and job.status is not JobStatus.COMPLETED and not job.stream:
            return error(500, failure(job)[0])

        async def events() -> AsyncIterator[bytes]:
            sent = 0
            try:
                while True:
                    for piece in job.stream[sent:]:
                        yield f"data: {json.dumps(piece)}\n\n".encode()
                    sent = len(job.stream)
                    if job.done.is_set() and sent == len(job.stream):
                        break
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(asyncio.shield(job.done.wait()), 0.01)
                if job.status is not JobStatus.COMPLETED:
                    detail = json.dumps({"detail": failure(job)[0]})
                    yield f"event: error\ndata: {detail}\n\n".encode()
            finally:
                if not job.done.is_set():  # the caller hung up mid-stream
                    fleet.cancel(job.id)

        headers = {fal.REQUEST_ID_HEADER: job.id}
        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)

    requests = "/queue/{owner}/{alias}/requests/{request_id}"
    app = Starlette(
        routes=[
            Route(f"{requests}/status", status, methods=["GET"]),
            Route(f"{requests}/status/stream", status_stream, methods=["GET"]),
            Route(f"{requests}/cancel", cancel, methods=["PUT"]),
            Route(requests, result, methods=["GET"]),
            Route("/queue/{app:path}", submit, methods=["POST"]),
            Route("/run/{app:path}", run, methods=["POST"]),
        ],
        lifespan=fleet_lifespan(fleet),
    )
    return FaultInjector(app, fleet, _route, _error_body)


def _route(scope: MutableMapping[str, Any]) -> str | None:
    """Which fault route a request belongs to (see ``gpubench_sdk.testing.FaultPlan``)."""
    path: str = scope.get("path", "")
    method: str = scope.get("method", "")
    if method == "POST":
        return "submit"
    if method == "PUT":
        return "control"
    return "poll" if "/requests/" in path else None


def _error_body(status: int, message: str) -> tuple[bytes, str]:
    return json.dumps({"detail": message}).encode(), "application/json"


def main(argv: list[str] | None = None) -> None:
    """Serve an emulator until interrupted: ``python -m gpubench_fal.emulator``."""
    from gpubench_sdk.testing import EmulatorParser, serve_forever

    # fal's keep_alive: how long an idle runner stays up
    args = EmulatorParser(__doc__, port=8787, idle_flag="--keep-alive-s").parse(argv)
    serve_forever(make_app(args.fleet(), api_key=args.api_key), host=args.host, port=args.port)


if __name__ == "__main__":
    main()
