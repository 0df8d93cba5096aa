"""gpubench's histograms aggregated by the runner (``telemetry.configure`` with one push reader)
export the points the SDK's ``Histogram.record`` would: the same metrics, attributes, bucket
counts, sums, min and max, and exemplars, collection after collection; and ``configure`` takes
that path only where the SDK would aggregate exactly so."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from opentelemetry.context import attach, detach
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    InMemoryMetricReader,
    MetricExporter,
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

from gpubench_sdk import telemetry
from gpubench_sdk._base._types import Invocation, Outcome, Phase
from gpubench_sdk._base._version import __version__
from gpubench_sdk._runner import _telemetry
from gpubench_sdk._runner._histograms import (
    DirectHistogram,
    DirectHistograms,
    MergingMetricExporter,
)
from gpubench_sdk.testing._otlp import otlp_receiver

_MS = 1_000_000
_RESOURCE = Resource.create({"service.name": "direct-metrics"})
_SCOPE = InstrumentationScope(_telemetry.INSTRUMENTATION_NAME, __version__)


class _Keep(MetricExporter):
    """Keeps each export's OTLP message."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[ExportMetricsServiceRequest] = []

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000,
               **kwargs: Any) -> MetricExportResult:  # fmt: skip
        self.sent.append(encode_metrics(metrics_data))
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        return None


def _invocations(rounds: int) -> Iterator[tuple[Invocation, dict[str, Any]]]:
    """Requests of every kind the histograms see: plain and LLM, warm-up and measured, failed,
    cold with a server-reported execution time, token gaps across the buckets, and an
    attribute whose value is a list."""
    plain = {"gpubench.target": "t", "gpubench.provider": "http", "gpubench.workload": "any",
             "gpubench.endpoint": "http://127.0.0.1:80/x", "tags": ["a", "b"]}  # fmt: skip
    llm = {**plain, "gpubench.workload": "llm", "gen_ai.request.model": "m"}
    for seq in range(rounds):
        gaps = [1 + seq % 7, 4, 30 + seq, 600 * (seq % 3), 12_000]  # ms apart: several buckets
        times = [20 * _MS]
        for gap in gaps:
            times.append(times[-1] + gap * _MS)
        yield (Invocation("t", 0, seq, Phase.MEASURE, 0, _MS, (51 + seq) * _MS, 0, Outcome.OK,
                          http_status=200), plain)  # fmt: skip
        yield (Invocation("t", 0, seq, Phase.MEASURE, 0, _MS, 61 * _MS, 0, Outcome.HTTP_5XX,
                          http_status=500, error="boom"), plain)  # fmt: skip
        yield (Invocation("t", 0, seq, Phase.MEASURE, 0, _MS, (900 + 97 * seq) * _MS, 0,
                          Outcome.OK, http_status=200, cold=True, execution_ms=20.0),
               plain)  # fmt: skip
        yield (Invocation("t", 0, seq, Phase.WARMUP if seq % 2 else Phase.MEASURE, 0, _MS,
                          times[-1] + _MS, 0, Outcome.OK, http_status=200, input_units=7 + seq,
                          output_units=len(times), token_times_ns=times), llm)  # fmt: skip


def _exports(
    direct: bool, parent: SpanContext | None = None, rounds: int = 40
) -> list[ExportMetricsServiceRequest]:
    """Two collections of the histograms of ``_invocations`` (the first after half of them),
    recorded through the SDK or aggregated directly, as OTLP messages, each with its
    collection instants checked and then left out (``_histograms``)."""
    keep = _Keep()
    merging = MergingMetricExporter(keep)
    reader = PeriodicExportingMetricReader(merging, export_interval_millis=math.inf)
    provider = MeterProvider(resource=_RESOURCE, metric_readers=[reader])
    if direct:
        made = DirectHistograms.make(provider, reader, merging, _SCOPE)
        assert made is not None
        _telemetry.aggregate_histograms_directly(provider, made)
    instruments = _telemetry.Instruments(meter_provider=provider)
    token = attach(set_span_in_context(NonRecordingSpan(parent))) if parent else None
    began = time.time_ns()
    try:
        made_all = list(_invocations(rounds))
        for i, (inv, attrs) in enumerate(made_all):
            instruments.record(inv, attrs)
            if i == len(made_all) // 2:
                reader.collect()
        reader.collect()
    finally:
        if token is not None:
            detach(token)
    assert not instruments._failed_once
    assert (instruments._histograms is not None) is direct
    provider.shutdown()
    return [_histograms(sent, began) for sent in keep.sent]


