"""The span exporter ``telemetry.configure(otlp_endpoint=...)`` installs sends the bytes the
SDK's OTLP encoder would: the same serialised ``ExportTraceServiceRequest`` for every kind of
span (scalar and array attributes, statuses, events, remote parents, trace state, several
scopes), and that message reaches a real OTLP/HTTP receiver."""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans as sdk_encode
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
