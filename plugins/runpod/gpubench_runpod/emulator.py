"""A RunPod Serverless emulator on the testing kit's simulated fleet, for tests and demos.

One ASGI app speaks both of RunPod's planes, as the real service does on two hosts:
``/v2/{endpoint_id}/...`` (``run``, ``runsync``, ``status``, ``stream``, ``cancel``,
``purge-queue``, ``health``) and the REST control plane ``/v1/endpoints/{endpoint_id}`` (GET,
PATCH ``workersMin``/``workersMax``/``idleTimeout``), with the documented methods only (polls
are GET, as the official ``runpod`` client sends them). Point the provider at it with
``base_url=<url>/v2`` and ``rest_url=<url>/v1``. Faults in ``fleet.faults`` are applied to
``run``/``runsync`` (route ``submit``), ``status``/``stream`` (``poll``) and the rest
(``control``). Run ``python -m gpubench_runpod.emulator --port 8686`` to serve one by hand.
Needs the testing extra (``pip install 'gpubench-sdk[testing]'``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from gpubench_sdk import testing as kit

from . import _protocol as rp

_STATUS = {
    kit.JobStatus.QUEUED: rp.IN_QUEUE,
    kit.JobStatus.RUNNING: rp.IN_PROGRESS,
    kit.JobStatus.COMPLETED: rp.COMPLETED,
    kit.JobStatus.FAILED: rp.FAILED,
    kit.JobStatus.CANCELLED: rp.CANCELLED,
    kit.JobStatus.TIMED_OUT: rp.TIMED_OUT,
}
DEFAULT_ENDPOINT_ID = "emulated-endpoint"
# The endpoint's template as GET /v1/endpoints/{id}?includeTemplate=true shows it (a few of the
# documented fields: docs.runpod.io/api-reference/endpoints/GET/endpoints/endpointId).
TEMPLATE = {"id": "emu0template", "name": "gpubench emulated worker", "isServerless": True,
            "imageName": "gpubench/emulated-worker:1.0", "containerDiskInGb": 10}  # fmt: skip
_SCALING = {"workersMin": "min_workers", "workersMax": "max_workers",
            "idleTimeout": "idle_timeout_s"}  # fmt: skip


def job_body(job: kit.Job) -> dict[str, Any]:
    """A job as RunPod's /status shows it: times in whole milliseconds, as the service sends."""
    body: dict[str, Any] = {"id": job.id, "status": _STATUS[job.status]}
    times = {"delayTime": job.queue_ms, "executionTime": job.execution_ms}
    body |= {name: round(ms) for name, ms in times.items() if ms is not None}
    body |= {k: v for k, v in (("workerId", job.worker_id), ("error", job.error)) if v is not None}
    if job.status is kit.JobStatus.COMPLETED:
        # a generator handler's output is the list of what it yielded (return_aggregate_stream)
        body["output"] = job.result
    return body


