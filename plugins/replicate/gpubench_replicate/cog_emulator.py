"""A Cog container emulator on the testing kit's simulated fleet, for tests and demos.

Speaks Cog's HTTP API as Cog 0.23.1's own server answers it (observed on loopback; see
``gpubench_replicate._cog``'s docstring): ``POST /predictions`` (waits for the result;
``Prefer: respond-async`` answers 202 at once), ``PUT /predictions/{id}`` (idempotent: the same
id while it runs returns its state, 202), ``POST /predictions/{id}/cancel`` (200 ``{}``; 404
``{}`` if unknown or finished), ``GET /health-check`` (``STARTING``/``READY``/``BUSY`` with the
container's ``setup`` and ``version``) and ``GET /``. Predictions come back without timestamps
(0.23 sends none), errors as ``{"error": ..., "status": "failed"}``.

Two deployments of a container:

* **direct** (the default, like ``docker run``): the container starts with the server and runs
  its setup; a prediction that arrives meanwhile gets ``503 Setup has not finished yet``. When
  the fleet has stopped it (idle timeout), the next request starts one and gets the 503.
* ``behind_proxy=True`` (Cloud Run, a Kubernetes Service with a readiness probe): each fleet
  worker is one container; the proxy starts them on demand and holds a request until one is
  ready, so setup becomes the prediction's wait; ``/health-check`` answers 503 while no
  container runs.

Either way a request that finds every container busy gets Cog's 409, and a container frees its
slot ``slot_release_s`` *after* answering, as Cog's does, so a request sent at once can get 409.
``api_key`` stands for a proxy's bearer token (Cog itself has no auth). Faults apply to creates
(route ``submit``) and health checks (``poll``). ``python -m gpubench_replicate.cog_emulator
--port 5000`` serves one by hand. Needs the testing extra (``pip install 'gpubench-sdk[testing]'``).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import time
from collections.abc import AsyncIterator, MutableMapping
from datetime import UTC, datetime
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
    WorkerBill,
)

from . import _cog
from . import _prediction as p
from ._emulation import WallClock, prediction_body

AT_CAPACITY = "At capacity - all prediction slots busy"
SETUP_RUNNING = (
    "Setup has not finished yet. Wait until it has finished, or GET /health-check for status."
)
NO_CONTAINER = "no container is running"
VERSION = {"coglet": "emulated", "python_sdk": "emulated"}


def error_body(status: int, message: str) -> tuple[bytes, str]:
    """Cog 0.23's error shape, ``{"error": ..., "status": "failed"}``; 409 with its text."""
    text = AT_CAPACITY if status == 409 else message
    return json.dumps({"error": text, "status": p.FAILED}).encode(), "application/json"


