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

import json
from collections.abc import AsyncIterator
from typing import Any

from gpubench_sdk import testing as kit

from . import _kserve as kserve

DEFAULT_MODEL = "emulated-model_0a1b2c"


def make_app(
    fleet: kit.SimulatedFleet,
    *,
    api_key: str | None = None,
    model: str = DEFAULT_MODEL,
    max_concurrent: int = 64,
    streams: bool = True,
) -> kit.ASGIApp:
    """The emulator app for ``fleet``: ``model`` is the name in the URL; ``api_key`` the
    workspace key every request must carry as ``Authorization: Bearer``; ``streams``: the
    model is deployed with streaming output (else it answers JSON whatever is accepted)."""
    in_flight = kit.InFlight(max_concurrent)
    key = kit.KeyCheck(api_key, bare=True, message="invalid workspace API key")

    def known(request: kit.Request) -> None:
        name = request.path_params["model"]
        if name != model:
            raise kit.Reject(404, f"Model with name {name} does not exist.")

    def check(request: kit.Request) -> None:
        known(request)
        key(request)

    emu = kit.Emulator(fleet, name="Inferless", check=check, fault=None)
    models = "/v2/models/{model}"

    @emu.route(models + "/versions/{version}/infer", "POST", fault="submit")
    @emu.route(models + "/infer", "POST", fault="submit")
    async def infer(request: kit.Request) -> Any:
        try:
            body = json.loads(await request.body())
        except ValueError:
            detail = [{"type": "json_invalid", "loc": ["body", 0], "msg": "JSON decode error"}]
            return emu.json({"detail": detail}, 422)
        if (problem := kserve.request_problem(body)) is not None:
            return emu.json(problem[1], problem[0])
        payload = kserve.decode_tensors(body["inputs"])
        if in_flight.full:
            raise kit.Reject(429, "too many concurrent requests for this model")
        request_id = body.get("id") if isinstance(body.get("id"), str) else None
        job = emu.submit(payload, full="too many queued requests: {exc}", job_id=request_id)
        version = request.path_params.get("version")  # kserve: null when the URL has none
        if streams and "text/event-stream" in request.headers.get("accept", ""):
            in_flight.enter()

            async def pieces() -> AsyncIterator[Any]:
                async for piece in kit.follow(job, 0.002):
                    yield piece
                if job.status is not kit.JobStatus.COMPLETED:
                    yield {"error": job.error or job.status.value}

            return emu.sse(pieces(), on_close=in_flight.leave)
        with in_flight:
            await job.done.wait()
        if job.status is not kit.JobStatus.COMPLETED:
            raise kit.Reject(500, job.error or f"inference {job.status.value}")
        outputs = kserve.encode_outputs(job.output)
        return {"model_name": model, "model_version": version, "id": job.id, "outputs": outputs}

    emu.static("/v2", {"name": "gpubench-inferless-emulator", "extensions": []}, check=False)
    emu.static("/v2/health/live", {"live": True}, check=False)
    # ready: the gateway is; replicas start on demand
    emu.static("/v2/health/ready", {"ready": True}, check=False)

    @emu.route(models + "/ready", check=False)
    @emu.route(models + "/versions/{version}/ready", check=False)
    async def model_ready(request: kit.Request) -> Any:
        known(request)
        return {"name": model, "ready": True}

    @emu.route(models, check=False)
    @emu.route(models + "/versions/{version}", check=False)
    async def model_metadata(request: kit.Request) -> Any:
        known(request)  # the model's tensors are whatever its handler reads: none are declared
        return {"name": model, "versions": ["1"], "platform": "", "inputs": [], "outputs": []}

    return emu.app()


def infer_url(base_url: str, model: str = DEFAULT_MODEL, version: str = "1") -> str:
    """The emulated model's infer URL under ``base_url`` (Inferless's URL shape)."""
    return f"{base_url.rstrip('/')}/v2/models/{model}/versions/{version}/infer"


def main(argv: list[str] | None = None) -> None:
    """Serve an emulator until interrupted: ``python -m gpubench_inferless.emulator``."""
    parser = kit.EmulatorParser(__doc__, port=8688, idle_flag="--scale-down-delay-s")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.serve(make_app, argv)


if __name__ == "__main__":
    main()