def _histograms(sent: ExportMetricsServiceRequest, began: int) -> Any:
    """The histograms of one export, each point stamped with the collection's instant (the
    SDK counter's) and started within the run, exemplars timed within it; those instants
    (a reading of the clock each, never the same twice) then left out."""
    copy = ExportMetricsServiceRequest()
    copy.CopyFrom(sent)
    (scope_metrics,) = copy.resource_metrics[0].scope_metrics
    assert scope_metrics.scope.name == _telemetry.INSTRUMENTATION_NAME
    assert scope_metrics.scope.version == __version__
    counter = scope_metrics.metrics[0]
    assert counter.name == "gpubench.requests"  # the SDK's, on both paths
    collected = counter.sum.data_points[0].time_unix_nano
    found = []
    for metric in scope_metrics.metrics[1:]:
        for point in metric.histogram.data_points:
            assert point.time_unix_nano == collected
            assert began <= point.start_time_unix_nano <= collected
            point.time_unix_nano = point.start_time_unix_nano = 0
            for exemplar in point.exemplars:
                assert began <= exemplar.time_unix_nano <= collected
                exemplar.time_unix_nano = 0
        found.append(metric)
    return found


def test_direct_histograms_export_the_sdk_points() -> None:
    sdk, direct = _exports(direct=False), _exports(direct=True)
    assert len(sdk) == len(direct) == 2
    for sdk_sent, direct_sent in zip(sdk, direct, strict=True):
        assert [m.name for m in direct_sent] == [
            "gpubench.request.duration",
            "gpubench.cold_start.duration",
            "gen_ai.client.operation.duration",
            "gen_ai.client.token.usage",
            "gen_ai.client.operation.time_to_first_chunk",
            "gen_ai.client.operation.time_per_output_chunk",
        ]
        assert direct_sent == sdk_sent
    gaps = direct[-1][-1].histogram.data_points
    assert sum(p.count for p in gaps) == 40 * 5  # five gaps a stream, every one counted
    assert len([c for c in gaps[0].bucket_counts if c]) >= 4  # spread over the buckets


def test_exemplars_of_a_sampled_parent_are_the_sdk_ones() -> None:
    """Run inside a sampled span, the SDK keeps the last value of each bucket as an exemplar
    with that span's ids, handed over once per collection: so does the direct path."""
    parent = SpanContext(trace_id=77, span_id=78, is_remote=False, trace_flags=TraceFlags(1))
    direct = _exports(True, parent)
    assert direct == _exports(False, parent)
    assert any(p.exemplars for m in direct[0] for p in m.histogram.data_points)
    unsampled = SpanContext(trace_id=77, span_id=78, is_remote=False, trace_flags=TraceFlags(0))
    quiet = _exports(True, unsampled)
    assert not any(p.exemplars for sent in quiet for m in sent for p in m.histogram.data_points)
    assert quiet == _exports(False, unsampled)


def test_values_and_attribute_sets_are_taken_as_the_sdk_takes_them() -> None:
    """Against the SDK's own points for the same values: NaN, infinite and negative values
    dropped (an attribute set that had only those has no point), ``True`` and ``1`` two
    attribute sets, and past 2,000 sets one overflow point, whose exemplars keep the
    measurement's attributes."""
    sampled = SpanContext(trace_id=5, span_id=6, is_remote=False, trace_flags=TraceFlags(1))
    histogram = DirectHistogram("h", "s", "d", (1.0, 2.0), threading.Lock())
    reader = InMemoryMetricReader()
    sdk = (
        MeterProvider(metric_readers=[reader])
        .get_meter("m")
        .create_histogram("h", explicit_bucket_boundaries_advisory=(1.0, 2.0))
    )
    recorded: list[tuple[float, dict[str, Any]]] = [
        (math.nan, {"k": "bad"}), (math.inf, {"k": "bad"}), (-1.0, {"k": "bad"}),
        (0.5, {"k": True}), (1.5, {"k": 1}), (-1.0, {"k": 1}),
    ]  # fmt: skip
    recorded += [(0.5 + i % 3, {"k": f"set {i}"}) for i in range(2003)]
    token = attach(set_span_in_context(NonRecordingSpan(sampled)))
    try:
        for value, attrs in recorded:
            histogram.record_all((value,), attrs, sampled)
            sdk.record(value, attrs)
    finally:
        detach(token)
    metric = histogram.collect(123)
    data = reader.get_metrics_data()
    assert metric is not None and data is not None
    points = _points(metric)
    assert points == _points(data.resource_metrics[0].scope_metrics[0].metrics[0])
    assert len(points) == 2001 and points[0][0] == {"k": True} and points[1][0] == {"k": 1}
    overflow = points[-1]
    assert overflow[0] == {"otel.metric.overflow": True} and overflow[1] == 5  # 5 sets past
    assert overflow[-1] == [  # each bucket's last value, with its own attributes
        ({"k": "set 2001"}, 0.5, 6, 5), ({"k": "set 2002"}, 1.5, 6, 5),
        ({"k": "set 2000"}, 2.5, 6, 5),
    ]  # fmt: skip


