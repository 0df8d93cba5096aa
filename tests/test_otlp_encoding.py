"""The span exporter ``telemetry.configure(otlp_endpoint=...)`` installs sends the bytes the
SDK's OTLP encoder would: the same serialised ``ExportTraceServiceRequest`` for every kind of
span (scalar and array attributes, statuses, events, remote parents, trace state, several
scopes), and that message reaches a real OTLP/HTTP receiver."""

from __future__ import annotations

import asyncio
from typing import Any

from opentelemetry.context import attach, detach
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans as sdk_encode
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    TraceState,
    set_span_in_context,
)

from gpubench_sdk._base._types import Invocation, Outcome, Phase
from gpubench_sdk._runner._otlp import FastOTLPSpanExporter, encode_spans
from gpubench_sdk.testing._otlp import otlp_receiver


def _spans() -> tuple[ReadableSpan, ...]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "enc"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("gpubench_sdk", "1.2.3")
    other = provider.get_tracer("other", schema_url="https://opentelemetry.io/schemas/1.21.0")
    attrs = {"s": "é", "empty": "", "no": False, "yes": True, "neg": -5, "big": 2**62,
             "f": 1.5, "ints": [1, 2], "strs": ("a", "b")}  # fmt: skip
    for seq in range(3):  # repeated pairs come from the cache
        with tracer.start_as_current_span(
            "gpubench.invoke", kind=SpanKind.CLIENT, attributes={**attrs, "gpubench.seq": seq}
        ) as span:
            child = tracer.start_span("POST", kind=SpanKind.CLIENT, attributes={"server.port": 80})
            child.set_status(Status(StatusCode.ERROR, "boom"))
            child.end()
            if seq == 2:
                span.add_event("event", {"k": 1})
    remote = SpanContext(
        trace_id=123, span_id=456, is_remote=True, trace_flags=TraceFlags(1),
        trace_state=TraceState([("vendor", "v")]),
    )  # fmt: skip
    context = set_span_in_context(NonRecordingSpan(remote))
    late = other.start_span("remote-child", context=context, start_time=1, attributes={"t": 1.0})
    late.set_status(Status(StatusCode.OK))
    late.end(end_time=2)
    internal = tracer.start_span("internal")  # the default kind, no attributes, unset status
    internal.end()
    return memory.get_finished_spans()


def test_the_bytes_are_the_sdk_encoders() -> None:
    spans = _spans()
    assert len(spans) == 8
    expected = sdk_encode(spans).SerializePartialToString()
    assert encode_spans(spans) == expected
    assert encode_spans(spans) == expected  # the second time from the cache
    assert encode_spans(()) == sdk_encode(()).SerializePartialToString()


def test_the_exporter_delivers_them_to_a_receiver() -> None:
    spans = _spans()
    with otlp_receiver() as (url, received):
        exporter = FastOTLPSpanExporter(endpoint=f"{url}/v1/traces", timeout=5)
        assert exporter.export(spans) is SpanExportResult.SUCCESS
        exporter.shutdown()
        assert exporter.export(spans) is SpanExportResult.FAILURE  # shut down: the SDK's answer
    assert received.traces == [sdk_encode(spans).SerializePartialToString()]
    assert len(received.spans()) == len(spans)


class _Counting:
    """Ids from a counter: two providers that make the same spans give them the same ids."""

    def __init__(self) -> None:
        self.n = 0

    def generate_span_id(self) -> int:
        self.n += 1
        return self.n

    def generate_trace_id(self) -> int:
        self.n += 1
        return self.n << 64

    def is_trace_id_random(self) -> bool:
        return False


