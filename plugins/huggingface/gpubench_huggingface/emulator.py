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

from typing import TYPE_CHECKING, Any, Literal

from gpubench_sdk import testing as kit

from . import _protocol as hf
from ._emulated_endpoints import EndpointAPI
from ._emulated_tgi import REVISION, TgiShapes, failure, validation_error

if TYPE_CHECKING:
    from starlette.requests import Request

DEFAULT_NAMESPACE = "gpubench"
DEFAULT_ENDPOINT_NAME = "emulated-endpoint"
_AXUM_422 = "Failed to deserialize the JSON body into the target type: inputs: missing"


def make_app(
    fleet: kit.SimulatedFleet,
    *,
    api_key: str | None = None,
    namespace: str = DEFAULT_NAMESPACE,
    endpoint_name: str = DEFAULT_ENDPOINT_NAME,
    minute_s: float = hf.SECONDS_PER_MINUTE,
    compute_time_unit: Literal["s", "ms"] = "s",
    initializing_status: int = 503,
    max_concurrent_requests: int = 128,
    time_per_token_ms: float = 5.0,
) -> kit.ASGIApp:
    """The emulator app for ``fleet`` (see the module's docstring for each quirk)."""
    key = kit.KeyCheck(api_key, bare=True, message="Invalid credentials in Authorization header")
    emu = kit.Emulator(fleet, name="Hugging Face", check=key, fault=None)
    shapes = TgiShapes(fleet, compute_time_unit, time_per_token_ms)
    in_flight = kit.InFlight(max_concurrent_requests)
    api = EndpointAPI(fleet, namespace=namespace, name=endpoint_name, minute_s=minute_s)
    api.register(emu)

    def tgi_error(status: int, message: str, error_type: str) -> kit.Reject:
        body = {"error": message, "error_type": error_type}
        return kit.Reject(status, message, response=emu.json(body, status))

    async def body_of(request: Request, tgi: bool) -> dict[str, Any]:
        """The request body; TGI's routes (and ``POST /`` with a text ``inputs``) refuse what
        TGI refuses: a body that is not a ``GenerateRequest`` (axum's 422 text), parameters
        its validation rejects (422 ``validation``)."""
        body = await emu.read_json(request, not_object=None)
        if tgi and not (isinstance(body, dict) and isinstance(body.get("inputs"), str)):
            raise kit.Reject(422, response=emu.text(f"{_AXUM_422} or not a string", 422))
        if not isinstance(body, dict) or "inputs" not in body:
            raise kit.Reject(400, f"Body needs to provide a inputs key, received: {body!r}"[:200])
        refused = validation_error(body.get("parameters"))
        if isinstance(body["inputs"], str) and refused is not None:
            raise tgi_error(422, refused, "validation")
        return body

    async def admit(request: Request, payload: dict[str, Any]) -> kit.Job:
        """HF's proxy, then TGI's admission: paused, cold (503 or hold), overloaded."""
        key(request)  # after the body is read, as the proxy does
        if api.paused:
            raise kit.Reject(503, "endpoint is paused")
        if in_flight.full:
            raise tgi_error(429, "Model is overloaded", "overloaded")
        ready = fleet.counts().ready
        wait = request.headers.get(hf.SCALE_UP_TIMEOUT_HEADER.lower(), "")
        if not ready and not wait.isdigit():
            fleet.request_worker()  # the 503 still wakes a replica up
            raise kit.Reject(initializing_status, "Service Unavailable: no replica is ready yet")
        try:
            job = emu.submit(payload, full="Model is overloaded: {exc}")
        except kit.Reject as full:
            raise tgi_error(429, full.message, "overloaded") from None
        if not ready:
            # the proxy holds the request until a replica is ready, at most ``wait`` seconds
            await kit.watch(request, job, timeout_s=int(wait), started=True)
            if job.started_s is None:
                fleet.cancel(job.id)
                raise kit.Reject(503, "Service Unavailable: scale-up timeout reached")
        return job

    async def generate(request: Request) -> Any:
        """TGI's ``/generate``, ``/generate_stream`` (SSE) and ``POST /``: TGI's
        ``compat_generate`` for a text ``inputs`` (``"stream": true`` streams), else the
        toolkit's custom handler (``{"inputs": {...}}``), which answers 400 on a failure."""
        path = request.url.path
        body = await body_of(request, tgi=path != "/")
        tgi = isinstance(body["inputs"], str)
        parameters = body.get("parameters")
        details = isinstance(parameters, dict) and parameters.get("details") is True
        job = await admit(request, shapes.payload(body))
        if path == "/generate_stream" or (path == "/" and tgi and body.get("stream") is True):
            in_flight.enter()

            def close() -> None:
                in_flight.leave()
                fleet.cancel(job.id)  # if the client hung up: TGI stops generating

            events = shapes.stream_events(job, details)
            headers = {"x-request-id": job.id, "x-compute-type": "gpu+optimized",
                       "x-accel-buffering": "no"}  # fmt: skip
            return emu.sse(events, compact=True, headers=headers, on_close=close)

        def failed(job: kit.Job) -> kit.Reject:
            message = failure(job)
            return tgi_error(424, message, "generation") if tgi else kit.Reject(400, message)

        with in_flight:
            job = await emu.finished(request, job, failed)
        if not tgi:  # the custom handler's own answer
            return emu.json(job.output, headers={"x-request-id": job.id})
        answer = shapes.generate_output(job, details)
        # POST / answers [GenerateResponse], as compat_generate and the toolkit's
        # text-generation pipeline do
        return emu.json([answer] if path == "/" else answer, headers=shapes.headers(job))

    for path in ("/", "/generate", "/generate_stream"):
        emu.route(path, "POST", fault="submit", check=False)(generate)

    @emu.route("/health", check=False)
    async def health(request: Request) -> Any:
        return emu.reply(status=200 if fleet.counts().ready else initializing_status)

    @emu.route("/info", check=False)
    async def info(request: Request) -> Any:
        """TGI's ``GET /info`` (the fields ``InferenceClient.get_endpoint_info`` shows)."""
        return {
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

    return emu.app()


def main(argv: list[str] | None = None) -> None:
    """Serve an emulator until interrupted: ``python -m gpubench_huggingface.emulator``."""
    parser = kit.EmulatorParser(__doc__, port=8687, idle_flag=None)
    parser.add_argument("--namespace", default=DEFAULT_NAMESPACE)
    parser.add_argument("--endpoint-name", default=DEFAULT_ENDPOINT_NAME)
    parser.add_argument("--minute-s", type=float, default=1.0, help="one scaleToZeroTimeout minute")
    parser.add_argument("--scale-to-zero-minutes", type=int, default=1)
    parser.add_argument("--compute-time-unit", choices=["s", "ms"], default="s")
    parser.add_argument("--time-per-token-ms", type=float, default=5.0)
    parser.add_argument("--max-concurrent-requests", type=int, default=128)
    args = parser.parse(argv)
    fleet = args.fleet(idle_timeout_s=args.scale_to_zero_minutes * args.minute_s)
    args.serve(
        make_app(fleet, api_key=args.api_key, **args.own(exclude=("scale_to_zero_minutes",)))
    )


if __name__ == "__main__":
    main()
