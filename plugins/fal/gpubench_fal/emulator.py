"""A fal emulator on the testing kit's simulated fleet, for tests and demos.

fal serves its queue API on ``queue.fal.run`` and direct calls on ``fal.run``: same paths,
two hosts. One emulator serves both under two prefixes: the queue under ``/queue`` (``POST
/queue/{app}[/{subpath}]``, ``GET .../requests/{id}/status`` with ``logs=1``, ``GET
.../requests/{id}/status/stream`` (SSE), ``GET .../requests/{id}``, ``PUT
.../requests/{id}/cancel``) and direct calls under ``/run`` (``POST /run/{app}``, ``POST
/run/{app}/stream`` answering SSE; a dropped connection cancels the request). Point the provider
at it with ``queue_url=<url>/queue`` and ``run_url=<url>/run``; the official ``fal-client``
with ``FAL_QUEUE_RUN_HOST=<host:port>/queue`` and ``FAL_RUN_HOST=<host:port>/run`` (it only
speaks https: serve it with TLS). Status answers 202 while the request is pending and 200 once
COMPLETED. Faults in ``fleet.faults`` apply to submits and direct calls (route ``submit``),
status and result reads (``poll``) and cancels (``control``). Run ``python -m
gpubench_fal.emulator --port 8787`` to serve one by hand. Needs the testing extra.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from gpubench_sdk import testing as kit

from . import _protocol as fal

RATE_WINDOW_S = 1.0
_RETRY = {"Retry-After": "1"}
_EXPIRED = f"not started within its {fal.REQUEST_TIMEOUT_HEADER}"


def _error_body(status: int, message: str) -> tuple[bytes, str]:
    return json.dumps({"detail": message}).encode(), "application/json"


def make_app(
    fleet: kit.SimulatedFleet,
    *,
    api_key: str | None = None,
    submits_per_s: int | None = None,
    keepalive_s: float = 15.0,
) -> kit.ASGIApp:
    """The emulator app for ``fleet``. With ``api_key`` every request must carry
    ``Authorization: Key <api_key>``; ``submits_per_s`` caps submits and direct calls per
    second (429 with ``Retry-After`` beyond); ``keepalive_s`` spaces the comment lines of an
    SSE status stream (fal: 15 s)."""
    refused = "Invalid or missing credentials: Authorization: Key <FAL_KEY>"
    emu = kit.QueueEmulator(
        fleet,
        name="fal",
        check=kit.KeyCheck(api_key, schemes=("Key",), message=refused),
        error_body=_error_body,
        fault=None,
        job_param="request_id",
        missing="Request not found",
        rate_limits=None if submits_per_s is None else {"submit": submits_per_s},
        rate_window_s=RATE_WINDOW_S,
        throttle_headers=_RETRY,
    )

    def runner_logs(job: kit.Job) -> list[dict[str, Any]]:
        """What a runner would log for the request: its start and its end, timestamped."""
        entry = {"level": "INFO", "source": "user"}
        return [
            {"message": f"{job.worker_id} {what}", **entry, "timestamp": emu.clock.iso(at_s)}
            for at_s, what in (
                (job.started_s, "started the request"),
                (job.finished_s, f"finished the request: {job.status.value}"),
            )
            if at_s is not None
        ]

    def status_body(request: kit.Request, job: kit.Job, with_logs: bool) -> dict[str, Any]:
        under = f"{str(request.base_url).rstrip('/')}/queue/{emu.tag(job)}/requests"
        body: dict[str, Any] = {"request_id": job.id, **fal.request_urls(under, job.id)}
        if job.status is kit.JobStatus.QUEUED:
            return {"status": fal.IN_QUEUE, "queue_position": emu.position(job), **body}
        job_logs = runner_logs(job) if with_logs else None
        if job.status is kit.JobStatus.RUNNING:
            return {"status": fal.IN_PROGRESS, "logs": job_logs, **body}
        done: dict[str, Any] = {"status": fal.COMPLETED, "logs": job_logs, **body}
        if job.execution_ms is not None:
            done["metrics"] = {"inference_time": job.execution_ms / 1e3}
        if job.status is not kit.JobStatus.COMPLETED:
            done["error"], done["error_type"] = failure(job)
        return done

    def failure(job: kit.Job) -> tuple[str, str]:
        if emu.ended_by(job):
            return _EXPIRED, fal.ERROR_TIMEOUT
        if job.status is kit.JobStatus.TIMED_OUT:
            return job.error or "request timed out", fal.ERROR_TIMEOUT
        if job.status is kit.JobStatus.CANCELLED:
            return "request cancelled", fal.ERROR_CANCELLED
        return job.error or "runner error", fal.ERROR_RUNNER

    def result_of(job: kit.Job) -> Any:
        if job.status is not kit.JobStatus.COMPLETED:
            raise kit.Reject(504 if job.status is kit.JobStatus.TIMED_OUT else 500, failure(job)[0])
        return emu.json(job.output, headers={fal.REQUEST_ID_HEADER: job.id})

    def find(request: kit.Request) -> kit.Job:
        params = request.path_params
        return emu.find(request, tag=f"{params['owner']}/{params['alias']}")

    async def start(request: kit.Request, app_path: str) -> kit.Job:
        """The job a submit or a direct call to ``app_path`` starts (or a ``Reject``)."""
        emu.throttle("submit")
        if app_path.count("/") < 1:
            raise kit.Reject(404, "Application not found: use <owner>/<app>")
        payload = await emu.read_json(request, status=422, empty={})
        start_timeout = request.headers.get(fal.REQUEST_TIMEOUT_HEADER)
        try:
            timeout_s = float(start_timeout) if start_timeout is not None else None
        except ValueError:
            timeout_s = 0.0
        if timeout_s is not None and not timeout_s > fal.MIN_REQUEST_TIMEOUT_S:
            raise kit.Reject(422, f"{fal.REQUEST_TIMEOUT_HEADER} must be seconds > 1")
        full = "too many requests in the queue: {exc}"
        tag = fal.app_base(app_path)  # the app the request was sent to, for find
        job = emu.submit(payload, full=full, headers=_RETRY, job_id=str(uuid.uuid4()), tag=tag)
        if timeout_s is not None:  # not started by then: fal gives up on the request
            emu.cancel_after(job, timeout_s, _EXPIRED, queued_only=True)
        return job

    requests = "/queue/{owner}/{alias}/requests/{request_id}"

    @emu.route(f"{requests}/status", fault="poll")
    async def status(request: kit.Request) -> Any:
        job = find(request)
        body = status_body(request, job, request.query_params.get("logs") in ("1", "true"))
        return emu.json(body, 200 if body["status"] == fal.COMPLETED else 202)

    @emu.route(f"{requests}/status/stream", fault="poll")
    async def status_stream(request: kit.Request) -> Any:
        job = find(request)
        with_logs = request.query_params.get("logs") in ("1", "true")

        async def events() -> AsyncIterator[bytes]:
            last: tuple[Any, ...] | None = None
            quiet_since = time.monotonic()
            while True:
                body = status_body(request, job, with_logs)
                key = (body["status"], body.get("queue_position"))
                if key != last:
                    last, quiet_since = key, time.monotonic()
                    yield kit.sse_event(json.dumps(body))
                    if body["status"] == fal.COMPLETED:
                        return
                elif time.monotonic() - quiet_since >= keepalive_s:
                    quiet_since = time.monotonic()
                    yield b": keep-alive\n\n"
                await emu.wait(job, 0.01)

        return emu.stream(events())

    @emu.route(f"{requests}/cancel", "PUT", fault="control")
    async def cancel(request: kit.Request) -> Any:
        try:
            job = find(request)
        except kit.Reject:
            return emu.json({"status": "NOT_FOUND"}, 404)
        if job.status.terminal:
            return emu.json({"status": "ALREADY_COMPLETED"}, 400)
        # a queued request is removed; a running one's runner is told to stop
        queued = job.status is kit.JobStatus.QUEUED
        fleet.cancel(job.id)
        return {"status": "OK"} if queued else emu.json({"status": "CANCELLATION_REQUESTED"}, 202)

    @emu.route(requests, fault="poll")
    async def result(request: kit.Request) -> Any:
        job = find(request)
        if not job.status.terminal:
            raise kit.Reject(400, "Request is still in progress")
        return result_of(job)

    @emu.route("/queue/{app:path}", "POST", fault="submit")
    async def submit(request: kit.Request) -> Any:
        # the status at submission (IN_QUEUE with its position) and the request's URLs
        job = await start(request, request.path_params["app"])
        return status_body(request, job, with_logs=False)

    @emu.route("/run/{app:path}", "POST", fault="submit")
    async def run(request: kit.Request) -> Any:
        app_path: str = request.path_params["app"]
        job = await start(request, app_path.removesuffix("/stream"))
        if app_path.endswith("/stream"):
            return await stream(request, job)
        if not await emu.hold(request, job):  # a hang-up cancels a direct call (fal docs)
            raise kit.Reject(499, "client closed the connection")
        if emu.ended_by(job):  # a timeout the caller set: fal marks it (fal_client won't retry)
            raise kit.Reject(504, failure(job)[0], {fal.REQUEST_TIMEOUT_TYPE_HEADER: "user"})
        return result_of(job)

    async def stream(request: kit.Request, job: kit.Job) -> Any:
        # The answer starts with the first piece of output (or the failure, as a status code).
        started = await emu.first_output(job, request)
        if started == "hung_up":
            raise kit.Reject(499, "client closed the connection")
        if started == "failed":
            raise kit.Reject(500, failure(job)[0])

        def closing(sent: int) -> list[bytes]:
            if job.status is kit.JobStatus.COMPLETED:
                return []
            return [kit.sse_event(json.dumps({"detail": failure(job)[0]}), event="error")]

        return emu.stream_job(
            job,
            lambda piece, _: kit.sse_event(json.dumps(piece)),
            end=closing,
            cancel_on_hang_up=True,  # the caller hung up mid-stream
            headers={fal.REQUEST_ID_HEADER: job.id},
        )

    return emu.app()


def main(argv: list[str] | None = None) -> None:
    """Serve an emulator until interrupted: ``python -m gpubench_fal.emulator``."""
    # fal's keep_alive: how long an idle runner stays up
    kit.EmulatorParser(__doc__, port=8787, idle_flag="--keep-alive-s").serve(make_app, argv)


if __name__ == "__main__":
    main()
