"""A real OTLP/HTTP receiver on loopback, and the semantic-convention checks of what it got.

``ProviderConformance.test_telemetry_follows_semconv`` runs a plugin against its emulator with
the OTLP/HTTP exporter pointed here, then checks every span and metric point by name against the
conventions, as pinned by the ``opentelemetry-semantic-conventions`` package (its constants are
the reference, not strings copied into this file).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.semconv.attributes import (
    error_attributes,
    http_attributes,
    network_attributes,
    server_attributes,
    url_attributes,
)

from .._transport._spans import KNOWN_METHODS

# Every attribute an HTTP client span of ours may carry, and those it must (semconv HTTP client
# span: method, url.full, server.address, server.port required; status when a response came).
HTTP_SPAN_ALLOWED = frozenset(
    {
        http_attributes.HTTP_REQUEST_METHOD,
        http_attributes.HTTP_REQUEST_METHOD_ORIGINAL,
        http_attributes.HTTP_RESPONSE_STATUS_CODE,
        http_attributes.HTTP_REQUEST_RESEND_COUNT,
        url_attributes.URL_FULL,
        server_attributes.SERVER_ADDRESS,
        server_attributes.SERVER_PORT,
        network_attributes.NETWORK_PROTOCOL_VERSION,
        error_attributes.ERROR_TYPE,
    }
)
HTTP_SPAN_REQUIRED = frozenset(
    {
        http_attributes.HTTP_REQUEST_METHOD,
        url_attributes.URL_FULL,
        server_attributes.SERVER_ADDRESS,
        server_attributes.SERVER_PORT,
    }
)


class Received:
    """What the receiver was sent, decoded: spans and the last export of each metric."""

    def __init__(self) -> None:
        self.traces: list[bytes] = []
        self.metrics: list[bytes] = []
        self.lock = threading.Lock()

    def spans(self) -> list[Span]:
        found: list[Span] = []
        for body in self.traces:
            req = ExportTraceServiceRequest.FromString(body)
            found += [sp for rs in req.resource_spans for ss in rs.scope_spans for sp in ss.spans]
        return found

    def metric_points(self, name: str) -> list[Any]:
        """The data points of metric ``name`` in the last export that had it (cumulative)."""
        points: list[Any] = []
        for body in self.metrics:
            req = ExportMetricsServiceRequest.FromString(body)
            for rm in req.resource_metrics:
                for sm in rm.scope_metrics:
                    for m in sm.metrics:
                        if m.name == name:
                            data = m.sum if m.HasField("sum") else m.histogram
                            points = list(data.data_points)
        return points


@contextmanager
def otlp_receiver() -> Iterator[tuple[str, Received]]:
    """An OTLP/HTTP (protobuf) receiver on a free loopback port: (base URL, what it got)."""
    received = Received()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            signal = self.path.rsplit("/", 1)[-1]
            ok = self.headers.get("Content-Type") == "application/x-protobuf"
            if ok and signal in ("traces", "metrics"):
                with received.lock:
                    getattr(received, signal).append(body)
            self.send_response(200 if ok else 415)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def attributes(span: Any) -> dict[str, Any]:
    """An OTLP span's (or data point's) attributes as plain Python values."""
    out: dict[str, Any] = {}
    for kv in span.attributes:
        which = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, which) if which else None
    return out


def check_http_span(span: Span, *, host: str, port: int, secret: str) -> dict[str, Any]:
    """Assert that ``span`` is an HTTP client span by the conventions; its attributes."""
    attrs = attributes(span)
    assert span.kind == Span.SpanKind.SPAN_KIND_CLIENT, span
    extra = set(attrs) - HTTP_SPAN_ALLOWED
    assert not extra, f"{span.name}: attributes outside the HTTP conventions: {extra}"
    missing = HTTP_SPAN_REQUIRED - set(attrs)
    assert not missing, f"{span.name}: required HTTP attributes missing: {missing}"
    method = attrs[http_attributes.HTTP_REQUEST_METHOD]
    assert method in KNOWN_METHODS | {"_OTHER"}, method
    assert span.name == (method if method != "_OTHER" else "HTTP"), (span.name, method)
    assert attrs[server_attributes.SERVER_ADDRESS] == host
    assert attrs[server_attributes.SERVER_PORT] == port
    assert attrs[url_attributes.URL_FULL].startswith(("http://", "https://"))
    assert secret not in attrs[url_attributes.URL_FULL]
    status = attrs.get(http_attributes.HTTP_RESPONSE_STATUS_CODE)
    if status is not None and status >= 400:
        assert attrs[error_attributes.ERROR_TYPE] == str(status)
        assert span.status.code == span.status.STATUS_CODE_ERROR
    if status is None:  # no response: the failure's class says why
        assert attrs.get(error_attributes.ERROR_TYPE), span
    return attrs


def check_exported(received: Received, *, secret: str, warmup: int, measured: int) -> int:
    """Assert the conventions on one single-scenario run's export: one ``gpubench.invoke``
    span per request, with an HTTP client span per HTTP call under it inside its time range;
    phase and scenario on spans and on every ``gpubench.requests`` point. Returns how many
    HTTP calls were seen (more than requests for a polling provider)."""
    from urllib.parse import urlsplit

    spans = received.spans()
    invoke = [sp for sp in spans if sp.name == "gpubench.invoke"]
    assert len(invoke) == warmup + measured, f"{len(invoke)} invoke spans"
    phases = sorted(attributes(sp)["gpubench.phase"] for sp in invoke)
    assert phases == sorted(["warmup"] * warmup + ["measure"] * measured), phases
    calls = 0
    slack_ns = 5_000_000  # the invoke span's end is from perf_counter, a child's from the clock
    for sp in invoke:
        attrs = attributes(sp)
        assert attrs["gpubench.scenario.index"] == 0
        assert attrs["gpubench.scenario.name"], attrs
        assert http_attributes.HTTP_REQUEST_METHOD not in attrs  # the calls say their own
        children = [c for c in spans if c.parent_span_id == sp.span_id]
        http = [c for c in children if not c.name.startswith("gpubench.")]
        assert http, f"no HTTP client span under request {attrs['gpubench.seq']}"
        for c in http:
            assert c.trace_id == sp.trace_id
            assert sp.start_time_unix_nano - slack_ns <= c.start_time_unix_nano
            assert c.end_time_unix_nano <= sp.end_time_unix_nano + slack_ns
            url = urlsplit(attributes(c)[url_attributes.URL_FULL])
            check_http_span(c, host=url.hostname or "", port=url.port or 0, secret=secret)
        calls += len(http)
    points = received.metric_points("gpubench.requests")
    by_phase: dict[str, int] = {}
    for p in points:
        pa = attributes(p)
        assert pa["gpubench.scenario.index"] == 0 and pa["gpubench.scenario.name"]
        by_phase[pa["gpubench.phase"]] = by_phase.get(pa["gpubench.phase"], 0) + p.as_int
    assert by_phase == {"warmup": warmup, "measure": measured} if warmup else {"measure": measured}
    return calls
