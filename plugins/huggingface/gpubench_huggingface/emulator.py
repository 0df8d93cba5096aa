"""A Hugging Face Inference Endpoints emulator on the testing kit's simulated fleet.

One ASGI app plays both hosts, as the real service splits them: the endpoint URL behind HF's
proxy, and the management API ``/v2/endpoint/{namespace}/{name}`` (GET, PUT, POST
``pause``/``resume``/``scale-to-zero``; see ``_emulated_endpoints``). The endpoint URL speaks
TGI as ``huggingface_hub``'s ``InferenceClient`` expects it: ``POST /generate``, ``POST
/generate_stream`` (SSE token events), ``POST /`` with a text ``inputs`` (TGI's
``compat_generate``: ``"stream": true`` streams, else ``[GenerateResponse]``), ``details`` only
when ``parameters.details`` asks, ``GET /health`` and ``GET /info``; ``POST /`` with an object
``inputs`` is the inference toolkit's custom handler. Point the provider at it with
``url=<url>`` and ``management_url=<url>/v2``. The quirks users meet are reproduced:

- no ready replica: the proxy answers 503 (``initializing_status``; 502 in older docs) and wakes
  one; with ``X-Scale-Up-Timeout: <s>`` it holds the request until a replica is ready (503 if
  none is within the timeout);
- TGI's errors as ``{"error", "error_type"}``: 422 ``validation`` (e.g. ``temperature`` 0),
  424 ``generation``, 429 ``overloaded`` beyond ``max_concurrent_requests``; a body TGI cannot
  deserialize is axum's plain-text 422; the toolkit answers a handler exception with 400
  ``{"error"}``;
- TGI's timing headers in ms, ``x-compute-time`` in seconds or, as older TGI did, whole
  milliseconds (``compute_time_unit``);
- a client that hangs up cancels its request (TGI drops the generation);
- ``minute_s``: how long one ``scaleToZeroTimeout`` minute lasts here (tests run faster).

Faults in ``fleet.faults`` apply to inference (route ``submit``) and management (``control``)
requests. Run ``python -m gpubench_huggingface.emulator --port 8687`` to serve one by hand.
Needs the testing extra (``pip install 'gpubench-sdk[testing]'``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
from collections.abc import AsyncIterator, MutableMapping
from typing import Any, Literal

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
from ._emulated_tgi import REVISION, TgiShapes, until, validation_error

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
        from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
        from starlette.routing import Route

        from ._emulated_endpoints import EndpointAPI
    except ImportError as exc:
        raise ImportError(f"the Hugging Face emulator: {INSTALL_HINT}") from exc

    shapes = TgiShapes(fleet, compute_time_unit, time_per_token_ms)
    inflight = [0]

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

    api = EndpointAPI(
        fleet,
        namespace=namespace,
        name=endpoint_name,
        minute_s=minute_s,
        authorized=authorized,
        error=error,
    )

    async def body_of(request: Request, tgi: bool) -> dict[str, Any] | Response:
        """The request body; TGI's routes (and ``POST /`` with a text ``inputs``) refuse what
        TGI refuses: a body that is not a ``GenerateRequest`` (axum's 422 text), parameters
        its validation rejects (422 ``validation``)."""
        try:
            body = json.loads(await request.body())
        except ValueError:
            return error(400, "body is not valid JSON")
        if tgi and not (isinstance(body, dict) and isinstance(body.get("inputs"), str)):
            text = "Failed to deserialize the JSON body into the target type: inputs: missing"
            return PlainTextResponse(f"{text} or not a string", status_code=422)
        if not isinstance(body, dict) or "inputs" not in body:
            return error(400, f"Body needs to provide a inputs key, received: {body!r}"[:200])
        refused = validation_error(body.get("parameters"))
        if isinstance(body["inputs"], str) and refused is not None:
            return error(422, refused, "validation")
        return body

    def wants_details(body: dict[str, Any]) -> bool:
        parameters = body.get("parameters")
        return isinstance(parameters, dict) and parameters.get("details") is True

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
        if api.paused:
            return error(503, "endpoint is paused")
        if inflight[0] >= max_concurrent_requests:
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
                    await until(lambda: job.started_s is not None or job.done.is_set())
            if job.started_s is None:
                fleet.cancel(job.id)
                return error(503, "Service Unavailable: scale-up timeout reached")
        return job

    def failure(job: Job, tgi: bool) -> Response | None:
        if job.status is JobStatus.COMPLETED:
            return None
        message = job.error or f"request {job.status.value}"
        return error(424, message, "generation") if tgi else error(400, message)

    async def run(request: Request, body: dict[str, Any], tgi: bool) -> Job | Response:
        job = await admit(request, shapes.payload(body))
        if isinstance(job, Response):
            return job
        inflight[0] += 1
        try:
            if not await until_ready(request, job):
                return Response(status_code=499)  # nobody is listening any more
        finally:
            inflight[0] -= 1
        return failure(job, tgi) or job

    async def stream(request: Request, body: dict[str, Any]) -> Response:
        job = await admit(request, shapes.payload(body))
        if isinstance(job, Response):
            return job
        inflight[0] += 1
        details = wants_details(body)

        async def events() -> AsyncIterator[str]:
            try:
                async for event in shapes.stream_events(job, details):
                    yield f"data:{json.dumps(event, separators=(',', ':'))}\n\n"
            finally:
                inflight[0] -= 1
                if not job.done.is_set():
                    fleet.cancel(job.id)  # the client hung up: TGI stops generating

        headers = {
            "x-request-id": job.id,
            "x-compute-type": "gpu+optimized",
            "x-accel-buffering": "no",
        }
        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)

    async def root(request: Request) -> Response:
        """TGI's ``compat_generate`` for a text ``inputs`` (``stream`` honoured), else the
        toolkit's custom handler (``{"inputs": {...}}``), which answers 400 on a failure."""
        body = await body_of(request, tgi=False)
        if isinstance(body, Response):
            return body
        if isinstance(body["inputs"], str) and body.get("stream") is True:
            return await stream(request, body)
        tgi = isinstance(body["inputs"], str)
        job = await run(request, body, tgi=tgi)
        if isinstance(job, Response):
            return job
        answer = shapes.root_output(job, tgi, wants_details(body))
        headers = shapes.headers(job) if tgi else {"x-request-id": job.id}
        return JSONResponse(answer, headers=headers)

    async def generate(request: Request) -> Response:
        body = await body_of(request, tgi=True)
        if isinstance(body, Response):
            return body
        job = await run(request, body, tgi=True)
        if isinstance(job, Response):
            return job
        answer = shapes.generate_output(job, wants_details(body))
        return JSONResponse(answer, headers=shapes.headers(job))

    async def generate_stream(request: Request) -> Response:
        body = await body_of(request, tgi=True)
        return body if isinstance(body, Response) else await stream(request, body)

    async def health(request: Request) -> Response:
        counts = fleet.counts()
        ready = counts.idle + counts.running
        return Response(status_code=200 if ready else initializing_status)

    async def info(request: Request) -> Response:
        """TGI's ``GET /info`` (the fields ``InferenceClient.get_endpoint_info`` shows)."""
        return JSONResponse(
            {
                "model_id": "gpubench/emulated",
                "model_sha": REVISION,
                "model_pipeline_tag": "text-generation",
                "max_concurrent_requests": max_concurrent_requests,
                "max_best_of": 2,
                "max_stop_sequences": 4,
                "max_input_tokens": 1024,
                "max_total_tokens": 2048,
                "validation_workers": 2,
                "max_client_batch_size": 4,
                "router": "text-generation-router",
                "version": "3.3.6",
                "sha": None,
                "docker_label": None,
            }
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with fleet:
            yield
            api.close()

    base = "/v2/endpoint/{namespace}/{name}"
    app = Starlette(
        routes=[
            Route("/", root, methods=["POST"]),
            Route("/generate", generate, methods=["POST"]),
            Route("/generate_stream", generate_stream, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
            Route("/info", info, methods=["GET"]),
            Route(base, api.endpoint, methods=["GET", "PUT"]),
            Route(base + "/{action}", api.action, methods=["POST"]),
        ],
        lifespan=lifespan,
    )
    return FaultInjector(app, fleet, _route)


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