def _points(metric: Any) -> list[tuple[Any, ...]]:
    """A histogram's points: attributes, count, sum, bucket counts, min, max, and exemplars
    (measurement attributes not the point's, value, span id, trace id)."""
    return [
        (dict(p.attributes), p.count, p.sum, p.bucket_counts, p.min, p.max,
         [(e.filtered_attributes, e.value, e.span_id, e.trace_id) for e in p.exemplars])
        for p in metric.data.data_points
    ]  # fmt: skip


def test_collections_while_requests_record_see_whole_values() -> None:
    """The reader's thread collects while the loop records: every collection sees each value
    whole (its count, bucket and sum together)."""
    histogram = DirectHistogram("h", "s", "d", (1.0, 2.0), threading.Lock())
    done = threading.Event()
    seen: list[tuple[int, float]] = []

    def collect() -> None:
        while not done.is_set():
            metric = histogram.collect(time.time_ns())
            if metric is not None:
                point: Any = metric.data.data_points[0]
                seen.append((point.count, point.sum))

    reader = threading.Thread(target=collect)
    reader.start()
    try:
        for _ in range(20_000):
            histogram.record_all((1.0, 1.0, 1.0), {"k": "v"})
    finally:
        done.set()
        reader.join(10)
    final = histogram.collect(time.time_ns())
    assert final is not None
    assert [p.count for p in final.data.data_points] == [60_000]  # type: ignore[union-attr]
    assert len(seen) > 1
    assert all(count == total and count % 3 == 0 for count, total in seen)


@contextmanager
def _env(monkeypatch: pytest.MonkeyPatch, **values: str) -> Iterator[None]:
    with monkeypatch.context() as patch:
        for key, value in values.items():
            patch.setenv(key, value)
        yield


def test_configure_aggregates_directly_only_where_the_sdk_would_aggregate_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with otlp_receiver() as (url, received):
        setup = telemetry.configure(otlp_endpoint=url, set_global=False, prometheus_linger_s=0)
        instruments = setup.instruments()
        assert instruments.enabled and instruments._histograms is not None
        for inv, attrs in _invocations(3):
            instruments.record(inv, attrs)
        instruments.flush()
        # A reader added since must see the next run's histograms: that run takes the SDK's
        # path, and configure's reader exports each histogram once, both runs' points combined.
        memory = InMemoryMetricReader()
        setup.meter_provider.add_metric_reader(memory)
        later = setup.instruments()
        assert later.enabled and later._histograms is None
        for inv, attrs in _invocations(2):
            later.record(inv, attrs)
        later.flush()
        added = memory.get_metrics_data()
        assert added is not None
        (seen,) = [m for m in added.resource_metrics[0].scope_metrics[0].metrics
                   if m.name == "gpubench.request.duration"]  # fmt: skip
        assert sum(point[1] for point in _points(seen)) == 8  # two rounds, 4 requests each
        setup.shutdown()  # the final collection goes out with the direct histograms in it
        gaps = received.metric_points("gen_ai.client.operation.time_per_output_chunk")
        assert sum(p.count for p in gaps) == 5 * 5
        assert sum(p.as_int for p in received.metric_points("gpubench.requests")) == 20
        assert sum(p.count for p in received.metric_points("gpubench.request.duration")) == 20
        (last,) = [ExportMetricsServiceRequest.FromString(b) for b in received.metrics[-1:]]
        names = [m.name for m in last.resource_metrics[0].scope_metrics[0].metrics]
        assert len(names) == len(set(names)) == 7  # the counter and six histograms, once each

        def direct(**kw: Any) -> bool:
            made = telemetry.configure(set_global=False, prometheus_linger_s=0, **kw)
            try:
                instruments = made.instruments()
                return instruments.enabled and instruments._histograms is not None
            finally:
                made.shutdown()

        assert not direct(otlp_endpoint=url, in_memory=True)  # a second reader: the SDK's path
        assert direct(console=True)
        assert not direct(otlp_endpoint=url, console=True)
        for name, value in (
            ("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "delta"),
            ("OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION",
             "base2_exponential_bucket_histogram"),
            ("OTEL_METRICS_EXEMPLAR_FILTER", "always_on"),
        ):  # fmt: skip
            with _env(monkeypatch, **{name: value}):
                assert not direct(otlp_endpoint=url), name
        with _env(monkeypatch, OTEL_METRICS_EXEMPLAR_FILTER="always_off"):
            assert direct(otlp_endpoint=url)
