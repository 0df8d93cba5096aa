"""A Replicate API emulator on the testing kit's simulated fleet, for tests and demos.

Speaks the HTTP API of https://replicate.com/docs/reference/http under ``/v1``: predictions on a
model (``POST /v1/models/{owner}/{name}/predictions``), a version (``POST /v1/predictions`` with
``version``) and a deployment (``POST /v1/deployments/{owner}/{name}/predictions``), all backed
by one fleet; ``GET /v1/predictions/{id}``, ``POST /v1/predictions/{id}/cancel``,
``GET``/``PATCH /v1/deployments/{owner}/{name}`` (``min_instances``/``max_instances`` drive the
fleet), and SSE at ``urls.stream`` (``/stream/{id}``, another host on the real service).
``Prefer: wait[=N]`` holds a create up to N s (at most ``wait_cap_s``), ``Cancel-After`` ends a
prediction ``aborted`` (never started) or ``canceled``. The key is accepted as
``Authorization: Bearer`` or ``Token`` (what the official client sends). Faults in
``fleet.faults`` apply to creates (route ``submit``), reads and streams (``poll``) and the rest
(``control``). ``python -m gpubench_replicate.emulator --port 8787`` serves one by hand.
Needs the testing extra (``pip install 'gpubench-sdk[testing]'``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import re
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

from gpubench_sdk import ScalingSettings
from gpubench_sdk.testing import (
    INSTALL_HINT,
    ASGIApp,
    FaultInjector,
    FleetConfig,
    Job,
    QueueFull,
    SimulatedFleet,
)

from . import _prediction as p
from ._emulation import WallClock, prediction_body
from ._replicate import MAX_WAIT_S

DEFAULT_MODEL = "gpubench/echo"
DEFAULT_VERSION = "5c7d5dc6dd8bf75c1acaa8565735e7986bc5b66206b55cca93cb72c9bf15ccaa"
DEFAULT_DEPLOYMENT = "gpubench/echo-deployment"
THROTTLED_DETAIL = "Request was throttled. Expected available in 1 second."
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_S = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


_TITLES = {
    400: "Bad request",
    401: "Unauthenticated",
    404: "Not found",
    405: "Method not allowed",
    422: "Invalid input",
    429: "Too many requests",
}


def error_body(status: int, message: str) -> tuple[bytes, str]:
    """Replicate's error shape, an RFC 7807 problem (``application/problem+json`` with
    ``title``, ``detail``, ``status``: the bodies recorded in replicate-python's
    ``tests/cassettes/run__invalid-token.yaml``; the client reads them in
    ``replicate/exceptions.py``), with its throttle text for 429."""
    detail = THROTTLED_DETAIL if status == 429 else message
    title = _TITLES.get(status, "Internal server error" if status >= 500 else "Error")
    body = {"title": title, "detail": detail, "status": status}
    return json.dumps(body).encode(), "application/problem+json"


def parse_duration_s(value: str) -> float | None:
    """``Cancel-After``: a Go-style duration (``1m``, ``90s``, ``1h30m``) or bare seconds."""
    value = value.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", value):
        return float(value)
    if not value or _DURATION.sub("", value):
        return None
    return sum(float(n) * _UNIT_S[u] for n, u in _DURATION.findall(value))


def make_app(
    fleet: SimulatedFleet,
    *,
    api_key: str | None = None,
    model: str = DEFAULT_MODEL,
    version: str = DEFAULT_VERSION,
    deployment: str = DEFAULT_DEPLOYMENT,
    hardware: str = "gpu-a100-large",
    wait_cap_s: float = MAX_WAIT_S,
) -> ASGIApp:
    """The emulator app for ``fleet``; ``wait_cap_s`` shortens how long ``Prefer: wait`` holds
    a create before answering with the incomplete prediction (the service's 60 s)."""
    try:
        from starlette.applications import Starlette
        from starlette.exceptions import HTTPException
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response, StreamingResponse
        from starlette.routing import Route
    except ImportError as exc:
        raise ImportError(f"the Replicate emulator: {INSTALL_HINT}") from exc

    clock = WallClock()
    ended_by: dict[str, str] = {}  # prediction id -> "aborted"/"canceled" set by Cancel-After
    deadlines: set[asyncio.Task[None]] = set()
    release = {"number": 1}

    def error(status: int, message: str) -> Response:
        body, ctype = error_body(status, message)
        return Response(body, status_code=status, media_type=ctype)

    def authorized(request: Request) -> bool:
        if api_key is None:
            return True
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme not in ("Bearer", "Token"):
            return False
        return hmac.compare_digest(given.strip().encode(), api_key.encode())

    def body_of(job: Job, request: Request) -> dict[str, Any]:
        base = str(request.base_url).rstrip("/")
        urls = {
            "get": f"{base}/v1/predictions/{job.id}",
            "cancel": f"{base}/v1/predictions/{job.id}/cancel",
            "stream": f"{base}/stream/{job.id}",
            "web": f"https://replicate.com/p/{job.id}",
        }
        return prediction_body(
            job, clock, status=ended_by.get(job.id), model=model, version=version, urls=urls
        )

    async def expire(job: Job, after_s: float) -> None:
        await asyncio.sleep(after_s)
        if not job.status.terminal:
            ended_by[job.id] = p.ABORTED if job.started_s is None else p.CANCELED
            fleet.cancel(job.id)

    async def create(request: Request, target_ok: bool) -> Response:
        if not authorized(request):
            return error(401, "You did not pass a valid authentication token")
        if not target_ok:
            return error(404, "Not found.")
        try:
            body = json.loads(await request.body())
        except ValueError:
            return error(400, "body is not valid JSON")
        if not isinstance(body, dict) or not isinstance(body.get("input"), dict):
            return error(422, "input: a JSON object is required")
        if request.url.path == "/v1/predictions" and body.get("version") != version:
            return error(422, f"version: {body.get('version')!r} does not exist")
        wait_s: float | None = None
        prefer = request.headers.get("prefer")
        if prefer is not None:
            match = re.fullmatch(r"wait(?:=(\d+))?", prefer.strip())
            if match is None or not 1 <= int(match.group(1) or MAX_WAIT_S) <= MAX_WAIT_S:
                return error(400, f"Prefer: expected 'wait' or 'wait=1..{MAX_WAIT_S}'")
            wait_s = float(match.group(1) or MAX_WAIT_S)
        cancel_after_s = None
        if (raw := request.headers.get("cancel-after")) is not None:
            cancel_after_s = parse_duration_s(raw)
            if cancel_after_s is None or cancel_after_s <= 0:
                return error(400, "Cancel-After: expected a duration such as '1m' or '90s'")
        try:
            job = fleet.submit(body["input"])
        except QueueFull:
            return error(429, THROTTLED_DETAIL)
        if cancel_after_s is not None:
            task = asyncio.get_running_loop().create_task(expire(job, cancel_after_s))
            deadlines.add(task)
            task.add_done_callback(deadlines.discard)
        if wait_s is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(job.done.wait(), min(wait_s, wait_cap_s))
        return JSONResponse(body_of(job, request), status_code=201)

    def owner_name(request: Request) -> str:
        return f"{request.path_params['owner']}/{request.path_params['name']}"

    async def create_on_model(request: Request) -> Response:
        return await create(request, owner_name(request) == model)

    async def create_on_version(request: Request) -> Response:
        return await create(request, True)

    async def create_on_deployment(request: Request) -> Response:
        return await create(request, owner_name(request) == deployment)

    def find(request: Request) -> Job | Response:
        if not authorized(request):
            return error(401, "You did not pass a valid authentication token")
        job = fleet.job(request.path_params["prediction_id"])
        return job if job is not None else error(404, "Not found.")

    async def get_prediction(request: Request) -> Response:
        job = find(request)
        return job if isinstance(job, Response) else JSONResponse(body_of(job, request))

    async def cancel(request: Request) -> Response:
        job = find(request)
        if isinstance(job, Response):
            return job
        fleet.cancel(job.id)
        return JSONResponse(body_of(job, request))

    async def stream(request: Request) -> Response:
        job = find(request)
        if isinstance(job, Response):
            return job

        async def events() -> AsyncIterator[bytes]:
            sent = 0
            while True:
                finished = job.done.is_set()  # read first: chunks before it are all there
                while sent < len(job.stream):
                    sent += 1
                    yield _event("output", sent, json.dumps(job.stream[sent - 1]))
                if finished:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(job.done.wait(), 0.01)
            status = ended_by.get(job.id) or body_of(job, request)["status"]
            if status == p.SUCCEEDED and sent == 0:
                yield _event("output", 1, json.dumps(job.output))
            if status == p.FAILED:
                yield _event("error", sent + 1, json.dumps({"detail": job.error}))
            reason = {} if status == p.SUCCEEDED else {"reason": status}
            yield _event("done", sent + 2, json.dumps(reason))

        headers = {"Cache-Control": "no-store"}
        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)

    def deployment_body() -> dict[str, Any]:
        s = fleet.scaling
        owner, name = deployment.split("/", 1)
        return {
            "owner": owner,
            "name": name,
            "current_release": {
                "number": release["number"],
                "model": model,
                "version": version,
                "created_at": clock.iso(0.0),
                # replicate 1.0.7's Account model requires type, username and name.
                "created_by": {
                    "type": "organization",
                    "username": owner,
                    "name": owner,
                    "github_url": None,
                },
                "configuration": {
                    "hardware": hardware,
                    "min_instances": s.min_workers,
                    "max_instances": s.max_workers,
                },
            },
        }

    async def model_route(request: Request) -> Response:
        if not authorized(request):
            return error(401, "You did not pass a valid authentication token")
        if owner_name(request) != model:
            return error(404, "Not found.")
        return JSONResponse(model_body(model, version_body(version, clock.iso(0.0))))

    async def version_route(request: Request) -> Response:
        if not authorized(request):
            return error(401, "You did not pass a valid authentication token")
        wanted = request.path_params.get("version_id")
        if owner_name(request) != model or wanted not in (None, version):
            return error(404, "Not found.")
        body = version_body(version, clock.iso(0.0))
        if wanted is None:  # the list: one page
            return JSONResponse({"next": None, "previous": None, "results": [body]})
        return JSONResponse(body)

    async def deployment_route(request: Request) -> Response:
        if not authorized(request):
            return error(401, "You did not pass a valid authentication token")
        if owner_name(request) != deployment:
            return error(404, "Not found.")
        if request.method == "PATCH":
            try:
                body = json.loads(await request.body())
            except ValueError:
                return error(400, "body is not valid JSON")
            if not isinstance(body, dict):
                return error(400, "body must be a JSON object")
            changes: dict[str, int] = {}
            for field, knob in (("min_instances", "min_workers"), ("max_instances", "max_workers")):
                if field in body:
                    value = body[field]
                    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                        return error(400, f"{field} must be a non-negative integer")
                    changes[knob] = value
            try:
                fleet.set_scaling(ScalingSettings(**changes))
            except ValueError as exc:
                return error(400, str(exc))
            release["number"] += 1
        return JSONResponse(deployment_body())

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with fleet:
            yield
            for task in list(deadlines):
                task.cancel()

    async def not_routed(request: Request, exc: Exception) -> Response:
        # Unknown routes and methods answer the API's JSON problem, never Starlette's text.
        status = getattr(exc, "status_code", 500)
        return error(status, "Not found." if status == 404 else str(getattr(exc, "detail", "")))

    app = Starlette(
        routes=[
            Route("/v1/models/{owner}/{name}/predictions", create_on_model, methods=["POST"]),
            Route("/v1/predictions", create_on_version, methods=["POST"]),
            Route(
                "/v1/deployments/{owner}/{name}/predictions",
                create_on_deployment,
                methods=["POST"],
            ),
            Route("/v1/predictions/{prediction_id}", get_prediction, methods=["GET"]),
            Route("/v1/predictions/{prediction_id}/cancel", cancel, methods=["POST"]),
            Route("/v1/deployments/{owner}/{name}", deployment_route, methods=["GET", "PATCH"]),
            Route("/v1/models/{owner}/{name}", model_route, methods=["GET"]),
            Route("/v1/models/{owner}/{name}/versions", version_route, methods=["GET"]),
            Route(
                "/v1/models/{owner}/{name}/versions/{version_id}", version_route, methods=["GET"]
            ),
            Route("/stream/{prediction_id}", stream, methods=["GET"]),
        ],
        lifespan=lifespan,
        exception_handlers={HTTPException: not_routed},
    )
    return FaultInjector(app, fleet, _route, render_error=error_body)


