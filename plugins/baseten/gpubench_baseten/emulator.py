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

import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from gpubench_sdk import ScalingSettings
from gpubench_sdk import testing as kit

from . import _protocol as bt

DEFAULT_MODEL_ID = "emu1model"
DEFAULT_DEPLOYMENT_ID = "emu1dep"
_ASYNC_STATUS = {
    kit.JobStatus.QUEUED: bt.QUEUED,
    kit.JobStatus.RUNNING: bt.IN_PROGRESS,
    kit.JobStatus.COMPLETED: bt.SUCCEEDED,
    kit.JobStatus.FAILED: bt.FAILED,
    kit.JobStatus.TIMED_OUT: bt.FAILED,
    kit.JobStatus.CANCELLED: bt.CANCELED,
}
RATE_LIMITS_PER_S = {
    "async_predict": bt.ASYNC_PREDICT_PER_S,
    "async_request": bt.ASYNC_STATUS_PER_S,
}


_CODES = {400: "client_error", 401: "unauthorized", 404: "model_does_not_exist",
          429: "rate_limited", 500: "application_error", 504: "timeout"}  # fmt: skip
_RETRY = {"Retry-After": "1"}
_ASYNC = "async"  # the tag of async predicts: only they have a status to read


def _error_body(status: int, message: str, code: str | None = None) -> tuple[bytes, str]:
    body = {"error": message, "error_code": code or _CODES.get(status, "client_error")}
    return json.dumps(body).encode(), "application/json"


def _fault_body(status: int, message: str) -> tuple[bytes, str]:
    return _error_body(status, message, "internal_baseten_error")