def make_app(
    fleet: kit.SimulatedFleet,
    *,
    api_key: str | None = None,
    endpoint_id: str = DEFAULT_ENDPOINT_ID,
    runsync_cap_ms: int = rp.RUNSYNC_DEFAULT_WAIT_MS,
    rate_limits: Mapping[str, int] = rp.RATE_LIMITS_PER_WINDOW,
) -> kit.ASGIApp:
    """The emulator app for ``fleet``. With ``api_key`` every request must carry it
    (``Authorization: Bearer <key>`` or the bare key); ``runsync_cap_ms`` shortens how long
    ``/runsync`` holds a request before answering with a pending job (the service's ~90 s);
    ``rate_limits`` caps each operation's requests per 10 s (429 beyond, as RunPod does)."""
    delivered: dict[str, int] = {}  # stream items already handed out per job (/stream drains)
    key = kit.KeyCheck(api_key, bare=True)

    def check(request: kit.Request) -> None:
        if request.path_params["endpoint_id"] != endpoint_id:
            raise kit.Reject(404, "endpoint not found")
        key(request)
        emu.throttle(request.url.path.split("/")[3] if request.url.path.count("/") >= 3 else "")

    emu = kit.QueueEmulator(
        fleet,
        name="RunPod",
        check=check,
        missing="request does not exist",
        rate_limits=rate_limits,
        rate_window_s=rp.RATE_LIMIT_WINDOW_S,
        throttled="rate limit exceeded for /{operation}",
    )

    async def submit(request: kit.Request) -> kit.Job:
        body = await emu.read_input(request)
        policy = body.get("policy") or {}
        timeout_ms = policy.get("executionTimeout") if isinstance(policy, dict) else None
        timeout_s = timeout_ms / 1e3 if isinstance(timeout_ms, int) else None
        return emu.submit(body["input"], execution_timeout_s=timeout_s)

    prefix = "/v2/{endpoint_id}"

    @emu.route(f"{prefix}/run", "POST", fault="submit")
    async def run(request: kit.Request) -> Any:
        return {"id": (await submit(request)).id, "status": rp.IN_QUEUE}

    @emu.route(f"{prefix}/runsync", "POST", fault="submit")
    async def runsync(request: kit.Request) -> Any:
        wait = request.query_params.get("wait", str(rp.RUNSYNC_DEFAULT_WAIT_MS))
        if not wait.isdigit() or not rp.RUNSYNC_MIN_WAIT_MS <= int(wait) <= rp.RUNSYNC_MAX_WAIT_MS:
            raise kit.Reject(
                400, f"wait must be {rp.RUNSYNC_MIN_WAIT_MS}..{rp.RUNSYNC_MAX_WAIT_MS} ms"
            )
        job = await submit(request)
        await emu.wait(job, min(int(wait), runsync_cap_ms) / 1e3)
        return job_body(job)

    # GET only, as documented and as the official client (runpod 1.12.0, endpoint/runner.py)
    # polls; runpod's local API server is the one that wants POST.
    @emu.route(f"{prefix}/status/{{job_id}}", fault="poll")
    async def status(request: kit.Request) -> Any:
        return job_body(emu.find(request))

    @emu.route(f"{prefix}/stream/{{job_id}}", fault="poll")
    async def stream(request: kit.Request) -> Any:
        job = emu.find(request)
        start = delivered.get(job.id, 0)
        items = list(job.stream[start:])
        delivered[job.id] = start + len(items)
        return {"status": _STATUS[job.status], "stream": [{"output": item} for item in items]}

    @emu.route(f"{prefix}/cancel/{{job_id}}", "POST")
    async def cancel(request: kit.Request) -> Any:
        job = emu.find(request)
        # RunPod answers CANCELLED at once, also for a running job whose worker stops later
        cancelled = fleet.cancel(job.id)
        return {"id": job.id, "status": rp.CANCELLED if cancelled else _STATUS[job.status]}

    @emu.route(f"{prefix}/purge-queue", "POST")
    async def purge_queue(request: kit.Request) -> Any:
        queued = [job for job in emu.jobs() if job.status is kit.JobStatus.QUEUED]
        for job in queued:
            fleet.cancel(job.id)
        return {"removed": len(queued), "status": "completed"}

    @emu.route(f"{prefix}/health")
    async def health(request: kit.Request) -> Any:
        c = fleet.counts()
        jobs = {"completed": c.completed, "failed": c.failed + c.timed_out,
                "inProgress": c.running, "inQueue": c.queued, "retried": 0}  # fmt: skip
        workers = {"idle": c.idle, "initializing": c.initializing, "ready": c.idle,
                   "running": c.running, "throttled": c.throttled, "unhealthy": 0}  # fmt: skip
        return {"jobs": jobs, "workers": workers}

    @emu.route("/v1/endpoints/{endpoint_id}", "GET", "PATCH")
    async def endpoint(request: kit.Request) -> Any:
        if request.method == "PATCH":
            emu.set_scaling(kit.scaling_patch(await emu.read_json(request), _SCALING))
        s = fleet.scaling
        assert s.idle_timeout_s is not None
        body = {"id": endpoint_id, "name": "gpubench emulator", "workersMin": s.min_workers,
                "workersMax": s.max_workers, "idleTimeout": math.ceil(s.idle_timeout_s),
                "scalerType": "QUEUE_DELAY", "scalerValue": 4, "flashboot": False,
                "templateId": TEMPLATE["id"], "gpuTypeIds": ["NVIDIA L4"], "gpuCount": 1,
                "version": 0, "computeType": "GPU"}  # fmt: skip
        if request.query_params.get("includeTemplate") == "true":  # the template only when asked
            body["template"] = dict(TEMPLATE)
        return body

    return emu.app()


def main(argv: list[str] | None = None) -> None:
    """Serve an emulator until interrupted: ``python -m gpubench_runpod.emulator``."""
    parser = kit.EmulatorParser(__doc__, port=8686)
    parser.add_argument("--endpoint-id", default=DEFAULT_ENDPOINT_ID)
    parser.serve(make_app, argv)


if __name__ == "__main__":
    main()
