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

import json
import re
from collections.abc import Iterator
from typing import Any

from gpubench_sdk import testing as kit

from . import _prediction as p
from ._replicate import MAX_WAIT_S

DEFAULT_MODEL = "gpubench/echo"
DEFAULT_VERSION = "5c7d5dc6dd8bf75c1acaa8565735e7986bc5b66206b55cca93cb72c9bf15ccaa"
DEFAULT_DEPLOYMENT = "gpubench/echo-deployment"
THROTTLED_DETAIL = "Request was throttled. Expected available in 1 second."
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_S = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


_STATUS = {
    kit.JobStatus.QUEUED: p.STARTING,  # waiting for an instance, or for its setup
    kit.JobStatus.RUNNING: p.PROCESSING,
    kit.JobStatus.COMPLETED: p.SUCCEEDED,
    kit.JobStatus.FAILED: p.FAILED,
    kit.JobStatus.CANCELLED: p.CANCELED,
    kit.JobStatus.TIMED_OUT: p.CANCELED,
}


def api_time(clock: kit.WallClock, perf_s: float) -> str:
    """A fleet instant as the APIs write it (UTC, microseconds, ``Z``)."""
    return clock.at(perf_s).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def prediction_body(
    job: kit.Job, clock: kit.WallClock, *, status: str | None = None, **extra: Any
) -> dict[str, Any]:
    """The prediction object for ``job`` (both emulators' prediction: Cog serves Replicate's),
    with ISO-8601 timestamps on the wall clock and ``metrics`` in seconds, as Replicate and Cog
    send them; ``status`` overrides the mapped one (``aborted``)."""
    body: dict[str, Any] = {
        "id": job.id,
        "input": dict(job.input),
        "output": None,
        "logs": "",
        "error": job.error,
        "status": status or _STATUS[job.status],
        "created_at": api_time(clock, job.submitted_s),
        "started_at": None if job.started_s is None else api_time(clock, job.started_s),
        "completed_at": None,
        "metrics": {},
        **extra,
    }
    if job.status.terminal and job.finished_s is not None:
        body["completed_at"] = api_time(clock, job.finished_s)
    if job.status is kit.JobStatus.COMPLETED:
        body["output"] = job.result
    if job.execution_ms is not None and job.finished_s is not None:
        body["metrics"] = {
            "predict_time": round(job.execution_ms / 1e3, 6),  # seconds, as the APIs send
            "total_time": round(job.finished_s - job.submitted_s, 6),
        }
    return body


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
    fleet: kit.SimulatedFleet,
    *,
    api_key: str | None = None,
    model: str = DEFAULT_MODEL,
    version: str = DEFAULT_VERSION,
    deployment: str = DEFAULT_DEPLOYMENT,
    hardware: str = "gpu-a100-large",
    wait_cap_s: float = MAX_WAIT_S,
) -> kit.ASGIApp:
    """The emulator app for ``fleet``; ``wait_cap_s`` shortens how long ``Prefer: wait`` holds
    a create before answering with the incomplete prediction (the service's 60 s)."""
    key = kit.KeyCheck(api_key, schemes=("Bearer", "Token"),
                   message="You did not pass a valid authentication token")  # fmt: skip
    # unknown routes and methods answer the API's JSON problem, never Starlette's text
    emu = kit.QueueEmulator(
        fleet,
        name="Replicate",
        check=key,
        error_body=error_body,
        not_found="Not found.",
        job_param="prediction_id",
        missing="Not found.",
    )
    created_at = api_time(emu.clock, 0.0)
    release = {"number": 1}

    def body_of(job: kit.Job, request: kit.Request) -> dict[str, Any]:
        base = str(request.base_url).rstrip("/")
        urls = {
            "get": f"{base}/v1/predictions/{job.id}",
            "cancel": f"{base}/v1/predictions/{job.id}/cancel",
            "stream": f"{base}/stream/{job.id}",
            "web": f"https://replicate.com/p/{job.id}",
        }
        return prediction_body(
            job, emu.clock, status=emu.ended_by(job), model=model, version=version, urls=urls
        )

    def cancel_after(job: kit.Job) -> str:
        """How a prediction ends at its ``Cancel-After`` deadline: ``aborted`` if never started."""
        return p.ABORTED if job.started_s is None else p.CANCELED

    def owner_name(request: kit.Request) -> None:
        """A path's ``{owner}/{name}`` must be the deployment (or model) served here."""
        expected = deployment if request.url.path.startswith("/v1/deployments/") else model
        if f"{request.path_params['owner']}/{request.path_params['name']}" != expected:
            raise kit.Reject(404, "Not found.")

    @emu.route("/v1/models/{owner}/{name}/predictions", "POST", fault="submit")
    @emu.route("/v1/predictions", "POST", fault="submit")
    @emu.route("/v1/deployments/{owner}/{name}/predictions", "POST", fault="submit")
    async def create(request: kit.Request) -> Any:
        if "owner" in request.path_params:  # not on a version
            owner_name(request)
        body = await emu.read_input(request, status=422, message="input: a JSON object is required")
        if request.url.path == "/v1/predictions" and body.get("version") != version:
            raise kit.Reject(422, f"version: {body.get('version')!r} does not exist")
        wait_s: float | None = None
        prefer = request.headers.get("prefer")
        if prefer is not None:
            match = re.fullmatch(r"wait(?:=(\d+))?", prefer.strip())
            if match is None or not 1 <= int(match.group(1) or MAX_WAIT_S) <= MAX_WAIT_S:
                raise kit.Reject(400, f"Prefer: expected 'wait' or 'wait=1..{MAX_WAIT_S}'")
            wait_s = float(match.group(1) or MAX_WAIT_S)
        cancel_after_s = None
        if (raw := request.headers.get("cancel-after")) is not None:
            cancel_after_s = parse_duration_s(raw)
            if cancel_after_s is None or cancel_after_s <= 0:
                raise kit.Reject(400, "Cancel-After: expected a duration such as '1m' or '90s'")
        job = emu.submit(body["input"], full=THROTTLED_DETAIL)
        if cancel_after_s is not None:
            emu.cancel_after(job, cancel_after_s, cancel_after)
        if wait_s is not None:
            await emu.wait(job, min(wait_s, wait_cap_s))
        return emu.json(body_of(job, request), 201)

    @emu.route("/v1/predictions/{prediction_id}", fault="poll")
    async def get_prediction(request: kit.Request) -> Any:
        return body_of(emu.find(request), request)

    @emu.route("/v1/predictions/{prediction_id}/cancel", "POST")
    async def cancel(request: kit.Request) -> Any:
        job = emu.find(request)
        fleet.cancel(job.id)
        return body_of(job, request)

    @emu.route("/stream/{prediction_id}", fault="poll")
    async def stream(request: kit.Request) -> Any:
        job = emu.find(request)

        def output(piece: Any, event_id: int) -> bytes:
            return kit.sse_event(json.dumps(piece), event="output", event_id=event_id)

        def closing(sent: int) -> Iterator[bytes]:
            status = body_of(job, request)["status"]
            if status == p.SUCCEEDED and sent == 0:
                yield output(job.output, 1)
            if status == p.FAILED:
                yield kit.sse_event({"detail": job.error}, event="error", event_id=sent + 1)
            reason = {} if status == p.SUCCEEDED else {"reason": status}
            yield kit.sse_event(reason, event="done", event_id=sent + 2)

        return emu.stream_job(job, output, end=closing, headers={"Cache-Control": "no-store"})

    @emu.route("/v1/deployments/{owner}/{name}", "GET", "PATCH")
    async def deployment_route(request: kit.Request) -> Any:
        owner_name(request)
        if request.method == "PATCH":
            fields = {"min_instances": "min_workers", "max_instances": "max_workers"}
            emu.set_scaling(kit.scaling_patch(await emu.read_json(request), fields))
            release["number"] += 1
        s = fleet.scaling
        owner, name = deployment.split("/", 1)
        # replicate 1.0.7's Account model requires type, username and name.
        created_by = {"type": "organization", "username": owner, "name": owner, "github_url": None}
        configuration = {"hardware": hardware, "min_instances": s.min_workers,
                         "max_instances": s.max_workers}  # fmt: skip
        current = {"number": release["number"], "model": model, "version": version,
                   "created_at": created_at, "created_by": created_by,
                   "configuration": configuration}  # fmt: skip
        return {"owner": owner, "name": name, "current_release": current}

    @emu.route("/v1/models/{owner}/{name}")
    async def model_route(request: kit.Request) -> Any:
        owner_name(request)
        return model_body(model, version_body(version, created_at))

    @emu.route("/v1/models/{owner}/{name}/versions")
    @emu.route("/v1/models/{owner}/{name}/versions/{version_id}")
    async def version_route(request: kit.Request) -> Any:
        owner_name(request)
        wanted = request.path_params.get("version_id")
        if wanted not in (None, version):
            raise kit.Reject(404, "Not found.")
        body = version_body(version, created_at)
        if wanted is None:  # the list: one page
            return {"next": None, "previous": None, "results": [body]}
        return body

    return emu.app()


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


def main(argv: list[str] | None = None) -> None:
    """Serve an emulator until interrupted: ``python -m gpubench_replicate.emulator``."""
    parser = kit.EmulatorParser(__doc__, port=8787, workers_flag="--max-instances",
                            min_flag="--min-instances")  # fmt: skip
    parser.serve(make_app, argv)


if __name__ == "__main__":
    main()
