"""A Hugging Face Inference Endpoints emulator on the testing kit's simulated fleet.

One ASGI app plays both hosts, as the real service splits them: the endpoint URL (the toolkit's
``POST /``, TGI's ``POST /generate`` and ``/generate_stream``, ``GET /health``) behind HF's proxy,
and the management API ``/v2/endpoint/{namespace}/{name}`` (GET, PUT ``compute.scaling``,
POST ``pause``/``resume``/``scale-to-zero``). Point the provider at it with ``url=<url>`` and
``management_url=<url>/v2``. The quirks users meet are reproduced:

- no ready replica: the proxy answers 503 (``initializing_status``; 502 in older docs) and wakes
  one; with ``X-Scale-Up-Timeout: <s>`` it holds the request until a replica is ready (503 if
  none is within the timeout);
- TGI's ``max_concurrent_requests``: 429 ``{"error": "Model is overloaded", "error_type":
  "overloaded"}``; TGI's timing headers in ms, ``x-compute-time`` in seconds or, as older TGI
  did, whole milliseconds (``compute_time_unit``);
- the toolkit answers a handler exception with 400 ``{"error"}``, TGI with 424 ``generation``;
- a client that hangs up cancels its request (TGI drops the generation);
- ``minute_s``: how long one ``scaleToZeroTimeout`` minute lasts here (tests run faster).

Faults in ``fleet.faults`` apply to inference (route ``submit``) and management (``control``)
requests. Run ``python -m gpubench_huggingface.emulator --port 8687`` to serve one by hand.
Needs the testing extra (``pip install 'gpubench-sdk[testing]'``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hmac
import json
from collections.abc import AsyncIterator, Callable, MutableMapping
from typing import Any, Literal

from gpubench_sdk import ScalingSettings
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

from . import _protocol as hf
from ._emulated_tgi import TgiShapes

DEFAULT_NAMESPACE = "gpubench"
DEFAULT_ENDPOINT_NAME = "emulated-endpoint"


def make_app(
    fleet: SimulatedFleet,
    *,
    api_key: str | None = None,
    namespace: str = DEFAULT_NAMESPACE,
    endpoint_name: str = DEFAULT_ENDPOINT_NAME,
    minute_s: float = hf.SECONDS_PER_MINUTE,
    compute_time_unit: Literal["s", "ms"] = "s",
    initializing_status: int = 503,
    max_concurrent_requests: int = 128,
    time_per_token_ms: float = 5.0,
) -> ASGIApp:
    """The emulator app for ``fleet`` (see the module's docstring for each quirk)."""
    try:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response, StreamingResponse
        from starlette.routing import Route
    except ImportError as exc:
        raise ImportError(f"the Hugging Face emulator: {INSTALL_HINT}") from exc

    shapes = TgiShapes(fleet, compute_time_unit, time_per_token_ms)
    # The user's settings are the fleet's, except while paused or draining to zero: then the
    # fleet runs with no minimum and no idle time, and the user's settings wait in ``saved``.
    saved: list[ScalingSettings] = []
    flags = {"paused": False, "draining": False, "inflight": 0}
    tasks: set[asyncio.Task[None]] = set()

    def error(status: int, message: str, error_type: str | None = None) -> Response:
        body: dict[str, Any] = {"error": message}
        if error_type is not None:
            body["error_type"] = error_type
        return JSONResponse(body, status_code=status)

    def authorized(request: Request) -> bool:
        if api_key is None:
            return True
        given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        return hmac.compare_digest(given.encode(), api_key.encode())

    async def body_of(request: Request) -> dict[str, Any] | Response:
        try:
            body = json.loads(await request.body())
        except ValueError:
            return error(400, "body is not valid JSON")
        if not isinstance(body, dict) or "inputs" not in body:
            return error(400, f"Body needs to provide a inputs key, recieved: {body!r}"[:200])
        return body

    async def until_ready(request: Request, job: Job) -> bool:
        """Wait until ``job`` is done; False (and the job cancelled) if the client hung up."""

        async def hung_up() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass

        done = asyncio.ensure_future(job.done.wait())
        gone = asyncio.ensure_future(hung_up())
        try:
            await asyncio.wait({done, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            done.cancel()
            gone.cancel()
        if not job.done.is_set():
            fleet.cancel(job.id)
            return False
        return True

    async def admit(request: Request, payload: dict[str, Any]) -> Job | Response:
        """HF's proxy, then TGI's admission: paused, cold (503 or hold), overloaded."""
        if not authorized(request):
            return error(401, "Invalid credentials in Authorization header")
        if flags["paused"]:
            return error(503, "endpoint is paused")
        if flags["inflight"] >= max_concurrent_requests:
            return error(429, "Model is overloaded", "overloaded")
        counts = fleet.counts()
        hold = request.headers.get(hf.SCALE_UP_TIMEOUT_HEADER.lower(), "")
        if counts.idle + counts.running == 0 and not hold.isdigit():
            fleet.request_worker()  # the 503 still wakes a replica up
            return error(initializing_status, "Service Unavailable: no replica is ready yet")
        try:
            job = fleet.submit(payload)
        except QueueFull as exc:
            return error(429, f"Model is overloaded: {exc}", "overloaded")
        if counts.idle + counts.running == 0:
            # the proxy holds the request until a replica is ready, at most hold seconds
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(int(hold)):
                    await _until(lambda: job.started_s is not None or job.done.is_set())
            if job.started_s is None:
                fleet.cancel(job.id)
                return error(503, "Service Unavailable: scale-up timeout reached")
        return job

    def failure(job: Job, tgi: bool) -> Response | None:
        if job.status is JobStatus.COMPLETED:
            return None
        message = job.error or f"request {job.status.value}"
        return error(424, message, "generation") if tgi else error(400, message)

    async def run(request: Request, tgi: bool) -> Job | Response:
        body = await body_of(request)
        if isinstance(body, Response):
            return body
        payload = shapes.payload(body)
        job = await admit(request, payload)
        if isinstance(job, Response):
            return job
        flags["inflight"] += 1
        try:
            if not await until_ready(request, job):
                return Response(status_code=499)  # nobody is listening any more
        finally:
            flags["inflight"] -= 1
        return failure(job, tgi) or job

    async def toolkit(request: Request) -> Response:
        job = await run(request, tgi=False)
        if isinstance(job, Response):
            return job
        return JSONResponse(shapes.toolkit_output(job), headers={"x-request-id": job.id})

    async def generate(request: Request) -> Response:
        job = await run(request, tgi=True)
        if isinstance(job, Response):
            return job
        return JSONResponse(shapes.generate_output(job), headers=shapes.headers(job))

    async def generate_stream(request: Request) -> Response:
        body = await body_of(request)
        if isinstance(body, Response):
            return body
        job = await admit(request, shapes.payload(body))
        if isinstance(job, Response):
            return job
        flags["inflight"] += 1

        async def events() -> AsyncIterator[str]:
            try:
                async for event in shapes.stream_events(job):
                    yield f"data: {json.dumps(event)}\n\n"
            finally:
                flags["inflight"] -= 1
                if not job.done.is_set():
                    fleet.cancel(job.id)  # the client hung up: TGI stops generating

        headers = {"x-request-id": job.id, "x-compute-type": "gpu+optimized"}
        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)

    async def health(request: Request) -> Response:
        counts = fleet.counts()
        ready = counts.idle + counts.running
        return Response(status_code=200 if ready else initializing_status)

    # ----- the management API ---------------------------------------------------------------

    def state() -> str:
        counts = fleet.counts()
        if flags["paused"]:
            return hf.PAUSED
        if counts.idle + counts.running:
            return hf.RUNNING
        if counts.workers:
            return hf.INITIALIZING
        return hf.SCALED_TO_ZERO

    def endpoint_body(request: Request) -> dict[str, Any]:
        counts = fleet.counts()
        user = user_scaling()
        assert user.idle_timeout_s is not None
        minutes = user.idle_timeout_s / minute_s
        return {
            "name": endpoint_name,
            "type": "protected",
            "provider": {"vendor": "aws", "region": "us-east-1"},
            "compute": {
                "accelerator": "gpu",
                "instanceType": "nvidia-a10g",
                "instanceSize": "x1",
                "scaling": {
                    "minReplica": user.min_workers,
                    "maxReplica": user.max_workers,
                    "scaleToZeroTimeout": round(minutes) if minutes == round(minutes) else minutes,
                },
            },
            "model": {"repository": "gpubench/emulated", "framework": "pytorch", "task": "custom"},
            "status": {
                "state": state(),
                "url": str(request.base_url).rstrip("/"),
                "readyReplica": counts.idle + counts.running,
                "targetReplica": counts.workers,
                "createdAt": "2026-01-01T00:00:00.000Z",
                "updatedAt": "2026-01-01T00:00:00.000Z",
            },
            "healthRoute": "/health",
        }

    def user_scaling() -> ScalingSettings:
        return saved[0] if saved else fleet.scaling

    def hold_back() -> None:
        """Keep the user's settings aside and let every replica go (pause, scale-to-zero)."""
        if not saved:
            saved.append(fleet.scaling)
        fleet.set_scaling(ScalingSettings(min_workers=0, idle_timeout_s=0))

    def give_back() -> None:
        if saved and not flags["paused"] and not flags["draining"]:
            fleet.set_scaling(saved.pop())

    def check(request: Request) -> Response | None:
        p = request.path_params
        if (p["namespace"], p["name"]) != (namespace, endpoint_name):
            return error(404, "endpoint not found")
        if not authorized(request):
            return error(401, "Invalid credentials in Authorization header")
        return None

    async def endpoint(request: Request) -> Response:
        if (denied := check(request)) is not None:
            return denied
        if request.method == "PUT":
            try:
                scaling = json.loads(await request.body())["compute"]["scaling"]
            except (ValueError, KeyError, TypeError):
                return error(400, "body must be {'compute': {'scaling': {...}}}")
            user = user_scaling()
            fields = {"minReplica": "min_workers", "maxReplica": "max_workers"}
            changes = {name: scaling[f] for f, name in fields.items() if f in scaling}
            if "scaleToZeroTimeout" in scaling:
                changes["idle_timeout_s"] = scaling["scaleToZeroTimeout"] * minute_s
            if any(not isinstance(v, int | float) or v < 0 for v in changes.values()):
                return error(400, f"invalid scaling: {scaling}")
            wanted = dataclasses.replace(user, **changes)
            try:
                if saved:
                    fleet.set_scaling(dataclasses.replace(wanted, min_workers=0, idle_timeout_s=0))
                    saved[0] = wanted
                else:
                    fleet.set_scaling(wanted)
            except ValueError as exc:
                return error(400, f"invalid scaling: {exc}")
        return JSONResponse(endpoint_body(request))

    async def drain() -> None:
        flags["draining"] = True
        hold_back()  # idle replicas stop now, busy ones after their request
        try:
            await _until(lambda: not fleet.counts().workers)
        finally:
            flags["draining"] = False
            give_back()

    async def action(request: Request) -> Response:
        if (denied := check(request)) is not None:
            return denied
        name = request.path_params["action"]
        if name == "scale-to-zero":
            if user_scaling().min_workers:
                return error(400, "minReplica must be 0 to scale an endpoint to zero")
            if not flags["draining"]:
                task = asyncio.get_running_loop().create_task(drain())
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        elif name == "pause":
            flags["paused"] = True
            hold_back()
        elif name == "resume":
            flags["paused"] = False
            give_back()
        else:
            return error(404, f"unknown action {name!r}")
        await asyncio.sleep(0)  # let the drain begin before the state is read
        return JSONResponse(endpoint_body(request))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with fleet:
            yield
            for task in list(tasks):
                task.cancel()

    base = "/v2/endpoint/{namespace}/{name}"
    app = Starlette(
        routes=[
            Route("/", toolkit, methods=["POST"]),
            Route("/generate", generate, methods=["POST"]),
            Route("/generate_stream", generate_stream, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
            Route(base, endpoint, methods=["GET", "PUT"]),
            Route(base + "/{action}", action, methods=["POST"]),
        ],
        lifespan=lifespan,
    )
    return FaultInjector(app, fleet, _route)


async def _until(condition: Callable[[], bool], interval_s: float = 0.002) -> None:
    """The fleet signals neither a job's start nor its last worker's stop: poll for them."""
    while True:
        if condition():
            return
        await asyncio.sleep(interval_s)


def _route(scope: MutableMapping[str, Any]) -> str | None:
    """Which fault route a request belongs to (see ``gpubench_sdk.testing.FaultPlan``)."""
    path: str = scope.get("path", "")
    if path in ("/", "/generate", "/generate_stream"):
        return "submit"
    if path.startswith("/v2/"):
        return "control"
    return None


def main(argv: list[str] | None = None) -> None:
    """Serve an emulator until interrupted: ``python -m gpubench_huggingface.emulator``."""
    import argparse
    import os

    from gpubench_sdk.testing import Duration, serve_forever

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8687)
    parser.add_argument("--namespace", default=DEFAULT_NAMESPACE)
    parser.add_argument("--endpoint-name", default=DEFAULT_ENDPOINT_NAME)
    parser.add_argument("--api-key-env", help="require the key in this environment variable")
    parser.add_argument("--cold-start-s", type=float, default=0.5)
    parser.add_argument("--max-workers", type=int, default=3)
    parser.add_argument("--minute-s", type=float, default=1.0, help="one scaleToZeroTimeout minute")
    parser.add_argument("--scale-to-zero-minutes", type=int, default=1)
    parser.add_argument("--compute-time-unit", choices=["s", "ms"], default="s")
    parser.add_argument("--time-per-token-ms", type=float, default=5.0)
    parser.add_argument("--max-concurrent-requests", type=int, default=128)
    args = parser.parse_args(argv)
    config = FleetConfig(
        cold_start=Duration.fixed(args.cold_start_s),
        max_workers=args.max_workers,
        idle_timeout_s=args.scale_to_zero_minutes * args.minute_s,
    )
    key = os.environ[args.api_key_env] if args.api_key_env else None
    app = make_app(
        SimulatedFleet(config),
        api_key=key,
        namespace=args.namespace,
        endpoint_name=args.endpoint_name,
        minute_s=args.minute_s,
        compute_time_unit=args.compute_time_unit,
        time_per_token_ms=args.time_per_token_ms,
        max_concurrent_requests=args.max_concurrent_requests,
    )
    serve_forever(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
