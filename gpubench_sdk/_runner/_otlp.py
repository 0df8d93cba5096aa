"""OTLP/HTTP span export at a fraction of the SDK encoder's CPU, with the same bytes on the wire.

Profiled with tracing on (``bench/hotpath_bench.py``, py-spy), the OTLP exporter's encoder was
the largest single cost of tracing: about 45% of it, most of it building one protobuf object
per span, attribute and value before serialising them. A run's spans repeat the same attribute
pairs (target, endpoint, phase, outcome, server address...) request after request, so
``encode_spans`` writes the protobuf wire format directly, keeps each scalar attribute's
encoded bytes once (a bounded cache), and encodes the resource and the instrumentation scope once
per batch. What is not a plain scalar (an array value, a span's events or links) goes through
the SDK's own encoder, piece by piece, so the message is the one ``encode_spans`` of
``opentelemetry-exporter-otlp-proto-common`` serialises (``tests/test_otlp.py`` checks both).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Sequence
from typing import Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.exporter.otlp.proto.common._internal import (
    _encode_instrumentation_scope,
    _encode_key_value,
    _encode_resource,
)
from opentelemetry.exporter.otlp.proto.common._internal.trace_encoder import _encode_span
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.sampling import DEFAULT_ON
from opentelemetry.trace import SpanContext, SpanKind, Status, TraceFlags

log = logging.getLogger("gpubench.telemetry")

__all__ = ["DirectSpans", "EncodedSpan", "FastOTLPSpanExporter", "encode_spans"]

_KIND = {  # the field (6) and its value
    SpanKind.INTERNAL: b"\x30\x01",
    SpanKind.SERVER: b"\x30\x02",
    SpanKind.CLIENT: b"\x30\x03",
    SpanKind.PRODUCER: b"\x30\x04",
    SpanKind.CONSUMER: b"\x30\x05",
}
_CACHE_MAX = 4096
_pack_q = struct.Struct("<Q").pack
_pack_d = struct.Struct("<d").pack
_pack_i = struct.Struct("<I").pack
# flags (16, fixed32): SpanFlags HAS_IS_REMOTE (0x100), and IS_REMOTE (0x200) for a remote parent
_FLAGS_LOCAL = b"\x85\x01" + _pack_i(0x100)
_FLAGS_REMOTE = b"\x85\x01" + _pack_i(0x300)


_ONE_BYTE = [bytes((n,)) for n in range(0x80)]


def _varint(n: int) -> bytes:
    if n < 0x80:
        return _ONE_BYTE[n]
    if n < 0x4000:  # a length or a request's seq: two bytes, no loop
        return bytes(((n & 0x7F) | 0x80, n >> 7))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: int, payload: bytes) -> bytes:
    """A length-delimited field (``tag``, one byte, already holds wire type 2)."""
    return bytes((tag,)) + _varint(len(payload)) + payload


_pairs: dict[tuple[str, type, Any], bytes] = {}
_names: dict[str, bytes] = {}


def _attribute(key: str, value: Any) -> bytes:
    """One attribute as a span's encoded ``attributes`` field (a ``KeyValue`` message)."""
    kind = type(value)
    cache_key = (key, kind, value)
    try:
        found = _pairs.get(cache_key)
    except TypeError:  # an unhashable value (a list): the SDK's encoder
        found = None
        cache_key = None  # type: ignore[assignment]
    if found is not None:
        return found
    if kind is str:
        any_value = _field(0x0A, value.encode())
    elif kind is bool:
        any_value = b"\x10\x01" if value else b"\x10\x00"
    elif kind is int and -(1 << 63) <= value < (1 << 63):
        any_value = b"\x18" + _varint(value & 0xFFFFFFFFFFFFFFFF)
    elif kind is float:
        any_value = b"\x21" + _pack_d(value)
    else:
        return _field(0x4A, _encode_key_value(key, value).SerializeToString())
    made = _field(0x4A, _field(0x0A, key.encode()) + _field(0x12, any_value))
    if cache_key is not None:
        if len(_pairs) >= _CACHE_MAX:
            _pairs.clear()
        _pairs[cache_key] = made
    return made


# what comes before a value of a key in an encoded attribute, by key (a float: fixed length)
# and by key and the value's varint length (an int)
_float_heads: dict[str, bytes] = {}
_int_heads: dict[tuple[str, int], bytes] = {}


