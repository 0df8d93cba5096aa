"""A Cog container emulator on the testing kit's simulated fleet, for tests and demos.

Speaks Cog's HTTP API (``python/cog/server/http.py`` in github.com/replicate/cog):
``POST /predictions`` (waits for the result; ``Prefer: respond-async`` answers 202 at once),
``PUT /predictions/{id}`` (idempotent: the same id while it runs returns its state, 202),
``POST /predictions/{id}/cancel`` (200 ``{}``; 404 ``{}`` if unknown or finished),
``GET /health-check`` (``STARTING``/``READY``/``BUSY`` with the container's ``setup``
timestamps) and ``GET /``.

Each fleet worker is one container behind a proxy (Cloud Run, a Kubernetes Service): a
request to a cold service waits while a container boots and runs its setup, which becomes the
prediction's starting phase; ``/health-check`` answers 503 while no container runs. With
``reject_when_busy`` (the default) a request that finds every container busy gets Cog's 409.
``api_key`` stands for the proxy's bearer token (Cog itself has no auth). Faults apply to
creates (route ``submit``) and health checks (``poll``).
``python -m gpubench_replicate.cog_emulator --port 5000`` serves one by hand. Needs the
testing extra (``pip install 'gpubench-sdk[testing]'``).
"""

from __future__ import annotations

import contextlib
import hmac
import json
from collections.abc import AsyncIterator
from typing import Any

from gpubench_sdk.testing import (
    FaultInjector,
    FleetConfig,
    QueueFull,
    SimulatedFleet,
    WorkerBill,
)
from gpubench_sdk.testing._faults import ASGIApp, Scope
from gpubench_sdk.testing._harness import require

from . import _cog
from . import _prediction as p
from ._emulation import WallClock, prediction_body

BUSY_DETAIL = "Already running a prediction"
NO_CONTAINER = "no container is running"


def error_body(status: int, message: str) -> tuple[bytes, str]:
    """Cog's (FastAPI's) error shape: ``{"detail": ...}``; 409 with its busy text."""
    detail = BUSY_DETAIL if status == 409 else message
    return json.dumps({"detail": detail}).encode(), "application/json"


