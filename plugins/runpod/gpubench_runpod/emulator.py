"""A RunPod Serverless emulator on the testing kit's simulated fleet, for tests and demos.

One ASGI app speaks both of RunPod's planes, as the real service does on two hosts:
``/v2/{endpoint_id}/...`` (``run``, ``runsync``, ``status``, ``stream``, ``cancel``,
``purge-queue``, ``health``) and the REST control plane ``/v1/endpoints/{endpoint_id}`` (GET,
PATCH ``workersMin``/``workersMax``/``idleTimeout``), with the documented methods only (polls
are GET, as the official ``runpod`` client sends them). Point the provider at it with
``base_url=<url>/v2`` and ``rest_url=<url>/v1``. Faults in ``fleet.faults`` are applied to
``run``/``runsync`` (route ``submit``), ``status``/``stream`` (``poll``) and the rest
(``control``). Run ``python -m gpubench_runpod.emulator --port 8686`` to serve one by hand.
Needs the testing extra (``pip install 'gpubench-sdk[testing]'``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import math
import time
from collections import deque
from collections.abc import Mapping, MutableMapping
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
)

from . import _protocol as rp

_STATUS = {
    JobStatus.QUEUED: rp.IN_QUEUE,
    JobStatus.RUNNING: rp.IN_PROGRESS,
    JobStatus.COMPLETED: rp.COMPLETED,
    JobStatus.FAILED: rp.FAILED,
    JobStatus.CANCELLED: rp.CANCELLED,
    JobStatus.TIMED_OUT: rp.TIMED_OUT,
}
DEFAULT_ENDPOINT_ID = "emulated-endpoint"


def job_body(job: Job) -> dict[str, Any]:
    """A job as RunPod's /status shows it: times in whole milliseconds, as the service sends."""
    body: dict[str, Any] = {"id": job.id, "status": _STATUS[job.status]}
    if job.queue_ms is not None:
        body["delayTime"] = round(job.queue_ms)
    if job.execution_ms is not None:
        body["executionTime"] = round(job.execution_ms)
    if job.worker_id is not None:
        body["workerId"] = job.worker_id
    if job.status is JobStatus.COMPLETED:
        # a generator handler's output is the list of what it yielded (return_aggregate_stream)
        body["output"] = list(job.stream) if job.stream else job.output
    if job.error is not None:
        body["error"] = job.error
    return body


