"""OpenTelemetry instrumentation of invocations, through the API only.

Without an SDK installed and configured, every call here is a no-op. The user's application
owns the providers; ``gpubench_sdk.telemetry.configure`` is a convenience for the CLI and
scripts. Spans are emitted after a request completes, with explicit timestamps taken from the
Invocation, so the span timeline and the stored record agree to the nanosecond.
"""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.trace import Status, StatusCode

from ._types import Invocation, Outcome

log = logging.getLogger("gpubench.telemetry")

INSTRUMENTATION_NAME = "gpubench_sdk"
SPAN_INVOKE = "gpubench.invoke"
SPAN_QUEUE = "gpubench.queue"
SPAN_COLD_START = "gpubench.cold_start"
SPAN_EXECUTION = "gpubench.execution"
METRIC_DURATION = "gpubench.request.duration"
METRIC_COLD_START = "gpubench.cold_start.duration"
METRIC_REQUESTS = "gpubench.requests"


class Instruments:
    """The tracer, meter and instruments of one run, bound to the given or global providers."""

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        from . import __version__

        self._explicit = tracer_provider is not None or meter_provider is not None
        self._enabled: bool | None = None
        self._tracer = trace.get_tracer(INSTRUMENTATION_NAME, __version__, tracer_provider)
        meter = metrics.get_meter(INSTRUMENTATION_NAME, __version__, meter_provider)
        self._duration = meter.create_histogram(
            METRIC_DURATION, unit="s", description="Scheduled send to last byte"
        )
        self._cold = meter.create_histogram(
            METRIC_COLD_START, unit="s", description="Cold start: latency minus execution time"
        )
        self._requests = meter.create_counter(
            METRIC_REQUESTS, unit="{request}", description="Requests by outcome"
        )
        self._failed_once = False

    @property
    def enabled(self) -> bool:
        """False while no SDK is configured: then recording is skipped outright.

        The API's no-op path still costs ~15 us a request (attribute dicts, proxy lookups),
        which at thousands of requests a second is load-generator capacity worth keeping.
        Decided at the first request, so an SDK configured before the run is honoured.
        """
        if self._enabled is None:
            self._enabled = self._explicit or not (
                isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
                and type(metrics.get_meter_provider()).__name__ == "_ProxyMeterProvider"
            )
        return self._enabled

    def record(self, inv: Invocation, attributes: dict[str, Any]) -> None:
        """Emit the span and metrics of one invocation. Never raises."""
        if not self.enabled:
            return
        try:
            self._record(inv, attributes)
        except Exception:  # telemetry must never break a measurement
            if not self._failed_once:
                self._failed_once = True
                log.warning("telemetry failed; further failures are not logged", exc_info=True)

    def _record(self, inv: Invocation, base: dict[str, Any]) -> None:
        attrs = dict(base)
        attrs["gpubench.outcome"] = inv.outcome.value
        self._requests.add(1, attrs)
        self._duration.record(inv.latency_ms / 1e3, attrs)
        cold_ms = cold_start_ms(inv)
        if cold_ms is not None:
            self._cold.record(cold_ms / 1e3, attrs)

        start = inv.wall_start_ns
        end = start + (inv.end_ns - inv.start_ns)
        span = self._tracer.start_span(SPAN_INVOKE, start_time=start, attributes=attrs)
        if not span.is_recording():
            span.end(end_time=end)
            return
        span.set_attribute("gpubench.seq", inv.seq)
        span.set_attribute("gpubench.phase", inv.phase.value)
        span.set_attribute("gpubench.latency_ms", inv.latency_ms)
        span.set_attribute("gpubench.send_lag_ms", inv.send_lag_ms)
        if inv.cold is not None:
            span.set_attribute("gpubench.cold", inv.cold)
            span.set_attribute("gpubench.cold_confirmed", inv.cold_confirmed)
        if inv.request_id:
            span.set_attribute("gpubench.request_id", inv.request_id)
        if inv.http_status is not None:
            span.set_attribute("http.response.status_code", inv.http_status)
        if inv.worker_id:
            span.set_attribute("gpubench.worker_id", inv.worker_id)
        if inv.outcome is not Outcome.OK:
            span.set_attribute("error.type", inv.outcome.value)
            span.set_status(Status(StatusCode.ERROR, inv.error or inv.outcome.value))
        context = trace.set_span_in_context(span)
        # Server-reported phases become children laid end to end from the send time: the queue
        # (which contains any cold boot), then execution. Their placement is an inference from
        # durations; the durations themselves are the provider's.
        cursor = start
        if inv.queue_ms is not None:
            queue_end = cursor + int(inv.queue_ms * 1e6)
            if inv.cold and inv.setup_ms is not None:
                boot_start = max(cursor, queue_end - int(inv.setup_ms * 1e6))
                self._child(SPAN_COLD_START, boot_start, queue_end, context)
            self._child(SPAN_QUEUE, cursor, queue_end, context)
            cursor = queue_end
        if inv.execution_ms is not None:
            self._child(SPAN_EXECUTION, cursor, cursor + int(inv.execution_ms * 1e6), context)
        span.end(end_time=end)

    def _child(self, name: str, start: int, end: int, context: Any) -> None:
        child = self._tracer.start_span(name, context=context, start_time=start)
        child.set_attribute("gpubench.duration_ms", (end - start) / 1e6)
        child.end(end_time=end)


def cold_start_ms(inv: Invocation) -> float | None:
    """The reference report's cold start, latency minus inference time, for a cold sample.

    Uses the server-reported execution time; ``None`` where the sample is not cold or the
    server did not report execution time (the metrics library infers it from warm samples).
    """
    if not inv.cold or inv.execution_ms is None or inv.outcome is not Outcome.OK:
        return None
    return max(0.0, inv.service_ms - inv.execution_ms)  # from the actual send, like the summary