def version_body(version: str, created_at: str) -> dict[str, Any]:
    """A model version: the fields replicate 1.0.7's ``Version`` requires, and a Cog OpenAPI
    schema (``components.schemas.Input``/``Output``) for the echo probe's inputs."""
    schemas = {
        "Input": {
            "type": "object",
            "title": "Input",
            "properties": {
                "echo": {"type": "string", "title": "Echo", "x-order": 0},
                "sleep_ms": {"type": "number", "title": "Sleep Ms", "default": 0, "x-order": 1},
            },
        },
        "Output": {"type": "object", "title": "Output"},
    }
    return {
        "id": version,
        "created_at": created_at,
        "cog_version": "0.23.1",
        "openapi_schema": {
            "openapi": "3.0.2",
            "info": {"title": "Cog", "version": "0.1.0"},
            "components": {"schemas": schemas},
        },
    }


def model_body(model: str, latest_version: dict[str, Any]) -> dict[str, Any]:
    """A model as ``GET /v1/models/{owner}/{name}`` returns it (replicate 1.0.7's ``Model``)."""
    owner, name = model.split("/", 1)
    return {
        "url": f"https://replicate.com/{model}",
        "owner": owner,
        "name": name,
        "description": "gpubench's echo model (emulated)",
        "visibility": "public",
        "github_url": None,
        "paper_url": None,
        "license_url": None,
        "run_count": 0,
        "cover_image_url": None,
        "default_example": None,
        "latest_version": latest_version,
    }


