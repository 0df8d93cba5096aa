"""The queue API ``queue_provider.py`` speaks, served on the testing kit's ``SimulatedFleet``
(workers that boot, queue and fail on demand), for its conformance test and for trying it.

``python queue_server.py`` serves it on 127.0.0.1:8765 with the key ``demo-key``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from gpubench_sdk.testing import ASGIApp, FaultInjector, JobStatus, QueueFull, SimulatedFleet


def queue_api(fleet: SimulatedFleet, api_key: str) -> ASGIApp:
    def refused(request: Request) -> JSONResponse | None:
        if request.headers.get("authorization") != f"Bearer {api_key}":
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        return None

    async def submit(request: Request) -> JSONResponse:
        if (answer := refused(request)) is not None:
            return answer
        body = await request.json()
        if not isinstance(body, dict) or not isinstance(body.get("input"), dict):
            return JSONResponse({"error": "body must be {'input': {...}}"}, status_code=400)
        try:
            job = fleet.submit(body["input"])
        except QueueFull as exc:
            return JSONResponse({"error": str(exc)}, status_code=429)
        return JSONResponse({"id": job.id, "status": str(job.status)}, status_code=201)

    async def status(request: Request) -> JSONResponse:
        if (answer := refused(request)) is not None:
            return answer
        job = fleet.job(request.path_params["id"])
        if job is None:
            return JSONResponse({"error": "no such job"}, status_code=404)
        return JSONResponse(
            {
                "id": job.id,
                "status": str(job.status),
                "output": job.output if job.status is JobStatus.COMPLETED else None,
                "error": job.error,
                "queue_ms": job.queue_ms,
                "execution_ms": job.execution_ms,
                "cold": job.cold,
            }
        )

    async def cancel(request: Request) -> JSONResponse:
        if (answer := refused(request)) is not None:
            return answer
        return JSONResponse({"cancelled": fleet.cancel(request.path_params["id"])})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with fleet:
            yield

    routes = [
        Route("/jobs", submit, methods=["POST"]),
        Route("/jobs/{id}", status, methods=["GET"]),
        Route("/jobs/{id}/cancel", cancel, methods=["POST"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    return FaultInjector(app, fleet, _route)


def _route(scope: MutableMapping[str, Any]) -> str | None:
    """Faults apply to submits (``submit``) and status reads (``poll``)."""
    if scope["path"] == "/jobs":
        return "submit"
    return "poll" if scope["method"] == "GET" else None


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(queue_api(SimulatedFleet(), "demo-key"), host="127.0.0.1", port=8765)
