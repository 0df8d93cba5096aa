"""Hugging Face Inference Endpoints: the names, units and bodies shared by provider and emulator,
and the provider's readers of the answers: errors into gpubench's taxonomy, the management API's
endpoint object into ``EndpointStatus`` (``FleetState``, ``ScalingSettings``).

Sources (read 2026-11):

- Endpoint URL and bodies: the inference toolkit's ``POST /`` takes ``{"inputs", "parameters"}``
  and answers any handler exception with 400 ``{"error": str}``
  (huggingface/huggingface-inference-toolkit ``webservice_starlette.py``); TGI adds
  ``POST /generate`` and ``POST /generate_stream`` (SSE ``data:`` events of
  ``{"token": {"id", "text", "logprob", "special"}, "generated_text", "details"}``, the last
  one carrying ``generated_text`` and ``details``; text-generation-inference PR #36 and
  https://huggingface.co/docs/text-generation-inference/conceptual/streaming). TGI errors are
  ``{"error", "error_type"}``: 422 validation, 424 generation, 429 overloaded, 500 incomplete
  generation (TGI ``router/src/server.rs``).
- TGI timing headers, milliseconds: ``x-total-time``, ``x-validation-time``, ``x-queue-time``,
  ``x-inference-time``, ``x-time-per-token``; ``x-prompt-tokens``, ``x-generated-tokens``;
  ``x-compute-time`` was ``as_millis()`` in older TGI and is seconds (a float) in newer TGI
  (router/src/server.rs; PROVIDERS.md).
- Cold endpoints: "the proxy will respond with the status code 503 while the new replica is
  initializing ... add the 'X-Scale-Up-Timeout' header ... the proxy will hold the request
  until a replica is ready" (https://huggingface.co/docs/inference-endpoints/guides/autoscaling;
  older documentation said 502). Header value in seconds.
- Management API ``https://api.endpoints.huggingface.cloud/v2``: ``GET``/``PUT
  /endpoint/{namespace}/{name}``, ``POST .../pause``, ``.../resume``, ``.../scale-to-zero``;
  ``status.state`` in the states below, ``status.readyReplica``, ``status.targetReplica``,
  ``status.url``; ``compute.scaling.{minReplica, maxReplica, scaleToZeroTimeout}`` with the
  timeout in minutes (huggingface_hub ``_inference_endpoints.py`` ``InferenceEndpointStatus``
  and ``update(scale_to_zero_timeout=...)``: "duration in minutes").
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import httpx

import gpubench_sdk as sdk

MANAGEMENT_URL: Final = "https://api.endpoints.huggingface.cloud/v2"

PENDING: Final = "pending"
INITIALIZING: Final = "initializing"
UPDATING: Final = "updating"
UPDATE_FAILED: Final = "updateFailed"
RUNNING: Final = "running"
PAUSED: Final = "paused"
FAILED: Final = "failed"
SCALED_TO_ZERO: Final = "scaledToZero"
STATES: Final = frozenset(
    {PENDING, INITIALIZING, UPDATING, UPDATE_FAILED, RUNNING, PAUSED, FAILED, SCALED_TO_ZERO}
)
STUCK_STATES: Final = frozenset({PAUSED, FAILED, UPDATE_FAILED})  # requests do not start these

SCALE_UP_TIMEOUT_HEADER: Final = "X-Scale-Up-Timeout"
SECONDS_PER_MINUTE: Final = 60.0
# compute.scaling's fields for min_workers, max_workers and idle_timeout_s (in minutes)
SCALING_FIELDS: Final = ("minReplica", "maxReplica", "scaleToZeroTimeout")

TIMING_HEADERS_MS: Final = {
    "x-total-time": "total_ms",
    "x-validation-time": "validation_ms",
    "x-queue-time": "queue_ms",
    "x-inference-time": "inference_ms",
    "x-time-per-token": "time_per_token_ms",
}
COMPUTE_TIME_HEADER: Final = "x-compute-time"


def compute_time_ms(value: str | None, reference_ms: float | None) -> float | None:
    """``x-compute-time`` in milliseconds, whichever unit the server wrote.

    Newer TGI writes seconds, older TGI whole milliseconds; a bare integer can be either
    (Rust prints ``1.0_f64`` as ``"1"``). The unit is the one that puts the figure nearer
    ``reference_ms`` (``x-total-time``, or else the client's time to first byte): compute time
    is most of either. Without a reference, a decimal point means seconds.
    """
    number = sdk.reported_time(value)
    if number is None or value is None:
        return None
    as_seconds_ms, as_ms = number * 1e3, number
    if reference_ms is None or reference_ms <= 0 or number == 0:
        return as_seconds_ms if any(c in value for c in ".eE") else as_ms

    def distance(candidate: float) -> float:
        return abs(math.log(max(candidate, 1e-6) / reference_ms))

    return as_seconds_ms if distance(as_seconds_ms) <= distance(as_ms) else as_ms


def timings_ms(headers: Mapping[str, str], first_byte_ms: float | None) -> dict[str, float]:
    """The TGI timing headers present, in milliseconds, keyed ``total_ms``, ``queue_ms``...,
    plus ``compute_ms`` from ``x-compute-time`` (unit detected, see ``compute_time_ms``)."""
    found: dict[str, float] = {}
    for header, key in TIMING_HEADERS_MS.items():
        number = sdk.reported_time(headers.get(header))
        if number is not None:
            found[key] = number
    compute = compute_time_ms(
        headers.get(COMPUTE_TIME_HEADER), found.get("total_ms", first_byte_ms)
    )
    if compute is not None:
        found["compute_ms"] = compute
    return found


def token_counts(headers: Mapping[str, str]) -> tuple[int | None, int | None]:
    """``(x-prompt-tokens, x-generated-tokens)`` where TGI sent them."""

    def count(name: str) -> int | None:
        value = headers.get(name)
        return int(value) if value is not None and value.isdigit() else None

    return count("x-prompt-tokens"), count("x-generated-tokens")


def toolkit_body(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The toolkit's ``{"inputs", "parameters"}`` for a workload payload.

    A payload that already has ``inputs`` is sent as written; an LLM payload (``prompt``)
    becomes the prompt with TGI-style parameters; anything else is the handler's ``inputs``.
    """
    if "inputs" in payload:
        return {key: payload[key] for key in ("inputs", "parameters") if key in payload}
    if isinstance(payload.get("prompt"), str):
        return {"inputs": payload["prompt"], "parameters": generation_parameters(payload)}
    return {"inputs": dict(payload)}


def generation_parameters(payload: Mapping[str, Any]) -> dict[str, Any]:
    """TGI ``parameters`` from an LLM payload. ``temperature`` 0 is left out: TGI refuses it
    (it must be strictly positive) and greedy decoding is its default anyway."""
    params: dict[str, Any] = dict(payload.get("parameters") or {})
    max_tokens = payload.get("max_new_tokens", payload.get("max_tokens"))
    if isinstance(max_tokens, int):
        params.setdefault("max_new_tokens", max_tokens)
    temperature = payload.get("temperature")
    if isinstance(temperature, int | float) and temperature > 0:
        params.setdefault("temperature", temperature)
    return params


def tgi_body(payload: Mapping[str, Any]) -> dict[str, Any]:
    """A body for TGI's ``/generate`` and ``/generate_stream``: ``inputs`` must be text, so a
    payload without a prompt is sent as its JSON text. ``details`` asks for token counts."""
    inputs = payload.get("inputs", payload.get("prompt"))
    if not isinstance(inputs, str):
        inputs = json.dumps(dict(payload), separators=(",", ":"), sort_keys=True)
    return {"inputs": inputs, "parameters": {**generation_parameters(payload), "details": True}}


def toolkit_output(data: Any) -> Any:
    """The handler's answer as it is, except the text-generation pipeline's
    ``[{"generated_text": ...}]``, which becomes the text (what LLM workloads read)."""
    if isinstance(data, list) and data and all(isinstance(d, dict) for d in data):
        texts = [d.get("generated_text") for d in data]
        if all(isinstance(t, str) for t in texts):
            return "".join(str(t) for t in texts)
    return data


# ----- errors: HTTP answers mapped into gpubench's taxonomy, by the protocol that sent them -----


class HandlerError(sdk.ServerHTTPError):
    """The model failed on a well-formed request: TGI's 424 generation error, or the toolkit's
    400 ``{"error"}`` (it answers every handler exception so). ``status_code`` is kept."""


def http_error(response: httpx.Response, provider: str, toolkit: bool) -> sdk.ProviderError:
    """The error for a 4xx/5xx answer; ``toolkit``: it came from the toolkit's ``POST /``.

    The core's (``as_provider_error``: the call named, a 429's ``Retry-After`` read in seconds
    or as an HTTP date), showing TGI's and the toolkit's ``{"error"}`` text; a client error that
    is really the model failing becomes ``HandlerError``."""
    data = sdk.json_or_text(response.text)
    fields = data if isinstance(data, dict) else {}
    detail, error_type = fields.get("error"), fields.get("error_type")
    text = detail if isinstance(detail, str) else None
    error = sdk.status_error(response, provider=provider, detail=text)
    status = response.status_code
    if isinstance(error, sdk.ClientHTTPError) and (
        status == 424 or error_type == "generation" or (status == 400 and toolkit and text)
    ):
        return sdk.reclassified(error, HandlerError)
    return error


# ----- the management API's endpoint object, in gpubench's terms ------------------------------


@dataclass(frozen=True, slots=True)
class EndpointStatus:
    """What the management API says of an endpoint at one moment."""

    state: str
    ready_replicas: int | None
    target_replicas: int | None
    url: str | None
    scaling: sdk.ScalingSettings
    raw: dict[str, Any]

    @property
    def is_scaled_to_zero(self) -> bool:
        return self.state == SCALED_TO_ZERO and not self.ready_replicas

    def fleet_state(self) -> sdk.FleetState:
        """Ready replicas serve requests (idle or busy: the API does not tell them apart);
        replicas targeted but not ready are starting."""
        ready, target = self.ready_replicas, self.target_replicas
        starting = None if ready is None or target is None else max(0, target - ready)
        detail = {
            "state": self.state,
            "readyReplica": ready,
            "targetReplica": target,
            "minReplica": self.scaling.min_workers,
            "maxReplica": self.scaling.max_workers,
        }
        return sdk.FleetState(ready=ready, starting=starting, detail=detail)


def parse_endpoint(body: Any, minute_s: float, provider: str) -> EndpointStatus:
    """An endpoint object as ``EndpointStatus``; ``InvalidResponseError`` if it is not one."""

    def invalid(why: str) -> sdk.InvalidResponseError:
        return sdk.InvalidResponseError(f"management API: {why}", provider=provider)

    if not isinstance(body, dict):
        raise invalid("the endpoint is not a JSON object")
    status = body.get("status")
    if not isinstance(status, dict) or status.get("state") not in STATES:
        state = status.get("state") if isinstance(status, dict) else None
        raise invalid(f"unknown status.state {state!r}")
    scaling = (body.get("compute") or {}).get("scaling")
    if not isinstance(scaling, dict):
        raise invalid("no compute.scaling")
    settings = sdk.read_scaling(
        scaling,
        *SCALING_FIELDS,
        provider=provider,
        where="management API: compute.scaling",
        idle_unit_s=minute_s,
        idle_default=None,
    )
    return EndpointStatus(
        state=status["state"],
        ready_replicas=sdk.whole_number(status.get("readyReplica")),
        target_replicas=sdk.whole_number(status.get("targetReplica")),
        url=status.get("url") if isinstance(status.get("url"), str) else None,
        scaling=settings,
        raw=body,
    )


def deployment_of(body: dict[str, Any]) -> dict[str, Any]:
    """What an endpoint object says is deployed: its model and its hardware (``deployed``)."""

    def section(name: str) -> dict[str, Any]:
        value = body.get(name)
        return value if isinstance(value, dict) else {}

    model, compute, where = section("model"), section("compute"), section("provider")
    found = {
        "repository": model.get("repository"),
        "revision": model.get("revision"),
        "framework": model.get("framework"),
        "task": model.get("task"),
        "instance_type": compute.get("instanceType"),
        "instance_size": compute.get("instanceSize"),
        "accelerator": compute.get("accelerator"),
        "vendor": where.get("vendor"),
        "region": where.get("region"),
    }
    return {k: v for k, v in found.items() if isinstance(v, str | int | float)}


def scaling_payload(settings: sdk.ScalingSettings, minute_s: float) -> dict[str, Any]:
    """The ``PUT`` body changing only the given knobs; ``ConfigError`` for what HF refuses."""
    scaling = sdk.scaling_fields(
        settings,
        *SCALING_FIELDS,
        idle_unit_s=minute_s,
        idle_range=(0, None),
        expected=f"whole minutes of {minute_s:g} s on Hugging Face (scaleToZeroTimeout)",
    )
    return {"compute": {"scaling": scaling}}
