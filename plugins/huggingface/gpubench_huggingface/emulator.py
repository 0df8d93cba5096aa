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

The model server's answers are built from a simulated fleet's job (sources in ``_protocol``; the
shapes checked against ``huggingface_hub``'s ``TextGenerationOutput`` and
``TextGenerationStreamOutput``, which parse them). TGI's bodies (text-generation-inference
``router/src/lib.rs``): ``GenerateResponse`` is ``{"generated_text", "details"?}``, ``details``
as ``{"finish_reason", "generated_tokens", "seed", "prefill", "tokens"}``; a ``StreamResponse``
event is ``{"index", "token", "generated_text", "details"}``, the last one carrying the text
and, when asked, ``{"finish_reason", "generated_tokens", "seed", "input_length"}``.

Faults in ``fleet.faults`` apply to inference (route ``submit``) and management (``control``)
requests. Run ``python -m gpubench_huggingface.emulator --port 8687`` to serve one by hand.
Needs the testing extra (``pip install 'gpubench-sdk[testing]'``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Literal

from gpubench_sdk import json_or_text
from gpubench_sdk import testing as kit

from . import _protocol as hf
from ._emulated_endpoints import REVISION, EndpointAPI

DEFAULT_NAMESPACE = "gpubench"
DEFAULT_ENDPOINT_NAME = "emulated-endpoint"
_AXUM_422 = "Failed to deserialize the JSON body into the target type: inputs: missing"
_POSITIVE = (lambda value: value > 0, "must be strictly positive")
# What TGI accepts of each number it validates, and its words when refused, in its order
_RULES: dict[str, tuple[Callable[[float], bool], str]] = {
    "temperature": _POSITIVE,
    "repetition_penalty": _POSITIVE,
    "top_p": (lambda value: 0 < value < 1, "must be > 0.0 and < 1.0"),
    "top_k": _POSITIVE,
    "max_new_tokens": _POSITIVE,
}


def validation_error(parameters: Any) -> str | None:
    """TGI's 422 ``validation`` message for parameters it refuses, else ``None`` (the rules
    and wording of text-generation-inference ``router/src/validation.rs``)."""
    if not isinstance(parameters, dict):
        return None if parameters is None else "`parameters` must be an object"
    for name, (accepted, refused) in _RULES.items():
        value = parameters.get(name)
        if isinstance(value, int | float) and not accepted(float(value)):
            return f"`{name}` {refused}"
    return None


def failure(job: kit.Job) -> str:
    """What a generation that did not complete says: its error, else how it ended."""
    return job.error or f"request {job.status.value}"


@dataclass
class TgiShapes:
    """Turns request bodies into fleet payloads and finished jobs into TGI/toolkit answers.

    A text ``inputs`` is a prompt; JSON text or an object is the fleet payload itself (so the
    echo probe's ``sleep_ms``/``chunks`` reach the fleet through TGI's text-only ``inputs``).
    ``max_new_tokens`` makes that many tokens, ``time_per_token_ms`` each.
    """

    fleet: kit.SimulatedFleet
    compute_time_unit: Literal["s", "ms"]
    time_per_token_ms: float

    def payload(self, body: dict[str, Any]) -> dict[str, Any]:
        inputs = body["inputs"]
        parameters = body.get("parameters") or {}
        decoded = json_or_text(inputs) if isinstance(inputs, str) else inputs
        payload = dict(decoded) if isinstance(decoded, dict) else {"prompt": inputs}
        tokens = parameters.get("max_new_tokens") if isinstance(parameters, dict) else None
        if isinstance(tokens, int) and tokens > 0:
            payload.setdefault("chunks", tokens)
            payload.setdefault("sleep_ms", tokens * self.time_per_token_ms)
        return payload

    @staticmethod
    def _token(index: int) -> dict[str, Any]:
        return {"id": 100 + index, "text": f" tok{index}", "logprob": -0.1, "special": False}

    def generated_text(self, job: kit.Job) -> str:
        if job.stream:
            return "".join(self._token(i)["text"] for i in range(len(job.stream)))
        output = job.output
        return output if isinstance(output, str) else json.dumps(output)

    @staticmethod
    def _details(generated: int) -> dict[str, Any]:
        """What a ``GenerateResponse``'s and a last ``StreamResponse``'s ``details`` share."""
        return {"finish_reason": "length", "generated_tokens": max(1, generated), "seed": None}

    def generate_output(self, job: kit.Job, details: bool) -> dict[str, Any]:
        answer: dict[str, Any] = {"generated_text": self.generated_text(job)}
        if details:
            tokens = [self._token(i) for i in range(len(job.stream))]
            answer["details"] = {**self._details(len(tokens)), "prefill": [], "tokens": tokens}
        return answer

    def headers(self, job: kit.Job) -> dict[str, str]:
        """TGI's timing headers (whole ms, as ``as_millis`` writes them). TGI sees a request
        only once a replica is up: time the proxy held it is in none of them."""
        assert job.started_s is not None and job.finished_s is not None
        bills = self.fleet.billing.workers
        boot_end_s = next((b.boot_end_s for b in bills if b.worker_id == job.worker_id), None)
        seen_s = max(job.submitted_s, boot_end_s or job.submitted_s)
        total_ms = (job.finished_s - seen_s) * 1e3
        inference_ms = (job.finished_s - job.started_s) * 1e3
        generated = max(1, len(job.stream))
        seconds = self.compute_time_unit == "s"
        compute = repr(total_ms / 1e3) if seconds else str(int(total_ms))
        return {
            "x-request-id": job.id,
            "x-compute-type": "gpu+optimized",
            "x-compute-time": compute,
            "x-total-time": str(int(total_ms)),
            "x-validation-time": "0",
            "x-queue-time": str(int((job.started_s - seen_s) * 1e3)),
            "x-inference-time": str(int(inference_ms)),
            "x-time-per-token": str(int(inference_ms / generated)),
            "x-prompt-tokens": str(self.prompt_tokens(job)),
            "x-generated-tokens": str(generated),
        }

    @staticmethod
    def prompt_tokens(job: kit.Job) -> int:
        prompt = job.input.get("prompt")
        return len(prompt.split()) if isinstance(prompt, str) else 1

    async def stream_events(self, job: kit.Job, details: bool) -> AsyncIterator[dict[str, Any]]:
        """One event per token as the fleet produces it; the last token's event carries
        ``generated_text`` (and ``details`` when asked), held back until the job ends, as TGI
        does. A failed generation ends with TGI's ``{"error", "error_type"}`` event."""
        sent = 0
        pending: dict[str, Any] | None = None
        async for _ in kit.follow(job, 0.002):
            if pending is not None:
                yield pending
            token = self._token(sent)
            pending = {"index": sent, "token": token, "generated_text": None, "details": None}
            sent += 1
        if job.status is not kit.JobStatus.COMPLETED:
            yield {"error": failure(job), "error_type": "generation"}
            return
        if pending is None:  # nothing generated: only the end-of-sequence token
            token = {"id": 2, "text": "</s>", "logprob": -0.1, "special": True}
            pending = {"index": 0, "token": token, "generated_text": None, "details": None}
        final = {**pending, "generated_text": self.generated_text(job)}
        if details:
            final["details"] = {**self._details(sent), "input_length": self.prompt_tokens(job)}
        yield final


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

    async def body_of(request: kit.Request, tgi: bool) -> dict[str, Any]:
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

    async def admit(request: kit.Request, payload: dict[str, Any]) -> kit.Job:
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

    async def generate(request: kit.Request) -> Any:
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
    async def health(request: kit.Request) -> Any:
        return emu.reply(status=200 if fleet.counts().ready else initializing_status)

    # TGI's GET /info (the fields InferenceClient.get_endpoint_info shows)
    info = {
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
    emu.static("/info", info, check=False)

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
