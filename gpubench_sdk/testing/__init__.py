"""gpubench's testing kit: everything a provider plugin needs to be tested well, offline.

- ``SimulatedFleet`` (with ``FleetConfig`` and ``Duration``): a serverless platform's workers,
  queue, scaling and billing, simulated on asyncio, with per-job ground truth.
- ``FaultPlan`` / ``Fault`` / ``FaultInjector``: declarative misbehaviour (429s, 5xx, resets,
  truncated and malformed bodies, failed jobs) applied at the protocol layer.
- ``Emulator``: an emulator declared by its routes, with the key check (``KeyCheck``), the
  fault routes, the error body (``Reject``), the install hint and the lifespan built in;
  ``RateLimit``, ``scaling_patch``, ``follow``, ``watch`` and ``until`` for its handlers;
  ``sse_event`` (one server-sent event; ``Emulator.sse`` streams them), ``InFlight``
  (requests served now, against a cap), ``Operations`` (a control plane's long-running
  operations) and ``merge_patch`` (RFC 7396, how a ``PATCH`` changes a resource) for what its
  routes answer; ``PrefixCache`` (an LLM server's prompt prefix cache, vLLM's rules) for an
  LLM emulator's prefill.
- ``QueueEmulator``: an ``Emulator`` for a queue-style (job) API: it remembers the jobs it
  submitted and finds them by id, holds synchronous calls, waits for a stream's first output,
  ends jobs at deadlines and caps rates; ``WallClock`` (the fleet's times on the wall clock).
- ``Request``: Starlette's request, the argument of every route handler (for annotations).
- ``serve``: run an emulator (an ASGI app) with uvicorn on a random loopback port;
  ``serve_forever``: the same as an emulator's command line (prints its URL, then serves);
  ``EmulatorParser``: that command line's shared options (listen address, required key, the
  fleet's cold start, worker cap and idle timeout); ``hold``: keep a request open while its job
  runs, cancelling the job if the client hangs up; ``fleet_lifespan``: the app's lifespan that
  runs the fleet while the app is served; ``throwaway_tls``: a CA and a loopback certificate
  for serving HTTPS (``serve(app, tls=...)``), where an SDK sends no credentials over HTTP.
- ``ProviderConformance``: the test suite a plugin subclasses in five lines;
  ``fleet_fixture`` and ``served_fixture``: a protocol test module's ``fleet`` and ``served``
  fixtures, each in one assignment; ``quick_fleet``: a fleet with fixed cold starts, in a call.
- ``otlp_receiver`` (with ``check_exported`` and ``span_attributes``): a real OTLP/HTTP
  receiver on loopback, and the semantic-convention checks the conformance suite applies to
  what a run exported; for a plugin's own telemetry tests.

Needs the ``testing`` extra (``pip install 'gpubench-sdk[testing]'``): uvicorn, starlette,
pytest. They are imported only when used, so ``import gpubench_sdk`` never needs them.
The pytest fixtures ``simulated_fleet``, ``serve_app`` and ``gpubench_cli`` (``CliEndToEnd``:
emulator processes and ``gpubench run``, returning a ``CliRun``) come with the extra's pytest
plugin.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._billing import BillingMeter, WorkerBill
from ._builder import Emulator, KeyCheck, RateLimit, Reject, plain_text, scaling_patch, sse_event
from ._cases import FAULT_CASES, POLL_FAULT_CASES, FaultCase
from ._emulator import (
    EmulatorArgs,
    EmulatorParser,
    fleet_lifespan,
    follow,
    hold,
    until,
    watch,
)
from ._end_to_end import CliEndToEnd, CliRun
from ._faults import (
    ASGIApp,
    Fault,
    FaultedFleet,
    FaultInjector,
    FaultKind,
    FaultPlan,
    Injected,
    json_error,
)
from ._fleet import FleetConfig, SimulatedFleet, echo_handler, quick_fleet
from ._harness import INSTALL_HINT, ServedApp, serve, serve_forever
from ._jobs import FleetCounts, Job, JobStatus, JobTruth, QueueFull, WorkerState
from ._patch import merge_patch
from ._prefix_cache import PrefixCache
from ._queue import QueueEmulator, WallClock
from ._routes import InFlight, Operations
from ._timing import Duration, noise_tolerance_ms
from ._tls import throwaway_tls

if TYPE_CHECKING:
    from starlette.requests import Request

    from ._conformance import ProviderConformance
    from ._fixtures import fleet_fixture, served_fixture
    from ._otlp import attributes as span_attributes
    from ._otlp import check_exported, otlp_receiver

__all__ = [
    "FAULT_CASES",
    "INSTALL_HINT",
    "POLL_FAULT_CASES",
    "ASGIApp",
    "BillingMeter",
    "CliEndToEnd",
    "CliRun",
    "Duration",
    "Emulator",
    "EmulatorArgs",
    "EmulatorParser",
    "Fault",
    "FaultCase",
    "FaultInjector",
    "FaultKind",
    "FaultPlan",
    "FaultedFleet",
    "FleetConfig",
    "FleetCounts",
    "InFlight",
    "Injected",
    "Job",
    "JobStatus",
    "JobTruth",
    "KeyCheck",
    "Operations",
    "PrefixCache",
    "ProviderConformance",
    "QueueEmulator",
    "QueueFull",
    "RateLimit",
    "Reject",
    "Request",
    "ServedApp",
    "SimulatedFleet",
    "WallClock",
    "WorkerBill",
    "WorkerState",
    "check_exported",
    "echo_handler",
    "fleet_fixture",
    "fleet_lifespan",
    "follow",
    "hold",
    "json_error",
    "merge_patch",
    "noise_tolerance_ms",
    "otlp_receiver",
    "plain_text",
    "quick_fleet",
    "scaling_patch",
    "serve",
    "serve_forever",
    "served_fixture",
    "span_attributes",
    "sse_event",
    "throwaway_tls",
    "until",
    "watch",
]

# Built on pytest: imported only by the tests that use them (name -> module).
_NEEDS_PYTEST = {
    "ProviderConformance": "_conformance",
    "fleet_fixture": "_fixtures",
    "served_fixture": "_fixtures",
}
# The OTLP receiver decodes with opentelemetry-proto: imported only by the tests that use it.
_OTLP = {"otlp_receiver": "otlp_receiver", "check_exported": "check_exported",
         "span_attributes": "attributes"}  # fmt: skip


def __getattr__(name: str) -> Any:
    if name == "Request":  # the type of a route handler's argument, for annotations
        from ._harness import require

        return require("starlette.requests", "the Request type").Request
    if name in _NEEDS_PYTEST:
        from ._harness import require

        require("pytest")
        module = importlib.import_module(f".{_NEEDS_PYTEST[name]}", __name__)
        return getattr(module, name)
    if name in _OTLP:
        from . import _otlp

        return getattr(_otlp, _OTLP[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