def _event(name: str, event_id: int, data: str) -> bytes:
    return f"event: {name}\nid: {event_id}\ndata: {data}\n\n".encode()


def _route(scope: MutableMapping[str, Any]) -> str | None:
    """Which fault route a request belongs to (see ``gpubench_sdk.testing.FaultPlan``)."""
    path: str = scope.get("path", "")
    method: str = scope.get("method", "GET")
    if method == "POST" and (path == "/v1/predictions" or path.endswith("/predictions")):
        return "submit"
    if path.startswith("/stream/") or (method == "GET" and path.startswith("/v1/predictions/")):
        return "poll"
    return "control"


def main(argv: list[str] | None = None) -> None:
    """Serve an emulator until interrupted: ``python -m gpubench_replicate.emulator``."""
    import argparse
    import os

    from gpubench_sdk.testing import Duration, serve_forever

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8787)
    parser.add_argument("--api-key-env", help="require the key in this environment variable")
    parser.add_argument("--cold-start-s", type=float, default=0.5)
    parser.add_argument("--max-instances", type=int, default=3)
    parser.add_argument("--min-instances", type=int, default=0)
    parser.add_argument("--idle-timeout-s", type=float, default=1.0)
    args = parser.parse_args(argv)
    config = FleetConfig(
        cold_start=Duration.fixed(args.cold_start_s),
        min_workers=args.min_instances,
        max_workers=args.max_instances,
        idle_timeout_s=args.idle_timeout_s,
    )
    key = os.environ[args.api_key_env] if args.api_key_env else None
    app = make_app(SimulatedFleet(config), api_key=key)
    serve_forever(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