def make_app(
    fleet: SimulatedFleet, *, api_key: str | None = None, reject_when_busy: bool = True
) -> ASGIApp:
    """The emulator app for ``fleet``; each of its workers is one Cog container."""
    require("starlette")
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    clock = WallClock()

    def error(status: int, message: str) -> Response:
        body, ctype = error_body(status, message)
        return Response(body, status_code=status, media_type=ctype)

    def authorized(request: Request) -> bool:
        if api_key is None:
            return True
        given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        return hmac.compare_digest(given.encode(), api_key.encode())

    def busy() -> bool:
        c = fleet.counts()
        assert fleet.scaling.max_workers is not None
        return c.running + c.queued >= fleet.scaling.max_workers

    async def predict(request: Request, prediction_id: str | None) -> Response:
        if not authorized(request):
            return error(401, "Unauthorized")
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError:
            return error(422, "body is not valid JSON")
        if not isinstance(body, dict):
            return error(422, "body must be a JSON object")
        given_id = body.get("id")
        if prediction_id is not None:
            if given_id is not None and given_id != prediction_id:
                return error(422, "prediction ID must match the ID supplied in the URL")
            running = fleet.job(prediction_id)
            if running is not None and not running.status.terminal:
                return JSONResponse(prediction_body(running, clock), status_code=202)
            given_id = prediction_id
        payload = body.get("input") or {}
        if not isinstance(payload, dict):
            return error(422, "input: a JSON object is required")
        if reject_when_busy and busy():
            return error(409, BUSY_DETAIL)
        job_id = given_id if isinstance(given_id, str) and given_id else None
        if job_id is not None and fleet.job(job_id) is not None:
            return error(409, BUSY_DETAIL)  # one id, one prediction
        try:
            job = fleet.submit(payload, job_id=job_id)
        except QueueFull:
            return error(409, BUSY_DETAIL)
        if request.headers.get("prefer") == "respond-async":
            return JSONResponse(prediction_body(job, clock), status_code=202)
        await job.done.wait()
        return JSONResponse(prediction_body(job, clock))

    async def post_prediction(request: Request) -> Response:
        return await predict(request, None)

    async def put_prediction(request: Request) -> Response:
        return await predict(request, request.path_params["prediction_id"])

    async def cancel(request: Request) -> Response:
        if not authorized(request):
            return error(401, "Unauthorized")
        job = fleet.job(request.path_params["prediction_id"])
        if job is None or job.status.terminal:
            return JSONResponse({}, status_code=404)
        fleet.cancel(job.id)
        return JSONResponse({})

    def setup_of(bill: WorkerBill | None) -> dict[str, Any]:
        if bill is None or bill.boot_end_s is None:
            return {}  # Cog sends an empty setup until setup has finished
        return {
            "started_at": clock.iso(bill.started_s),
            "completed_at": clock.iso(bill.boot_end_s),
            "logs": "",
            "status": p.SUCCEEDED,
        }

    async def health(request: Request) -> Response:
        if not authorized(request):
            return error(401, "Unauthorized")
        c = fleet.counts()
        if c.is_cold:
            # No container: the proxy has no backend to ask (a Kubernetes Service without
            # ready pods answers 503). Not waking one keeps fleet watching from warming it.
            return error(503, NO_CONTAINER)
        live = [b for b in fleet.billing.workers if b.stopped_s is None]
        booted = [b for b in live if b.boot_end_s is not None]
        bill = max(booted, key=lambda b: b.boot_end_s or 0.0) if booted else None
        if c.idle:
            status = _cog.READY
        elif c.running:
            status = _cog.BUSY
        else:
            status = _cog.STARTING
        return JSONResponse({"status": status, "setup": setup_of(bill)})

    async def index(request: Request) -> Response:
        return JSONResponse(
            {
                "cog_version": "emulated",
                "docs_url": "/docs",
                "openapi_url": "/openapi.json",
                "shutdown_url": "/shutdown",
                "healthcheck_url": "/health-check",
                "predictions_url": "/predictions",
                "predictions_idempotent_url": "/predictions/{prediction_id}",
                "predictions_cancel_url": "/predictions/{prediction_id}/cancel",
            }
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with fleet:
            yield

    app = Starlette(
        routes=[
            Route("/", index, methods=["GET"]),
            Route("/health-check", health, methods=["GET"]),
            Route("/predictions", post_prediction, methods=["POST"]),
            Route("/predictions/{prediction_id}", put_prediction, methods=["PUT"]),
            Route("/predictions/{prediction_id}/cancel", cancel, methods=["POST"]),
        ],
        lifespan=lifespan,
    )
    return FaultInjector(app, fleet, _route, render_error=error_body)


def _route(scope: Scope) -> str | None:
    """Which fault route a request belongs to (see ``gpubench_sdk.testing.FaultPlan``)."""
    path: str = scope.get("path", "")
    if path.endswith("/cancel"):
        return "control"
    if path.startswith("/predictions"):
        return "submit"
    if path == "/health-check":
        return "poll"
    return None


def main(argv: list[str] | None = None) -> None:
    """Serve an emulator until interrupted: ``python -m gpubench_replicate.cog_emulator``."""
    import argparse
    import os

    from gpubench_sdk.testing import Duration, serve_forever

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5000)
    parser.add_argument("--api-key-env", help="require this bearer token (a proxy's)")
    parser.add_argument("--setup-s", type=float, default=0.5, help="container boot + setup")
    parser.add_argument("--containers", type=int, default=1, help="most containers at once")
    parser.add_argument("--idle-timeout-s", type=float, default=1.0)
    args = parser.parse_args(argv)
    config = FleetConfig(
        cold_start=Duration.fixed(args.setup_s),
        max_workers=args.containers,
        idle_timeout_s=args.idle_timeout_s,
    )
    key = os.environ[args.api_key_env] if args.api_key_env else None
    app = make_app(SimulatedFleet(config), api_key=key)
    serve_forever(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
