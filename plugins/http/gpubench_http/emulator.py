"""A generic JSON inference service on the testing kit's simulated fleet, with Modal's quirks.

``POST /predict`` runs the body (or its ``input`` object) as a fleet job and answers
``{"id", "output", "metrics": {"queue_time", "predict_time"}}`` (seconds, as Baseten-style
services report), with ``x-request-id`` and ``x-queue-ms`` headers. A request still running
after ``redirect_after_s`` is answered ``303 See Other`` with ``Location: /result/{id}``, as
Modal's web endpoints do after 150 s (modal.com/docs/guide/webhook-timeouts); ``GET
/result/{id}`` waits again and redirects again, until the result is ready. ``GET /health``
answers 200 while a worker is up and 503 while none is (readiness). A client that disconnects
cancels its job, and so does one that takes a 303 and does not come back for the result within
``reclaim_within_s``: a client cancelled between two hops has no connection left to close.
``auth`` picks the scheme the service requires (``bearer``, ``api-key``, ``key``, ``modal``:
``Modal-Key``/``Modal-Secret`` from ``api_key`` written ``key:secret``).
Faults in ``fleet.faults`` hit ``/predict`` (route ``submit``) and ``/result`` (``poll``).
Run ``python -m gpubench_http.emulator --port 0`` to serve one by hand (testing extra needed).
"""

from __future__ import annotations

import asyncio
from typing import Any

from gpubench_sdk import KeyScheme
from gpubench_sdk import testing as kit

MODAL_REDIRECT_AFTER_S = 150.0  # modal.com/docs/guide/webhook-timeouts
RECLAIM_WITHIN_S = 1.0  # a redirect is followed within milliseconds; a second is generous


def make_app(
    fleet: kit.SimulatedFleet,
    *,
    api_key: str | None = None,
    auth: KeyScheme = "bearer",
    redirect_after_s: float = MODAL_REDIRECT_AFTER_S,
    reclaim_within_s: float = RECLAIM_WITHIN_S,
) -> kit.ASGIApp:
    """The emulator app for ``fleet``; with ``api_key`` every request must carry it."""
    key = kit.KeyCheck.sent_as(auth, api_key, message="missing or invalid credentials")
    emu = kit.Emulator(fleet, name="HTTP", check=key)
    unclaimed: dict[str, asyncio.TimerHandle] = {}  # job id -> its cancel, once redirected

    def abandon(job: kit.Job) -> None:
        unclaimed.pop(job.id, None)
        fleet.cancel(job.id)  # nothing to cancel once it has ended

    def answer(job: kit.Job) -> Any:
        if job.status is not kit.JobStatus.COMPLETED:
            raise kit.Reject(500, f"handler failed: {job.error}")
        metrics = {"queue_time": (job.queue_ms or 0.0) / 1e3,
                   "predict_time": (job.execution_ms or 0.0) / 1e3}  # fmt: skip
        headers = {"x-request-id": job.id, "x-queue-ms": f"{job.queue_ms or 0.0:.3f}"}
        return emu.json({"id": job.id, "output": job.output, "metrics": metrics}, headers=headers)

    async def wait(request: kit.Request, job: kit.Job) -> Any:
        """The answer, a 303 to the result URL after ``redirect_after_s``, or nothing (the
        client left, and its job is cancelled)."""
        if (pending := unclaimed.pop(job.id, None)) is not None:
            pending.cancel()  # the client came back for it
        seen = await kit.watch(request, job, timeout_s=redirect_after_s)
        if seen == "hung_up":
            fleet.cancel(job.id)
            return emu.reply(status=499)
        if seen == "timed_out":  # a small body, as a real redirect may carry (and a fault can cut)
            location = f"/result/{job.id}"
            unclaimed[job.id] = emu.later(reclaim_within_s, abandon, job)
            return emu.json({"result_url": location}, 303, headers={"location": location})
        return answer(job)

    @emu.route("/predict", "POST", "PUT", fault="submit")
    async def predict(request: kit.Request) -> Any:
        body = await emu.read_json(request, not_object=None)
        if not isinstance(body, dict):
            raise kit.Reject(422, "body must be a JSON object")
        job_input = body["input"] if isinstance(body.get("input"), dict) else body
        return await wait(request, emu.submit(job_input, full="too many requests: {exc}"))

    @emu.route("/result/{job_id}", fault="poll")
    async def result(request: kit.Request) -> Any:
        return await wait(request, emu.job(request.path_params["job_id"], "no such call"))

    @emu.route("/health", check=False)
    async def health(request: kit.Request) -> Any:
        up = fleet.counts().workers > 0
        return emu.json({"ready": up}, 200 if up else 503)

    return emu.app()


def main(argv: list[str] | None = None) -> None:
    """Serve an emulator until interrupted: ``python -m gpubench_http.emulator``."""
    parser = kit.EmulatorParser(__doc__, port=8787, max_workers=2)
    parser.add_argument("--auth", default="bearer", choices=["bearer", "api-key", "key", "modal"])
    parser.add_argument("--redirect-after-s", type=float, default=MODAL_REDIRECT_AFTER_S)
    parser.serve(make_app, argv)


if __name__ == "__main__":
    main()
