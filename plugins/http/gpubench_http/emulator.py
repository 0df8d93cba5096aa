"""A generic JSON inference service on the testing kit's simulated fleet, with Modal's quirks.

``POST /predict`` runs the body (or its ``input`` object) as a fleet job and answers
``{"id", "output", "metrics": {"queue_time", "predict_time"}}`` (seconds, as Baseten-style
services report), with ``x-request-id`` and ``x-queue-ms`` headers. A request still running
after ``redirect_after_s`` is answered ``303 See Other`` with ``Location: /result/{id}``, as
Modal's web endpoints do after 150 s (modal.com/docs/guide/webhook-timeouts); ``GET
/result/{id}`` waits again and redirects again, until the result is ready. ``GET /health``
answers 200 while a worker is up and 503 while none is (readiness). A client that disconnects
cancels its job. ``auth`` picks the scheme the service requires (``bearer``, ``api-key``,
``key``, ``modal``: ``Modal-Key``/``Modal-Secret`` from ``api_key`` written ``key:secret``).
Faults in ``fleet.faults`` hit ``/predict`` (route ``submit``) and ``/result`` (``poll``).
Run ``python -m gpubench_http.emulator --port 0`` to serve one by hand (testing extra needed).
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
    Job,
    JobStatus,
    QueueFull,
    SimulatedFleet,
)

MODAL_REDIRECT_AFTER_S = 150.0  # modal.com/docs/guide/webhook-timeouts


def make_app(
    fleet: SimulatedFleet,
    *,
    api_key: str | None = None,
    auth: str = "bearer",
    redirect_after_s: float = MODAL_REDIRECT_AFTER_S,
) -> ASGIApp:
    """The emulator app for ``fleet``; with ``api_key`` every request must carry it."""
    try:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response
        from starlette.routing import Route
    except ImportError as exc:
        raise ImportError(f"the HTTP emulator: {INSTALL_HINT}") from exc

    def error(status: int, message: str) -> Response:
        return JSONResponse({"error": message}, status_code=status)

    def authorized(request: Request) -> bool:
        if api_key is None:
            return True
        h = request.headers
        if auth == "modal":
            given = f"{h.get('modal-key', '')}:{h.get('modal-secret', '')}"
        else:
            scheme = {"bearer": "Bearer ", "api-key": "Api-Key ", "key": "Key "}[auth]
            value = h.get("authorization", "")
            given = value[len(scheme) :] if value.startswith(scheme) else ""
        return hmac.compare_digest(given.encode(), api_key.encode())

    def answer(job: Job) -> Response:
        if job.status is not JobStatus.COMPLETED:
            return error(500, f"handler failed: {job.error}")
        body = {
            "id": job.id,
            "output": job.output,
            "metrics": {
                "queue_time": (job.queue_ms or 0.0) / 1e3,
                "predict_time": (job.execution_ms or 0.0) / 1e3,
            },
        }
        headers = {"x-request-id": job.id, "x-queue-ms": f"{job.queue_ms or 0.0:.3f}"}
        return JSONResponse(body, headers=headers)

    async def wait(request: Request, job: Job) -> Response:
        """The answer, a 303 to the result URL after ``redirect_after_s``, or nothing (the
        client left, and its job is cancelled)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + redirect_after_s
        while not job.done.is_set():
            left = deadline - loop.time()
            if left <= 0:  # a small body, as a real redirect may carry (and a fault can cut)
                location = f"/result/{job.id}"
                return JSONResponse(
                    {"result_url": location}, status_code=303, headers={"location": location}
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(job.done.wait(), min(left, 0.05))
            if not job.done.is_set() and await request.is_disconnected():
                fleet.cancel(job.id)
                return Response(status_code=499)
        return answer(job)

    async def predict(request: Request) -> Response:
        if not authorized(request):
            return error(401, "missing or invalid credentials")
        try:
            body = json.loads(await request.body())
        except ValueError:
            return error(400, "body is not valid JSON")
        if not isinstance(body, dict):
            return error(422, "body must be a JSON object")
        job_input = body["input"] if isinstance(body.get("input"), dict) else body
        try:
            job = fleet.submit(job_input)
        except QueueFull as exc:
            return error(429, f"too many requests: {exc}")
        return await wait(request, job)

    async def result(request: Request) -> Response:
        if not authorized(request):
            return error(401, "missing or invalid credentials")
        job = fleet.job(request.path_params["job_id"])
        if job is None:
            return error(404, "no such call")
        return await wait(request, job)

    async def health(request: Request) -> Response:
        up = fleet.counts().workers > 0
        return JSONResponse({"ready": up}, status_code=200 if up else 503)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with fleet:
            yield

    app = Starlette(
        routes=[
            Route("/predict", predict, methods=["POST", "PUT"]),
            Route("/result/{job_id}", result, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
    return FaultInjector(app, fleet, _route)


def _route(scope: MutableMapping[str, Any]) -> str | None:
    path: str = scope.get("path", "")
    if path == "/predict":
        return "submit"
    return "poll" if path.startswith("/result/") else "control"


def main(argv: list[str] | None = None) -> None:
    """Serve an emulator until interrupted: ``python -m gpubench_http.emulator``."""
    import argparse
    import os

    from gpubench_sdk.testing import Duration, FleetConfig, serve_forever

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8787)
    parser.add_argument("--api-key-env", help="require the key in this environment variable")
    parser.add_argument("--auth", default="bearer", choices=["bearer", "api-key", "key", "modal"])
    parser.add_argument("--redirect-after-s", type=float, default=MODAL_REDIRECT_AFTER_S)
    parser.add_argument("--cold-start-s", type=float, default=0.5)
    parser.add_argument("--max-workers", type=int, default=2)
    parser.add_argument("--idle-timeout-s", type=float, default=1.0)
    args = parser.parse_args(argv)
    config = FleetConfig(
        cold_start=Duration.fixed(args.cold_start_s),
        max_workers=args.max_workers,
        idle_timeout_s=args.idle_timeout_s,
    )
    key = os.environ[args.api_key_env] if args.api_key_env else None
    app = make_app(
        SimulatedFleet(config), api_key=key, auth=args.auth, redirect_after_s=args.redirect_after_s
    )
    serve_forever(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
