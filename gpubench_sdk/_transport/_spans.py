"""HTTP client spans, one per HTTP call a provider makes, named by OpenTelemetry's conventions.

The transport opens one around every request it sends (a submit, each poll, a stream), so every
httpx-based plugin gets them without a line of its own; they are children of the request's
``gpubench.invoke`` span. Names and attributes follow the stable HTTP client span conventions
(semantic-conventions v1.26+, ``docs/http/http-spans.md``; pinned here by the
``opentelemetry-semantic-conventions`` package's ``semconv.attributes``): span name = the
method, ``http.request.method``, ``url.full`` (credentials and query values scrubbed),
``server.address``, ``server.port``, ``network.protocol.version``,
``http.response.status_code``, ``error.type`` (the status code for >= 400, else the
exception's class), ``http.request.resend_count`` when the transport resent the request.

With tracing off no tracer is set (``use_tracer``) and the transport pays one ContextVar read.
Inside a runner's invocation (a ``CallLog`` that collects spans) a call's span is a ``LateSpan``:
its name, attributes, times and status are noted as the call goes, and the runner makes the
OpenTelemetry span from them once the invocation is over, under the invocation's span, which
starts when the request went out (``_request``): the span timeline and the stored record agree,
and no span object, context switch or attribute validation is paid while the request is out.
"""

from __future__ import annotations

import time
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any, Protocol

import httpx
from opentelemetry.trace import SpanKind, Status, StatusCode

from .._base._secrets import redact, scrub_url
from ._request import call_log

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer


class CallSpan(Protocol):
    """What the transport does with an HTTP client span: an OpenTelemetry ``Span`` or a
    ``LateSpan``."""

    def set_attribute(self, key: str, value: Any) -> None: ...

    def set_status(self, status: Status) -> None: ...

    def end(self) -> None: ...


class LateSpan:
    """An HTTP client span noted during an invocation, made by the runner after it: ``name``,
    ``attributes`` (those it started with: a ``PreparedCall``'s are one dict for all its
    calls, never written to), ``more`` (those set since, or ``None``), ``start_ns`` and
    ``end_ns`` (``time.perf_counter_ns()``), ``status``."""

    __slots__ = ("attributes", "end_ns", "more", "name", "start_ns", "status")

    def __init__(self, name: str, attributes: dict[str, Any]) -> None:
        self.name = name
        self.attributes = attributes
        self.more: dict[str, Any] | None = None
        self.start_ns = time.perf_counter_ns()
        self.end_ns: int | None = None
        self.status: Status | None = None

    def set_attribute(self, key: str, value: Any) -> None:
        if self.more is None:
            self.more = {key: value}
        else:
            self.more[key] = value

    def set_status(self, status: Status) -> None:
        self.status = status

    def end(self) -> None:
        if self.end_ns is None:
            self.end_ns = time.perf_counter_ns()


# semconv http.request.method: the methods of RFC 9110 and RFC 5789 (PATCH), and QUERY; any
# other is reported as "_OTHER" with the original in http.request.method_original.
KNOWN_METHODS = frozenset(
    {"CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE", "QUERY"}
)
_DEFAULT_PORTS = {"http": 80, "https": 443}

_TRACER: ContextVar[Tracer | None] = ContextVar("gpubench_http_tracer", default=None)


def use_tracer(tracer: Tracer | None) -> Token[Tracer | None]:
    """Make the transport open HTTP client spans with ``tracer`` in this context (and the
    tasks it starts); ``None``: no spans."""
    return _TRACER.set(tracer)


def reset_tracer(token: Token[Tracer | None]) -> None:
    _TRACER.reset(token)


def current_tracer() -> Tracer | None:
    return _TRACER.get()


def start_http_span(tracer: Tracer, request: httpx.Request) -> CallSpan:
    """An HTTP client span for ``request``, started now in the current context."""
    return _start(tracer, request.method, request.url)


def _start(tracer: Tracer, method: str, url: httpx.URL) -> CallSpan:
    name, attrs = span_start_args(method, url)
    return start_span(tracer, name, attrs)


def start_span(tracer: Tracer, name: str, attrs: dict[str, Any]) -> CallSpan:
    """The HTTP client span of a call starting now: a ``LateSpan`` in the invocation's
    ``CallLog`` when the runner collects them, else an OpenTelemetry span."""
    log = call_log()
    if log is not None and log.spans is not None:
        late = LateSpan(name, attrs)
        log.spans.append(late)
        return late
    return tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attrs)


def span_start_args(method: str, url: httpx.URL) -> tuple[str, dict[str, str | int]]:
    """The name and start attributes of the HTTP client span of a call to ``url``: all of
    them in one dict at start (one attribute set per call, not one ``set_attribute`` each)."""
    attrs: dict[str, str | int] = {
        "http.request.method": method if method in KNOWN_METHODS else "_OTHER",
        "url.full": scrub_url(str(url)),
        "server.address": url.host,
        "network.protocol.version": "1.1",  # aiohttp's client speaks HTTP/1.1 only
    }
    port = url.port or _DEFAULT_PORTS.get(url.scheme)
    if port:
        attrs["server.port"] = port
    if method not in KNOWN_METHODS:
        attrs["http.request.method_original"] = method
    return (method if method in KNOWN_METHODS else "HTTP"), attrs


def note_status(span: CallSpan, status: int, resent: bool = False) -> None:
    """The response's status; >= 400 is an error for a client span (semconv)."""
    span.set_attribute("http.response.status_code", status)
    if resent:
        span.set_attribute("http.request.resend_count", 1)
    if status >= 400:
        span.set_attribute("error.type", str(status))
        span.set_status(Status(StatusCode.ERROR))


def note_error(span: CallSpan, exc: BaseException) -> None:
    """A call that failed without a response (or whose body failed): ``error.type`` is the
    exception's class, as httpx names it (``httpx.ReadTimeout``)."""
    kind = type(exc)
    public = getattr(httpx, kind.__name__, None) is kind
    span.set_attribute("error.type", f"httpx.{kind.__name__}" if public else kind.__qualname__)
    span.set_status(Status(StatusCode.ERROR, redact(str(exc)) or kind.__name__))


class HTTPCallSpan:
    """The HTTP client span of a call a plugin makes without httpx (boto3, a gRPC gateway):
    ``telemetry.start_http_span`` opens it, ``finish`` ends it with what the call got."""

    __slots__ = ("_span",)

    def __init__(self, span: CallSpan) -> None:
        self._span: CallSpan | None = span

    def finish(self, status: int | None = None, error: BaseException | None = None) -> None:
        """End the span: the response's ``status``, or the ``error`` that came instead.
        A second call does nothing."""
        span, self._span = self._span, None
        if span is None:
            return
        if status is not None:
            note_status(span, status)
        elif error is not None:
            note_error(span, error)
        span.end()


def start_call_span(method: str, url: str) -> HTTPCallSpan | None:
    """Open an HTTP client span for a call about to be sent, when the run records spans
    (``None`` otherwise: then there is nothing to finish)."""
    tracer = _TRACER.get()
    if tracer is None:
        return None
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        return None
    return HTTPCallSpan(_start(tracer, method.upper(), parsed))