def make_app(
    fleet: kit.SimulatedFleet,
    *,
    api_key: str | None = None,
    model_id: str = DEFAULT_MODEL_ID,
    deployment_id: str = DEFAULT_DEPLOYMENT_ID,
    environment: str = "production",
    rate_limits: Mapping[str, int] = RATE_LIMITS_PER_S,
) -> kit.ASGIApp:
    """The emulator app for ``fleet``. With ``api_key`` every request must carry
    ``Authorization: Api-Key <key>`` (or ``Bearer <key>``); ``rate_limits`` caps
    ``async_predict`` and status reads per second (429 beyond, as Baseten does). A fleet with
    ``max_queue`` rejects predicts beyond it with 429 (backpressure ``REJECT_ON_FULL``)."""
    refused = "Authorization: Api-Key <BASETEN_API_KEY> is missing or wrong"
    emu = kit.QueueEmulator(
        fleet,
        name="Baseten",
        check=kit.KeyCheck(api_key, schemes=("Api-Key", "Bearer"), message=refused),
        error_body=_error_body,
        fault_body=_fault_body,
        job_param="request_id",
        rate_limits=rate_limits,
        throttled="{operation}: over {limit} requests per second",
        throttle_headers=_RETRY,
    )
    unknown, _ = _error_body(404, "no such async request", "client_error")
    emu.missing = kit.Reject(404, response=emu.reply(unknown, 404, media_type="application/json"))
    created = datetime.now(UTC).replace(microsecond=0)
    extra: dict[str, int] = dict(bt.AUTOSCALING_DEFAULTS)

    def target_ok(request: kit.Request) -> None:
        params = request.path_params
        if (
            params.get("env", environment) != environment
            or params.get("dep", deployment_id) != deployment_id
        ):
            raise kit.Reject(404, "no such environment or deployment of this model")

    async def start(request: kit.Request, async_call: bool) -> kit.Job:
        target_ok(request)
        if async_call:
            emu.throttle("async_predict")
            required = "model_input (an object) is required"
            body = (await emu.read_input(request, "model_input", message=required))["model_input"]
        else:
            body = await emu.read_json(request)
        full = "the deployment's queue is full: {exc}"
        tag = _ASYNC if async_call else None
        return emu.submit(body, full=full, headers=_RETRY, job_id=uuid.uuid4().hex, tag=tag)

    def failure(job: kit.Job) -> kit.Reject:
        headers = {bt.REQUEST_ID_HEADER: job.id}
        if job.status is kit.JobStatus.TIMED_OUT:
            return kit.Reject(504, job.error or "predict timed out", headers)
        return kit.Reject(500, job.error or "the model raised", headers)

    async def predict(request: kit.Request) -> Any:
        job = await start(request, async_call=False)
        if job.input.get("chunks"):
            return await streamed(job)
        await job.done.wait()
        if job.status is not kit.JobStatus.COMPLETED:
            raise failure(job)
        return emu.json(job.output, headers={bt.REQUEST_ID_HEADER: job.id})

    async def streamed(job: kit.Job) -> Any:
        if await emu.first_output(job) == "failed":
            raise failure(job)

        return emu.stream_job(
            job,
            lambda piece, _: (json.dumps(piece) + "\n").encode(),
            media_type="application/octet-stream",
            headers={bt.REQUEST_ID_HEADER: job.id},
        )

    async def async_predict(request: kit.Request) -> Any:
        job = await start(request, async_call=True)
        return emu.json({"request_id": job.id}, 201)

    @emu.route("/async_request/{request_id}", fault="poll")
    async def async_request(request: kit.Request) -> Any:
        emu.throttle("async_request")
        job = emu.find(request, tag=_ASYNC)
        at = {kit.JobStatus.QUEUED: job.submitted_s, kit.JobStatus.RUNNING: job.started_s}.get(
            job.status, job.finished_s
        )
        errors = []
        if job.status in (kit.JobStatus.FAILED, kit.JobStatus.TIMED_OUT):
            timed_out = job.status is kit.JobStatus.TIMED_OUT
            code = "MODEL_PREDICT_TIMEOUT" if timed_out else "MODEL_PREDICT_ERROR"
            errors.append({"code": code, "message": job.error or "the model raised"})
        return {"request_id": job.id, "model_id": model_id, "deployment_id": deployment_id,
                "status": _ASYNC_STATUS[job.status], "webhook_status": "PENDING",
                "created_at": emu.clock.iso(job.submitted_s), "status_at": emu.clock.iso(at),
                "errors": errors}  # fmt: skip

    @emu.route("/async_request/{request_id}", "DELETE")
    async def cancel(request: kit.Request) -> Any:
        job = emu.find(request, tag=_ASYNC)
        canceled = job.status is kit.JobStatus.QUEUED and fleet.cancel(job.id)
        refused = f"request is {_ASYNC_STATUS[job.status]}: only a QUEUED one can be canceled"
        message = "canceled" if canceled else refused
        return {"request_id": job.id, "canceled": canceled, "message": message}

    async def queue_status(request: kit.Request) -> Any:
        target_ok(request)
        states = [job.status for job in emu.jobs(tag=_ASYNC)]
        return {"model_id": model_id, "deployment_id": deployment_id,
                "num_queued_requests": states.count(kit.JobStatus.QUEUED),
                "num_in_progress_requests": states.count(kit.JobStatus.RUNNING)}  # fmt: skip

    async def wake(request: kit.Request) -> Any:
        target_ok(request)
        fleet.request_worker()
        return emu.reply(status=202)

    for prefix in ("/environments/{env}", "/deployment/{dep}", "/production"):
        emu.route(f"{prefix}/predict", "POST", fault="submit")(predict)
        emu.route(f"{prefix}/async_predict", "POST", fault="submit")(async_predict)
        emu.route(f"{prefix}/async_queue_status")(queue_status)
        emu.route(f"{prefix}/wake", "POST")(wake)

    def settings_body() -> dict[str, Any]:
        s = fleet.scaling
        assert s.idle_timeout_s is not None
        return {"min_replica": s.min_workers, "max_replica": s.max_workers,
                "scale_down_delay": round(s.idle_timeout_s), **extra}  # fmt: skip

    def deployment_ok(request: kit.Request) -> None:
        params = request.path_params
        if params["model"] != model_id or params["dep"] not in (deployment_id, environment):
            raise kit.Reject(404, "model or deployment not found")

    deployment_path = "/v1/models/{model}/deployments/{dep}"

    @emu.route(deployment_path)
    async def deployment(request: kit.Request) -> Any:
        deployment_ok(request)
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

    @emu.route(deployment_path + "/autoscaling_settings", "PATCH")
    async def autoscaling(request: kit.Request) -> Any:
        deployment_ok(request)
        try:
            patch = bt.AutoscalingPatch.model_validate(await emu.read_json(request))
        except ValidationError as exc:
            fields = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise kit.Reject(400, fields) from None
        changes = patch.model_dump(exclude_none=True)
        before = settings_body()
        emu.set_scaling(ScalingSettings(changes.get("min_replica"), changes.get("max_replica"),
                                        changes.get("scale_down_delay")))  # fmt: skip
        extra.update({k: v for k, v in changes.items() if k in bt.AUTOSCALING_DEFAULTS})
        status = "ACCEPTED" if settings_body() != before else "UNCHANGED"
        return {"status": status, "message": f"autoscaling settings {status.lower()}"}

    return emu.app()


def main(argv: list[str] | None = None) -> None:
    """Serve an emulator until interrupted: ``python -m gpubench_baseten.emulator``."""
    parser = kit.EmulatorParser(
        __doc__, port=8788, workers_flag="--max-replicas", idle_flag="--scale-down-delay-s"
    )
    parser.add_argument("--model-id", default=DEFAULT_MODEL_ID)
    parser.add_argument("--deployment-id", default=DEFAULT_DEPLOYMENT_ID)
    parser.serve(make_app, argv)


if __name__ == "__main__":
    main()
