"""A run's histograms aggregated by gpubench itself, exported through ``configure``'s reader.

Profiled with tracing on (``bench/client_tail_bench.py --throughput --otlp``, py-spy), the SDK's
``Histogram.record`` was about a third of the traced client's CPU: each call builds a
``Measurement``, cleans and hashes every attribute (twelve on an LLM request) and takes two
locks, and a 16-token stream records about twenty values (one per gap between tokens). The
attribute dicts a run records with are made once and reused (``Instruments``), so here a value
costs a dict lookup by the dict's identity, a bisect and a few additions.

What leaves the process is unchanged: ``MergingMetricExporter`` wraps ``configure``'s exporter
and adds these histograms to each collection as the SDK's own data points (same attributes,
buckets, sums, min and max, exemplars; ``tests/test_direct_metrics.py`` records the same
requests both ways and compares the exports). Made only where the SDK would aggregate exactly
so (one push reader, cumulative explicit-bucket histograms, no views, the trace-based or no
exemplar filter): ``make`` answers ``None`` otherwise and the runs record through the SDK.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from opentelemetry.sdk.metrics import (
    AlwaysOffExemplarFilter,
    Exemplar,
    Histogram,
    TraceBasedExemplarFilter,
)
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    HistogramDataPoint,
    Metric,
    MetricExporter,
    MetricExportResult,
    MetricReader,
    MetricsData,
    PeriodicExportingMetricReader,
    ScopeMetrics,
)
from opentelemetry.sdk.metrics.export import Histogram as HistogramData
from opentelemetry.sdk.metrics.view import (
    DefaultAggregation,
    ExplicitBucketHistogramAggregation,
)
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import INVALID_SPAN

try:  # how the SDK's Measurement cleans attributes (opentelemetry-api's attributes module)
    from opentelemetry.attributes import _clean_attribute_value
except ImportError:  # another API version: ``make`` leaves the runs on the SDK's path
    _clean_attribute_value = None  # type: ignore[assignment]

log = logging.getLogger("gpubench.telemetry")

__all__ = ["DirectHistogram", "DirectHistograms", "MergingMetricExporter"]

# The SDK's default cardinality limit per metric stream, and the point it folds the rest into
# (OpenTelemetry metrics SDK spec, "Cardinality limits"; opentelemetry-sdk 1.45's
# _view_instrument_match.py)
_CARDINALITY_LIMIT = 2000
_OVERFLOW = {"otel.metric.overflow": True}
# The exemplar filters kept here: trace-based (the SDK's default) and always off
_FILTERS_KEPT = (TraceBasedExemplarFilter, AlwaysOffExemplarFilter)
_first_records = itertools.count()  # orders the histograms by their first value, as the SDK


def _key(value: Any) -> Any:
    """An attribute set's identity as the SDK's ``_hash_attributes`` makes it: each value with
    its type (``True`` and ``1`` are two points), sequences and mappings recursively."""
    if isinstance(value, str | bytes | bool | int | float | type(None)):
        return (type(value).__name__, value)
    if isinstance(value, Sequence):
        return ("sequence", tuple(_key(v) for v in value))
    if isinstance(value, Mapping):
        ordered = sorted(value, key=lambda item: item if isinstance(item, str) else str(item))
        return ("mapping", tuple((k, _key(value[k])) for k in ordered))
    return ("other", repr(value))


class _Point:
    """One attribute set's cumulative histogram, as the SDK's explicit-bucket aggregation keeps
    it, with the aligned-bucket exemplar reservoir's last sampled value per bucket."""

    __slots__ = ("attributes", "counts", "exemplars", "max", "min", "start_ns", "sum", "total")

    def __init__(self, attributes: dict[str, Any], buckets: int) -> None:
        self.attributes = attributes
        self.start_ns = time.time_ns()  # the SDK's: the attribute set's first measurement
        self.counts = [0] * buckets
        self.sum: float = 0  # since the last collection (the SDK adds it to the total then:
        self.total: float = 0  # summed in the same order, the float is the same to the bit)
        self.min = math.inf
        self.max = -math.inf
        # bucket: (value, time, span id, trace id, the measurement's attributes not the point's)
        self.exemplars: dict[int, tuple[float, int, int, int, dict[str, Any]]] = {}


