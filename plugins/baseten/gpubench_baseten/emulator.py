"""A Baseten emulator on the testing kit's simulated fleet, for tests and demos.

Baseten answers inference on ``model-{id}.api.baseten.co`` and management on
``api.baseten.co``; one emulator app serves both, for one model with one deployment, since
their paths do not overlap: ``/environments/{env}/...``, ``/deployment/{id}/...`` and
``/production/...`` (``predict``, ``async_predict``, ``async_queue_status``, ``wake``),
``/async_request/{id}`` (GET, DELETE), and ``/v1/models/{model}/deployments/{dep}`` with its
``autoscaling_settings`` (PATCH). Point the provider at it with ``base_url=<url>`` and
``api_url=<url>``, the official ``baseten`` SDK with ``base_url_override=<url>``. A model
streams when its input asks for ``chunks`` (one JSON line per piece). Held predicts are not
cancelled when the caller hangs up (Baseten leaves that to the model's code); the emulator
delivers no webhooks (``webhook_status`` stays ``PENDING``). Faults in ``fleet.faults`` apply to
``predict``/``async_predict`` (route ``submit``), status reads (``poll``) and the rest
(``control``). Run ``python -m gpubench_baseten.emulator --port 8788`` to serve one by hand.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Mapping, MutableMapping
from datetime import UTC, datetime, timedelta
from typing import Any

from gpubench_sdk import ScalingSettings
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

from . import _protocol as bt

DEFAULT_MODEL_ID = "emu1model"
DEFAULT_DEPLOYMENT_ID = "emu1dep"
_ASYNC_STATUS = {
    JobStatus.QUEUED: bt.QUEUED,
    JobStatus.RUNNING: bt.IN_PROGRESS,
    JobStatus.COMPLETED: bt.SUCCEEDED,
    JobStatus.FAILED: bt.FAILED,
    JobStatus.TIMED_OUT: bt.FAILED,
    JobStatus.CANCELLED: bt.CANCELED,
}
RATE_LIMITS_PER_S = {
    "async_predict": bt.ASYNC_PREDICT_PER_S,
    "async_request": bt.ASYNC_STATUS_PER_S,
}


def make_app(
    fleet: SimulatedFleet,
    *,
    api_key: str | None = None,
    model_id: str = DEFAULT_MODEL_ID,
    deployment_id: str = DEFAULT_DEPLOYMENT_ID,
    environment: str = "production",
    rate_limits: Mapping[str, int] = RATE_LIMITS_PER_S,
) -> ASGIApp:
    """The emulator app for ``fleet``. With ``api_key`` every request must carry
    ``Authorization: Api-Key <key>`` (or ``Bearer <key>``); ``rate_limits`` caps
    ``async_predict`` and status reads per second (429 beyond, as Baseten does). A fleet with
    ``max_queue`` rejects predicts beyond it with 429 (backpressure ``REJECT_ON_FULL``)."""
    try:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response, StreamingResponse
        from starlette.routing import Route
    except ImportError as exc:
        raise ImportError(f"the Baseten emulator: {INSTALL_HINT}") from exc

    created = datetime.now(UTC).replace(microsecond=0)
    extra: dict[str, int] = dict(bt.AUTOSCALING_DEFAULTS)
    walls: dict[str, tuple[datetime, float]] = {}  # async request -> (created_at, perf time)
    windows: dict[str, deque[float]] = {}

    def error(status: int, message: str, code: str, **headers: str) -> Response:
        body = {"error": message, "error_code": code}
        return JSONResponse(body, status_code=status, headers=headers or None)

    def denied(request: Request) -> Response | None:
        if api_key is None:
            return None
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme not in ("Api-Key", "Bearer") or not hmac.compare_digest(
            given.encode(), api_key.encode()
        ):
            return error(
                401, "Authorization: Api-Key <BASETEN_API_KEY> is missing or wrong", "unauthorized"
            )
        return None

    def over_limit(operation: str) -> Response | None:
        limit = rate_limits.get(operation)
        if limit is None:
            return None
        now = time.monotonic()
        window = windows.setdefault(operation, deque())
        while window and window[0] <= now - 1.0:
            window.popleft()
        if len(window) >= limit:
            return error(
                429,
                f"{operation}: over {limit} requests per second",
                "rate_limited",
                **{"Retry-After": "1"},
            )
        window.append(now)
        return None

    def target_ok(request: Request) -> Response | None:
        params = request.path_params
        if (
            params.get("env", environment) != environment
            or params.get("dep", deployment_id) != deployment_id
        ):
            return error(
                404, "no such environment or deployment of this model", "model_does_not_exist"
            )
        return None

    async def start(request: Request, async_call: bool) -> Job | Response:
        if (refused := denied(request) or target_ok(request)) is not None:
            return refused
        if async_call and (refused := over_limit("async_predict")) is not None:
            return refused
        try:
            body = json.loads(await request.body())
        except ValueError:
            return error(400, "body is not valid JSON", "client_error")
        if not isinstance(body, dict):
            return error(400, "body must be a JSON object", "client_error")
        if async_call:
            if not isinstance(body.get("model_input"), dict):
                return error(400, "model_input (an object) is required", "client_error")
            body = body["model_input"]
        try:
            return fleet.submit(body, job_id=uuid.uuid4().hex)
        except QueueFull as exc:
            return error(
                429,
                f"the deployment's queue is full: {exc}",
                "rate_limited",
                **{"Retry-After": "1"},
            )

    def failure(job: Job) -> Response:
        if job.status is JobStatus.TIMED_OUT:
            return error(504, job.error or "predict timed out", "timeout")
        return error(500, job.error or "the model raised", "application_error")

    async def predict(request: Request) -> Response:
        job = await start(request, async_call=False)
        if isinstance(job, Response):
            return job
        if job.input.get("chunks"):
            return await streamed(job)
        await job.done.wait()
        answer = JSONResponse(job.output) if job.status is JobStatus.COMPLETED else failure(job)
        answer.headers[bt.REQUEST_ID_HEADER] = job.id
        return answer

    async def streamed(job: Job) -> Response:
        while not job.stream and not job.done.is_set():
            with contextlib.suppress(TimeoutError):
                await _wait(job, 0.01)
        if job.done.is_set() and job.status is not JobStatus.COMPLETED and not job.stream:
            answer = failure(job)
            answer.headers[bt.REQUEST_ID_HEADER] = job.id
            return answer

        async def pieces() -> AsyncIterator[bytes]:
            sent = 0
            while True:
                for piece in job.stream[sent:]:
                    yield (json.dumps(piece) + "\n").encode()
                sent = len(job.stream)
                if job.done.is_set() and sent == len(job.stream):
                    return
                with contextlib.suppress(TimeoutError):
                    await _wait(job, 0.01)

        headers = {bt.REQUEST_ID_HEADER: job.id}
        return StreamingResponse(pieces(), media_type="application/octet-stream", headers=headers)

    async def async_predict(request: Request) -> Response:
        job = await start(request, async_call=True)
        if isinstance(job, Response):
            return job
        walls[job.id] = (datetime.now(UTC), job.submitted_s)
        return JSONResponse({"request_id": job.id}, status_code=201)

    def wall(job_id: str, at_s: float | None) -> str | None:
        origin, origin_s = walls[job_id]
        return None if at_s is None else (origin + timedelta(seconds=at_s - origin_s)).isoformat()

    def found(request: Request) -> Job | Response:
        job = fleet.job(request.path_params["request_id"])
        if job is None or job.id not in walls:
            return error(404, "no such async request", "client_error")
        return job

    async def async_request(request: Request) -> Response:
        if (refused := denied(request) or over_limit("async_request")) is not None:
            return refused
        job = found(request)
        if isinstance(job, Response):
            return job
        at = {JobStatus.QUEUED: job.submitted_s, JobStatus.RUNNING: job.started_s}.get(
            job.status, job.finished_s
        )
        errors = []
        if job.status in (JobStatus.FAILED, JobStatus.TIMED_OUT):
            code = (
                "MODEL_PREDICT_TIMEOUT"
                if job.status is JobStatus.TIMED_OUT
                else "MODEL_PREDICT_ERROR"
            )
            errors.append({"code": code, "message": job.error or "the model raised"})
        return JSONResponse(
            {
                "request_id": job.id,
                "model_id": model_id,
                "deployment_id": deployment_id,
                "status": _ASYNC_STATUS[job.status],
                "webhook_status": "PENDING",
                "created_at": wall(job.id, job.submitted_s),
                "status_at": wall(job.id, at),
                "errors": errors,
            }
        )

    async def cancel(request: Request) -> Response:
        if (refused := denied(request)) is not None:
            return refused
        job = found(request)
        if isinstance(job, Response):
            return job
        canceled = job.status is JobStatus.QUEUED and fleet.cancel(job.id)
        message = (
            "canceled"
            if canceled
            else f"request is {_ASYNC_STATUS[job.status]}: only a QUEUED one can be canceled"
        )
        return JSONResponse({"request_id": job.id, "canceled": canceled, "message": message})

    async def queue_status(request: Request) -> Response:
        if (refused := denied(request) or target_ok(request)) is not None:
            return refused
        states = [t.status for t in fleet.truths() if t.job_id in walls]
        return JSONResponse(
            {
                "model_id": model_id,
                "deployment_id": deployment_id,
                "num_queued_requests": states.count(JobStatus.QUEUED),
                "num_in_progress_requests": states.count(JobStatus.RUNNING),
            }
        )

    async def wake(request: Request) -> Response:
        if (refused := denied(request) or target_ok(request)) is not None:
            return refused
        fleet.request_worker()
        return Response(status_code=202)

    def settings_body() -> dict[str, Any]:
        s = fleet.scaling
        assert s.idle_timeout_s is not None
        return {
            "min_replica": s.min_workers,
            "max_replica": s.max_workers,
            "scale_down_delay": round(s.idle_timeout_s),
            **extra,
        }

    def deployment_body() -> dict[str, Any]:
        c = fleet.counts()
        active = c.idle + c.running + c.initializing
        status = bt.SCALED_TO_ZERO if active == 0 else bt.ACTIVE
        if c.initializing and not (c.idle or c.running):
            status = bt.WAKING_UP
        policy = "REJECT_ON_FULL" if fleet.config.max_queue is not None else "QUEUE_ON_FULL"
        return {
            "id": deployment_id,
            "created_at": created.isoformat(),
            "name": "deployment-1",
            "model_id": model_id,
            "is_production": environment == "production",
            "is_development": environment == "development",
            "status": status,
            "active_replica_count": active,
            "autoscaling_settings": settings_body(),
            "instance_type_name": "emulated-gpu",
            "environment": environment,
            "labels": {},
            "request_backpressure_settings": {"policy": policy},
        }

    def deployment_ok(request: Request) -> Response | None:
        params = request.path_params
        if params["model"] != model_id or params["dep"] not in (deployment_id, environment):
            return error(404, "model or deployment not found", "model_does_not_exist")
        return None

    async def deployment(request: Request) -> Response:
        if (refused := denied(request) or deployment_ok(request)) is not None:
            return refused
        return JSONResponse(deployment_body())

    async def autoscaling(request: Request) -> Response:
        if (refused := denied(request) or deployment_ok(request)) is not None:
            return refused
        try:
            body = json.loads(await request.body())
        except ValueError:
            return error(400, "body is not valid JSON", "client_error")
        if not isinstance(body, dict):
            return error(400, "body must be a JSON object", "client_error")
        unknown = set(body) - set(bt.AUTOSCALING_RANGES)
        if unknown:
            return error(400, f"unknown fields: {sorted(unknown)}", "client_error")
        changes = {k: v for k, v in body.items() if v is not None}
        for field, value in changes.items():
            low, high = bt.AUTOSCALING_RANGES[field]
            if (
                not isinstance(value, int)
                or isinstance(value, bool)
                or value < low
                or (high is not None and value > high)
            ):
                bounds = f"{low}..{high}" if high is not None else f">= {low}"
                return error(400, f"{field} must be an integer {bounds}", "client_error")
        before = settings_body()
        try:
            fleet.set_scaling(
                ScalingSettings(
                    changes.get("min_replica"),
                    changes.get("max_replica"),
                    changes.get("scale_down_delay"),
                )
            )
        except ValueError as exc:  # ConfigError: min above max
            return error(400, str(exc), "client_error")
        extra.update({k: v for k, v in changes.items() if k in bt.AUTOSCALING_DEFAULTS})
        changed = settings_body() != before
        status = "ACCEPTED" if changed else "UNCHANGED"
        return JSONResponse({"status": status, "message": f"autoscaling settings {status.lower()}"})

    routes = []
    for prefix in ("/environments/{env}", "/deployment/{dep}", "/production"):
        routes += [
            Route(f"{prefix}/predict", predict, methods=["POST"]),
            Route(f"{prefix}/async_predict", async_predict, methods=["POST"]),
            Route(f"{prefix}/async_queue_status", queue_status, methods=["GET"]),
            Route(f"{prefix}/wake", wake, methods=["POST"]),
        ]
    routes += [
        Route("/async_request/{request_id}", async_request, methods=["GET"]),
        Route("/async_request/{request_id}", cancel, methods=["DELETE"]),
        Route("/v1/models/{model}/deployments/{dep}", deployment, methods=["GET"]),
        Route(
            "/v1/models/{model}/deployments/{dep}/autoscaling_settings",
            autoscaling,
            methods=["PATCH"],
        ),
    ]
    return FaultInjector(
        Starlette(routes=routes, lifespan=fleet_lifespan(fleet)), fleet, _route, _error_body
    )


async def _wait(job: Job, timeout_s: float) -> None:
    await asyncio.wait_for(asyncio.shield(job.done.wait()), timeout_s)


def _route(scope: MutableMapping[str, Any]) -> str | None:
    """Which fault route a request belongs to (see ``gpubench_sdk.testing.FaultPlan``)."""
    path: str = scope.get("path", "")
    method: str = scope.get("method", "")
    if method == "POST" and path.endswith(("/predict", "/async_predict")):
        return "submit"
    if method == "GET" and path.startswith("/async_request/"):
        return "poll"
    return "control"


def _error_body(status: int, message: str) -> tuple[bytes, str]:
    return json.dumps(
        {"error": message, "error_code": "internal_baseten_error"}
    ).encode(), "application/json"


def main(argv: list[str] | None = None) -> None:
    """Serve an emulator until interrupted: ``python -m gpubench_baseten.emulator``."""
    from gpubench_sdk.testing import EmulatorParser, serve_forever

    parser = EmulatorParser(
        __doc__, port=8788, workers_flag="--max-replicas", idle_flag="--scale-down-delay-s"
    )
    parser.add_argument("--model-id", default=DEFAULT_MODEL_ID)
    parser.add_argument("--deployment-id", default=DEFAULT_DEPLOYMENT_ID)
    args = parser.parse(argv)
    app = make_app(
        args.fleet(),
        api_key=args.api_key,
        model_id=args.model_id,
        deployment_id=args.deployment_id,
    )
    serve_forever(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