def _invocations() -> list[tuple[Any, dict[str, Any], list[Any]]]:
    ms = 1_000_000
    wall = 1_700_000_000 * 10**9
    plain = {"gpubench.target": "t", "gpubench.provider": "http", "gpubench.workload": "any",
             "gpubench.scenario": "burst", "gpubench.scenario.index": 0,
             "gpubench.scenario.name": "burst-0", "gpubench.endpoint": "http://127.0.0.1:80/x",
             "tags": ["a", "b"]}  # fmt: skip
    llm = {**plain, "gpubench.workload": "llm", "gen_ai.request.model": "m"}
    http = {
        "http.request.method": "POST",
        "url.full": "http://127.0.0.1:80/x",
        "server.address": "127.0.0.1",
        "server.port": 80,
    }
    # a prepared call's attributes (one dict for all its calls) and those set as it went; a
    # name set again during a call keeps its first place in the span's attributes
    call = ("POST", http, {"http.response.status_code": 200}, wall + ms, wall + 40 * ms, None)
    failed = ("GET", {"http.request.method": "GET", "url.full": "http://127.0.0.1:80/y"},
              {"error.type": "500", "http.request.method": "GET"}, wall - ms, wall + 90 * ms,
              Status(StatusCode.ERROR))  # fmt: skip
    plain_call = ("PUT", {"http.request.method": "PUT", "http.response.status_code": 201}, None,
                  wall, wall + ms, None)  # fmt: skip
    made = []
    # the second time and after: attributes from the caches; seqs of 1, 2 and 3 varint bytes
    for seq in (0, 300, 70_000):
        made += [
            (Invocation("t", 0, seq, Phase.MEASURE, 0, ms, 51 * ms, wall, Outcome.OK,
                        http_status=200, request_id=f"r{seq}", worker_id="w"), plain, [call]),
            (Invocation("t", 0, seq, Phase.MEASURE, 0, ms, 61 * ms, wall, Outcome.HTTP_5XX,
                        http_status=500, error="boom", queue_ms=3.5, execution_ms=20.0,
                        setup_ms=2.0, cold=True, cold_confirmed=True, retry_after_s=1.5),
             plain, [call, failed]),
            (Invocation("t", 0, seq, Phase.WARMUP, 0, ms, 80 * ms, wall, Outcome.OK,
                        http_status=200, input_units=7, output_units=4, cold=False,
                        execution_ms=9.25, token_times_ns=[20 * ms, 30 * ms, 41 * ms]),
             llm, [plain_call]),
        ]  # fmt: skip
    return made