class DirectHistogram:
    """One histogram of a run (an instrument)."""

    def __init__(
        self, name: str, unit: str, description: str, boundaries: Sequence[float], lock: Any
    ) -> None:
        self.name, self.unit, self.description = name, unit, description
        self.boundaries = tuple(float(b) for b in boundaries)
        self.first = -1  # when its first value came, in ``_first_records``' order
        self._lock = lock
        self._points: dict[Any, _Point] = {}  # by the attributes' content, first seen first
        # by the dict's identity: (the dict, its point, what an exemplar adds to the point's)
        self._by_id: dict[int, tuple[dict[str, Any], _Point, dict[str, Any]]] = {}

    def _point(self, attrs: dict[str, Any]) -> tuple[_Point, dict[str, Any]]:
        """``attrs``' point (made at its first value) and the attributes an exemplar of it
        keeps besides the point's (none, except on the overflow point). Under the lock."""
        found = self._by_id.get(id(attrs))
        if found is not None and found[0] is attrs:
            return found[1], found[2]
        cleaned = dict(_clean_attribute_value(attrs, None))  # as the SDK's Measurement does
        key, extra = _key(cleaned), {}
        point = self._points.get(key)
        if point is None and len(self._points) >= _CARDINALITY_LIMIT:
            key, extra, cleaned = _key(_OVERFLOW), cleaned, dict(_OVERFLOW)
            point = self._points.get(key)
        if point is None:
            point = self._points[key] = _Point(cleaned, len(self.boundaries) + 1)
        if len(self._by_id) >= 4 * _CARDINALITY_LIMIT:  # dicts made per request: bounded
            self._by_id.clear()
        self._by_id[id(attrs)] = (attrs, point, extra)
        return point, extra

    def record_all(
        self, values: Sequence[float], attrs: dict[str, Any], sampled: Any = None
    ) -> None:
        """Each of ``values`` under ``attrs``, as the SDK's ``Histogram.record`` would take
        them one by one, under one lock; ``sampled``: the current span's context where the
        SDK's exemplar filter would sample them (``DirectHistograms.sampled_span``)."""
        kept = [v for v in values if 0 <= v < math.inf]  # not NaN, infinite or negative
        if len(kept) < len(values):  # the SDK drops those, with a warning each
            for value in values:
                if not 0 <= value < math.inf:
                    log.warning("Histogram %s: %s dropped (not finite, or negative)",
                                self.name, value)  # fmt: skip
        if not kept:
            return
        bounds = self.boundaries
        with self._lock:
            if self.first < 0:
                self.first = next(_first_records)
            point, extra = self._point(attrs)
            counts = point.counts
            for value in kept:
                index = bisect_left(bounds, value)
                counts[index] += 1
                point.sum += value
                if value < point.min:
                    point.min = value
                if value > point.max:
                    point.max = value
                if sampled is not None:
                    point.exemplars[index] = (value, time.time_ns(), sampled.span_id,
                                              sampled.trace_id, extra)  # fmt: skip

    def collect(self, now_ns: int) -> Metric | None:
        """The SDK's ``Metric`` for this histogram now (cumulative), or ``None`` before its
        first value; each point's exemplars are handed over once, as the SDK's reservoir does."""
        taken = []
        with self._lock:  # the numbers only: the objects are built after (the loop waits)
            for point in self._points.values():
                point.total = point.sum + point.total
                point.sum = 0
                taken.append((point.attributes, min(point.start_ns, now_ns), point.total,
                              tuple(point.counts), point.min, point.max,
                              sorted(point.exemplars.items())))  # fmt: skip
                point.exemplars = {}
        if not taken:
            return None
        made = [
            HistogramDataPoint(
                attributes=attributes,
                start_time_unix_nano=start,
                time_unix_nano=now_ns,
                count=sum(counts),
                sum=total,
                bucket_counts=counts,
                explicit_bounds=self.boundaries,
                min=low,
                max=high,
                exemplars=[
                    Exemplar(dict(extra), value, at, span_id, trace_id)
                    for _, (value, at, span_id, trace_id, extra) in exemplars
                ],
            )
            for attributes, start, total, counts, low, high, exemplars in taken
        ]
        data = HistogramData(
            data_points=made, aggregation_temporality=AggregationTemporality.CUMULATIVE
        )
        return Metric(name=self.name, description=self.description, unit=self.unit, data=data)


