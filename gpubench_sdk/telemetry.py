"""One-call OpenTelemetry setup for scripts and the CLI.

The library itself only uses the OpenTelemetry API: in your own application, configure the SDK
as you already do and gpubench's spans and metrics join it. ``configure`` is for when gpubench
is the application::

    from gpubench_sdk import telemetry
    setup = telemetry.configure(otlp_endpoint="http://localhost:4318")
    ...
    setup.shutdown()

Exporter failures (collector down, timeouts) are logged by the SDK and never reach the caller.
Span and metric names are listed in ``docs/observability.md``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    InMemoryMetricReader,
    MetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from ._base._errors import ConfigError
from ._base._validate import check_url
from ._base._version import __version__
from ._runner._histograms import DirectHistograms, MergingMetricExporter
from ._runner._telemetry import (
    INSTRUMENTATION_NAME,
    METRIC_COLD_START,
    METRIC_DURATION,
    METRIC_GENAI_DURATION,
    METRIC_GENAI_TOKENS,
    METRIC_GENAI_TPOC,
    METRIC_GENAI_TTFC,
    METRIC_REQUESTS,
    SPAN_COLD_START,
    SPAN_EXECUTION,
    SPAN_INVOKE,
    SPAN_QUEUE,
    Instruments,
    aggregate_histograms_directly,
    send_spans_directly,
)
from ._transport._spans import HTTPCallSpan
from ._transport._spans import start_call_span as start_http_span

__all__ = [
    "METRIC_COLD_START",
    "METRIC_DURATION",
    "METRIC_GENAI_DURATION",
    "METRIC_GENAI_TOKENS",
    "METRIC_GENAI_TPOC",
    "METRIC_GENAI_TTFC",
    "METRIC_REQUESTS",
    "PROMETHEUS_LINGER_S",
    "SPAN_COLD_START",
    "SPAN_EXECUTION",
    "SPAN_INVOKE",
    "SPAN_QUEUE",
    "HTTPCallSpan",
    "TelemetrySetup",
    "configure",
    "parse_prometheus_address",
    "start_http_span",
]

_EXPORT_TIMEOUT_S = 5.0
PROMETHEUS_LINGER_S = 5.0
"""How long ``shutdown`` keeps ``/metrics`` served for a final scrape (default)."""
log = logging.getLogger("gpubench.telemetry")


@dataclass
class TelemetrySetup:
    """The providers ``configure`` made; pass ``instruments()`` to a Runner to use them."""

    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    spans: InMemorySpanExporter | None = None
    metric_reader: InMemoryMetricReader | None = None
    prometheus_address: tuple[str, int] | None = None  # where /metrics is served, if it is
    prometheus_linger_s: float = PROMETHEUS_LINGER_S
    _prometheus_server: Any = None
    _prometheus_registry: Any = None

    def instruments(self) -> Instruments:
        return Instruments(tracer_provider=self.tracer_provider, meter_provider=self.meter_provider)

    def final_scrape(self) -> bool:
        """Keep ``/metrics`` served until a scrape that began now has been answered, or for
        ``prometheus_linger_s``, so the run's final totals can be scraped. True when a final
        scrape came; immediately True without a Prometheus endpoint."""
        registry = self._prometheus_registry
        if registry is None:
            return True
        log.info(
            "waiting up to %g s for a final Prometheus scrape of %s",
            self.prometheus_linger_s,
            self.prometheus_address,
        )
        return bool(registry.wait_for_scrape(time.monotonic(), self.prometheus_linger_s))

    def shutdown(self) -> None:
        """Serve a final Prometheus scrape (``final_scrape``), then flush and stop exporters;
        bounded by the linger and the export timeout, never raises."""
        with contextlib.suppress(Exception):
            self.final_scrape()
        for stop in (self.tracer_provider.shutdown, self.meter_provider.shutdown):
            # an unreachable collector must not fail the run
            with contextlib.suppress(Exception):
                stop()
        if self._prometheus_server is not None:
            server, thread = self._prometheus_server
            server.shutdown()
            server.server_close()
            thread.join(5)
            self._prometheus_server = self._prometheus_registry = None


def configure(
    *,
    otlp_endpoint: str | None = None,
    otlp_headers: dict[str, str] | None = None,
    console: bool = False,
    in_memory: bool = False,
    service_name: str = "gpubench",
    set_global: bool = True,
    metric_interval_s: float = 10.0,
    prometheus_port: int | None = None,
    prometheus_host: str = "0.0.0.0",
    prometheus_linger_s: float = PROMETHEUS_LINGER_S,
) -> TelemetrySetup:
    """Build tracer and meter providers with the chosen exporters.

    ``otlp_endpoint`` is the collector's OTLP/HTTP base URL (``/v1/traces`` and
    ``/v1/metrics`` are appended). ``prometheus_port`` serves the metrics for Prometheus to
    scrape at ``http://HOST:PORT/metrics`` (``0``: any free port, see
    ``setup.prometheus_address``; needs the ``prometheus`` extra); ``shutdown`` keeps serving
    until one more scrape or ``prometheus_linger_s`` passes (set it to at least the scrape
    interval so the run's final totals are scraped; 0: stop at once). ``set_global`` installs the
    providers process-wide (possible once per process); otherwise pass
    ``setup.instruments()`` to the Runner.
    """
    if otlp_endpoint is not None:
        check_url("otlp_endpoint", otlp_endpoint)
    if not (math.isfinite(prometheus_linger_s) and 0 <= prometheus_linger_s <= 3600):
        raise ConfigError("prometheus_linger_s", prometheus_linger_s, "seconds from 0 to 3600")
    if not (math.isfinite(metric_interval_s) and metric_interval_s > 0):
        raise ConfigError("metric_interval_s", metric_interval_s, "seconds > 0")
    resource = Resource.create({"service.name": service_name})
    tracer_provider = TracerProvider(resource=resource)
    readers: list[MetricReader] = []
    exporters: list[MergingMetricExporter] = []
    setup_kw: dict[str, Any] = {}
    interval_ms = metric_interval_s * 1000
    otlp_spans: BatchSpanProcessor | None = None
    if otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        from ._runner._otlp import FastOTLPSpanExporter

        base = otlp_endpoint.rstrip("/")
        otlp_spans = BatchSpanProcessor(
            FastOTLPSpanExporter(  # the SDK's exporter, its encoding 3-5x cheaper
                endpoint=f"{base}/v1/traces", headers=otlp_headers, timeout=_EXPORT_TIMEOUT_S
            )
        )
        tracer_provider.add_span_processor(otlp_spans)
        exporters.append(
            MergingMetricExporter(
                OTLPMetricExporter(
                    endpoint=f"{base}/v1/metrics", headers=otlp_headers, timeout=_EXPORT_TIMEOUT_S
                )
            )
        )
    if console:
        tracer_provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
        exporters.append(MergingMetricExporter(ConsoleMetricExporter()))
    readers += [PeriodicExportingMetricReader(e, export_interval_millis=interval_ms)
                for e in exporters]  # fmt: skip
    if in_memory:
        spans = InMemorySpanExporter()
        tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
        reader = InMemoryMetricReader()
        readers.append(reader)
        setup_kw.update(spans=spans, metric_reader=reader)
    if prometheus_port is not None:
        setup_kw.update(_prometheus(readers, prometheus_host, prometheus_port))
    if otlp_spans is not None and not (console or in_memory):
        # The OTLP exporter alone: a run's spans are encoded from its records straight into
        # it, without SDK span objects (the same bytes at a fraction of the CPU). A provider
        # the user brings, or one with other processors, gets the SDK's spans.
        from ._runner._otlp import DirectSpans

        direct = DirectSpans.make(tracer_provider, otlp_spans)
        if direct is not None:
            send_spans_directly(tracer_provider, direct)
    meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    if len(readers) == 1 and exporters:
        # One push reader, ours: the runs' histograms are aggregated by gpubench and added to
        # its exports (the same points at a fraction of the SDK's per-value CPU).
        scope = InstrumentationScope(INSTRUMENTATION_NAME, __version__)
        histograms = DirectHistograms.make(meter_provider, readers[0], exporters[0], scope)
        if histograms is not None:
            aggregate_histograms_directly(meter_provider, histograms)
    if set_global:
        trace.set_tracer_provider(tracer_provider)
        metrics.set_meter_provider(meter_provider)
    return TelemetrySetup(
        tracer_provider, meter_provider, prometheus_linger_s=prometheus_linger_s, **setup_kw
    )


def _prometheus(readers: list[MetricReader], host: str, port: int) -> dict[str, Any]:
    """A Prometheus reader on its own registry (so two setups in one process never clash) and
    an HTTP server for it in a daemon thread."""
    try:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import CollectorRegistry, start_http_server
    except ImportError as exc:
        raise ConfigError(
            "prometheus_port",
            port,
            "the Prometheus exporter: pip install 'gpubench-sdk[prometheus]'",
        ) from exc
    registry = _scrape_watching_registry(CollectorRegistry)
    readers.append(PrometheusMetricReader(registry=registry))
    try:
        server, thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise ConfigError("prometheus_port", port, f"a free port on {host} ({exc})") from exc
    bound_host, bound_port = server.server_address[:2]
    return {"prometheus_address": (str(bound_host), int(bound_port)),
            "_prometheus_server": (server, thread), "_prometheus_registry": registry}  # fmt: skip


def _scrape_watching_registry(base: type[Any]) -> Any:
    """A ``CollectorRegistry`` that knows when a scrape began and ended, so ``shutdown`` can
    wait for one that began after the run (and so saw its final totals)."""

    class Registry(base):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(auto_describe=True)
            self._done = threading.Condition()
            self._last_began = -math.inf  # monotonic start of the last answered scrape

        def collect(self) -> Any:
            began = time.monotonic()
            yield from super().collect()
            with self._done:
                self._last_began = max(self._last_began, began)
                self._done.notify_all()

        def wait_for_scrape(self, after: float, timeout_s: float) -> bool:
            with self._done:
                return bool(self._done.wait_for(lambda: self._last_began >= after, timeout_s))

    return Registry()


def parse_prometheus_address(text: str | None) -> tuple[str, int | None]:
    """``--prometheus-port`` as (host, port): ``9464`` or ``127.0.0.1:9464``; ``None``: off."""
    if not text:
        return "0.0.0.0", None
    host, _, port = text.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        number = -1
    if not 0 <= number <= 65535:
        raise ConfigError("--prometheus-port", text, "a port (9464) or HOST:PORT (127.0.0.1:9464)")
    return host.strip("[]") or "0.0.0.0", number