def _record_all(direct: bool, parent: Any = None, spans: int = 33, batched: bool = False) -> bytes:
    """The OTLP bytes of ``_invocations`` recorded through the SDK's spans or encoded directly
    (``batched``: as a run records them, in batches on an event loop, flushed at its end)."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace.export import SpanExporter

    from gpubench_sdk._runner import _telemetry
    from gpubench_sdk._runner._otlp import DirectSpans

    got: list[Any] = []

    class Keep(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            got.extend(spans)
            return SpanExportResult.SUCCESS

    provider = TracerProvider(resource=_RESOURCE, id_generator=_Counting())
    processor = SimpleSpanProcessor(Keep())
    provider.add_span_processor(processor)
    if direct:
        _telemetry.send_spans_directly(
            provider, DirectSpans(processor, provider.resource, provider.id_generator, 128)
        )
    instruments = _telemetry.Instruments(tracer_provider=provider, meter_provider=MeterProvider())
    token = attach(set_span_in_context(NonRecordingSpan(parent))) if parent else None
    try:
        if batched:

            async def run() -> None:
                instruments.batch()
                for inv, attrs, calls in _invocations():
                    instruments.record(inv, attrs, calls)
                assert not got  # nothing recorded yet: a batch waits for its timer (or size)
                instruments.flush()

            asyncio.run(run())
        else:
            for inv, attrs, calls in _invocations():
                instruments.record(inv, attrs, calls)
    finally:
        if token is not None:
            detach(token)
    assert not instruments._failed_once
    assert bool(instruments._direct) is direct
    encoded = encode_spans(got)
    sent = ExportTraceServiceRequest.FromString(encoded)
    assert sum(len(ss.spans) for rs in sent.resource_spans for ss in rs.scope_spans) == spans
    return encoded


_RESOURCE = Resource.create({"service.name": "direct"})


def test_spans_encoded_from_the_record_are_the_sdk_spans_bytes() -> None:
    """configure's exporter alone: a run's spans skip the SDK's span objects, and send the
    bytes the SDK's spans of the same invocations encode to (ids, parents, order, attributes,
    statuses, phase children), with no parent, a remote parent and its trace state, or a
    sampled-out parent (no spans at all)."""
    sdk_path = _record_all(direct=False)
    assert _record_all(direct=True) == sdk_path
    assert _record_all(direct=True, batched=True) == sdk_path  # as a run records them
    remote = SpanContext(
        trace_id=99, span_id=98, is_remote=True, trace_flags=TraceFlags(1),
        trace_state=TraceState([("vendor", "v")]),
    )  # fmt: skip
    assert _record_all(direct=True, parent=remote) == _record_all(direct=False, parent=remote)
    out = SpanContext(trace_id=99, span_id=98, is_remote=False, trace_flags=TraceFlags(0))
    assert _record_all(direct=True, parent=out, spans=0) == b""
    assert _record_all(direct=True, parent=remote, batched=True) == _record_all(
        direct=False, parent=remote
    )  # the parent each invocation ended under, though recorded later


def test_a_runs_batches_are_recorded_on_their_timer_and_by_size() -> None:
    """While a run records in batches, what waits is recorded RECORD_DUE_S after the first of
    it ended (no later request needed, no flush), or as soon as RECORD_BATCH wait; the spans go
    to the processor EMIT_BATCH invocations at a time, or at the flush."""
    from opentelemetry.sdk.metrics import MeterProvider

    from gpubench_sdk._runner import _telemetry
    from gpubench_sdk._runner._otlp import DirectSpans, EncodedSpan

    handed: list[Any] = []

    class Keep(SimpleSpanProcessor):
        def on_end(self, span: Any) -> None:
            handed.append(span)

    provider = TracerProvider(resource=_RESOURCE, id_generator=_Counting())
    processor = Keep(InMemorySpanExporter())
    provider.add_span_processor(processor)
    _telemetry.send_spans_directly(
        provider, DirectSpans(processor, provider.resource, provider.id_generator, 128)
    )
    instruments = _telemetry.Instruments(tracer_provider=provider, meter_provider=MeterProvider())
    inv, attrs, calls = _invocations()[0]

    async def run() -> None:
        instruments.batch()
        instruments.record(inv, attrs, calls)
        assert len(instruments._pending) == 1
        await asyncio.sleep(_telemetry.RECORD_DUE_S * 4)
        assert not instruments._pending  # recorded on its timer
        assert len(handed) == 1  # none handed for COUNT_BATCH_S: its spans go at once
        for _ in range(_telemetry.RECORD_BATCH):
            instruments.record(inv, attrs, calls)
        assert not instruments._pending  # a full batch: recorded at once
        assert len(handed) == 2  # EMIT_BATCH invocations held: one entry for all their spans
        instruments.record(inv, attrs, calls)
        instruments.flush()  # the run's end: nothing left waiting
        assert not instruments._pending and instruments._held_n == 0
        assert len(handed) == 3

    assert _telemetry.EMIT_BATCH == _telemetry.RECORD_BATCH  # what the counts above assume
    asyncio.run(run())
    assert all(isinstance(entry, EncodedSpan) for entry in handed)
    sent = ExportTraceServiceRequest.FromString(encode_spans(handed))
    assert sum(len(ss.spans) for rs in sent.resource_spans for ss in rs.scope_spans) == 2 * (
        _telemetry.RECORD_BATCH + 2
    )  # each invocation: its call's span and its own


def test_configure_alone_encodes_directly_and_added_processors_get_sdk_spans() -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from gpubench_sdk import telemetry

    with otlp_receiver() as (url, received):
        setup = telemetry.configure(otlp_endpoint=url, set_global=False, prometheus_linger_s=0)
        alone = setup.instruments()
        assert alone.enabled and alone._direct is not None
        for inv, attrs, calls in _invocations()[:1]:
            alone.record(inv, attrs, calls)
        memory = InMemorySpanExporter()
        setup.tracer_provider.add_span_processor(SimpleSpanProcessor(memory))
        shared = setup.instruments()  # a processor added since: it must see the spans
        assert shared.enabled and shared._direct is None
        for inv, attrs, calls in _invocations()[:1]:
            shared.record(inv, attrs, calls)
        assert [s.name for s in memory.get_finished_spans()] == ["POST", "gpubench.invoke"]
        setup.shutdown()
        both = telemetry.configure(otlp_endpoint=url, in_memory=True, set_global=False)
        assert both.instruments().enabled and both.instruments()._direct is None
        both.shutdown()
        names = [s.name for s in received.spans()]
    assert names == ["POST", "gpubench.invoke"] * 2  # the direct one and the SDK's