class DirectHistograms:
    """The histograms of one meter provider that gpubench aggregates itself (``make``), and
    the step that adds them to that provider's exports (``merge``)."""

    def __init__(self, scope: InstrumentationScope, exemplars: bool, reader: MetricReader) -> None:
        self._scope = scope  # the runner's meter's (``Instruments``): the histograms join it
        self._exemplars = exemplars  # the trace-based filter (else: always off)
        self._reader = reader
        self._lock = threading.Lock()
        self._histograms: dict[str, DirectHistogram] = {}

    @classmethod
    def make(
        cls,
        provider: Any,
        reader: MetricReader,
        exporter: MergingMetricExporter,
        scope: InstrumentationScope,
    ) -> DirectHistograms | None:
        """The direct histograms of ``provider`` (made by ``configure`` with ``reader`` as its
        only reader, a ``PeriodicExportingMetricReader`` exporting through ``exporter``, which
        they are attached to), or ``None`` where the SDK would aggregate histograms otherwise
        than ``DirectHistogram`` does (views, exponential buckets, delta temporality, another
        cardinality limit, exemplars always on, or SDK internals other than those relied on
        here)."""
        try:
            config = provider._sdk_config
            exemplar_filter = config.exemplar_filter
            if (
                _clean_attribute_value is None
                or not isinstance(reader, PeriodicExportingMetricReader)
                or config.views
                or _for_histograms(reader._instrument_class_temporality)
                is not AggregationTemporality.CUMULATIVE
                or not _advised_buckets(_for_histograms(reader._instrument_class_aggregation))
                or _for_histograms(reader._instrument_class_cardinality_limit) != _CARDINALITY_LIMIT
                or not isinstance(exemplar_filter, _FILTERS_KEPT)
            ):
                return None
        except Exception:  # an SDK whose internals differ: its own path
            return None
        made = cls(scope, isinstance(exemplar_filter, TraceBasedExemplarFilter), reader)
        exporter.direct = made
        return made

    def alone_in(self, provider: Any) -> bool:
        """Whether this sink's reader is still ``provider``'s only one: a reader added since
        (``add_metric_reader``) must see the histograms, so then the runs take the SDK's path."""
        consumer = getattr(provider, "_measurement_consumer", None)
        return tuple(getattr(consumer, "_reader_storages", ())) == (self._reader,)

    def histogram(
        self, name: str, unit: str, description: str, boundaries: Sequence[float]
    ) -> DirectHistogram:
        """The histogram ``name`` (the same one for every run on this provider, as the SDK's
        meter answers one instrument per name)."""
        with self._lock:
            found = self._histograms.get(name)
            if found is None:
                found = self._histograms[name] = DirectHistogram(
                    name, unit, description, boundaries, self._lock
                )
            return found

    def sampled_span(self, span: Any) -> Any:
        """The context of ``span`` (the current span) where the SDK's exemplar filter would
        sample a measurement made now (trace-based: a sampled span is current), else ``None``."""
        if not self._exemplars:
            return None
        if span == INVALID_SPAN:
            return None
        context = span.get_span_context()
        return context if context.trace_flags.sampled else None

    def merge(self, data: MetricsData) -> MetricsData:
        """``data`` (one SDK collection) with these histograms in their scope's metrics.

        Called only for a collection the SDK has data for (its reader exports nothing
        otherwise); a run that records a histogram has counted the request in the SDK's
        ``gpubench.requests`` first, so no direct value waits on an export that never comes.
        """
        now = _collection_time(data)
        with self._lock:
            histograms = sorted(self._histograms.values(), key=lambda h: h.first)
        made = [m for h in histograms if h.first >= 0 and (m := h.collect(now)) is not None]
        if not made or not data.resource_metrics:
            return data
        first, *rest = data.resource_metrics
        scopes = list(first.scope_metrics)
        for i, scope_metrics in enumerate(scopes):
            if scope_metrics.scope == self._scope:
                scopes[i] = replace(scope_metrics, metrics=_joined(scope_metrics.metrics, made))
                break
        else:
            scopes.append(ScopeMetrics(scope=self._scope, metrics=made, schema_url=""))
        return MetricsData(resource_metrics=[replace(first, scope_metrics=scopes), *rest])


