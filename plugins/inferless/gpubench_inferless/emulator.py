"""An Inferless emulator on the testing kit's simulated fleet: a model's KServe v2 ``infer`` URL.

``POST /v2/models/{model}/versions/{version}/infer`` (and ``/v2/models/{model}/infer``) takes
``{"id"?, "inputs": [tensors]}``; the input tensors become the fleet's payload (by name), the
model's answer comes back as ``{"model_name", "model_version", "id", "outputs": [tensors]}``.
The request is checked as strictly as kserve's ``ModelServer`` checks it (``_kserve.
request_problem``: a tensor without ``shape`` is a 422). The v2 health and metadata routes are
served too: ``GET /v2``, ``/v2/health/live``, ``/v2/health/ready``, ``/v2/models/{model}``
and ``/v2/models/{model}/ready`` (with or without ``/versions/{version}``).
With ``Accept: text/event-stream`` the answer is SSE, one ``data:`` event per streamed piece (a
model that streams). Errors are KServe's ``{"error": "<message>"}`` (FastAPI's 422 ``{"detail"}``
for a body that is not v2): 401 without the workspace key, 404 for another model, 429 beyond
``max_concurrent`` requests, 500 when the model fails. A request id in the body is the fleet's
job id. Faults in ``fleet.faults`` apply to every infer request (route ``submit``). Inferless
has no control plane API to emulate. Run ``python -m gpubench_inferless.emulator --port 8688``
by hand.
Needs the testing extra (``pip install 'gpubench-sdk[testing]'``).
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
    JobStatus,
    QueueFull,
    SimulatedFleet,
)

from . import _kserve as kserve

DEFAULT_MODEL = "emulated-model_0a1b2c"


def make_app(
    fleet: SimulatedFleet,
    *,
    api_key: str | None = None,
    model: str = DEFAULT_MODEL,
    max_concurrent: int = 64,
    streams: bool = True,
) -> ASGIApp:
    """The emulator app for ``fleet``: ``model`` is the name in the URL; ``api_key`` the
    workspace key every request must carry as ``Authorization: Bearer``; ``streams``: the
    model is deployed with streaming output (else it answers JSON whatever is accepted)."""
    try:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response, StreamingResponse
        from starlette.routing import Route
    except ImportError as exc:
        raise ImportError(f"the Inferless emulator: {INSTALL_HINT}") from exc

    inflight = [0]

    def error(status: int, message: str) -> Response:
        return JSONResponse({"error": message}, status_code=status)

    def authorized(request: Request) -> bool:
        if api_key is None:
            return True
        given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        return hmac.compare_digest(given.encode(), api_key.encode())

    def unknown(request: Request) -> Response | None:
        name = request.path_params["model"]
        return None if name == model else error(404, f"Model with name {name} does not exist.")

    async def infer(request: Request) -> Response:
        if (missing := unknown(request)) is not None:
            return missing
        if not authorized(request):
            return error(401, "invalid workspace API key")
        try:
            body = json.loads(await request.body())
        except ValueError:
            detail = [{"type": "json_invalid", "loc": ["body", 0], "msg": "JSON decode error"}]
            return JSONResponse({"detail": detail}, status_code=422)
        if (problem := kserve.request_problem(body)) is not None:
            return JSONResponse(problem[1], status_code=problem[0])
        payload = kserve.decode_tensors(body["inputs"])
        if inflight[0] >= max_concurrent:
            return error(429, "too many concurrent requests for this model")
        request_id = body.get("id") if isinstance(body.get("id"), str) else None
        try:
            job = fleet.submit(payload, job_id=request_id)
        except QueueFull as exc:
            return error(429, f"too many queued requests: {exc}")
        version = request.path_params.get("version")  # kserve: null when the URL has none
        if streams and "text/event-stream" in request.headers.get("accept", ""):
            inflight[0] += 1

            async def events() -> AsyncIterator[str]:
                sent = 0
                try:
                    while not (job.done.is_set() and sent >= len(job.stream)):
                        while sent < len(job.stream):
                            yield f"data: {json.dumps(job.stream[sent])}\n\n"
                            sent += 1
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(job.done.wait(), 0.002)
                    if job.status is not JobStatus.COMPLETED:
                        yield f"data: {json.dumps({'error': job.error or job.status.value})}\n\n"
                finally:
                    inflight[0] -= 1

            return StreamingResponse(events(), media_type="text/event-stream")
        inflight[0] += 1
        try:
            await job.done.wait()
        finally:
            inflight[0] -= 1
        if job.status is not JobStatus.COMPLETED:
            return error(500, job.error or f"inference {job.status.value}")
        return JSONResponse(
            {
                "model_name": model,
                "model_version": version,
                "id": job.id,
                "outputs": kserve.encode_outputs(job.output),
            }
        )

    async def server_metadata(request: Request) -> Response:
        return JSONResponse({"name": "gpubench-inferless-emulator", "extensions": []})

    async def live(request: Request) -> Response:
        return JSONResponse({"live": True})

    async def ready(request: Request) -> Response:
        return JSONResponse({"ready": True})  # the gateway is; replicas start on demand

    async def model_ready(request: Request) -> Response:
        return unknown(request) or JSONResponse({"name": model, "ready": True})

    async def model_metadata(request: Request) -> Response:
        # the model's tensors are whatever its handler reads: none are declared
        body = {"name": model, "versions": ["1"], "platform": "", "inputs": [], "outputs": []}
        return unknown(request) or JSONResponse(body)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with fleet:
            yield

    models = "/v2/models/{model}"
    app = Starlette(
        routes=[
            Route("/v2", server_metadata, methods=["GET"]),
            Route("/v2/health/live", live, methods=["GET"]),
            Route("/v2/health/ready", ready, methods=["GET"]),
            Route(models, model_metadata, methods=["GET"]),
            Route(models + "/versions/{version}", model_metadata, methods=["GET"]),
            Route(models + "/ready", model_ready, methods=["GET"]),
            Route(models + "/versions/{version}/ready", model_ready, methods=["GET"]),
            Route(models + "/versions/{version}/infer", infer, methods=["POST"]),
            Route(models + "/infer", infer, methods=["POST"]),
        ],
        lifespan=lifespan,
    )
    return FaultInjector(app, fleet, _route)


def _route(scope: MutableMapping[str, Any]) -> str | None:
    """Every infer request is a submit (see ``gpubench_sdk.testing.FaultPlan``)."""
    return "submit" if str(scope.get("path", "")).endswith("/infer") else None


def infer_url(base_url: str, model: str = DEFAULT_MODEL, version: str = "1") -> str:
    """The emulated model's infer URL under ``base_url`` (Inferless's URL shape)."""
    return f"{base_url.rstrip('/')}/v2/models/{model}/versions/{version}/infer"


def main(argv: list[str] | None = None) -> None:
    """Serve an emulator until interrupted: ``python -m gpubench_inferless.emulator``."""
    import argparse
    import os

    from gpubench_sdk.testing import Duration, serve_forever

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8688)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--api-key-env", help="require the key in this environment variable")
    parser.add_argument("--cold-start-s", type=float, default=0.5)
    parser.add_argument("--max-workers", type=int, default=3)
    parser.add_argument("--scale-down-delay-s", type=float, default=1.0)
    args = parser.parse_args(argv)
    config = FleetConfig(
        cold_start=Duration.fixed(args.cold_start_s),
        max_workers=args.max_workers,
        idle_timeout_s=args.scale_down_delay_s,
    )
    key = os.environ[args.api_key_env] if args.api_key_env else None
    app = make_app(SimulatedFleet(config), api_key=key, model=args.model)
    serve_forever(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
