"""A Cog container emulator on the testing kit's simulated fleet, for tests and demos.

Speaks Cog's HTTP API as Cog 0.23.1's own server answers it (observed on loopback; see
``gpubench_replicate._cog``'s docstring): ``POST /predictions`` (waits for the result;
``Prefer: respond-async`` answers 202 at once), ``PUT /predictions/{id}`` (idempotent: the same
id while it runs returns its state, 202), ``POST /predictions/{id}/cancel`` (200 ``{}``; 404
``{}`` if unknown or finished), ``GET /health-check`` (``STARTING``/``READY``/``BUSY`` with the
container's ``setup`` and ``version``) and ``GET /``. Predictions come back without timestamps
(0.23 sends none), errors as ``{"error": ..., "status": "failed"}``.

Two deployments of a container:

* **direct** (the default, like ``docker run``): the container starts with the server and runs
  its setup; a prediction that arrives meanwhile gets ``503 Setup has not finished yet``. When
  the fleet has stopped it (idle timeout), the next request starts one and gets the 503.
* ``behind_proxy=True`` (Cloud Run, a Kubernetes Service with a readiness probe): each fleet
  worker is one container; the proxy starts them on demand and holds a request until one is
  ready, so setup becomes the prediction's wait; ``/health-check`` answers 503 while no
  container runs.

Either way a request that finds every container busy gets Cog's 409, and a container frees its
slot ``slot_release_s`` *after* answering, as Cog's does, so a request sent at once can get 409.
``api_key`` stands for a proxy's bearer token (Cog itself has no auth). Faults apply to creates
(route ``submit``) and health checks (``poll``). ``python -m gpubench_replicate.cog_emulator
--port 5000`` serves one by hand. Needs the testing extra (``pip install 'gpubench-sdk[testing]'``).
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

from gpubench_sdk import testing as kit

from . import _cog
from . import _prediction as p
from .emulator import prediction_body

AT_CAPACITY = "At capacity - all prediction slots busy"
SETUP_RUNNING = (
    "Setup has not finished yet. Wait until it has finished, or GET /health-check for status."
)
NO_CONTAINER = "no container is running"
VERSION = {"coglet": "emulated", "python_sdk": "emulated"}


def error_body(status: int, message: str) -> tuple[bytes, str]:
    """Cog 0.23's error shape, ``{"error": ..., "status": "failed"}``; 409 with its text."""
    text = AT_CAPACITY if status == 409 else message
    return json.dumps({"error": text, "status": p.FAILED}).encode(), "application/json"