def make_app(
    fleet: SimulatedFleet,
    *,
    api_key: str | None = None,
    endpoint_id: str = DEFAULT_ENDPOINT_ID,
    runsync_cap_ms: int = rp.RUNSYNC_DEFAULT_WAIT_MS,
    rate_limits: Mapping[str, int] = rp.RATE_LIMITS_PER_WINDOW,
) -> ASGIApp:
    """The emulator app for ``fleet``. With ``api_key`` every request must carry it
    (``Authorization: Bearer <key>`` or the bare key); ``runsync_cap_ms`` shortens how long
    ``/runsync`` holds a request before answering with a pending job (the service's ~90 s);
    ``rate_limits`` caps each operation's requests per 10 s (429 beyond, as RunPod does)."""
    try:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response
        from starlette.routing import Route
    except ImportError as exc:
        raise ImportError(f"the RunPod emulator: {INSTALL_HINT}") from exc

    delivered: dict[str, int] = {}  # stream items already handed out per job (/stream drains)

    def error(status: int, message: str) -> Response:
        return JSONResponse({"error": message}, status_code=status)

    def authorized(request: Request) -> bool:
        if api_key is None:
            return True
        given = request.headers.get("authorization", "")
        given = given.removeprefix("Bearer ").strip()
        return hmac.compare_digest(given.encode(), api_key.encode())

    windows: dict[str, deque[float]] = {}

    def over_limit(operation: str) -> bool:
        limit = rate_limits.get(operation)
        if limit is None:
            return False
        now = time.monotonic()
        window = windows.setdefault(operation, deque())
        while window and window[0] <= now - rp.RATE_LIMIT_WINDOW_S:
            window.popleft()
        if len(window) >= limit:
            return True
        window.append(now)
        return False

    def check(request: Request) -> Response | None:
        if request.path_params["endpoint_id"] != endpoint_id:
            return error(404, "endpoint not found")
        if not authorized(request):
            return error(401, "Unauthorized")
        operation = request.url.path.split("/")[3] if request.url.path.count("/") >= 3 else ""
        if over_limit(operation):
            return error(429, f"rate limit exceeded for /{operation}")
        return None

    def find(request: Request) -> Job | Response:
        job = fleet.job(request.path_params["job_id"])
        return job if job is not None else error(404, "request does not exist")

    async def submit(request: Request) -> Job | Response:
        try:
            body = json.loads(await request.body())
        except ValueError:
            return error(400, "body is not valid JSON")
        if not isinstance(body, dict) or not isinstance(body.get("input"), dict):
            return error(400, "body must be a JSON object with an 'input' object")
        policy = body.get("policy") or {}
        timeout_ms = policy.get("executionTimeout") if isinstance(policy, dict) else None
        try:
            return fleet.submit(
                body["input"],
                execution_timeout_s=timeout_ms / 1e3 if isinstance(timeout_ms, int) else None,
            )
        except QueueFull as exc:
            return error(429, f"queue is full: {exc}")

    async def run(request: Request) -> Response:
        if (denied := check(request)) is not None:
            return denied
        job = await submit(request)
        if isinstance(job, Response):
            return job
        return JSONResponse({"id": job.id, "status": rp.IN_QUEUE})

    async def runsync(request: Request) -> Response:
        if (denied := check(request)) is not None:
            return denied
        wait = request.query_params.get("wait", str(rp.RUNSYNC_DEFAULT_WAIT_MS))
        if not wait.isdigit() or not rp.RUNSYNC_MIN_WAIT_MS <= int(wait) <= rp.RUNSYNC_MAX_WAIT_MS:
            return error(400, f"wait must be {rp.RUNSYNC_MIN_WAIT_MS}..{rp.RUNSYNC_MAX_WAIT_MS} ms")
        job = await submit(request)
        if isinstance(job, Response):
            return job
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(job.done.wait(), min(int(wait), runsync_cap_ms) / 1e3)
        return JSONResponse(job_body(job))

    async def status(request: Request) -> Response:
        if (denied := check(request)) is not None:
            return denied
        job = find(request)
        return job if isinstance(job, Response) else JSONResponse(job_body(job))

    async def stream(request: Request) -> Response:
        if (denied := check(request)) is not None:
            return denied
        job = find(request)
        if isinstance(job, Response):
            return job
        start = delivered.get(job.id, 0)
        items = list(job.stream[start:])
        delivered[job.id] = start + len(items)
        body = {"status": _STATUS[job.status], "stream": [{"output": item} for item in items]}
        return JSONResponse(body)

    async def cancel(request: Request) -> Response:
        if (denied := check(request)) is not None:
            return denied
        job = find(request)
        if isinstance(job, Response):
            return job
        # RunPod answers CANCELLED at once, also for a running job whose worker stops later
        cancelled = fleet.cancel(job.id)
        return JSONResponse(
            {"id": job.id, "status": rp.CANCELLED if cancelled else _STATUS[job.status]}
        )

    async def purge_queue(request: Request) -> Response:
        if (denied := check(request)) is not None:
            return denied
        queued = [t.job_id for t in fleet.truths() if t.status is JobStatus.QUEUED]
        for job_id in queued:
            fleet.cancel(job_id)
        return JSONResponse({"removed": len(queued), "status": "completed"})

    async def health(request: Request) -> Response:
        if (denied := check(request)) is not None:
            return denied
        c = fleet.counts()
        return JSONResponse(
            {
                "jobs": {
                    "completed": c.completed,
                    "failed": c.failed + c.timed_out,
                    "inProgress": c.running,
                    "inQueue": c.queued,
                    "retried": 0,
                },
                "workers": {
                    "idle": c.idle,
                    "initializing": c.initializing,
                    "ready": c.idle,
                    "running": c.running,
                    "throttled": c.throttled,
                    "unhealthy": 0,
                },
            }
        )

    def endpoint_body() -> dict[str, Any]:
        s = fleet.scaling
        assert s.idle_timeout_s is not None
        return {
            "id": endpoint_id,
            "name": "gpubench emulator",
            "workersMin": s.min_workers,
            "workersMax": s.max_workers,
            "idleTimeout": math.ceil(s.idle_timeout_s),
            "scalerType": "QUEUE_DELAY",
            "scalerValue": 4,
            "flashboot": False,
        }

    async def endpoint(request: Request) -> Response:
        if (denied := check(request)) is not None:
            return denied
        if request.method == "PATCH":
            try:
                body = json.loads(await request.body())
            except ValueError:
                return error(400, "body is not valid JSON")
            if not isinstance(body, dict):
                return error(400, "body must be a JSON object")
            changes: dict[str, int] = {}
            for field, name in (
                ("workersMin", "min_workers"),
                ("workersMax", "max_workers"),
                ("idleTimeout", "idle_timeout_s"),
            ):
                if field in body:
                    value = body[field]
                    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                        return error(400, f"{field} must be a non-negative integer")
                    changes[name] = value
            from gpubench_sdk import ScalingSettings

            try:
                fleet.set_scaling(ScalingSettings(**changes))
            except ValueError as exc:
                return error(400, str(exc))
        return JSONResponse(endpoint_body())

    prefix = "/v2/{endpoint_id}"
    app = Starlette(
        routes=[
            Route(f"{prefix}/run", run, methods=["POST"]),
            Route(f"{prefix}/runsync", runsync, methods=["POST"]),
            # GET only, as documented and as the official client (runpod 1.12.0,
            # endpoint/runner.py) polls; runpod's local API server is the one that wants POST.
            Route(f"{prefix}/status/{{job_id}}", status, methods=["GET"]),
            Route(f"{prefix}/stream/{{job_id}}", stream, methods=["GET"]),
            Route(f"{prefix}/cancel/{{job_id}}", cancel, methods=["POST"]),
            Route(f"{prefix}/purge-queue", purge_queue, methods=["POST"]),
            Route(f"{prefix}/health", health, methods=["GET"]),
            Route("/v1/endpoints/{endpoint_id}", endpoint, methods=["GET", "PATCH"]),
        ],
        lifespan=fleet_lifespan(fleet),
    )
    return FaultInjector(app, fleet, _route)


def _route(scope: MutableMapping[str, Any]) -> str | None:
    """Which fault route a request belongs to (see ``gpubench_sdk.testing.FaultPlan``)."""
    path: str = scope.get("path", "")
    last = path.rstrip("/").rsplit("/", 1)[-1]
    if path.startswith("/v2/") and last in ("run", "runsync"):
        return "submit"
    if "/status/" in path or "/stream/" in path:
        return "poll"
    return "control"


def main(argv: list[str] | None = None) -> None:
    """Serve an emulator until interrupted: ``python -m gpubench_runpod.emulator``."""
    from gpubench_sdk.testing import EmulatorParser, serve_forever

    parser = EmulatorParser(__doc__, port=8686)
    parser.add_argument("--endpoint-id", default=DEFAULT_ENDPOINT_ID)
    args = parser.parse(argv)
    app = make_app(args.fleet(), api_key=args.api_key, endpoint_id=args.endpoint_id)
    serve_forever(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