def attribute_once(key: str, value: Any) -> bytes:
    """``_attribute`` for a value that will not recur (a request's seq, latency, id): encoded
    without the value cache, which it would only crowd. What precedes the value (the message's
    length, the key, the value's field) depends only on the key and, for an int, on its
    varint's length, so it is kept: a float or an int costs one concatenation."""
    kind = type(value)
    if kind is float:
        head = _float_heads.get(key)
        if head is None:
            if len(_float_heads) >= _CACHE_MAX:
                _float_heads.clear()
            key_field = _field(0x0A, key.encode())  # then AnyValue (9 bytes): double_value
            inner = key_field + b"\x12\x09\x21"
            head = _float_heads[key] = b"\x4a" + _varint(len(inner) + 8) + inner
        return head + _pack_d(value)
    if kind is int and 0 <= value < (1 << 63):
        encoded = _varint(value)
        head_key = (key, len(encoded))
        head = _int_heads.get(head_key)
        if head is None:
            if len(_int_heads) >= _CACHE_MAX:
                _int_heads.clear()
            key_field = _field(0x0A, key.encode())  # then AnyValue: int_value
            inner = key_field + b"\x12" + _varint(1 + len(encoded)) + b"\x18"
            head = _int_heads[head_key] = b"\x4a" + _varint(len(inner) + len(encoded)) + inner
        return head + encoded
    if kind is str:
        key_value = _field(0x0A, key.encode()) + _field(0x12, _field(0x0A, value.encode()))
        return _field(0x4A, key_value)
    if kind is bool:
        return _attribute(key, value)
    return encode_attributes({key: value})  # anything else as the SDK would keep it (or drop it)


def encode_once(pairs: list[tuple[str, Any]]) -> bytes:
    """The attributes ``pairs`` (an invoke span's per-request ones), each as ``attribute_once``
    encodes it; a float's or an int's in this loop, from the same kept heads (a call each
    was a fifth of a traced plain request's span encoding)."""
    parts: list[bytes] = []
    for key, value in pairs:
        kind = type(value)
        if kind is float:
            head = _float_heads.get(key)
            if head is not None:
                parts += (head, _pack_d(value))
                continue
        elif kind is int and 0 <= value < (1 << 63):
            encoded = _varint(value)
            head = _int_heads.get((key, len(encoded)))
            if head is not None:
                parts += (head, encoded)
                continue
        parts.append(attribute_once(key, value))  # the first of its kind (or not a number)
    return b"".join(parts)


def _name(name: str) -> bytes:
    found = _names.get(name)
    if found is None:
        if len(_names) >= _CACHE_MAX:
            _names.clear()
        found = _names[name] = _field(0x2A, name.encode())
    return found


_UNSET = b"\x7a\x00"  # an unset status: present, empty


def _span(span: ReadableSpan) -> bytes:
    """One span as an encoded ``Span`` message, fields in number order as the SDK's are."""
    if span.events or span.links or span.dropped_events or span.dropped_links:
        sdk: bytes = _encode_span(span).SerializeToString()
        return sdk
    ctx = span.get_span_context()
    assert ctx is not None
    trace_id, span_id = ctx.trace_id.to_bytes(16, "big"), ctx.span_id.to_bytes(8, "big")
    parts = [b"\x0a\x10", trace_id, b"\x12\x08", span_id]
    state = ctx.trace_state
    if state:
        parts.append(_field(0x1A, ",".join(f"{k}={v}" for k, v in state.items()).encode()))
    parent = span.parent
    flags = _FLAGS_LOCAL
    if parent is not None:
        parts += (b"\x22\x08", parent.span_id.to_bytes(8, "big"))
        if parent.is_remote:
            flags = _FLAGS_REMOTE
    parts += (_name(span.name), _KIND[span.kind])
    parts += (b"\x39", _pack_q(span.start_time or 0), b"\x41", _pack_q(span.end_time or 0))
    attributes = span.attributes
    if attributes:
        # BoundedAttributes' own dict where it has one: a Mapping's items() is 10x slower
        for key, value in getattr(attributes, "_dict", attributes).items():
            try:
                parts.append(_attribute(key, value))
            except Exception:  # the SDK's encoder skips an attribute it cannot encode, too
                log.exception("Failed to encode key %s", key)
    if span.dropped_attributes:
        parts += (b"\x50", _varint(span.dropped_attributes))
    status = span.status
    if status is not None:
        parts.append(_status(status))
    parts.append(flags)
    return b"".join(parts)


def _status(status: Status | None) -> bytes:
    if status is None or not (status.description or status.status_code.value):
        return _UNSET
    body = b""
    if status.description:
        body = _field(0x12, status.description.encode())
    if status.status_code.value:
        body += b"\x18" + _varint(status.status_code.value)
    return _field(0x7A, body)


