"""The records that flow through a benchmark: Request in, Result back, Invocation stored."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


class Outcome(enum.StrEnum):
    """The closed taxonomy of how one request ended. Stored as its small integer ``code``."""

    OK = "ok"
    THROTTLED = "throttled"
    COLD_TIMEOUT = "cold_timeout"
    HTTP_4XX = "http_4xx"
    HTTP_5XX = "http_5xx"
    TIMEOUT = "timeout"
    TRANSPORT = "transport"
    INVALID_RESPONSE = "invalid_response"
    CANCELLED = "cancelled"

    @property
    def code(self) -> int:
        return _OUTCOME_CODES[self]

    @classmethod
    def from_code(cls, code: int) -> Outcome:
        return _OUTCOMES[code]


_OUTCOMES: tuple[Outcome, ...] = tuple(Outcome)
_OUTCOME_CODES: dict[Outcome, int] = {o: i for i, o in enumerate(_OUTCOMES)}


class Phase(enum.StrEnum):
    """Why a request was sent: measured, or only to warm the target up."""

    MEASURE = "measure"
    WARMUP = "warmup"


REQUESTED = "requested"
"""The key of a request's ``detail`` holding the lengths it asked for, where they vary."""


@dataclass(frozen=True, slots=True)
class Request:
    """A provider-neutral request built by a Workload.

    ``payload`` is the model input as a JSON object; each provider wraps it in its own protocol
    (RunPod's ``{"input": ...}``, KServe's tensors...). The token/image hints let a provider map
    the request to a native API (e.g. an OpenAI-compatible chat call). ``detail`` is what the
    workload chose for this request that the plan alone does not say (the lengths it drew, later
    a dataset row or a conversation's turn): stored with the request's result, as JSON.
    """

    seq: int
    payload: Mapping[str, Any]
    kind: str = "probe"
    stream: bool = False
    prompt_tokens: int | None = None
    max_output_tokens: int | None = None
    detail: Mapping[str, Any] | None = None


@dataclass(slots=True)
class Result:
    """What a provider's ``invoke`` returns for a request that succeeded.

    Only ``output`` is expected; every other field is what the provider's protocol reveals.
    Times are server-reported milliseconds; ``first_byte_ns`` is ``time.perf_counter_ns()`` when
    the first response byte arrived (see ``gpubench_sdk.first_byte_ns``).

    ``cold`` says whether the request hit a cold worker; ``cold_confirmed`` says whether that
    is a fact the provider reported (the local runtime booted a worker for this very request,
    or the fleet was verified empty just before) rather than a guess from timings (RunPod's
    ``delayTime`` above a threshold). Only confirmed cold starts are stored as confirmed.

    ``token_times_ns`` holds ``time.perf_counter_ns()`` at the arrival of each streamed token
    (or chunk: one SSE event may carry several tokens), on the same clock as ``first_byte_ns``;
    the runner drops them all when any lies outside the request. ``detail`` is a workload- or
    provider-specific structured result, a JSON-able mapping (e.g. a GPU probe's measured
    TFLOP/s); when a provider gives none, the runner asks ``Workload.detail(output)``.
    """

    output: Any = None
    http_status: int | None = None
    request_id: str | None = None
    first_byte_ns: int | None = None
    queue_ms: float | None = None
    execution_ms: float | None = None
    setup_ms: float | None = None
    cold: bool | None = None
    cold_confirmed: bool = False
    worker_id: str | None = None
    input_units: int | None = None
    output_units: int | None = None
    token_times_ns: Sequence[int] | None = None
    detail: Mapping[str, Any] | None = None


@dataclass(slots=True)
class Invocation:
    """The full record of one request, as stored.

    Monotonic timestamps are ``time.perf_counter_ns()`` values relative to the run's origin;
    ``wall_start_ns`` is ``time.time_ns()`` when the request was sent. Latency counts from the
    scheduled send time, so an open-loop run does not hide the client's own delays
    (no coordinated omission); ``send_lag_ms`` shows those delays.

    ``token_times_ns`` are the streamed tokens' arrival times relative to the run's origin, like
    ``first_byte_ns`` (stored at microsecond resolution, see ``_store._schema``); ``detail`` is
    the request's structured result (``Result.detail`` or ``Workload.detail``), JSON-able.
    ``retry_after_s`` is how long a throttled request was told to wait (``Retry-After``).
    """

    target: str
    scenario: int
    seq: int
    phase: Phase
    scheduled_ns: int
    start_ns: int
    end_ns: int
    wall_start_ns: int
    outcome: Outcome
    first_byte_ns: int | None = None
    http_status: int | None = None
    error: str | None = None
    request_id: str | None = None
    queue_ms: float | None = None
    execution_ms: float | None = None
    setup_ms: float | None = None
    cold: bool | None = None
    cold_confirmed: bool = False
    input_units: int | None = None
    output_units: int | None = None
    worker_id: str | None = None
    token_times_ns: Sequence[int] | None = None
    detail: Mapping[str, Any] | None = None
    retry_after_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK

    @property
    def latency_ms(self) -> float:
        """Scheduled send to last byte, in milliseconds."""
        return (self.end_ns - self.scheduled_ns) / 1e6

    @property
    def service_ms(self) -> float:
        """Actual send to last byte, in milliseconds."""
        return (self.end_ns - self.start_ns) / 1e6

    @property
    def send_lag_ms(self) -> float:
        """How late the client sent the request against its schedule, in milliseconds."""
        return (self.start_ns - self.scheduled_ns) / 1e6

    @property
    def ttfb_ms(self) -> float | None:
        """Scheduled send to first response byte, in milliseconds, where measured."""
        if self.first_byte_ns is None:
            return None
        return (self.first_byte_ns - self.scheduled_ns) / 1e6


@dataclass(frozen=True, slots=True)
class FleetState:
    """A provider's view of its workers at one moment. ``None`` where the provider is silent."""

    ready: int | None = None
    busy: int | None = None
    starting: int | None = None
    queued: int | None = None
    throttled: int | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_cold(self) -> bool:
        """True when no worker is ready, busy or starting: the next request must boot one."""
        return not (self.ready or self.busy or self.starting)


@dataclass(frozen=True, slots=True)
class ScalingSettings:
    """The autoscaling knobs common to serverless platforms. ``None`` leaves a knob unchanged."""

    min_workers: int | None = None
    max_workers: int | None = None
    idle_timeout_s: float | None = None


@dataclass(frozen=True, slots=True)
class ColdCheck:
    """The answer of ``Provider.ensure_cold``: whether the target was verified cold, and how."""

    confirmed: bool
    waited_s: float
    how: str