def _joined(sdk: Sequence[Metric], direct: list[Metric]) -> list[Metric]:
    """The SDK's metrics of the scope and the direct ones; where both hold one histogram (runs
    on the SDK's path since a reader was added, after direct ones), its points combined."""
    ours = {m.name: m for m in direct}
    joined = [_combined(m, ours.pop(m.name)) if m.name in ours else m for m in sdk]
    return joined + [m for m in direct if m.name in ours]


def _combined(sdk: Metric, direct: Metric) -> Metric:
    """One cumulative histogram from the SDK's points and the direct ones (same attributes:
    counts, sums, min and max added up, the earlier start; exemplars of both)."""
    points: dict[Any, Any] = {_key(dict(p.attributes or {})): p for p in sdk.data.data_points}
    for mine in direct.data.data_points:
        key = _key(dict(mine.attributes or {}))
        other = points.get(key)
        if not (isinstance(other, HistogramDataPoint) and isinstance(mine, HistogramDataPoint)):
            points[key] = mine  # an attribute set only the direct path saw
            continue
        points[key] = replace(
            other,
            start_time_unix_nano=min(other.start_time_unix_nano, mine.start_time_unix_nano),
            count=other.count + mine.count,
            sum=other.sum + mine.sum,
            bucket_counts=tuple(
                a + b for a, b in zip(other.bucket_counts, mine.bucket_counts, strict=True)
            ),
            min=min(other.min, mine.min),
            max=max(other.max, mine.max),
            exemplars=[*other.exemplars, *mine.exemplars],
        )
    data = HistogramData(data_points=list(points.values()),
                         aggregation_temporality=AggregationTemporality.CUMULATIVE)  # fmt: skip
    return replace(sdk, data=data)


def _for_histograms(by_class: Mapping[Any, Any]) -> Any:
    """A reader's setting for histograms (its dicts are keyed by the SDK's instrument classes)."""
    return next(value for kind, value in by_class.items() if issubclass(kind, Histogram))


def _advised_buckets(aggregation: Any) -> bool:
    """Whether a reader's histogram aggregation is explicit buckets at the instrument's advised
    boundaries, with min and max: the default, or ``ExplicitBucketHistogramAggregation()``
    (the OTLP exporter's choice unless told otherwise)."""
    if type(aggregation) is DefaultAggregation:
        return True
    return (
        type(aggregation) is ExplicitBucketHistogramAggregation
        and aggregation._boundaries is None
        and aggregation._record_min_max is True
    )


def _collection_time(data: MetricsData) -> int:
    """The instant the SDK stamped this collection's points with (one per collection)."""
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    return int(point.time_unix_nano)
    return time.time_ns()


class MergingMetricExporter(MetricExporter):
    """``configure``'s metric exporter: exports through ``inner`` each collection with the
    run's direct histograms (``DirectHistograms.merge``) added, once they exist."""

    def __init__(self, inner: MetricExporter) -> None:
        super().__init__(
            preferred_temporality=inner._preferred_temporality,
            preferred_aggregation=inner._preferred_aggregation,
        )
        self._inner = inner
        self.direct: DirectHistograms | None = None

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        if self.direct is not None:
            try:
                metrics_data = self.direct.merge(metrics_data)
            except Exception:  # telemetry must never break a run: the SDK's part still goes
                log.warning("gpubench's histograms could not be added to an export", exc_info=True)
        return self._inner.export(metrics_data, timeout_millis=timeout_millis, **kwargs)

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self._inner.force_flush(timeout_millis=timeout_millis)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._inner.shutdown(timeout_millis=timeout_millis, **kwargs)
