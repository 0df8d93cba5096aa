"""`gpubench run --otlp-endpoint`: spans and metrics arrive at a real OTLP/HTTP receiver."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web
from conftest import LoopbackServer
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from gpubench_sdk import Store

# An LLM workload, so the GenAI conventions are checked on the wire too (the demo model
# answers with usage counts).
PLAN = """
[workload]
kind = "llm"
prompt_tokens = 12
max_tokens = 5

[[targets]]
name = "loc"
provider = "local"
url = "{url}"

[[scenarios]]
kind = "burst"
total = 15
concurrency = 3
"""


def otlp_receiver() -> tuple[web.Application, dict[str, list[bytes]]]:
    received: dict[str, list[bytes]] = {"traces": [], "metrics": []}

    async def collect(request: web.Request) -> web.Response:
        assert request.content_type == "application/x-protobuf"
        received[request.match_info["signal"]].append(await request.read())
        return web.Response(body=b"", content_type="application/x-protobuf")

    app = web.Application()
    app.router.add_post("/v1/{signal}", collect)
    return app, received


@contextlib.contextmanager
def local_runtime() -> Iterator[str]:
    """`gpubench local serve` (the demo model) on a free port, so requests have a server URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpubench_sdk", "local", "serve", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("gpubench local runtime listening on http://127.0.0.1:"), line
        yield line.split()[-1]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(20)


def test_spans_and_metrics_reach_the_collector(tmp_path: Path) -> None:
    app, received = otlp_receiver()
    plan = tmp_path / "p.toml"
    with LoopbackServer(app) as collector, local_runtime() as url:
        plan.write_text(PLAN.format(url=url))
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "gpubench_sdk",
                "run",
                str(plan),
                "--store",
                str(tmp_path / "o.sqlite"),
                "--quiet",
                "--otlp-endpoint",
                collector.url,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr
    spans = []
    for body in received["traces"]:
        req = ExportTraceServiceRequest.FromString(body)
        for rs in req.resource_spans:
            service = {a.key: a.value.string_value for a in rs.resource.attributes}["service.name"]
            assert service == "gpubench"
            spans += [sp for ss in rs.scope_spans for sp in ss.spans]
    invoke = [sp for sp in spans if sp.name == "gpubench.invoke"]
    assert len(invoke) == 15
    with Store(tmp_path / "o.sqlite") as s:
        invs = {i.seq: i for i in s.invocations(s.run("latest").id)}
    for sp in invoke:
        attrs = {a.key: a.value for a in sp.attributes}
        inv = invs[attrs["gpubench.seq"].int_value]
        assert sp.kind == Span.SpanKind.SPAN_KIND_CLIENT
        assert attrs["gpubench.provider"].string_value == "local"
        assert attrs["gpubench.outcome"].string_value == "ok"
        assert "error.type" not in attrs
        # the request's answer; the HTTP call itself is a child span (below)
        assert "http.request.method" not in attrs
        assert attrs["http.response.status_code"].int_value == 200
        assert attrs["server.address"].string_value == "127.0.0.1"
        assert 0 < attrs["server.port"].int_value < 65536
        assert attrs["gpubench.phase"].string_value == "measure"
        assert attrs["gpubench.scenario.name"].string_value == "burst-0"
        # semconv GenAI span attribute: seconds to the first streamed chunk, if any streamed
        if inv.token_times_ns:
            assert attrs["gen_ai.response.time_to_first_chunk"].double_value > 0
        # semconv GenAI attributes: the demo model reports its usage
        assert attrs["gen_ai.operation.name"].string_value == "text_completion"
        assert attrs["gen_ai.usage.input_tokens"].int_value == inv.input_units
        assert attrs["gen_ai.usage.output_tokens"].int_value == 5
        # timestamps: the stored record's, to the nanosecond
        assert sp.start_time_unix_nano == inv.wall_start_ns
        assert sp.end_time_unix_nano - sp.start_time_unix_nano == inv.end_ns - inv.start_ns
        children = [c for c in spans if c.parent_span_id == sp.span_id]
        (call,) = [c for c in children if c.name == "POST"]
        http = {a.key: a.value for a in call.attributes}  # semconv HTTP client span
        assert call.kind == Span.SpanKind.SPAN_KIND_CLIENT
        assert http["http.request.method"].string_value == "POST"
        assert http["http.response.status_code"].int_value == 200
        assert http["url.full"].string_value.startswith(url)
        assert http["server.address"].string_value == "127.0.0.1"
        assert http["server.port"].int_value == attrs["server.port"].int_value
        children = [c for c in children if c is not call]
        expected = {"gpubench.queue", "gpubench.execution"}
        if inv.cold:  # the fresh runtime's first worker boots for a request: a cold start
            expected.add("gpubench.cold_start")
        assert {c.name for c in children} == expected
        for c in children:
            assert c.trace_id == sp.trace_id
            assert sp.start_time_unix_nano <= c.start_time_unix_nano <= c.end_time_unix_nano
            duration_ms = {a.key: a.value.double_value for a in c.attributes}[
                "gpubench.duration_ms"
            ]
            assert (c.end_time_unix_nano - c.start_time_unix_nano) / 1e6 == pytest.approx(
                duration_ms, abs=1e-3
            )
        by_name = {c.name: c for c in children}
        # phases laid end to end: execution starts where the queue ends
        assert by_name["gpubench.execution"].start_time_unix_nano == (
            by_name["gpubench.queue"].end_time_unix_nano
        )
        assert by_name["gpubench.execution"].end_time_unix_nano - sp.start_time_unix_nano == (
            pytest.approx((inv.queue_ms + inv.execution_ms) * 1e6, abs=2)
        )
        if inv.cold:
            boot = by_name["gpubench.cold_start"]
            assert boot.end_time_unix_nano == by_name["gpubench.queue"].end_time_unix_nano
    metrics: dict[str, Metric] = {}
    for body in received["metrics"]:
        req = ExportMetricsServiceRequest.FromString(body)
        for rm in req.resource_metrics:
            for sm in rm.scope_metrics:
                metrics |= {m.name: m for m in sm.metrics}  # cumulative: the last export wins
    assert any(i.cold for i in invs.values())
    expected_metrics = {
        "gpubench.request.duration",
        "gpubench.requests",
        "gpubench.cold_start.duration",
        "gen_ai.client.operation.duration",
        "gen_ai.client.token.usage",
    }
    assert expected_metrics <= set(metrics)
    duration = metrics["gpubench.request.duration"]
    assert duration.unit == "s"
    points = duration.histogram.data_points
    assert sum(p.count for p in points) == 15
    assert sum(p.sum for p in points) == pytest.approx(
        sum(i.latency_ms for i in invs.values()) / 1e3, rel=1e-6
    )
    assert list(points[0].explicit_bounds)[:3] == [0.005, 0.01, 0.025]  # seconds, not ms
    point_attrs = {a.key: a.value.string_value for a in points[0].attributes}
    assert point_attrs["gpubench.target"] == "loc"
    assert point_attrs["server.address"] == "127.0.0.1"
    tokens = metrics["gen_ai.client.token.usage"].histogram.data_points
    by_type = {
        {a.key: a.value.string_value for a in p.attributes}["gen_ai.token.type"]: p for p in tokens
    }
    assert by_type["output"].sum == 5 * 15
    requests = metrics["gpubench.requests"].sum.data_points
    assert sum(p.as_int for p in requests) == 15
