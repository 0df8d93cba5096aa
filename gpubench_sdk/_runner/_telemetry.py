"""OpenTelemetry instrumentation of invocations, through the API only.

Without an SDK installed and configured, every call here is a no-op. The user's application
owns the providers; ``gpubench_sdk.telemetry.configure`` is a convenience for the CLI and
scripts. Spans are emitted after a request completes, with explicit timestamps taken from the
Invocation, so the span timeline and the stored record agree to the nanosecond.

Attribute and metric names follow the OpenTelemetry semantic conventions where they exist, as
pinned by the ``opentelemetry-semantic-conventions`` package (0.66b2: HTTP and ``server.*``
attributes are stable; ``gen_ai.*`` are "development" and may be renamed upstream). Every name
is listed in ``docs/observability.md``.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Sequence
from functools import lru_cache
from itertools import pairwise
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from opentelemetry import metrics, trace
from opentelemetry.context import Context, get_current
from opentelemetry.trace import SpanKind, Status, StatusCode

from .._base._types import Invocation, Outcome
from .._base._version import __version__

if TYPE_CHECKING:
    from ._histograms import DirectHistogram, DirectHistograms
    from ._otlp import DirectSpans

log = logging.getLogger("gpubench.telemetry")

# One HTTP call of an invocation: span name, attributes at its start (a dict that may be shared
# by many calls: never written to), attributes set since (or None), start and end
# (time.time_ns), status.
HTTPCall = tuple[str, dict[str, Any], dict[str, Any] | None, int, int, Status | None]

INSTRUMENTATION_NAME = "gpubench_sdk"
SPAN_INVOKE = "gpubench.invoke"
SPAN_QUEUE = "gpubench.queue"
SPAN_COLD_START = "gpubench.cold_start"
SPAN_EXECUTION = "gpubench.execution"
METRIC_DURATION = "gpubench.request.duration"
METRIC_COLD_START = "gpubench.cold_start.duration"
METRIC_REQUESTS = "gpubench.requests"
# GenAI client metrics (semconv gen-ai-metrics), recorded for LLM workloads only. gpubench is
# the client: semantic-conventions v1.41.0 docs/gen-ai/gen-ai-metrics.md (now in
# open-telemetry/semantic-conventions-genai) keeps gen_ai.server.time_to_first_token and
# gen_ai.server.time_per_output_token for model servers ("time to generate first token"); a
# client records time_to_first_chunk / time_per_output_chunk, measured where it receives them.
METRIC_GENAI_DURATION = "gen_ai.client.operation.duration"
METRIC_GENAI_TOKENS = "gen_ai.client.token.usage"
METRIC_GENAI_TTFC = "gen_ai.client.operation.time_to_first_chunk"
METRIC_GENAI_TPOC = "gen_ai.client.operation.time_per_output_chunk"
LLM_WORKLOADS = frozenset({"llm"})  # workload names whose requests are GenAI operations
# Seconds. The semconv HTTP duration boundaries (0.005-10 s), extended to 5 min for cold
# starts: the SDK's default boundaries (0-10,000) assume milliseconds and would put every
# request below 5 s in one bucket.
DURATION_BUCKETS_S = (
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 30.0,
    60.0, 120.0, 300.0,
)  # fmt: skip
# semconv gen_ai.client.token.usage: powers of 4 up to 4^12
TOKEN_BUCKETS = tuple(float(4**i) for i in range(13))
# While a run records in batches (``Instruments.batch``): gpubench.requests lags its requests by
# at most COUNT_BATCH_S (and a run's end). Where gpubench encodes spans itself, invocations are
# recorded RECORD_BATCH at a time, or RECORD_DUE_S after the first of a batch ended (a batch
# holds the requests of RECORD_DUE_S: one or a few at light load, when the event loop must not
# stall long, RECORD_BATCH at full load, when CPU counts), and their spans are handed to the
# exporter EMIT_BATCH invocations at a time, or COUNT_BATCH_S after the first.
COUNT_BATCH_S = 0.25
RECORD_BATCH = 32
RECORD_DUE_S = 0.005
EMIT_BATCH = 32
# attribute dicts kept: per target x phase x outcome x error, its GenAI and two token-type
# variants (an LLM run: four dicts per combination)
_ATTR_CACHE_MAX = 1024
# The invoke span's attributes besides its metric attributes, in the order they are set
_SPAN_ONLY = frozenset({
    "gpubench.seq", "gpubench.latency_ms", "gpubench.send_lag_ms", "gpubench.cold",
    "gpubench.cold_confirmed", "gpubench.request_id", "http.response.status_code",
    "gpubench.worker_id", "gpubench.retry_after_s", "gpubench.ttft_ms",
    "gen_ai.response.time_to_first_chunk", "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
})  # fmt: skip
# Tracer providers whose spans gpubench encodes itself (``telemetry.configure``'s, with its
# OTLP exporter alone): the sink for each.
_DIRECT: weakref.WeakKeyDictionary[Any, DirectSpans] = weakref.WeakKeyDictionary()
# Meter providers whose gpubench histograms gpubench aggregates itself (``telemetry.configure``'s,
# with one push reader): the histograms for each.
_DIRECT_METRICS: weakref.WeakKeyDictionary[Any, DirectHistograms] = weakref.WeakKeyDictionary()


def send_spans_directly(provider: Any, sink: DirectSpans) -> None:
    """Spans of runs that trace to ``provider`` are encoded from their records into ``sink``
    (no SDK span objects): for ``telemetry.configure``, which made ``provider`` and its one
    span processor."""
    _DIRECT[provider] = sink


def aggregate_histograms_directly(provider: Any, sink: DirectHistograms) -> None:
    """The histograms of runs that measure to ``provider`` are aggregated in ``sink`` (no SDK
    ``Histogram.record``): for ``telemetry.configure``, which made ``provider`` and its reader."""
    _DIRECT_METRICS[provider] = sink


class _SDKHistogram:
    """An SDK histogram with ``DirectHistogram``'s ``record_all``: a run records through one
    or the other (``Instruments.enabled`` chooses)."""

    __slots__ = ("_record",)

    def __init__(self, histogram: metrics.Histogram) -> None:
        self._record = histogram.record

    def record_all(
        self, values: Sequence[float], attrs: dict[str, Any], sampled: Any = None
    ) -> None:
        record = self._record
        for value in values:
            record(value, attrs)


@lru_cache(maxsize=64)
def server_attributes(endpoint: str | None) -> tuple[tuple[str, Any], ...]:
    """``server.address`` and ``server.port`` of a provider's endpoint URL (semconv HTTP client
    spans: the port defaults from the scheme)."""
    if not endpoint:
        return ()
    try:
        url = urlsplit(endpoint)
        port = url.port or {"http": 80, "https": 443}.get(url.scheme)
    except ValueError:
        return ()
    if not url.hostname:
        return ()
    found: list[tuple[str, Any]] = [("server.address", url.hostname)]
    if port:
        found.append(("server.port", port))
    return tuple(found)


# The histograms of a run: name, unit, description and bucket boundaries (the order ``_use`` takes)
_HISTOGRAMS = (
    (METRIC_DURATION, "s", "Scheduled send to last byte", DURATION_BUCKETS_S),
    (METRIC_COLD_START, "s", "Cold start: latency minus execution time", DURATION_BUCKETS_S),
    (METRIC_GENAI_DURATION, "s", "GenAI operation duration", DURATION_BUCKETS_S),
    (METRIC_GENAI_TOKENS, "{token}", "Input and output tokens used", TOKEN_BUCKETS),
    (METRIC_GENAI_TTFC, "s", "Time from the send to the first streamed chunk", DURATION_BUCKETS_S),
    (METRIC_GENAI_TPOC, "s", "Time between consecutive streamed chunks", DURATION_BUCKETS_S),
)


class Instruments:
    """The tracer, meter and instruments of one run, bound to the given or global providers."""

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        self._explicit = tracer_provider is not None or meter_provider is not None
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self._histograms: DirectHistograms | None = None
        self._enabled: bool | None = None
        self._direct: DirectSpans | None = None
        self._scope: Any = None
        # attribute dicts encoded (for direct spans), by identity: the dict, its bytes, and
        # whether it holds a name an invoke span sets per request
        self._blocks: dict[int, tuple[dict[str, Any], bytes, bool]] = {}
        self._tracer = trace.get_tracer(INSTRUMENTATION_NAME, __version__, tracer_provider)
        meter = metrics.get_meter(INSTRUMENTATION_NAME, __version__, meter_provider)
        self._requests = meter.create_counter(
            METRIC_REQUESTS, unit="{request}", description="Requests by outcome"
        )
        self._use([
            _SDKHistogram(meter.create_histogram(name, unit=unit, description=description,
                                                 explicit_bucket_boundaries_advisory=buckets))
            for name, unit, description, buckets in _HISTOGRAMS
        ])  # fmt: skip
        self._failed_once = False
        self._attr_cache: dict[tuple[Any, ...], tuple[dict[str, Any], dict[str, Any]]] = {}
        # gpubench.requests during a run, added in batches: {id(attribute dict): [dict, count]}
        self._batching = False
        self._counts: dict[int, list[Any]] = {}
        self._counts_due = 0.0
        # invocations waiting to be recorded (batching, spans encoded directly): their record,
        # attributes, HTTP calls, and the context that was current when they ended
        self._pending: list[tuple[Invocation, dict[str, Any], Sequence[HTTPCall], Context]] = []
        self._pending_timer: asyncio.TimerHandle | None = None
        # spans encoded directly while batching, handed to the processor EMIT_BATCH
        # invocations at a time (or COUNT_BATCH_S after the first)
        self._held: list[bytes] = []
        self._held_n = 0
        self._held_due = 0.0

    @property
    def enabled(self) -> bool:
        """False while no SDK is configured: then recording is skipped outright.

        The API's no-op path still costs ~15 us a request (attribute dicts, proxy lookups),
        which at thousands of requests a second is load-generator capacity worth keeping.
        Decided at the first request, so an SDK configured before the run is honoured; so is
        where spans and histograms go: encoded and aggregated by gpubench where
        ``telemetry.configure``'s exporter and reader are the providers' only ones, else
        through the SDK.
        """
        if self._enabled is None:
            self._enabled = self._explicit or not (
                isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
                and type(metrics.get_meter_provider()).__name__ == "_ProxyMeterProvider"
            )
            provider = self._tracer_provider or trace.get_tracer_provider()
            direct = _DIRECT.get(provider)
            # the scope object the tracer's own spans carry, so a batch groups both as one
            scope = getattr(self._tracer, "_instrumentation_scope", None)
            if direct is not None and scope is not None and direct.alone_in(provider):
                self._direct, self._scope = direct, scope
            meter_provider = self._meter_provider or metrics.get_meter_provider()
            histograms = _DIRECT_METRICS.get(meter_provider)
            if histograms is not None and histograms.alone_in(meter_provider):
                self._histograms = histograms
                self._use([histograms.histogram(*spec) for spec in _HISTOGRAMS])
        return self._enabled

    def _use(self, histograms: Sequence[_SDKHistogram | DirectHistogram]) -> None:
        """Record into ``histograms`` (``_HISTOGRAMS``' order): the SDK's or direct ones."""
        (self._duration, self._cold, self._genai_duration, self._genai_tokens, self._ttfc,
         self._tpoc) = histograms  # fmt: skip

    @property
    def tracer(self) -> trace.Tracer:
        return self._tracer

    def record(
        self,
        inv: Invocation,
        attributes: dict[str, Any],
        calls: Sequence[HTTPCall] = (),
    ) -> None:
        """Emit the span and metrics of one invocation, with ``calls`` (its HTTP calls, noted
        by the transport) as the span's children. Never raises."""
        if not self.enabled:
            return
        context = get_current()  # where the spans go, kept: the current one may change later
        if self._batching and self._direct is not None:
            pending = self._pending
            pending.append((inv, attributes, calls, context))
            if len(pending) >= RECORD_BATCH:
                self._record_pending()
            elif len(pending) == 1:
                self._record_later()
            return
        try:
            self._record(inv, attributes, calls, context)
        except Exception:  # telemetry must never break a measurement
            self._warn_once()

    def _record_later(self) -> None:
        """Record what waits ``RECORD_DUE_S`` from now, on the run's event loop (a timer, not
        the next request's end: requests that end together, as a closed loop's do, must not
        wait on the batch of the ones before them). Without an asyncio loop: now."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # trio, or no loop
            self._record_pending()
            return
        self._pending_timer = loop.call_later(RECORD_DUE_S, self._record_pending)

    def _record_pending(self) -> None:
        """Record the invocations waiting, in the order they ended (the order of their spans'
        ids). In a batch, the encoder's code and caches stay warm from one to the next: 10 us of
        CPU a request less than one at a time on a plain request (bench/hotpath_bench.py)."""
        timer, self._pending_timer = self._pending_timer, None
        if timer is not None:
            timer.cancel()
        pending, self._pending = self._pending, []
        for inv, attributes, calls, context in pending:
            try:
                self._record(inv, attributes, calls, context)
            except Exception:  # telemetry must never break a measurement
                self._warn_once()

    def _emit_held(self) -> None:
        """Hand the spans held (``EMIT_BATCH``) to the batch span processor, as one entry."""
        held, self._held, self._held_n = self._held, [], 0
        if held and self._direct is not None:
            self._direct.emit(held, self._scope)

    def _warn_once(self) -> None:
        if not self._failed_once:
            self._failed_once = True
            log.warning("telemetry failed; further failures are not logged", exc_info=True)

    def _metric_attributes(self, inv: Invocation, base: dict[str, Any]) -> dict[str, Any]:
        """The attributes of a request's metrics: one dict per target, phase and outcome, made
        once and reused (the same few combinations recur for every request of a run)."""
        failed = inv.outcome is not Outcome.OK
        key = (id(base), inv.phase, inv.outcome, error_type(inv) if failed else None)
        attrs = self._attr_cache.get(key)
        if attrs is None or attrs[0] is not base:
            made = dict(base)
            made["gpubench.phase"] = inv.phase.value
            made["gpubench.outcome"] = inv.outcome.value
            made.update(server_attributes(base.get("gpubench.endpoint")))
            if failed:
                made["error.type"] = key[3]
            if len(self._attr_cache) >= _ATTR_CACHE_MAX:
                self._attr_cache.clear()
            attrs = self._attr_cache[key] = (base, made)
        return attrs[1]

    def batch(self) -> None:
        """Record in batches from now until ``flush`` (the runner's run does):

        * ``gpubench.requests``: each request is counted here and added to the SDK's counter
          at most ``COUNT_BATCH_S`` apart, since the counter's ``add`` validates and hashes
          the attributes (~4% of the client's CPU per request with tracing on, profiled);
        * where gpubench encodes the spans itself (``telemetry.configure``'s exporter), whole
          invocations (spans and histograms) are recorded in batches (``RECORD_BATCH``,
          ``RECORD_DUE_S``), and their spans handed to the exporter's processor together
          (``EMIT_BATCH``): one queue entry, and one wake-up of its thread, for many requests.
          On a plain request this halves tracing's CPU (bench/hotpath_bench.py).
        """
        self._batching = True

    def flush(self) -> None:
        """Record the invocations and add the request counts still batched; stop batching."""
        self._record_pending()
        self._batching = False
        self._emit_held()
        self._add_counts()

    def _add_counts(self) -> None:
        counts, self._counts = self._counts, {}
        for attrs, n in counts.values():
            try:
                self._requests.add(n, attrs)
            except Exception:  # telemetry must never break a measurement
                self._warn_once()

    def _count(self, attrs: dict[str, Any]) -> None:
        """One request in ``gpubench.requests``."""
        if not self._batching:
            self._requests.add(1, attrs)
            return
        entry = self._counts.get(id(attrs))
        if entry is None:
            self._counts[id(attrs)] = [attrs, 1]
        else:
            entry[1] += 1
        now = time.monotonic()
        if now >= self._counts_due:
            self._counts_due = now + COUNT_BATCH_S
            self._add_counts()

    def _record(
        self, inv: Invocation, base: dict[str, Any], calls: Sequence[HTTPCall], context: Context
    ) -> None:
        """The spans and metrics of ``inv``, under ``context`` (current when it ended)."""
        current = trace.get_current_span(context)  # the parent, and what an exemplar points at
        attrs = self._metric_attributes(inv, base)  # shared: never mutated below
        self._count(attrs)
        # where the SDK would keep an exemplar of each value (direct histograms only)
        sampled = None if self._histograms is None else self._histograms.sampled_span(current)
        self._duration.record_all((inv.latency_ms / 1e3,), attrs, sampled)
        cold_ms = cold_start_ms(inv)
        if cold_ms is not None:
            self._cold.record_all((cold_ms / 1e3,), attrs, sampled)
        genai = base.get("gpubench.workload") in LLM_WORKLOADS
        if genai:
            attrs = self._genai_attributes(attrs)
            self._record_genai(inv, attrs, sampled)

        start = inv.wall_start_ns
        end = start + (inv.end_ns - inv.start_ns)
        # The HTTP calls (a submit, each poll, a stream) are its children, each an HTTP client
        # span with its own method and status; this span's status code is the answer's. All
        # attributes go in one call: each set_attribute takes the span's lock and validates.
        own = _span_attributes(inv, genai)
        direct = self._direct
        if direct is not None and self._record_direct(direct, inv, attrs, own, calls, current):
            return
        extra = dict(attrs)
        extra.update(own)
        span = self._tracer.start_span(
            SPAN_INVOKE, context, start_time=start, attributes=extra, kind=SpanKind.CLIENT
        )
        if not span.is_recording():  # sampled out: so are its children
            span.end(end_time=end)
            return
        if inv.outcome is not Outcome.OK:
            span.set_status(Status(StatusCode.ERROR, inv.error or inv.outcome.value))
        inside = trace.set_span_in_context(span)  # the children's parent
        tracer = self._tracer
        for name, attrs, more, began, ended, status in calls:  # HTTP client spans, in call order
            began = min(max(began, start), end)  # within their invocation's span
            if more:
                attrs = {**attrs, **more}
            child = tracer.start_span(
                name, context=inside, kind=SpanKind.CLIENT, attributes=attrs, start_time=began
            )
            if status is not None:
                child.set_status(status)
            child.end(end_time=min(max(ended, began), end))
        # Server-reported phases become children laid end to end from the send time: the queue
        # (which contains any cold boot), then execution. Their placement is an inference from
        # durations; the durations themselves are the provider's.
        cursor = start
        if inv.queue_ms is not None:
            queue_end = cursor + int(inv.queue_ms * 1e6)
            if inv.cold and inv.setup_ms is not None:
                boot_start = max(cursor, queue_end - int(inv.setup_ms * 1e6))
                self._child(SPAN_COLD_START, boot_start, queue_end, inside)
            self._child(SPAN_QUEUE, cursor, queue_end, inside)
            cursor = queue_end
        if inv.execution_ms is not None:
            self._child(SPAN_EXECUTION, cursor, cursor + int(inv.execution_ms * 1e6), inside)
        span.end(end_time=end)

    def _genai_attributes(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """A GenAI request's metric attributes: ``attrs`` and the operation's name, first (one
        dict per ``attrs``, made once: the span's encoded attributes are cached by it)."""
        key = (id(attrs), "genai")
        found = self._attr_cache.get(key)
        if found is None or found[0] is not attrs:
            if len(self._attr_cache) >= _ATTR_CACHE_MAX:
                self._attr_cache.clear()
            made = {"gen_ai.operation.name": "text_completion", **attrs}
            found = self._attr_cache[key] = (attrs, made)
        return found[1]

    def _record_direct(
        self,
        direct: DirectSpans,
        inv: Invocation,
        attrs: dict[str, Any],
        own: list[tuple[str, Any]],
        calls: Sequence[HTTPCall],
        current: Any,
    ) -> bool:
        """The spans ``_record`` makes through the SDK, encoded here from the record and sent to
        configure's OTLP processor: the same ids in the same order from the provider's id
        generator, the same sampling (parent-based, always on), the same bytes. False where
        a span would reach the provider's attribute limit: then the SDK's path makes them."""
        # the encoder's functions through the sink: _otlp (and the OTLP exporter it imports)
        # stays unimported where no run exports with configure
        attribute_once, encode_attributes = direct.attribute_once, direct.encode_attributes
        encode_span, flags_local = direct.encode_span, direct.FLAGS_LOCAL
        block, clash = self._encoded(attrs, encode_attributes)
        limit = direct.max_attributes
        if clash or len(attrs) + len(own) > limit:
            return False
        for call in calls:
            if len(call[1]) + len(call[2] or ()) > limit:
                return False
        parent = current.get_span_context()
        if parent.is_valid:
            if not parent.trace_flags.sampled:  # ParentBased: sampled out, with its children
                return True
            trace_id, parent_id = parent.trace_id, parent.span_id.to_bytes(8, "big")
            state = direct.trace_state_field(parent.trace_state)
            flags = direct.FLAGS_REMOTE if parent.is_remote else flags_local
        else:
            trace_id, parent_id, state, flags = direct.trace_id(), None, b"", flags_local
        span_id, ids = direct.ids(trace_id, state)
        invoke_attrs = block + direct.encode_once(own)
        made: list[bytes] = []  # the invocation's spans, in the order the SDK's would end
        emit = made.append
        start = inv.wall_start_ns
        end = start + (inv.end_ns - inv.start_ns)
        for name, call_attrs, more, began, ended, status in calls:  # as _record: calls first
            began = start if began < start else end if began > end else began
            child_ids = direct.ids(trace_id, state)[1]
            encoded = self._encoded(call_attrs, encode_attributes)[0]
            if more:  # in the merged dict's order: a name set again keeps its first place
                encoded = (encoded + encode_attributes(more) if more.keys().isdisjoint(call_attrs)
                           else encode_attributes({**call_attrs, **more}))  # fmt: skip
            ended = began if ended < began else end if ended > end else ended
            emit(encode_span(child_ids, span_id, name, SpanKind.CLIENT, began, ended, encoded,
                             status, flags_local))  # fmt: skip
        phases: list[tuple[str, int, int]] = []
        cursor = start
        if inv.queue_ms is not None:
            queue_end = cursor + int(inv.queue_ms * 1e6)
            if inv.cold and inv.setup_ms is not None:
                phases.append((SPAN_COLD_START, max(cursor, queue_end - int(inv.setup_ms * 1e6)),
                               queue_end))  # fmt: skip
            phases.append((SPAN_QUEUE, cursor, queue_end))
            cursor = queue_end
        if inv.execution_ms is not None:
            phases.append((SPAN_EXECUTION, cursor, cursor + int(inv.execution_ms * 1e6)))
        for name, began, ended in phases:
            child_ids = direct.ids(trace_id, state)[1]
            duration = attribute_once("gpubench.duration_ms", (ended - began) / 1e6)
            emit(encode_span(child_ids, span_id, name, SpanKind.INTERNAL, began, ended,
                             duration, None, flags_local))  # fmt: skip
        status = None
        if inv.outcome is not Outcome.OK:
            status = Status(StatusCode.ERROR, inv.error or inv.outcome.value)
        emit(encode_span(ids, parent_id, SPAN_INVOKE, SpanKind.CLIENT, start, end, invoke_attrs,
                         status, flags))  # fmt: skip
        if not self._batching:
            direct.emit(made, self._scope)
            return True
        self._held += made
        self._held_n += 1
        if self._held_n >= EMIT_BATCH:
            self._emit_held()
        else:
            now = time.monotonic()
            if now >= self._held_due:
                self._held_due = now + COUNT_BATCH_S
                self._emit_held()
        return True

    def _encoded(self, attrs: dict[str, Any], encode: Any) -> tuple[bytes, bool]:
        """``attrs`` encoded, once per dict (a run's metric attributes and a prepared call's
        span attributes are one dict each, request after request), and whether one of them is
        also an invoke span's per-request attribute (then the span's dict order differs)."""
        found = self._blocks.get(id(attrs))
        if found is None or found[0] is not attrs:
            if len(self._blocks) >= _ATTR_CACHE_MAX:
                self._blocks.clear()
            clash = not _SPAN_ONLY.isdisjoint(attrs)
            found = self._blocks[id(attrs)] = (attrs, encode(attrs), clash)
        return found[1], found[2]

    def _record_genai(self, inv: Invocation, attrs: dict[str, Any], sampled: Any) -> None:
        """The semconv GenAI client metrics of one LLM request."""
        self._genai_duration.record_all((inv.latency_ms / 1e3,), attrs, sampled)
        if inv.outcome is not Outcome.OK:
            return
        for kind, count in (("input", inv.input_units), ("output", inv.output_units)):
            if count is not None:
                self._genai_tokens.record_all((count,), self._token_attributes(attrs, kind),
                                              sampled)  # fmt: skip
        ttfc_ms = first_chunk_ms(inv)
        if ttfc_ms is not None:
            self._ttfc.record_all((ttfc_ms / 1e3,), attrs, sampled)
        times = inv.token_times_ns
        if times is not None and len(times) > 1:
            gaps = [(after - before) / 1e9 for before, after in pairwise(times)]
            self._tpoc.record_all(gaps, attrs, sampled)

    def _token_attributes(self, attrs: dict[str, Any], kind: str) -> dict[str, Any]:
        """``attrs`` and ``gen_ai.token.type``: one dict per ``attrs`` and kind, made once."""
        key = (id(attrs), kind)
        found = self._attr_cache.get(key)
        if found is None or found[0] is not attrs:
            if len(self._attr_cache) >= _ATTR_CACHE_MAX:
                self._attr_cache.clear()
            found = self._attr_cache[key] = (attrs, attrs | {"gen_ai.token.type": kind})
        return found[1]

    def _child(self, name: str, start: int, end: int, context: Any) -> None:
        child = self._tracer.start_span(name, context=context, start_time=start)
        child.set_attribute("gpubench.duration_ms", (end - start) / 1e6)
        child.end(end_time=end)


def _span_attributes(inv: Invocation, genai: bool) -> list[tuple[str, Any]]:
    """The invoke span's attributes besides its metric attributes, in the order they are set
    (every name here is in ``_SPAN_ONLY``)."""
    own: list[tuple[str, Any]] = [
        ("gpubench.seq", inv.seq),
        ("gpubench.latency_ms", inv.latency_ms),
        ("gpubench.send_lag_ms", inv.send_lag_ms),
    ]
    if inv.cold is not None:
        own += (("gpubench.cold", inv.cold), ("gpubench.cold_confirmed", inv.cold_confirmed))
    if inv.request_id:
        own.append(("gpubench.request_id", inv.request_id))
    if inv.http_status is not None:
        own.append(("http.response.status_code", inv.http_status))
    if inv.worker_id:
        own.append(("gpubench.worker_id", inv.worker_id))
    if inv.retry_after_s is not None:
        own.append(("gpubench.retry_after_s", inv.retry_after_s))
    ttfc_ms = first_chunk_ms(inv)
    if ttfc_ms is not None:
        own.append(("gpubench.ttft_ms", ttfc_ms))
        if genai:  # GenAI semconv span attribute, in seconds
            own.append(("gen_ai.response.time_to_first_chunk", ttfc_ms / 1e3))
    if genai:
        if inv.input_units is not None:
            own.append(("gen_ai.usage.input_tokens", inv.input_units))
        if inv.output_units is not None:
            own.append(("gen_ai.usage.output_tokens", inv.output_units))
    return own


def cold_start_ms(inv: Invocation) -> float | None:
    """The reference report's cold start, latency minus inference time, for a cold sample.

    Uses the server-reported execution time; ``None`` where the sample is not cold or the
    server did not report execution time (the metrics library infers it from warm samples).
    """
    if not inv.cold or inv.execution_ms is None or inv.outcome is not Outcome.OK:
        return None
    return max(0.0, inv.service_ms - inv.execution_ms)  # from the actual send, like the summary


def error_type(inv: Invocation) -> str:
    """semconv ``error.type``: the HTTP status code as a string for a response >= 400, else
    gpubench's outcome (``timeout``, ``transport``...), a low-cardinality class of failure."""
    if inv.http_status is not None and inv.http_status >= 400:
        return str(inv.http_status)
    return inv.outcome.value


def first_chunk_ms(inv: Invocation) -> float | None:
    """Time from the scheduled send to the first streamed token, as ``metrics`` counts TTFT
    (an open-loop run's client lag is not hidden); ``None`` for a request that streamed none."""
    times = inv.token_times_ns
    if times:
        return float(times[0] - inv.scheduled_ns) / 1e6
    return None