def encode_spans(spans: Sequence[ReadableSpan | EncodedSpan]) -> bytes:
    """The serialised ``ExportTraceServiceRequest`` of ``spans``: grouped by resource, then by
    instrumentation scope, in the order they first appear (as the SDK's encoder groups them)."""
    groups: dict[int, tuple[Any, dict[int, tuple[Any, list[bytes]]]]] = {}
    for span in spans:
        resource = span.resource
        scope = span.instrumentation_scope or None
        by_scope = groups.setdefault(id(resource), (resource, {}))[1]
        one = span.encoded if isinstance(span, EncodedSpan) else _field(0x12, _span(span))
        by_scope.setdefault(id(scope), (scope, []))[1].append(one)
    out = []
    for resource, by_scope in groups.values():
        scoped = []
        for scope, encoded in by_scope.values():
            head = _field(0x0A, _encode_instrumentation_scope(scope).SerializeToString())
            schema = scope.schema_url if scope is not None else None
            tail = _field(0x1A, schema.encode()) if schema else b""
            scoped.append(_field(0x12, head + b"".join(encoded) + tail))
        body = _field(0x0A, _encode_resource(resource).SerializeToString()) + b"".join(scoped)
        if resource.schema_url:
            body += _field(0x1A, resource.schema_url.encode())
        out.append(_field(0x0A, body))
    return b"".join(out)


# What the batch span processor reads of a span it is handed (``on_end``: is it sampled?); the
# span's real ids are in its encoded bytes.
_SAMPLED = SpanContext(1, 1, False, TraceFlags(TraceFlags.SAMPLED))


class EncodedSpan:
    """The spans of one invocation, or of the invocations a run recorded together (up to
    ``RECORD_BATCH``), encoded by ``DirectSpans`` straight from their records (no SDK ``Span``
    object was made for them): ``encoded`` holds each as the ``spans`` field of a
    ``ScopeSpans``, so ``encode_spans`` puts the bytes in as they are. One entry in the batch
    processor's queue, not one per span: an export of 512 entries holds 512 requests or more
    (at most 16,384: about 6 MB for plain requests, below the exporter's 64 MiB limit)."""

    __slots__ = ("encoded", "instrumentation_scope", "resource")

    context = _SAMPLED

    def __init__(self, encoded: bytes, resource: Any, scope: Any) -> None:
        self.encoded = encoded
        self.resource = resource
        self.instrumentation_scope = scope


def encode_span(
    ids: bytes,
    parent: bytes | None,
    name: str,
    kind: SpanKind,
    start: int,
    end: int,
    attributes: bytes,
    status: Status | None,
    flags: bytes,
) -> bytes:
    """One span's ``Span`` message as a ``spans`` field of a ``ScopeSpans`` (framed: what
    ``DirectSpans.emit`` joins), as ``_span`` writes an SDK span with these fields: ``ids``
    is the trace id, span id and trace state fields already encoded (``DirectSpans.ids``),
    ``attributes`` the encoded ``attributes`` fields (``_attribute``, ``attribute_once``)."""
    head = ids if parent is None else ids + b"\x22\x08" + parent
    body = b"".join(
        (head, _name(name), _KIND[kind], b"\x39", _pack_q(start), b"\x41", _pack_q(end),
         attributes, _status(status), flags)
    )  # fmt: skip
    return b"\x12" + _varint(len(body)) + body


def encode_attributes(attributes: dict[str, Any]) -> bytes:
    """The encoded ``attributes`` fields of a span with these attributes, as the SDK would
    keep them: a value that is not a plain scalar is cleaned as ``BoundedAttributes`` cleans it
    (a list becomes a tuple, an invalid value is dropped with the SDK's warning)."""
    parts = []
    for key, value in attributes.items():
        if type(value) not in _SCALARS:
            cleaned = BoundedAttributes(attributes={key: value})
            if key not in cleaned:
                continue
            value = cleaned[key]
        try:
            parts.append(_attribute(key, value))
        except Exception:  # the SDK's encoder skips an attribute it cannot encode, too
            log.exception("Failed to encode key %s", key)
    return b"".join(parts)


_SCALARS = frozenset({str, bool, int, float})
_DEFAULT_SAMPLER = DEFAULT_ON.get_description()  # type: ignore[no-untyped-call]


def trace_state_field(state: Any) -> bytes:
    """A span's encoded ``trace_state`` field (empty for none), as ``_span`` writes it."""
    if not state:
        return b""
    return _field(0x1A, ",".join(f"{k}={v}" for k, v in state.items()).encode())