def cog_time(unix_s: float) -> str:
    """A Unix instant as Cog 0.23 writes it: RFC 3339, nanoseconds, ``+00:00``."""
    unix_ns = round(unix_s * 1e9)
    whole = datetime.fromtimestamp(unix_ns // 1_000_000_000, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{whole}.{unix_ns % 1_000_000_000:09d}+00:00"


def make_app(
    fleet: kit.SimulatedFleet,
    *,
    api_key: str | None = None,
    behind_proxy: bool = False,
    reject_when_busy: bool = True,
    slot_release_s: float = 0.002,
    timestamps: bool = False,
) -> kit.ASGIApp:
    """The emulator app for ``fleet`` (see the module docstring for the two deployments);
    ``timestamps`` adds ``created_at``/``started_at``/``completed_at`` to predictions, as Cog
    before 0.23 sent them."""
    emu = kit.Emulator(fleet, name="Cog", check=kit.KeyCheck(api_key, bare=True),
                       error_body=error_body, fault=None)  # fmt: skip
    clock = kit.WallClock()
    releasing: list[float] = []  # when each slot answered but not yet freed becomes free
    if not behind_proxy:  # the container starts (and runs setup) with the server
        emu.on_start.append(fleet.request_worker)

    def still_releasing() -> int:
        now = time.perf_counter()
        releasing[:] = [t for t in releasing if t > now]
        return len(releasing)

    def refuse() -> None:
        """Cog's answer when the prediction cannot start now."""
        c = fleet.counts()
        assert fleet.scaling.max_workers is not None
        taken = c.running + c.queued + still_releasing()
        if behind_proxy:
            if taken >= fleet.scaling.max_workers and reject_when_busy:
                raise kit.Reject(409, AT_CAPACITY)
            return
        if not c.ready:  # in setup, or no container: start one, like a platform
            fleet.request_worker()
            raise kit.Reject(503, SETUP_RUNNING)
        if taken >= c.ready and reject_when_busy:
            raise kit.Reject(409, AT_CAPACITY)

    def body_of(job: kit.Job) -> dict[str, Any]:
        """Cog 0.23's prediction: no input and no timestamps once it has ended."""
        full = prediction_body(job, clock)
        keep: tuple[str, ...] = ("id", "status", "output", "logs", "metrics")
        if timestamps:
            keep += ("created_at", "started_at", "completed_at")
        body = {k: full[k] for k in keep if full[k] is not None}
        if job.status is kit.JobStatus.FAILED:
            body["error"] = full["error"]
        if not job.status.terminal:
            body["input"] = full["input"]
        body["metrics"] = {k: v for k, v in full["metrics"].items() if k == "predict_time"}
        return body

    @emu.route("/predictions", "POST", fault="submit")
    @emu.route("/predictions/{prediction_id}", "PUT", fault="submit")
    async def predict(request: kit.Request) -> Any:
        prediction_id = request.path_params.get("prediction_id")
        try:
            body = await emu.read_json(request, not_object=None, empty={})
        except kit.Reject:  # coglet answers a body it cannot parse in plain text
            text = b"Failed to parse the request body as JSON"
            return emu.reply(text, 400, media_type="text/plain")
        if not isinstance(body, dict):
            raise kit.Reject(422, "body must be a JSON object")
        given_id = body.get("id")
        if prediction_id is not None:
            if given_id is not None and given_id != prediction_id:
                msg = "prediction ID must match the ID supplied in the URL"
                detail = [{"loc": ["body", "id"], "msg": msg, "type": "value_error"}]
                return emu.json({"detail": detail}, 422)
            running = fleet.job(prediction_id)
            if running is not None and not running.status.terminal:
                return emu.json(body_of(running), 202)
            given_id = prediction_id
        payload = body.get("input") or {}
        if not isinstance(payload, dict):
            raise kit.Reject(422, "input: a JSON object is required")
        refuse()
        job_id = given_id if isinstance(given_id, str) and given_id else None
        if job_id is not None and fleet.job(job_id) is not None:
            raise kit.Reject(409, AT_CAPACITY)  # one id, one prediction
        job = emu.submit(payload, full=AT_CAPACITY, status=409, job_id=job_id)
        if request.headers.get("prefer") == "respond-async":
            return emu.json({"id": job.id, "status": p.STARTING}, 202)
        await job.done.wait()
        releasing.append(time.perf_counter() + slot_release_s)  # freed just after answering
        return body_of(job)

    @emu.route("/predictions/{prediction_id}/cancel", "POST", fault="control")
    async def cancel(request: kit.Request) -> Any:
        job = fleet.job(request.path_params["prediction_id"])
        if job is None or job.status.terminal:
            return emu.json({}, 404)
        fleet.cancel(job.id)
        return {}

    def setup_of(bill: kit.WorkerBill) -> dict[str, Any]:
        setup: dict[str, Any] = {"started_at": cog_time(clock.unix(bill.started_s))}
        if bill.boot_end_s is None:
            return {**setup, "status": p.STARTING}
        ended = cog_time(clock.unix(bill.boot_end_s))
        return {**setup, "completed_at": ended, "status": p.SUCCEEDED, "logs": ""}

    @emu.route("/health-check", fault="poll")
    async def health(request: kit.Request) -> Any:
        live = [b for b in fleet.billing.workers if b.stopped_s is None]
        if not live:
            # No container: a proxy has no backend to ask (a Kubernetes Service without ready
            # pods answers 503). Not waking one keeps fleet watching from warming it.
            raise kit.Reject(503, NO_CONTAINER)
        booted = [b for b in live if b.boot_end_s is not None]
        bill = max(booted, key=lambda b: b.boot_end_s or 0.0) if booted else live[-1]
        c = fleet.counts()
        status = _cog.READY if c.idle else _cog.BUSY if c.running else _cog.STARTING
        return {"status": status, "setup": setup_of(bill), "version": VERSION}

    index = {
        "cog_version": "emulated",
        "docs_url": "/docs",
        "openapi_url": "/openapi.json",
        "shutdown_url": "/shutdown",
        "healthcheck_url": "/health-check",
        "predictions_url": "/predictions",
        "predictions_idempotent_url": "/predictions/{prediction_id}",
        "predictions_cancel_url": "/predictions/{prediction_id}/cancel",
    }
    emu.static("/", index, check=False)

    return emu.app()


def main(argv: list[str] | None = None) -> None:
    """Serve an emulator until interrupted: ``python -m gpubench_replicate.cog_emulator``."""
    parser = kit.EmulatorParser(__doc__, port=5000, cold_flag="--setup-s",
                                workers_flag="--containers", max_workers=1,
                                key_help="require this bearer token (a proxy's)")  # fmt: skip
    proxied = "containers behind a proxy that starts them on demand and holds requests"
    parser.add_argument("--proxy", dest="behind_proxy", action="store_true", help=proxied)
    parser.serve(make_app, argv)


if __name__ == "__main__":
    main()