def cog_time(perf_s: float, offset_s: float) -> str:
    """A ``perf_counter`` instant as Cog 0.23 writes it: RFC 3339, nanoseconds, ``+00:00``."""
    unix_ns = round((perf_s + offset_s) * 1e9)
    whole = datetime.fromtimestamp(unix_ns // 1_000_000_000, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{whole}.{unix_ns % 1_000_000_000:09d}+00:00"


def make_app(
    fleet: SimulatedFleet,
    *,
    api_key: str | None = None,
    behind_proxy: bool = False,
    reject_when_busy: bool = True,
    slot_release_s: float = 0.002,
    timestamps: bool = False,
) -> ASGIApp:
    """The emulator app for ``fleet`` (see the module docstring for the two deployments);
    ``timestamps`` adds ``created_at``/``started_at``/``completed_at`` to predictions, as Cog
    before 0.23 sent them."""
    try:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response
        from starlette.routing import Route
    except ImportError as exc:
        raise ImportError(f"the Cog emulator: {INSTALL_HINT}") from exc

    clock = WallClock()
    offset_s = clock.offset_s
    releasing: list[float] = []  # when each slot answered but not yet freed becomes free

    def error(status: int, message: str) -> Response:
        body, ctype = error_body(status, message)
        return Response(body, status_code=status, media_type=ctype)

    def authorized(request: Request) -> bool:
        if api_key is None:
            return True
        given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        return hmac.compare_digest(given.encode(), api_key.encode())

    def still_releasing() -> int:
        now = time.perf_counter()
        releasing[:] = [t for t in releasing if t > now]
        return len(releasing)

    def refusal() -> Response | None:
        """Cog's answer when the prediction cannot start now, else None."""
        c = fleet.counts()
        assert fleet.scaling.max_workers is not None
        taken = c.running + c.queued + still_releasing()
        if behind_proxy:
            busy = taken >= fleet.scaling.max_workers
            return error(409, AT_CAPACITY) if busy and reject_when_busy else None
        if c.idle + c.running == 0:  # in setup, or no container: start one, like a platform
            fleet.request_worker()
            return error(503, SETUP_RUNNING)
        if taken >= c.idle + c.running and reject_when_busy:
            return error(409, AT_CAPACITY)
        return None

    def body_of(job: Job) -> dict[str, Any]:
        """Cog 0.23's prediction: no input and no timestamps once it has ended."""
        full = prediction_body(job, clock)
        keep: tuple[str, ...] = ("id", "status", "output", "logs", "metrics")
        if timestamps:
            keep += ("created_at", "started_at", "completed_at")
        body = {k: full[k] for k in keep if full[k] is not None}
        if job.status is JobStatus.FAILED:
            body["error"] = full["error"]
        if not job.status.terminal:
            body["input"] = full["input"]
        body["metrics"] = {k: v for k, v in full["metrics"].items() if k == "predict_time"}
        return body

    async def predict(request: Request, prediction_id: str | None) -> Response:
        if not authorized(request):
            return error(401, "Unauthorized")
        raw = await request.body()
        try:
            body = json.loads(raw or b"{}")
        except ValueError:  # coglet answers a body it cannot parse in plain text
            return Response(
                b"Failed to parse the request body as JSON", 400, media_type="text/plain"
            )
        if not isinstance(body, dict):
            return error(422, "body must be a JSON object")
        given_id = body.get("id")
        if prediction_id is not None:
            if given_id is not None and given_id != prediction_id:
                detail = [
                    {
                        "loc": ["body", "id"],
                        "msg": "prediction ID must match the ID supplied in the URL",
                        "type": "value_error",
                    }
                ]
                return JSONResponse({"detail": detail}, status_code=422)
            running = fleet.job(prediction_id)
            if running is not None and not running.status.terminal:
                return JSONResponse(body_of(running), status_code=202)
            given_id = prediction_id
        payload = body.get("input") or {}
        if not isinstance(payload, dict):
            return error(422, "input: a JSON object is required")
        if (refused := refusal()) is not None:
            return refused
        job_id = given_id if isinstance(given_id, str) and given_id else None
        if job_id is not None and fleet.job(job_id) is not None:
            return error(409, AT_CAPACITY)  # one id, one prediction
        try:
            job = fleet.submit(payload, job_id=job_id)
        except QueueFull:
            return error(409, AT_CAPACITY)
        if request.headers.get("prefer") == "respond-async":
            return JSONResponse({"id": job.id, "status": p.STARTING}, status_code=202)
        await job.done.wait()
        releasing.append(time.perf_counter() + slot_release_s)  # freed just after answering
        return JSONResponse(body_of(job))

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

    def setup_of(bill: WorkerBill) -> dict[str, Any]:
        setup: dict[str, Any] = {"started_at": cog_time(bill.started_s, offset_s)}
        if bill.boot_end_s is None:
            return {**setup, "status": p.STARTING}
        return {
            **setup,
            "completed_at": cog_time(bill.boot_end_s, offset_s),
            "status": p.SUCCEEDED,
            "logs": "",
        }

    async def health(request: Request) -> Response:
        if not authorized(request):
            return error(401, "Unauthorized")
        live = [b for b in fleet.billing.workers if b.stopped_s is None]
        if not live:
            # No container: a proxy has no backend to ask (a Kubernetes Service without ready
            # pods answers 503). Not waking one keeps fleet watching from warming it.
            return error(503, NO_CONTAINER)
        booted = [b for b in live if b.boot_end_s is not None]
        bill = max(booted, key=lambda b: b.boot_end_s or 0.0) if booted else live[-1]
        c = fleet.counts()
        if c.idle:
            status = _cog.READY
        elif c.running:
            status = _cog.BUSY
        else:
            status = _cog.STARTING
        return JSONResponse({"status": status, "setup": setup_of(bill), "version": VERSION})

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
            if not behind_proxy:
                fleet.request_worker()  # the container starts (and runs setup) with the server
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


def _route(scope: MutableMapping[str, Any]) -> str | None:
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
    parser.add_argument(
        "--proxy",
        action="store_true",
        help="containers behind a proxy that starts them on demand and holds requests",
    )
    parser.add_argument("--containers", type=int, default=1, help="most containers at once")
    parser.add_argument("--idle-timeout-s", type=float, default=1.0)
    args = parser.parse_args(argv)
    config = FleetConfig(
        cold_start=Duration.fixed(args.setup_s),
        max_workers=args.containers,
        idle_timeout_s=args.idle_timeout_s,
    )
    key = os.environ[args.api_key_env] if args.api_key_env else None
    app = make_app(SimulatedFleet(config), api_key=key, behind_proxy=args.proxy)
    serve_forever(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