class DirectSpans:
    """Where ``Instruments`` sends a run's spans when ``telemetry.configure``'s OTLP exporter is
    the tracer provider's only span processor: each span encoded from the stored invocation
    (``encode_span``) and handed to that processor as an ``EncodedSpan``.

    The SDK's span (a lock, a context, attribute validation, a ``ReadableSpan`` copy at its end)
    and its encoding afterwards were most of tracing's CPU (``bench/tracing_cost_bench.py``):
    the bytes sent are the ones the SDK path sends for the same spans (tests/test_otlp_encoding.py).
    Made only for the default sampler (parent-based, always on) and span limits no span of a run
    reaches; otherwise ``make`` answers ``None`` and spans take the SDK's path.
    """

    def __init__(
        self, processor: SpanProcessor, resource: Any, id_generator: Any, max_attributes: int
    ) -> None:
        self._processor = processor
        self.resource = resource
        self._ids = id_generator
        self.max_attributes = max_attributes

    @classmethod
    def make(cls, provider: Any, processor: SpanProcessor) -> DirectSpans | None:
        """Spans sent straight to ``processor`` (``provider``'s only one, a
        ``BatchSpanProcessor`` with a ``FastOTLPSpanExporter``), or ``None`` where ``provider``
        samples or limits spans in a way the SDK's path alone gets right."""
        try:
            exporter = processor.span_exporter  # type: ignore[attr-defined]
            limits = SpanLimits()  # configure's provider takes its limits from the environment
            if (
                not isinstance(exporter, FastOTLPSpanExporter)
                or not exporter.direct_ready()
                or provider.sampler.get_description() != _DEFAULT_SAMPLER
                or limits.max_attribute_length is not None
                or limits.max_span_attributes is None
            ):
                return None
            return cls(processor, provider.resource, provider.id_generator,
                       limits.max_span_attributes)  # fmt: skip
        except Exception:  # an SDK whose internals differ: its own path
            return None

    def alone_in(self, provider: Any) -> bool:
        """Whether this sink's processor is still ``provider``'s only one (processors added
        after ``configure`` must see the spans: then the SDK's path makes them)."""
        active = getattr(provider, "_active_span_processor", None)
        return tuple(getattr(active, "_span_processors", ())) == (self._processor,)

    def trace_id(self) -> int:
        return int(self._ids.generate_trace_id())

    def ids(self, trace_id: int, state: bytes) -> tuple[bytes, bytes]:
        """A new span's id and its encoded trace id, span id and trace state fields."""
        span_id = self._ids.generate_span_id().to_bytes(8, "big")
        return span_id, b"\x0a\x10" + trace_id.to_bytes(16, "big") + b"\x12\x08" + span_id + state

    def emit(self, spans: list[bytes], scope: Any) -> None:
        """The spans (``encode_span``'s) of one invocation, or of a batch recorded together,
        in the order the SDK's would have ended."""
        encoded = b"".join(spans)
        self._processor.on_end(EncodedSpan(encoded, self.resource, scope))  # type: ignore[arg-type]

    # the encoder, for Instruments (which does not import this module unless a run uses it)
    attribute_once = staticmethod(attribute_once)
    encode_once = staticmethod(encode_once)
    encode_attributes = staticmethod(encode_attributes)
    encode_span = staticmethod(encode_span)
    trace_state_field = staticmethod(trace_state_field)
    FLAGS_LOCAL, FLAGS_REMOTE = _FLAGS_LOCAL, _FLAGS_REMOTE


class FastOTLPSpanExporter(OTLPSpanExporter):
    """``OTLPSpanExporter`` whose batches are encoded by ``encode_spans`` above; sending,
    retries, size limit and its own metrics stay the SDK exporter's. On an exporter version whose
    internals differ from the ones relied on here, every batch takes the SDK's path."""

    def direct_ready(self) -> bool:
        """Whether ``export`` sends by itself (what ``EncodedSpan`` needs: the SDK's path
        cannot encode one)."""
        return all(hasattr(self, name) for name in ("_client", "_metrics", "_shutdown"))

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        client = getattr(self, "_client", None)
        measure = getattr(self, "_metrics", None)
        if getattr(self, "_shutdown", True) or client is None or measure is None:
            return super().export(spans)
        with measure.export_operation(len(spans)) as result:
            try:
                data = encode_spans(spans)
            except Exception as error:
                log.error("Failed to encode span batch: %s", error)
                result.error = error
                return SpanExportResult.FAILURE
            limit = getattr(self, "_max_request_size", None)
            if limit is not None and len(data) > limit:
                if any(isinstance(span, EncodedSpan) for span in spans):
                    log.error("Span batch of %d bytes over the %d limit: dropped", len(data), limit)
                    result.error = ValueError("span batch over the request size limit")
                    return SpanExportResult.FAILURE
                return super().export(spans)  # the SDK's path logs and reports the drop
            answer = client.export(data)
            if not answer.success:
                result.error = answer.error
                status = getattr(answer, "status_code", None)
                if status is not None:
                    result.error_attrs = {"http.response.status_code": status}
                return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS
